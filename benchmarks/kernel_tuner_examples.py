"""Kernel Tuner's CUDA examples run by this project with only their import
changed, beside Kernel Tuner's own brute force on the same GPU, in one process.

The examples are Kernel Tuner's ``examples/cuda`` scripts and kernels
(vector_add, reduction, stencil, spmv, convolution, matmul), read where they
lie (``--examples-dir``), never copied. For each:

1. The script is cut to fit minutes by the substitutions of ``CUTS``: smaller
   arrays where the kernel takes the size as an argument, fewer values where a
   space is large, and two repairs of the scripts themselves (each with its
   reason). The cut script is printed as a diff, and both tools run it alike.
2. It runs with its imports of ``kernel_tuner`` made ours
   (``tuner.kernel_tuner.script.with_our_import``: the one-line change) in
   ``<out>/<example>/ours/``, then as it is, by Kernel Tuner (its default
   strategy, brute force), in ``<out>/<example>/kernel_tuner/``: the .cu files
   linked there, numpy's random generator seeded alike, the script's own
   output in ``<tool>.log`` and its JSON files beside it.
3. Per ``tune_kernel`` call it prints our winner and its tie set
   (``env["tie_set"]``: not shown slower by more than 0.5 %), Kernel Tuner's
   winner, whether that lies in our tie set and how Kernel Tuner timed our
   winner, and each tool's seconds per configuration, all in (compile,
   verify, time).

Then (``--study-trials``, default 50; 0 for none) a study with the project's
default search on convolution's full space (every value of its script,
3,145,728 combinations): convolution.py with its import changed, its
``tune_kernel`` call given ``strategy`` (the default search) and
``strategy_options={"max_fevals": N}``. It prints the modules the study
compiled and its wall time against the space's size.

    source .whl/setup.sh && python benchmarks/kernel_tuner_examples.py --examples-dir ../shared/kernel_tuner_examples --out DIR

(``--study-trials 0`` leaves the study out, ``--examples ''`` runs it alone:
two commands where one would not fit a machine's time.)

``--dry-run`` (no GPU): the cut scripts run with both tools' tuning replaced
by their translation (ours: each call's ``KernelSpec``; Kernel Tuner's: its
search space), and the two spaces' sizes compared. Needs a GPU, nvcc, PyCUDA,
Optuna and Kernel Tuner: on the offline GPU machine, the wheels that
``bash benchmarks/fetch-device-wheels.sh --all`` puts in ``.whl/`` (the
shared set for the pipeline, and ``benchmarks/device-wheels.txt``).
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import importlib
import importlib.metadata
import itertools
import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout: this copy of the package

EXAMPLES = ("vector_add", "reduction", "stencil", "spmv", "convolution", "matmul")
SEED = 0  # numpy.random.seed before each script, so both tools tune the same data


@dataclass(frozen=True)
class Cut:
    """One substitution in a script: ``old`` (found exactly once) becomes ``new``, for ``why``."""

    old: str
    new: str
    why: str


CUTS: dict[str, list[Cut]] = {
    "vector_add": [],
    "stencil": [],
    "reduction": [
        Cut("size = 800000000", "size = 80000000", "80 million floats instead of 800 (the kernel takes n as an argument)"),
        Cut(
            'tune_params["block_size_x"] = [2**i for i in range(5,11)]',
            'tune_params["block_size_x"] = [2**i for i in range(8,11)]',
            "blocks of 256 to 1024 threads",
        ),
        Cut(
            'tune_params["vector"] = [2**i for i in range(3)]',
            'tune_params["vector"] = [2**i for i in range(0,3,2)]',
            "float and float4 loads",
        ),
        Cut(
            'tune_params["num_blocks"] = [2**i for i in range(5,16)]',
            'tune_params["num_blocks"] = [2**i for i in range(8,16,4)]',
            "256 and 4096 blocks (the script tunes the second kernel once per value)",
        ),
        Cut(
            'tune_params["loop_unroll_factor_0"] = [0, 1, 8, 16, 32, 64]',
            'tune_params["loop_unroll_factor_0"] = [0, 8]',
            "the compiler's unrolling and 8",
        ),
    ],  # fmt: skip
    "spmv": [
        Cut(
            "nnz = int(nrows*ncols*0.001)",
            "nnz = int(int(nrows)*ncols*0.001)",
            "a repair: nrows is a numpy.int32, so nrows*ncols wraps 2^33 to 0 and the matrix has no element",
        ),
        Cut(
            'tune_params["block_size_x"] = [32*i for i in range(1,33)]',
            'tune_params["block_size_x"] = [32*i for i in range(1,33,4)]',
            "every fourth block size",
        ),
    ],  # fmt: skip
    "convolution": [
        Cut(
            'tune_params["filter_height"] = [i for i in range(3,35,2)]',
            'tune_params["filter_height"] = [17]',
            "the kernel's own default filter, 17 x 17 (the image is 4096 x 4096, as its .cu defines)",
        ),
        Cut('tune_params["filter_width"] = [i for i in range(3,35,2)]', 'tune_params["filter_width"] = [17]', "the same"),
        Cut(
            'tune_params["block_size_x"] = [16*i for i in range(1,9)]',
            'tune_params["block_size_x"] = [16*i for i in (2, 5, 8)]',
            "32, 80 (where padding applies) and 128 threads across",
        ),
        Cut(
            'tune_params["block_size_y"] = [2**i for i in range(6)]',
            'tune_params["block_size_y"] = [2**i for i in range(2,4)]',
            "4 and 8 rows",
        ),
        Cut('tune_params["tile_size_x"] = [i for i in range(1,9)]', 'tune_params["tile_size_x"] = [1, 2]', "tiles of 1 and 2"),
        Cut('tune_params["tile_size_y"] = [i for i in range(1,9)]', 'tune_params["tile_size_y"] = [1, 2]', "the same"),
        Cut('tune_params["read_only"] = [0,1]', 'tune_params["read_only"] = [1]', "the read-only cache on"),
    ],  # fmt: skip
    "matmul": [
        Cut(
            'tune_params["tile_size_x"] = [2**i for i in range(4)]',
            'tune_params["tile_size_x"] = [4]',
            "tiles 4 wide (each configuration multiplies two 4096 x 4096 matrices 32 times and more)",
        ),
        Cut(
            "iterations=32, metrics=metrics)",
            "iterations=32, metrics=metrics, atol=1e-2)",
            "a repair: the default atol (1e-6) rejects 2 to 3 % of the float32 sums of 1024 and 2048 products against "
            "numpy's float32 product (measured on the host): every configuration of 4096 would fail in both tools",
        ),
    ],  # fmt: skip
}


@dataclass
class Call:
    """One ``tune_kernel`` call of a script, as a tool answered it."""

    kernel: str
    space: dict[str, list]  # the call's tune_params
    results: list | None = None
    env: dict | None = None
    wall_s: float = 0.0
    error: str | None = None

    @property
    def params(self) -> list[str]:
        return list(self.space)

    @property
    def measured(self) -> list[dict]:
        return [r for r in self.results or [] if r is not None]

    @property
    def valid(self) -> list[dict]:
        return [
            r
            for r in self.measured
            if "__error__" not in r and isinstance(r.get("time"), (int, float)) and math.isfinite(r["time"])
        ]


@dataclass
class Run:
    calls: list[Call] = field(default_factory=list)
    error: str | None = None
    wall_s: float = 0.0


# ---- the scripts --------------------------------------------------------------------


def cut_script(example: str, examples_dir: Path) -> tuple[str, str]:
    """(the script as it is, the script cut by ``CUTS``).

    Raises:
        SystemExit: a cut does not find its text exactly once (one line naming it).
    """
    original = (examples_dir / f"{example}.py").read_text()
    text = original
    for cut in CUTS[example]:
        found = text.count(cut.old)
        if found != 1:
            raise SystemExit(f"error: {example}.py: a cut must find {cut.old!r} once, found it {found} times "
                             f"(the script differs from the Kernel Tuner examples this benchmark was written for)")  # fmt: skip
        text = text.replace(cut.old, cut.new)
    return original, text


def diff_lines(example: str, original: str, ours: str) -> list[str]:
    diff = difflib.unified_diff(
        original.splitlines(), ours.splitlines(), f"{example}.py", f"{example}.py (ours)", n=0, lineterm=""
    )
    return [line for line in diff if not line.startswith("@@")]


def run_script(example: str, text: str, tool: str, examples_dir: Path, out: Path, module: Any) -> Run:
    """Run ``text`` as ``__main__`` in ``out/example/tool/`` (its .cu files linked there), recording each
    ``tune_kernel`` call made through ``module`` (ours or Kernel Tuner's), its output in ``<tool>.log``."""
    folder = out / example / tool
    folder.mkdir(parents=True, exist_ok=True)
    for source in examples_dir.glob("*.cu"):
        link = folder / source.name
        if not link.exists():
            link.symlink_to(source.resolve())
    run = Run()
    started = time.perf_counter()
    # Kernel Tuner's brute force keeps every configuration it timed in a cache file per call: the
    # brute-forced spaces that the search benchmark reads as held-out tables.
    caches = folder if tool == "kernel_tuner" else None
    with _inside(folder), open(folder / f"{tool}.log", "w") as log, recording(module, run.calls, cache_dir=caches):
        with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
            np.random.seed(SEED)
            try:
                exec(compile(text, str(examples_dir / f"{example}.py"), "exec"), {"__name__": "__main__"})
            except BaseException as error:  # a script's failure is reported, the next one runs
                run.error = f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else ''}"[:300]
                if isinstance(error, KeyboardInterrupt):
                    raise
    run.wall_s = time.perf_counter() - started
    return run


@contextlib.contextmanager
def _inside(folder: Path) -> Iterator[None]:
    before = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


@contextlib.contextmanager
def recording(module: Any, calls: list[Call], cache_dir: Path | None = None, **extra: Any) -> Iterator[None]:
    """``module.tune_kernel`` recorded into ``calls`` (``extra``: keyword arguments added to every call;
    ``cache_dir``: each call's Kernel Tuner cache file, ``cache-<call>.json``, written there)."""
    original = module.tune_kernel

    def tune_kernel(*args: Any, **kwargs: Any):
        kwargs |= extra
        if cache_dir is not None:
            kwargs["cache"] = str(cache_dir / f"cache-{len(calls) + 1}.json")
        space = args[4] if len(args) > 4 else kwargs.get("tune_params", {})
        call = Call(kernel=str(args[0] if args else kwargs.get("kernel_name")), space={k: list(v) for k, v in space.items()})
        calls.append(call)
        started = time.perf_counter()
        try:
            call.results, call.env = original(*args, **kwargs)
        except Exception as error:
            call.error = f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else ''}"[:300]
            raise
        finally:
            call.wall_s = time.perf_counter() - started
        return call.results, call.env

    module.tune_kernel = tune_kernel
    try:
        yield
    finally:
        module.tune_kernel = original


# ---- the report ------------------------------------------------------------------------


def label(result: dict, params: list[str]) -> str:
    return ", ".join(f"{name}={result.get(name)}" for name in params)


def key(result: dict, params: list[str]) -> tuple:
    return tuple(result.get(name) for name in params)


def compare(example: str, ours: Run, theirs: Run) -> list[str]:
    lines = []
    if ours.error:
        lines.append(f"  ours stopped: {ours.error}")
    if theirs.error:
        lines.append(f"  Kernel Tuner stopped: {theirs.error}")
    for i, (mine, kt) in enumerate(itertools.zip_longest(ours.calls, theirs.calls), 1):
        call = mine or kt
        head = f"  call {i} ({call.kernel}):"
        parts = []
        for name, tool in (("ours", mine), ("Kernel Tuner", kt)):
            if tool is None:
                parts.append(f"{name}: no call")
            elif tool.error:
                parts.append(f"{name}: {tool.error}")
            else:
                count = len(tool.measured)
                parts.append(f"{name} {count} configurations ({len(tool.valid)} valid) in {tool.wall_s:.1f} s, "
                             f"{tool.wall_s / max(count, 1):.2f} s each")  # fmt: skip
        lines.append(f"{head} {'; '.join(parts)}")
        if mine is None or kt is None or mine.error or kt.error or not mine.valid:
            continue
        params = mine.params
        best = mine.env["best_config"]
        ties = mine.env.get("tie_set") or []
        tie_keys = {key(t, params) for t in ties}
        lines.append(f"    our winner: {label(best, params)}: {best['time']:.4f} ms (median, L2 flushed); tie set of {len(ties)}"
                     + (f": {'; '.join(label(t, params) for t in ties[:4])}{' ...' if len(ties) > 4 else ''}" if len(ties) > 1 else ""))  # fmt: skip
        if kt.valid:
            split = {
                part: np.mean([r.get(f"{part}_time", 0.0) for r in kt.valid])
                for part in ("compile", "verification", "benchmark", "framework")
            }
            lines.append("    Kernel Tuner per configuration: " + ", ".join(f"{part} {ms:.0f} ms" for part, ms in split.items()))
            kt_best = min(kt.valid, key=lambda r: r["time"])
            kt_times = {key(r, params): r["time"] for r in kt.valid}
            ours_in_kt = kt_times.get(key(best, params))
            lines.append(f"    Kernel Tuner's winner: {label(kt_best, params)}: {kt_best['time']:.4f} ms (mean of its iterations, hot); "
                         f"in our tie set: {'yes' if key(kt_best, params) in tie_keys else 'no'}; Kernel Tuner's time of our winner: "
                         + (f"{ours_in_kt / kt_best['time']:.3f} x its best" if ours_in_kt else "not measured"))  # fmt: skip
    total = [(run.wall_s, sum(len(c.measured) for c in run.calls)) for run in (ours, theirs)]
    lines.append(f"  all calls: ours {total[0][1]} configurations in {total[0][0]:.1f} s ({total[0][0] / max(total[0][1], 1):.2f} s each); "
                 f"Kernel Tuner {total[1][1]} in {total[1][0]:.1f} s ({total[1][0] / max(total[1][1], 1):.2f} s each)")  # fmt: skip
    return lines



def timed_where_we_found_infeasible(out: Path) -> list[str]:
    """Each Kernel Tuner call's configurations (its cache file, ``cache-<call>.json``) that our rows of
    the same family mark infeasible (a device limit: the launch cannot run), and its winner among the
    configurations both tools ran. No GPU: read from ``out`` after a run (``--recompare``)."""
    import json

    import pandas as pd

    measured = sorted((out / "results").glob("*/measurements.parquet"))
    if not measured:
        return [f"  no {out / 'results'}/<gpu>/measurements.parquet: nothing to compare"]
    rows = pd.read_parquet(measured[0])
    lines = []
    for cache_file in sorted(out.glob("*/kernel_tuner/cache-*.json")):
        cache = json.loads(cache_file.read_text())
        params = list(cache["tune_params_keys"])
        timed = {tuple(r[p] for p in params): r["time"] for r in cache["cache"].values() if isinstance(r.get("time"), (int, float))}
        # Our family of this call: the one whose rows hold the most of Kernel Tuner's configurations.
        best_family, best_overlap = None, 0
        for family, group in rows[rows.family.str.startswith(cache["kernel_name"] + "_")].groupby("family"):
            if set(params) <= set(group.columns):
                keys = {tuple(v) for v in group[params].itertuples(index=False)}
                overlap = len(keys & set(timed))
                if overlap > best_overlap:
                    best_family, best_overlap = family, overlap
        label = f"  {cache_file.parent.parent.name} call {cache_file.stem.split('-')[1]} ({cache['kernel_name']})"
        if best_family is None:
            lines.append(f"{label}: no family of ours holds its configurations")
            continue
        ours = rows[rows.family == best_family]
        status = {tuple(v[:-2]): (v[-2], v[-1]) for v in ours[params + ["status", "error"]].itertuples(index=False)}
        infeasible = {k: status[k][1] for k in timed if k in status and status[k][0] == "infeasible"}
        both = {k: ms for k, ms in timed.items() if k in status and status[k][0] == "ok"}
        lines.append(f"{label}: Kernel Tuner timed {len(timed)}; {len(infeasible)} of them are infeasible here")
        for key, reason in list(infeasible.items())[:3]:
            lines.append(f"    {dict(zip(params, key))}: Kernel Tuner {timed[key]:.4f} ms; ours: {reason}")
        if infeasible and both:
            kt_best = min(both, key=both.get)
            ok = ours[ours.status == "ok"]
            our_best = ok.loc[ok.time_ms_median.idxmin()]
            our_key = tuple(our_best[p].item() if hasattr(our_best[p], 'item') else our_best[p] for p in params)
            lines.append(f"    Kernel Tuner's winner among the {len(both)} both ran: {dict(zip(params, kt_best))} {both[kt_best]:.4f} ms; "
                         f"ours {dict(zip(params, our_key))}; Kernel Tuner's time of ours: {both.get(our_key, float('nan')) / both[kt_best]:.3f} x")  # fmt: skip
    return lines

# ---- the GPU run ---------------------------------------------------------------------------


def warm_up(results: Path) -> float:
    """The results folder's once-only work (device.json, the GPU's bandwidth peaks) and one built-in
    configuration, before any example is timed. Returns its seconds."""
    import tuner
    from tuner.families import REGISTRY

    started = time.perf_counter()
    family = REGISTRY["vector_add"]
    tuner.tune(family, {p.name: [p.default] for p in family.params}, n=1 << 22, dtype="float32", results=results, name="warm_up")
    return time.perf_counter() - started


def study(examples_dir: Path, out: Path, trials: int, say: Callable[[str], None]) -> None:
    """A study of ``trials`` with the default search on convolution's full space (module docstring)."""
    from tuner import kernel_tuner
    from tuner.data.paths import cubin_cache
    from tuner.kernel_tuner.script import with_our_import
    from tuner.search.samplers.registry import DEFAULT_STRATEGY

    original = (examples_dir / "convolution.py").read_text()
    text = with_our_import(original)
    cache = cubin_cache(out / "results")
    before = set(cache.glob("*.cubin"))
    options = {"strategy": DEFAULT_STRATEGY, "strategy_options": {"max_fevals": trials}}
    say(f"\n== convolution study: convolution.py with its import changed (nothing cut), its call given {options}")
    folder = out / "convolution" / "study"
    folder.mkdir(parents=True, exist_ok=True)
    for source in examples_dir.glob("*.cu"):
        if not (folder / source.name).exists():
            (folder / source.name).symlink_to(source.resolve())
    calls: list[Call] = []
    started = time.perf_counter()
    error = None
    with _inside(folder), open(folder / "study.log", "w") as log, recording(kernel_tuner, calls, **options):
        with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
            np.random.seed(SEED)
            try:
                namespace = {"__name__": "convolution_study"}
                exec(compile(text, str(examples_dir / "convolution.py"), "exec"), namespace)
                namespace["tune"]()
            except Exception as failure:
                error = f"{type(failure).__name__}: {failure}"[:300]
    wall = time.perf_counter() - started
    compiled = len(set(cache.glob("*.cubin")) - before)
    call = calls[0] if calls else None
    if call is None or call.results is None:
        say(
            f"  stopped: {error or (call.error if call else 'no tune_kernel call')} after {wall:.1f} s; {compiled} modules compiled"
        )
        return
    params = call.params
    product = math.prod(len(v) for v in call.space.values())
    statuses: dict[str, int] = {}
    for r in call.measured:
        kind = str(r.get("__error__", "ok"))
        statuses[kind] = statuses.get(kind, 0) + 1
    say(f"  space: {product:,} combinations of its tune_params (too many to list: searched without a list)")
    say(f"  study: {len(call.measured)} configurations measured {statuses} in {call.wall_s:.1f} s "
        f"({call.wall_s / max(len(call.measured), 1):.2f} s each); {compiled} modules compiled (new cubins)")  # fmt: skip
    if call.env and call.env.get("best_config"):
        say(f"  best found: {label(call.env['best_config'], params)}: {call.env['best_config']['time']:.4f} ms")


# ---- the dry run ---------------------------------------------------------------------------


class SpaceOnly:
    """Kernel Tuner's ``tune_kernel`` that builds its search space and answers made-up results (no GPU)."""

    def __init__(self) -> None:
        from kernel_tuner.searchspace import Searchspace

        self.searchspace = Searchspace

    def tune_kernel(self, kernel_name, kernel_source, problem_size, arguments, tune_params, restrictions=None,
                    block_size_names=None, **rest):  # fmt: skip
        names = (block_size_names or []) + ["block_size_x", "block_size_y", "block_size_z"][len(block_size_names or []) :]
        space = self.searchspace(dict(tune_params), restrictions or [], 1024, block_size_names=names)
        timings = {"times": [1.0], "compile_time": 0.0, "verification_time": 0.0, "benchmark_time": 0.0, "strategy_time": 0.0,
                   "framework_time": 0.0, "timestamp": "2026-01-01T00:00:00+00:00"}  # fmt: skip
        results = [dict(zip(tune_params, point)) | {"time": 1.0 + i} | timings for i, point in enumerate(space.list)]
        return results, {"best_config": results[0] if results else None}


def made_up_rows(results: Path) -> Callable:
    """``tuner.tune`` answering made-up rows for the spec's feasible configurations (the first 10,000), no GPU."""
    import pandas as pd

    from tuner.api import Tuned
    from tuner.families.base import Problem, config_key

    def tune(family, space=None, *, n, dtype=None, budget=None, **rest):
        problem = Problem(family.name, dtype, n)
        feasible = (
            c for c in family.configs({p.name: list(p.values) for p in family.params}) if not family.violations(c, problem)
        )
        configs = list(itertools.islice(feasible, budget or 10_000))
        rows = [{"family": family.name, "dtype": dtype, "n": n, "status": "ok", "config_key": config_key(c), **c,
                 "time_ms_median": 1.0 + i, "bandwidth_gbs": 1.0 / (1.0 + i), "timestamp": pd.Timestamp.now(tz="UTC")}
                for i, c in enumerate(configs)]  # fmt: skip
        folder = results / "dry-run"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "device.json").write_text('{"name": "no GPU (dry run)"}')
        return Tuned(rows=pd.DataFrame(rows), best=None, best_row=None, folder=folder)

    return tune


def dry_run(examples: list[str], examples_dir: Path, out: Path, trials: int, say: Callable[[str], None]) -> int:
    import tuner.api
    from tuner import kernel_tuner
    from tuner.kernel_tuner.script import with_our_import
    from tuner.search.samplers.registry import DEFAULT_STRATEGY

    kernel_tuner.configure(results=out / "results")
    real_tune, tuner.api.tune = tuner.api.tune, made_up_rows(out / "results")
    theirs_module = importlib.import_module("kernel_tuner")
    space_only = SpaceOnly()
    mismatches = 0
    try:
        for example in examples:
            original, cut = cut_script(example, examples_dir)
            say(f"\n== {example} (dry run: translated, not measured)")
            ours = run_script(example, with_our_import(cut), "ours", examples_dir, out, kernel_tuner)
            real_kt, theirs_module.tune_kernel = theirs_module.tune_kernel, space_only.tune_kernel
            try:
                theirs = run_script(example, cut, "kernel_tuner", examples_dir, out, theirs_module)
            finally:
                theirs_module.tune_kernel = real_kt
            for run, name in ((ours, "ours"), (theirs, "Kernel Tuner")):
                if run.error:
                    say(f"  {name} stopped: {run.error}")
            for i, (mine, kt) in enumerate(itertools.zip_longest(ours.calls, theirs.calls), 1):
                counts = [len(c.measured) if c and c.results is not None else None for c in (mine, kt)]
                same = counts[0] == counts[1] and None not in counts
                mismatches += not same
                family = mine.env["family"] if mine and mine.env else "-"
                say(f"  call {i}: ours {counts[0]} configurations (family {family}), Kernel Tuner's search space {counts[1]}"
                    f"{'' if same else '  <- differ'}")  # fmt: skip
        if trials:
            from tuner.kernel_tuner import translate

            calls: list[Call] = []
            folder = out / "convolution" / "study"
            folder.mkdir(parents=True, exist_ok=True)
            options = {"strategy": DEFAULT_STRATEGY, "strategy_options": {"max_fevals": trials}}
            plans = []

            def plan_only(*args, **kwargs):
                plans.append(translate(*args, **kwargs, sources_dir=out / "results" / ".kernel_tuner"))
                return [], {"best_config": None}

            kernel_tuner.tune_kernel, real = plan_only, kernel_tuner.tune_kernel
            try:
                namespace = {"__name__": "convolution_study"}
                with _inside(folder):
                    for source in examples_dir.glob("*.cu"):
                        if not Path(source.name).exists():
                            Path(source.name).symlink_to(source.resolve())
                    with recording(kernel_tuner, calls, **options):
                        exec(
                            compile(with_our_import((examples_dir / "convolution.py").read_text()), "convolution.py", "exec"),
                            namespace,
                        )
                        namespace["tune"]()
            finally:
                kernel_tuner.tune_kernel = real
            plan = plans[0]
            product = math.prod(len(p.values) for p in plan.spec.params)
            say(
                f"\n== convolution study (dry run): {plan.strategy} over {product:,} combinations (listed: {plan.space_size is not None})"
            )
    finally:
        tuner.api.tune = real_tune
    say(f"\ndry run: {mismatches} calls whose spaces differ between the tools")
    return 1 if mismatches else 0


# ---- main -----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--examples-dir", required=True, type=Path, help="Kernel Tuner's examples/cuda files (the .py scripts and .cu kernels)"
    )
    parser.add_argument("--out", required=True, type=Path, help="folder for the runs, the results and summary.txt")
    parser.add_argument("--examples", default=",".join(EXAMPLES),
                        help=f"comma-separated, of {', '.join(EXAMPLES)} (default: all; '' for the study alone)")  # fmt: skip
    parser.add_argument("--study-trials", type=int, default=50, help="the convolution study's trials (0: no study; default 50)")
    parser.add_argument(
        "--dry-run", action="store_true", help="translate both tools' calls without a GPU and compare their spaces"
    )
    parser.add_argument("--recompare", action="store_true",
                        help="no GPU: from an earlier run's --out, Kernel Tuner's times of configurations infeasible here")  # fmt: skip
    args = parser.parse_args(argv)
    if args.recompare:
        print("\n".join(["Kernel Tuner's timed configurations that are infeasible here:"] + timed_where_we_found_infeasible(args.out)))
        return 0
    examples = [e.strip() for e in args.examples.split(",") if e.strip()]
    unknown = [e for e in examples if e not in EXAMPLES]
    if unknown:
        parser.error(f"--examples: must name some of {list(EXAMPLES)}, got {unknown[0]!r}")
    if args.study_trials < 0:
        parser.error(f"--study-trials: must be at least 0, got {args.study_trials}")
    missing = [f"{e}.py" for e in examples if not (args.examples_dir / f"{e}.py").is_file()]
    if missing:
        parser.error(f"--examples-dir: must hold Kernel Tuner's example scripts, {args.examples_dir} lacks {missing[0]}")
    for example in examples:
        cut_script(example, args.examples_dir)  # every cut finds its text, before any work
    args.out.mkdir(parents=True, exist_ok=True)
    args.examples_dir = args.examples_dir.resolve()
    args.out = args.out.resolve()
    summary = open(args.out / "summary.txt", "w")

    def say(line: str) -> None:
        print(line, flush=True)
        summary.write(line + "\n")
        summary.flush()

    from tuner.kernel_tuner.script import with_our_import

    for example in examples:
        original, cut = cut_script(example, args.examples_dir)
        lines = diff_lines(example, original, with_our_import(cut))
        reasons = [f"  # {cut.new}: {cut.why}" for cut in CUTS[example]]
        say(
            f"\n-- {example}.py: the import (ours only) and the cuts (both tools)\n"
            + "\n".join(lines)
            + ("\n" + "\n".join(reasons) if reasons else "")
        )
    if args.dry_run:
        return dry_run(examples, args.examples_dir, args.out, args.study_trials, say)

    import kernel_tuner as theirs_module

    from tuner import kernel_tuner
    from tuner.device.gpu import GpuUnavailable

    results = args.out / "results"
    kernel_tuner.configure(results=results)
    started = time.perf_counter()
    try:
        warm = warm_up(results)
    except GpuUnavailable as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    say(f"\nwarm-up: device.json, the bandwidth peaks and one built-in configuration in {warm:.1f} s "
        f"(Kernel Tuner {importlib.metadata.version('kernel_tuner')}, numpy {np.__version__})")  # fmt: skip
    for example in examples:
        _, cut = cut_script(example, args.examples_dir)
        ours = run_script(example, with_our_import(cut), "ours", args.examples_dir, args.out, kernel_tuner)
        theirs = run_script(example, cut, "kernel_tuner", args.examples_dir, args.out, theirs_module)
        say(f"\n== {example}")
        for line in compare(example, ours, theirs):
            say(line)
    say("\n== Kernel Tuner's timed configurations that are infeasible here")
    for line in timed_where_we_found_infeasible(args.out):
        say(line)
    if args.study_trials:
        study(args.examples_dir, args.out, args.study_trials, say)
    say(f"\ntotal: {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
