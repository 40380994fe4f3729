"""The ``sweep`` stage: measure every feasible configuration of one sweep not
yet in its store, then write the store's rows for the sweep's grid.

This process walks the grid and appends each row to the store
(``tuner.stages.sweep_store``); one measuring process on the run's GPU compiles
each problem's modules ahead and measures. A configuration that poisons the
CUDA context is stored as ``launch_error`` here, and a fresh measuring
process goes on with what the store lacks (``tuner.measure.remote``).
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Iterator

from tuner import harness
from tuner.families import REGISTRY, Problem
from tuner.measure.remote import MeasuringProcess, restarting
from tuner.progress import Phases
from tuner.settings import Settings
from tuner.stages.sweep_store import measure_sweep, store_dir, sweep_rows


def run(settings: Settings, name: str, device_json: Path, out: Path) -> None:
    """Measure what the store of sweep ``name`` lacks, then write its rows to ``out``."""
    sweep = settings.sweep(name)
    family = REGISTRY[sweep.family]
    store = store_dir(settings.run.gpu_dir, name)
    side = (settings.stage_json("sweep", name), name, str(device_json), settings.run.device_index)

    def measure_all(measuring: MeasuringProcess) -> None:
        measure_sweep(name, family, sweep.problems(), sweep.domains(), store=store,
                      open_problem=lambda family, problem: RemoteProblem(measuring, problem),
                      prepare=lambda family, problem, configs: measuring.measure(_request("prepare", problem, configs=configs)),
                      energy_best=sweep.energy == "best" and measuring.measure({"do": "energy counter"}))  # fmt: skip

    started = time.perf_counter()
    _, measured = restarting(measuring_side, side, measure_all, f"sweep {name}")
    phases = Phases({"sweep (all)": time.perf_counter() - started, **(measured or {})})
    print(f"sweep {name} phases: {phases}", flush=True)
    from tuner.data import results

    # Every configuration is in the store now: read it back, no GPU needed.
    frame = results.to_frame(sweep_rows(store, family, sweep.problems(), sweep.domains()), families=[family])
    results.write_atomic(frame, out)
    print(results.best_line(frame, f"sweep {name}"))


def _request(do: str, problem: Problem, **more) -> dict:
    return {"do": do, "dtype": problem.dtype, "n": problem.n, **more}


class RemoteProblem:
    """One problem's session as ``measure_sweep`` uses it (``measure``,
    ``measure_energy``), measured in the measuring process."""

    def __init__(self, measuring: MeasuringProcess, problem: Problem) -> None:
        self.measuring, self.problem = measuring, problem

    def measure(self, cfg: dict, source: str) -> dict:
        return self.measuring.measure(_request("measure", self.problem, cfg=cfg, source=source))

    def measure_energy(self, cfg: dict) -> dict:
        columns = self.measuring.measure(_request("energy", self.problem, cfg=cfg))
        if "failed" in columns:
            raise RuntimeError(columns["failed"])
        return columns


@contextlib.contextmanager
def measuring_side(stage_json: str, name: str, device_json: str, device_index: int) -> Iterator:
    """The measuring process's half (``tuner.measure.remote.serve`` enters
    it): the Bench on the sweep's GPU, one problem's inputs on the device at a
    time, and a request's answer: a problem's modules compiled in parallel
    (``prepare``), a configuration's row (``measure``), the energy columns of
    one (``energy``), whether the GPU has an energy counter."""
    from tuner.errors import FatalDeviceError
    from tuner.measure.compile import compile_ahead

    settings = Settings.from_stage_json(stage_json)
    sweep = settings.sweep(name)
    family = REGISTRY[sweep.family]
    bench = harness.open_measuring_bench(settings, Path(device_json), sweep.timing, device_index, energy=sweep.energy == "all")
    prepare = compile_ahead(bench.gpu.arch, bench.cache_dir, settings.run.compile_jobs)
    placed: dict[Problem, object] = {}  # the problem whose inputs are on the device, and its session

    def session(problem: Problem):
        if problem not in placed:
            placed.clear()  # frees the previous problem's device buffers before the next is placed
            placed[problem] = bench.problem(family, problem)
        return placed[problem]

    def answer(request: dict):
        if request["do"] == "energy counter":
            return bench.has_energy_counter
        problem = Problem(family.name, request["dtype"], request["n"])
        if request["do"] == "prepare":
            return prepare(family, problem, request["configs"])
        if request["do"] == "measure":
            return session(problem).measure(request["cfg"], request["source"])
        try:
            return session(problem).measure_energy(request["cfg"]) or {}
        except FatalDeviceError:
            raise
        except Exception as error:  # noqa: BLE001 - a warning in the stage, not the end of the sweep
            return {"failed": f"{type(error).__name__}: {error}"}

    yield answer, lambda request: None, lambda: dict(bench.phases)
