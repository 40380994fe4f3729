"""What a study compiles, against its space: the modules a study of the
default strategy builds, and its wall time, on Kernel Tuner's convolution
space, without a GPU or nvcc.

    python benchmarks/study_compiles.py [--trials 50] [--nvcc-s 0.3] [--measure-s 0.005]

The space is that of Kernel Tuner's convolution script (every value: filter
sizes 3 to 33, blocks 16 to 128 by 32, tiles 1 to 8, padding and read-only
switches, 3,145,728 points, each its own module), with its restriction
(padding only where the block width is not a multiple of 32), and the same
narrowed to a space short enough to list (27,648 modules). nvcc is a shell
that sleeps ``--nvcc-s`` and writes a stub cubin; a trial compiles its module
as the tune stage's measuring thread does (``compile_variant``), then sleeps
``--measure-s``. The study runs through ``run_study`` with the tune stage's
compile-ahead wiring (``Precompiler``: claimed modules, the sampler's likely
next ones, the whole space where small beside the budget). Prints one line a
space: the modules built, the seconds the study took and the measuring
thread waited for nvcc, and the precompiler's summary. Nothing is written.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tuner.families.base import Family, Param, Problem  # noqa: E402
from tuner.measure import compile as compiling  # noqa: E402
from tuner.measure.precompile import Precompiler, study_modules  # noqa: E402
from tuner.search.study.run import StudyOptions, run_study  # noqa: E402
from tuner.search.tables.replay import _quiet_optuna  # noqa: E402

CONVOLUTION = {
    "filter_height": list(range(3, 35, 2)),
    "filter_width": list(range(3, 35, 2)),
    "block_size_x": [16 * i for i in range(1, 9)],
    "block_size_y": [2**i for i in range(6)],
    "tile_size_x": list(range(1, 9)),
    "tile_size_y": list(range(1, 9)),
    "use_padding": [0, 1],
    "read_only": [0, 1],
}
NARROWED = {
    **CONVOLUTION,
    "filter_height": [3, 5, 7],
    "filter_width": [3, 5, 7],
    "block_size_y": [1, 2, 4, 8],
    "tile_size_y": [1, 2, 4, 8],
}


def convolution(domains: dict[str, list], source: Path) -> Family:
    """Kernel Tuner's convolution space as a family: every parameter a define."""

    class Convolution(Family):
        name, dtypes, arg_types = "convolution", ("float32",), ""
        params = tuple(Param(name, tuple(values), name) for name, values in domains.items())

        def constraint_violations(self, cfg, problem):
            return [] if cfg["use_padding"] == 0 or cfg["block_size_x"] % 32 != 0 else ["padding only where it helps"]

        def kernel_name(self, cfg):
            return "convolution_kernel"

        def defines(self, cfg, problem):
            return {name: str(value) for name, value in cfg.items()}

        def bytes_moved(self, cfg, problem):
            return 4 * problem.n

        make_inputs = reference = bind = allocate = None

    Convolution.source = str(source)
    return Convolution()


def speed(cfg: dict) -> float:
    """A made-up rate with one optimum, so the search has somewhere to go."""
    away = abs(cfg["block_size_x"] - 64) / 16 + abs(cfg["tile_size_x"] - 2) + abs(cfg["tile_size_y"] - 4)
    return 1000.0 / (1 + away + cfg["read_only"] + (cfg["filter_height"] + cfg["filter_width"]) / 16)


def run(label: str, domains: dict[str, list], trials: int, nvcc_s: float, measure_s: float, work: Path) -> str:
    source = work / "convolution.cu"
    source.write_text("// the modules are stubs\n")
    family, problem = convolution(domains, source), Problem("convolution", "float32", 4096 * 4096)
    cache = Path(tempfile.mkdtemp(dir=work))
    waits: list[float] = []
    started = time.perf_counter()
    with Precompiler(
        family, problem, study_modules(family, problem, domains, [], 0, trials), arch="sm_90", cache_dir=cache
    ) as ahead:

        def measure(cfg: dict) -> dict:
            waited = time.perf_counter()
            compiling.compile_variant(family, cfg, problem, arch="sm_90", cache_dir=cache)
            waits.append(time.perf_counter() - waited)
            time.sleep(measure_s)
            return {"status": "ok", "bandwidth_gbs": speed(cfg)}

        with _quiet_optuna():
            outcome = run_study(StudyOptions.for_strategy(family=family, problem=problem, domains=domains, storage=None,
                                                          study_name=label, measure=measure, budget_trials=trials,
                                                          timeout_s=None, seed=0, claimed=ahead.hurry,
                                                          likely_next=ahead.expect))  # fmt: skip
        wall = time.perf_counter() - started
        summary = ahead.summary()
    listed = family.listed_space(problem, domains)
    space = "not listed" if listed is None else f"{len(compiling.unique_modules(family, listed, problem)):,} modules"
    return (f"{label}: {math.prod(map(len, domains.values())):,} points ({space}); {len(outcome.rows)} trials built "
            f"{len(list(cache.glob('*.cubin')))} modules in {wall:.1f} s, the measuring thread waiting {sum(waits):.1f} s; {summary}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=50)
    parser.add_argument("--nvcc-s", type=float, default=0.3, help="seconds the stub nvcc takes a module")
    parser.add_argument("--measure-s", type=float, default=0.005, help="seconds a trial's measurement takes")
    args = parser.parse_args(argv)
    if args.trials < 1 or args.nvcc_s < 0 or args.measure_s < 0:
        parser.error(f"--trials must be >= 1 and the seconds >= 0, got {args.trials}, {args.nvcc_s} and {args.measure_s}")
    nvcc = compiling.nvcc_command
    compiling.nvcc_command = lambda source, defines, flags, arch, output: [
        "sh", "-c", f"sleep {args.nvcc_s}; printf '\\177ELF' > '{output}'"]  # fmt: skip
    try:
        with tempfile.TemporaryDirectory() as work:
            for label, domains in (("convolution", CONVOLUTION), ("convolution narrowed", NARROWED)):
                print(run(label, domains, args.trials, args.nvcc_s, args.measure_s, Path(work)), flush=True)
    finally:
        compiling.nvcc_command = nvcc
    return 0


if __name__ == "__main__":
    sys.exit(main())
