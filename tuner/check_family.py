"""``python -m tuner check-family PATH``: a family of one's own checked before
(and on) a GPU, one line per step, stopping at the first defect with one line
naming the family, the rule and the value.

Without a GPU: the file loads and its families keep the rules built-in ones
keep; the space, with the reason for each infeasible point (``--list``); every
module compiles with nvcc; the kernel's parameters, as the compiler laid them
out, match the declared arguments; the inputs and the reference run at the
family's first check size; and a synthetic sweep and study of the space go
through collect, export and the report. With a GPU (``--gpu``), every module
is also verified against the reference at both check sizes.
"""

from __future__ import annotations

import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Callable

import numpy as np

from tuner.data.results import family_columns_unfit
from tuner.families import REGISTRY, Family, Problem, load_family_paths
from tuner.families.base import KERNELS_DIR, checkout_missing, config_key

# PyCUDA struct letters -> (float?, bits), as PTX lays the parameter out.
_ARG_LAYOUT = {"P": (False, 64), "f": (True, 32), "d": (True, 64), "e": (True, 16), "b": (False, 8), "B": (False, 8),
               "h": (False, 16), "H": (False, 16), "i": (False, 32), "I": (False, 32), "q": (False, 64), "Q": (False, 64)}  # fmt: skip


class FamilyDefect(Exception):
    """A defect of a family: the message is its one line."""


def check(path: Path, *, arch: str = "sm_90", gpu: bool = False, list_space: bool = False,
          say: Callable[[str], None] = print) -> list[str]:  # fmt: skip
    """Run every step for each family ``path`` defines; returns their names.

    Raises:
        FamilyDefect: the first defect found, as one line.
    """
    missing = checkout_missing(KERNELS_DIR)
    if missing:
        raise FamilyDefect(missing)
    try:
        names = load_family_paths([path])
    except ValueError as error:
        raise FamilyDefect(str(error)) from None
    for name in names:
        family = REGISTRY[name]
        unfit = family_columns_unfit(family)
        if unfit:
            raise FamilyDefect(f"{path}: {unfit}")
        say(f"load: {path}: family {name}, parameters {list(family.param_names)}, dtypes {list(family.dtypes)}")
        for dtype in family.dtypes:
            problem = Problem(name, dtype, family.check_sizes[0])
            space = _space(family, problem, list_space, say)
            modules = _compile(family, problem, space, arch, say)
            _arguments(family, problem, space[0], arch, say)
            _reference(family, problem, say)
            _pipeline(family, problem, space, say)
            if gpu:
                _verify(family, dtype, modules, say)
    return names


def _space(family: Family, problem: Problem, list_space: bool, say) -> list[dict]:
    every = list(family.configs({p.name: list(p.values) for p in family.params}))
    reasons = Counter()
    feasible = []
    for cfg in every:
        why = family.violations(cfg, problem)
        if why:
            reasons[why[0]] += 1
            if list_space:
                say(f"  infeasible {config_key(cfg)}: {'; '.join(why)}")
        else:
            feasible.append(cfg)
            if list_space:
                say(f"  feasible   {config_key(cfg)}")
    if not feasible:
        top = reasons.most_common(1)[0][0] if reasons else "no configuration"
        raise FamilyDefect(f"family {family.name!r}: its space must hold a feasible configuration for {problem.key}, got none ({top})")
    shown = reasons.most_common(3)
    detail = "; ".join(f"{count} by {reason}" for reason, count in shown)
    if len(reasons) > len(shown):  # the rest are counted, not left out unsaid
        detail += f"; {sum(reasons.values()) - sum(count for _, count in shown)} by {len(reasons) - len(shown)} other reasons"
    say(f"space: {problem.key}: {len(every)} configurations, {len(feasible)} feasible" + (f"; infeasible: {detail}" if detail else ""))
    return feasible


def _compile(family: Family, problem: Problem, space: list[dict], arch: str, say) -> dict:
    from tuner.measure.compile import CompileError, compile_all, unique_modules
    from tuner.progress import Progress

    started = time.perf_counter()
    modules = unique_modules(family, space, problem)
    with tempfile.TemporaryDirectory() as cache, Progress("compile", len(modules), unit="module", mode="off") as quiet:
        compiled = compile_all(family, space, problem, arch=arch, cache_dir=cache, progress=quiet)
    failed = {key: result for key, result in compiled.items() if isinstance(result, CompileError)}
    if failed:
        key, error = next(iter(failed.items()))
        first = next((line for line in str(error).splitlines() if "error" in line), str(error).splitlines()[-1])
        cfg = unique_modules(family, space, problem)[key]
        raise FamilyDefect(f"family {family.name!r}: every module must compile with nvcc for {arch}; {len(failed)} of {len(compiled)} "
                           f"did not, e.g. {config_key(cfg)}: {first.strip()[:300]}")  # fmt: skip
    spills = sum(1 for c in compiled.values() if c.spill_bytes)
    registers = max(c.registers for c in compiled.values())
    say(f"compile: {len(compiled)} modules for {arch} in {time.perf_counter() - started:.1f} s, at most {registers} registers, "
        f"{spills} spilling")  # fmt: skip
    return modules


def _arguments(family: Family, problem: Problem, cfg: dict, arch: str, say) -> None:
    from tuner.measure.compile import CompileError, kernel_parameters

    try:
        laid_out = kernel_parameters(KERNELS_DIR / family.source, family.kernel_name(cfg), defines=family.defines(cfg, problem),
                                     flags=family.compile_flags(cfg), arch=arch)  # fmt: skip
    except CompileError as error:
        raise FamilyDefect(f"family {family.name!r}: {str(error).splitlines()[0]}") from None
    declared = [_ARG_LAYOUT.get(letter) for letter in family.arg_types]
    names = [a.name for a in getattr(family, "args", ()) if a.role != "constant"] or [f"#{i}" for i in range(len(declared))]
    found = [(kind == "f", bits) for kind, bits in laid_out]
    if len(declared) != len(found):
        raise FamilyDefect(f"family {family.name!r}: the arguments must match kernel {family.kernel_name(cfg)!r}'s parameters; "
                           f"declared {len(declared)} ({family.arg_types}), the kernel takes {len(found)}")  # fmt: skip
    for i, (want, got) in enumerate(zip(declared, found)):
        if want != got:
            raise FamilyDefect(f"family {family.name!r}: argument {i} ({names[i]}) must match kernel {family.kernel_name(cfg)!r}'s "
                               f"parameter {i}; declared {_layout_text(want)}, the kernel takes {_layout_text(got)}")  # fmt: skip
    say(f"arguments: {len(declared)} match kernel {family.kernel_name(cfg)!r} ({', '.join(map(_layout_text, found))})")


def _layout_text(layout) -> str:
    if layout is None:
        return "an unknown type"
    is_float, bits = layout
    return f"a {bits}-bit {'float' if is_float else 'integer or pointer' if bits == 64 else 'integer'}"


def _reference(family: Family, problem: Problem, say) -> None:
    started = time.perf_counter()
    try:
        inputs = family.make_inputs(problem, np.random.default_rng(0))
        expected = np.asarray(family.reference(inputs, problem))
    except Exception as error:
        raise FamilyDefect(f"family {family.name!r}: inputs and reference must run for {problem.key}, got "
                           f"{type(error).__name__}: {str(error)[:300]}") from None  # fmt: skip
    if expected.dtype.kind == "f" and not np.isfinite(expected).all():
        raise FamilyDefect(f"family {family.name!r}: the reference must be finite for {problem.key}, got non-finite values")
    megabytes = sum(a.nbytes for a in inputs.values()) / 1e6
    say(f"reference: {problem.key}: inputs {megabytes:.1f} MB, {expected.size} expected {expected.dtype} values in "
        f"{time.perf_counter() - started:.2f} s")  # fmt: skip


def _pipeline(family: Family, problem: Problem, space: list[dict], say) -> None:
    """A made-up landscape over the space, swept and studied, then collected,
    exported and reported as the stages do, in a scratch folder."""
    import contextlib
    import io
    import json

    import optuna
    import pandas as pd

    from tuner.data import results
    from tuner.data.export import export
    from tuner.report.__main__ import main as report_main
    from tuner.search.replay import table_measure
    from tuner.search.study import run_study, study_rows

    def bandwidth(cfg: dict) -> float:  # a smooth landscape, best near each parameter's middle value
        return 1000.0 - sum(10.0 * (i + 1) * abs(list(p.values).index(cfg[p.name]) - len(p.values) // 2)
                            for i, p in enumerate(family.params))  # fmt: skip

    rows = [{"family": family.name, "dtype": problem.dtype, "n": problem.n, "source": "sweep:check", "status": "ok",
             "config_key": config_key(c), "bandwidth_gbs": bandwidth(c), "time_ms_median": family.bytes_moved(c, problem) / bandwidth(c) / 1e6,
             "bytes_moved": family.bytes_moved(c, problem), "grid": "1,1,1", "block": "1,1,1", **c} for c in space]  # fmt: skip
    table = results.to_frame(rows)
    budget = max(1, min(10, len(space) // 2))
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with tempfile.TemporaryDirectory() as scratch, contextlib.redirect_stdout(io.StringIO()):  # the stages' own lines stay out
        folder = Path(scratch) / "check"
        # The default search, as a study of the family would run.
        outcome = run_study(family=family, problem=problem, domains=None, storage=str(Path(scratch) / "study.log"),
                            study_name="check", measure=table_measure(table, family), budget_trials=budget, timeout_s=None,
                            seed=0)  # fmt: skip
        study = results.to_frame([r | {"source": "study:check"} for r in study_rows(outcome.storage, outcome.study.study_name)])
        results.write_atomic(results.to_frame(pd.concat([table, study], ignore_index=True), keep_unknown=True),
                             folder / "measurements.parquet")  # fmt: skip
        results.write_json_atomic({"name": "no GPU (check-family)", "slug": "check", "compute_capability": "0.0"}, folder / "device.json")
        results.write_json_atomic({}, folder / "peaks.json")
        export(folder, folder)
        exported = json.loads((folder / "best.json").read_text())["problems"][0]["params"]
        if report_main(["--results", str(folder), "--out", str(folder / "report")]) != 0:
            raise FamilyDefect(f"family {family.name!r}: the report must render its rows, it did not")
        markdown = (folder / "report" / "report.md").read_text()
    missing = [name for name in family.param_names if name not in exported or f"{name}=" not in markdown]
    if missing:
        raise FamilyDefect(f"family {family.name!r}: every parameter must reach best.json and the report, got {missing} missing")
    say(f"pipeline: a synthetic sweep of {len(space)} and a study of {len(study)} collected, exported ({exported}) and reported")


def _verify(family: Family, dtype: str, modules: dict, say) -> None:
    """Every module verified (untimed) on the GPU at both check sizes."""
    from tuner.device.describe import describe
    from tuner.device.gpu import require_gpu
    from tuner.measure.bench import Bench, environment_columns
    from tuner.measure.compile import compile_all
    from tuner.measure.timing import TimingOptions

    gpu = require_gpu()
    device = describe(gpu)
    with tempfile.TemporaryDirectory() as cache:
        bench = Bench(gpu=gpu, environment=environment_columns(device, device["slug"]), cache_dir=Path(cache), timing=TimingOptions())
        for n in family.check_sizes:
            problem = Problem(family.name, dtype, n)
            configs = [cfg for cfg in modules.values() if not family.violations(cfg, problem)]
            compile_all(family, configs, problem, arch=gpu.arch, cache_dir=cache)
            session = bench.problem(family, problem)
            for cfg in configs:
                row = session.measure(cfg, "check", timed=False)
                if row["status"] != "ok":
                    raise FamilyDefect(f"family {family.name!r}: every module must verify against the reference on {device['name']}; "
                                       f"{config_key(cfg)} at n={n}: {row['status']}: {str(row.get('error'))[:300]}")  # fmt: skip
            say(f"verify: {problem.key}: {len(configs)} modules verified on {device['name']}")
            del session
