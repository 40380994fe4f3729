"""``python -m tuner check-family PATH``: a family of one's own checked before
(and on) a GPU, one line per step, stopping at the first defect with one line
naming the family, the rule and the value.

Without a GPU: the file loads and its families keep the rules built-in ones
keep; the space, counted, with the reason for each infeasible point
(``--list``; a launch over the device's limits is infeasible too); the launch
(grid, block, shared bytes), scalars, shapes, bytes and FLOPs of every
feasible point evaluate to values a launch can take; the modules compile with
nvcc, and a configuration whose kernel needs more shared memory or registers
than the device gives is infeasible; the kernel's parameters, as the compiler
laid them out, match the declared arguments; the inputs and the reference run
at the family's first check size; and a synthetic sweep and study of the space
go through collect, export and the report. With a GPU (``--gpu``), every
compiled module is also verified against the reference at both check sizes.

The cost follows a covering subset, not the space: every value of every
parameter at least once and the space's two corners (``covering_subset``),
chosen without listing the space, are compiled (``--all``: every feasible
point). A space of up to ``LISTED`` points is listed, and the launch of each
of its feasible points evaluated; a larger one is counted, sampled for how
much of it is feasible, and its covering subset evaluated.
"""

from __future__ import annotations

import json
import math
import random
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Callable, Mapping

import numpy as np

from tuner.data.paths import GpuFolder
from tuner.data.results import family_columns_unfit
from tuner.families import REGISTRY, Family, Problem, load_family_paths
from tuner.families.base import KERNELS_DIR, MAX_ENUMERATED, config_key
from tuner.families.limits import DeviceLimits, resource_violations
from tuner.resources import resource_missing

# PyCUDA struct letters -> (float?, bits), as PTX lays the parameter out.
_ARG_LAYOUT = {"P": (False, 64), "f": (True, 32), "d": (True, 64), "e": (True, 16), "b": (False, 8), "B": (False, 8),
               "h": (False, 16), "H": (False, 16), "i": (False, 32), "I": (False, 32), "q": (False, 64), "Q": (False, 64)}  # fmt: skip

LISTED = 20_000  # spaces of up to this many points are listed (and every feasible launch evaluated)
SAMPLED = 1_000  # points of a larger space checked for the share that is feasible
CANDIDATES = 48  # configurations tried for each value the covering subset lacks
SM_COUNT = 132  # stands for the device's SMs in launch expressions, where no --device says (an H100 SXM's)


class FamilyDefect(Exception):
    """A defect of a family: the message is its one line."""


def check(path: Path, *, arch: str = "sm_90", gpu: bool = False, list_space: bool = False, every: bool = False,
          device: Mapping | None = None, say: Callable[[str], None] = print) -> list[str]:  # fmt: skip
    """Run every step for each family ``path`` defines; returns their names.

    Args:
        every: compile (and with ``gpu`` verify) every feasible configuration,
            not the covering subset.
        device: a ``device.json`` (``tuner.device.describe``): its limits
            and SM count; CUDA's limits and ``SM_COUNT`` otherwise.

    Raises:
        FamilyDefect: the first defect found, as one line.
    """
    missing = resource_missing(KERNELS_DIR)
    if missing:
        raise FamilyDefect(missing)
    limits = DeviceLimits.of_device(device or {})
    sm_count = int((device or {}).get("sm_count") or SM_COUNT)
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
            space = Space.of(family, problem, every=every, limits=limits, sm_count=sm_count)
            space.report(list_space, say)
            _launch(family, dtype, space.evaluated, sm_count, limits, say)
            checked, over = _compile(family, problem, space, arch, limits, sm_count, say)
            _arguments(family, problem, next(iter(checked.values())), arch, say)
            _reference(family, problem, say)
            _pipeline(family, problem, [cfg for cfg in space.evaluated if config_key(cfg) not in over], say)
            if gpu:
                _verify(family, dtype, checked, say)
    return names


class Space:
    """What check-family knows of a family's space for one problem: its size,
    the feasible points whose launch is evaluated (all of a listed space, the
    covering subset of a larger one), those compiled, and why points are infeasible."""

    def __init__(self, family: Family, problem: Problem, size: int, listed: bool, evaluated: list[dict], compiled: list[dict],
                 reasons: Counter, infeasible: list[tuple[dict, list[str]]], sampled: int, sampled_feasible: int,
                 uncovered: list[str]) -> None:  # fmt: skip
        self.family, self.problem, self.size, self.listed = family, problem, size, listed
        self.evaluated, self.compiled, self.reasons, self.infeasible = evaluated, compiled, reasons, infeasible
        self.sampled, self.sampled_feasible, self.uncovered = sampled, sampled_feasible, uncovered

    @classmethod
    def of(cls, family: Family, problem: Problem, *, every: bool = False, limits: DeviceLimits = DeviceLimits(),
           sm_count: int = SM_COUNT) -> "Space":  # fmt: skip
        """The space counted (listed where it holds up to ``LISTED`` points, or
        with ``every``), with its covering subset.

        Raises:
            FamilyDefect: ``every`` on a space too large to list, or no
                feasible configuration found.
        """
        size = math.prod(len(p.values) for p in family.params)
        if every and size > MAX_ENUMERATED:
            raise FamilyDefect(f"family {family.name!r}: --all lists the space, which must hold at most {MAX_ENUMERATED:,} "
                               f"configurations, got {size:,}; without --all a covering subset is checked")  # fmt: skip

        def why(cfg: dict) -> list[str]:
            reasons = family.violations(cfg, problem)
            limit = getattr(family, "limit_violations", None)
            if not reasons and limit is not None and limits != DeviceLimits():  # CUDA's limits are the family's own
                reasons = limit(cfg, problem, limits, sm_count)
            return reasons

        reasons: Counter = Counter()
        infeasible: list[tuple[dict, list[str]]] = []
        listed = every or size <= LISTED
        if listed:
            feasible = []
            for cfg in family.configs({p.name: list(p.values) for p in family.params}):
                found = why(cfg)
                if found:
                    reasons[_kind(found[0])] += 1
                    infeasible.append((cfg, found))
                else:
                    feasible.append(cfg)
            if not feasible:
                raise FamilyDefect(f"family {family.name!r}: its space must hold a feasible configuration for {problem.key}, "
                                   f"got none ({reasons.most_common(1)[0][0] if reasons else 'no configuration'})")  # fmt: skip
            subset, uncovered = covering_subset(family, problem, feasible=feasible)
            return cls(family, problem, size, True, feasible, feasible if every else subset, reasons, infeasible, 0, 0, uncovered)
        rng = random.Random(0)
        sampled_feasible = 0
        for _ in range(SAMPLED):
            cfg = {p.name: p.values[rng.randrange(len(p.values))] for p in family.params}
            found = why(cfg)
            if found:
                reasons[_kind(found[0])] += 1
                infeasible.append((cfg, found))
            else:
                sampled_feasible += 1
        subset, uncovered = covering_subset(family, problem, is_feasible=lambda cfg: not why(cfg))
        if not subset:
            raise FamilyDefect(f"family {family.name!r}: its space must hold a feasible configuration for {problem.key}, "
                               f"got none among {SAMPLED + CANDIDATES} tried ({reasons.most_common(1)[0][0] if reasons else '-'})")  # fmt: skip
        return cls(family, problem, size, False, subset, subset, reasons, infeasible, SAMPLED, sampled_feasible, uncovered)

    def report(self, list_space: bool, say: Callable[[str], None]) -> None:
        """The space's line (and with ``list_space`` a line per point listed or checked)."""
        if list_space:
            if not self.listed:
                say(f"  (the covering subset of {len(self.evaluated)}, and {len(self.infeasible)} sampled infeasible points)")
            for cfg, found in self.infeasible:
                say(f"  infeasible {config_key(cfg)}: {'; '.join(found)}")
            for cfg in self.evaluated:
                say(f"  feasible   {config_key(cfg)}")
        detail = "; ".join(f"{count} by {reason}" for reason, count in self.reasons.most_common(3))
        more = len(self.reasons) - 3
        detail += f"; and {sum(c for _, c in self.reasons.most_common()[3:])} by {more} other reasons (--list)" if more > 0 else ""
        if self.listed:
            counted = f"{self.size:,} configurations, {len(self.evaluated):,} feasible"
        else:
            share = self.sampled_feasible / self.sampled
            counted = (f"{self.size:,} configurations (over {LISTED:,}: not listed; {self.sampled:,} sampled, "
                       f"{share:.0%} feasible)")  # fmt: skip
        missing = f"; no feasible configuration found with {', '.join(self.uncovered[:5])}" if self.uncovered else ""
        say(f"space: {self.problem.key}: {counted}" + (f"; infeasible: {detail}" if detail else "") + missing)

    @property
    def chosen(self) -> str:
        """Which configurations are compiled, in words."""
        if self.compiled is self.evaluated and self.listed:
            return "every feasible configuration (--all)"
        return f"a covering subset of {len(self.compiled)} configurations (every value of every parameter and the corners; --all: every one)"


def _kind(reason: str) -> str:
    """A reason without its value, so that reasons of one rule count together."""
    return reason.split(", got ")[0]


def covering_subset(family: Family, problem: Problem, *, feasible: list[dict] | None = None,
                    is_feasible: Callable[[dict], bool] | None = None) -> tuple[list[dict], list[str]]:  # fmt: skip
    """Feasible configurations that hold every value of every parameter at
    least once, and the space's two corners (every parameter at its first
    value, every one at its last; where a corner is infeasible, the feasible
    point found nearest it), chosen greedily (each the candidate holding the
    most values not held yet), deterministically.

    From ``feasible`` (a listed space) the candidates for a value are its
    feasible points; otherwise they are made (the defaults with that value,
    the values not held yet, the corners with it, then random points; at most
    ``CANDIDATES`` a value) and checked with ``is_feasible``, so the space is
    never listed. Returns the subset and the ``name=value`` of each value no
    feasible candidate held.
    """
    params = family.params
    corners = [{p.name: p.values[0] for p in params}, {p.name: p.values[-1] for p in params}]
    chosen: dict[str, dict] = {}
    uncovered = {(p.name, v) for p in params for v in p.values}
    rng = random.Random(0)
    if feasible is not None:
        keys = {config_key(c) for c in feasible}
        having: dict[tuple, list[dict]] = {}
        for cfg in feasible:
            for name, value in cfg.items():
                having.setdefault((name, value), []).append(cfg)

        def candidates(name: str, value) -> list[dict]:
            found = having.get((name, value), [])
            stride = max(1, len(found) // CANDIDATES)
            return found[::stride][:CANDIDATES]

        def take(cfg: dict) -> bool:
            return config_key(cfg) in keys
    else:
        checked: dict[str, bool] = {}

        def take(cfg: dict) -> bool:
            key = config_key(cfg)
            if key not in checked:
                checked[key] = bool(is_feasible(cfg))
            return checked[key]

        def candidates(name: str, value) -> list[dict]:
            made = [{p.name: p.default for p in params} | {name: value}]
            made.append({p.name: next((v for v in p.values if (p.name, v) in uncovered), p.default) for p in params} | {name: value})
            made += [corner | {name: value} for corner in corners]
            while len(made) < CANDIDATES:
                made.append({p.name: p.values[rng.randrange(len(p.values))] for p in params} | {name: value})
            return [cfg for cfg in made if take(cfg)]

    def add(cfg: dict) -> None:
        chosen.setdefault(config_key(cfg), cfg)
        uncovered.difference_update(cfg.items())

    position = {p.name: {v: i / max(1, len(p.values) - 1) for i, v in enumerate(p.values)} for p in params}

    def distance(cfg: dict, corner: dict) -> float:
        return sum(abs(position[name][cfg[name]] - position[name][corner[name]]) for name in position)

    for corner in corners:
        if take(corner):
            add(corner)
            continue
        # The feasible point nearest the corner: where the space's extremes meet its limits.
        if feasible is not None:
            near = feasible
        else:
            near = []
            for _ in range(CANDIDATES):
                step = {p.name: min(len(p.values) - 1, int(rng.expovariate(1.0))) for p in params}
                near.append({p.name: p.values[step[p.name] if corner[p.name] == p.values[0] else len(p.values) - 1 - step[p.name]]
                             for p in params})  # fmt: skip
            near = [cfg for cfg in near if take(cfg)]
        if near:
            add(min(near, key=lambda cfg: distance(cfg, corner)))
    missing = []
    for param in params:
        for value in param.values:
            if (param.name, value) not in uncovered:
                continue
            options = candidates(param.name, value)
            if options:
                add(max(options, key=lambda cfg: sum(item in uncovered for item in cfg.items())))
            else:
                missing.append(f"{param.name}={value!r}")
    return list(chosen.values()), missing


def _launch(family: Family, dtype: str, evaluated: list[dict], sm_count: int, limits: DeviceLimits, say) -> None:
    """Every evaluated point's launch, scalars, shapes, bytes and FLOPs at both
    check sizes: values a launch can take, within the device's limits."""
    errors_of = getattr(family, "expression_errors", None)
    if errors_of is None:  # a Family subclass makes its launch in bind, on a device: its bytes only
        for n in family.check_sizes:
            problem = Problem(family.name, dtype, n)
            for cfg in evaluated:
                try:
                    moved = family.bytes_moved(cfg, problem)
                except Exception as error:
                    raise FamilyDefect(f"family {family.name!r}: bytes_moved must evaluate for {problem.key}; at {config_key(cfg)} "
                                       f"it raised {type(error).__name__}: {error}") from None  # fmt: skip
                if not (isinstance(moved, (int, float, np.number)) and math.isfinite(moved) and moved > 0):
                    raise FamilyDefect(f"family {family.name!r}: bytes_moved must be finite and positive for {problem.key}, "
                                       f"got {moved!r} at {config_key(cfg)}")  # fmt: skip
        say(f"launch: bytes of {len(evaluated)} configurations at n={list(family.check_sizes)} (the launch is the family's own)")
        return
    started = time.process_time()
    largest_grid, largest_block, over = 0, 0, Counter()
    count = 0
    for n in family.check_sizes:
        problem = Problem(family.name, dtype, n)
        broken: list[tuple[dict, str]] = []
        for cfg in evaluated:
            if family.violations(cfg, problem):  # infeasible at this size (a grid over the limit, say)
                continue
            count += 1
            errors = errors_of(cfg, problem, sm_count)
            if errors:
                broken.append((cfg, errors[0]))
                continue
            grid, block, _ = family.launch_shape(cfg, problem, sm_count)
            largest_grid, largest_block = max(largest_grid, math.prod(grid)), max(largest_block, math.prod(block))
            for reason in family.limit_violations(cfg, problem, limits, sm_count):
                over[_kind(reason)] += 1
        if broken:
            cfg, error = broken[0]
            raise FamilyDefect(f"family {family.name!r}: the launch, scalars, shapes and bytes of every feasible configuration "
                               f"must evaluate to values a launch takes for {problem.key}; {len(broken)} of {len(evaluated)} "
                               f"did not, e.g. {config_key(cfg)}: {error} (a restriction can exclude them)")  # fmt: skip
    names = getattr(family, "_grid_names", frozenset())
    stand_in = f"; sm_count taken as {sm_count}" if "sm_count" in names else ""
    within = f"; over {limits.where} limits: " + "; ".join(f"{c} by {r}" for r, c in over.most_common(3)) if over else ""
    say(f"launch: {len(evaluated)} configurations at n={list(family.check_sizes)} evaluate (grids up to {largest_grid:,} "
        f"blocks, blocks up to {largest_block} threads{stand_in}) in {time.process_time() - started:.2f} s of CPU{within}")  # fmt: skip


def _compile(family: Family, problem: Problem, space: Space, arch: str, limits: DeviceLimits, sm_count: int,
             say) -> tuple[dict[str, dict], set[str]]:  # fmt: skip
    """The checked configurations' modules compiled; returns module key ->
    configuration of those within the device's limits, and the
    ``config_key`` of those over them.

    Raises:
        FamilyDefect: a module nvcc rejects (other than for a device limit),
            or none within the limits.
    """
    from tuner.measure.compile import CompileError, compile_all, module_key, unique_modules
    from tuner.progress import Progress

    started = time.perf_counter()
    configs = space.compiled
    modules = unique_modules(family, configs, problem)
    with tempfile.TemporaryDirectory() as cache, Progress("compile", len(modules), unit="module", mode="off") as quiet:
        compiled = compile_all(family, configs, problem, arch=arch, cache_dir=cache, progress=quiet)
    failed = {key: result for key, result in compiled.items() if isinstance(result, CompileError) and not result.over_limit}
    if failed:
        key, error = next(iter(failed.items()))
        first = next((line for line in str(error).splitlines() if "error" in line), str(error).splitlines()[-1])
        raise FamilyDefect(f"family {family.name!r}: every module must compile with nvcc for {arch}; {len(failed)} of {len(compiled)} "
                           f"did not, e.g. {config_key(modules[key])}: {first.strip()[:300]}")  # fmt: skip
    over: Counter = Counter()
    beyond: set[str] = set()
    fitting: dict[str, dict] = {}
    launch_shape = getattr(family, "launch_shape", None)
    for cfg in configs:
        key = module_key(family, cfg, problem)
        result = compiled[key]
        if isinstance(result, CompileError):
            reasons = [result.over_limit]
        elif launch_shape is not None:
            _, block, dynamic = launch_shape(cfg, problem, sm_count)
            reasons = resource_violations(threads=math.prod(block), registers=result.registers, static_shared=result.shared_bytes,
                                          dynamic_shared=dynamic, limits=limits)  # fmt: skip
        else:
            reasons = []
        if reasons:
            over[_kind(reasons[0])] += 1
            beyond.add(config_key(cfg))
        else:
            fitting.setdefault(key, cfg)
    ok = [c for c in compiled.values() if not isinstance(c, CompileError)]
    spills = sum(1 for c in ok if c.spill_bytes)
    registers = max((c.registers for c in ok), default=0)
    within = "; infeasible on the device: " + "; ".join(f"{c} by {r}" for r, c in over.most_common(3)) if over else ""
    say(f"compile: {len(compiled)} modules of {space.chosen} for {arch} in {time.perf_counter() - started:.1f} s, at most "
        f"{registers} registers, {spills} spilling{within}")  # fmt: skip
    if not fitting:
        raise FamilyDefect(f"family {family.name!r}: a checked configuration must fit the device's limits for {problem.key}, "
                           f"got none ({over.most_common(1)[0][0]})")  # fmt: skip
    return fitting, beyond


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

    import optuna
    import pandas as pd

    from tuner.data import results
    from tuner.data.export import export
    from tuner.report.__main__ import main as report_main
    from tuner.search.study.run import StudyOptions, run_study, study_rows
    from tuner.search.tables.replay import table_measure

    def bandwidth(cfg: dict) -> float:  # a smooth landscape, best near each parameter's middle value, positive however many
        distance = sum((i + 1) * abs(list(p.values).index(cfg[p.name]) - len(p.values) // 2) / max(1, len(p.values) - 1)
                       for i, p in enumerate(family.params))  # fmt: skip
        return 1000.0 / (1.0 + distance)

    rows = [{"family": family.name, "dtype": problem.dtype, "n": problem.n, "source": "sweep:check", "status": "ok",
             "config_key": config_key(c), "bandwidth_gbs": bandwidth(c), "time_ms_median": family.bytes_moved(c, problem) / bandwidth(c) / 1e6,
             "bytes_moved": family.bytes_moved(c, problem), "grid": "1,1,1", "block": "1,1,1", **c} for c in space]  # fmt: skip
    table = results.to_frame(rows, families=[family])
    budget = max(1, min(10, len(space) // 2))
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with tempfile.TemporaryDirectory() as scratch, contextlib.redirect_stdout(io.StringIO()):  # the stages' own lines stay out
        folder = Path(scratch) / "check"
        files = GpuFolder(folder)
        # The default search, as a study of the family would run.
        outcome = run_study(StudyOptions.for_strategy(family=family, problem=problem, domains=None,
                                                      storage=str(Path(scratch) / "study.log"), study_name="check",
                                                      measure=table_measure(table, family), budget_trials=budget,
                                                      timeout_s=None, seed=0))  # fmt: skip
        study = results.to_frame([r | {"source": "study:check"} for r in study_rows(outcome.storage, outcome.study.study_name)],
                                 families=[family])  # fmt: skip
        results.write_atomic(results.to_frame(pd.concat([table, study], ignore_index=True), families=[family], keep_unknown=True),
                             files.measurements)  # fmt: skip
        results.write_json_atomic({"name": "no GPU (check-family)", "slug": "check", "compute_capability": "0.0"}, files.device_json)
        results.write_json_atomic({}, files.peaks_json)
        export(folder, folder)
        exported = json.loads(files.best_json.read_text())["problems"][0]["params"]
        if report_main(["--results", str(folder), "--out", str(files.report)]) != 0:
            raise FamilyDefect(f"family {family.name!r}: the report must render its rows, it did not")
        markdown = files.report_markdown.read_text()
    missing = [name for name in family.param_names if name not in exported or f"{name}=" not in markdown]
    if missing:
        raise FamilyDefect(f"family {family.name!r}: every parameter must reach best.json and the report, got {missing} missing")
    say(f"pipeline: a synthetic sweep of {len(space)} and a study of {len(study)} collected, exported ({exported}) and reported")


def _verify(family: Family, dtype: str, modules: dict, say) -> None:
    """Every module verified (untimed) on the GPU at both check sizes."""
    from tuner.device.describe import describe
    from tuner.device.gpu import require_gpu
    from tuner.measure.bench import Bench
    from tuner.measure.compile import compile_all

    gpu = require_gpu()
    device = describe(gpu)
    with tempfile.TemporaryDirectory() as cache:
        bench = Bench.open(gpu, device, cache)
        for n in family.check_sizes:
            problem = Problem(family.name, dtype, n)
            configs = [cfg for cfg in modules.values() if not family.violations(cfg, problem)]
            compile_all(family, configs, problem, arch=gpu.arch, cache_dir=cache)
            session = bench.problem(family, problem)
            over = 0
            for cfg in configs:
                row = session.measure(cfg, "check", timed=False)
                if row["status"] == "infeasible":  # over this device's limits: never launched
                    over += 1
                    continue
                if row["status"] != "ok":
                    raise FamilyDefect(f"family {family.name!r}: every module must verify against the reference on {device['name']}; "
                                       f"{config_key(cfg)} at n={n}: {row['status']}: {str(row.get('error'))[:300]}")  # fmt: skip
            beyond = f" ({over} over its limits, infeasible)" if over else ""
            say(f"verify: {problem.key}: {len(configs) - over} modules verified on {device['name']}{beyond}")
            del session
