"""One worker of the ``tune`` stage (its measuring child; one per GPU with
``--gpus``), in two processes: this one runs the search (``run_study``: the
sampler, the study's storage, the claims) and a measuring process
(``tuner.measure.remote``) owns the GPU, compiles ahead and measures. The
next trial is asked and claimed while one is measured; the measuring
process measures it as soon as that one is done, while this process records
that one. Neither waits for the other's Python.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
from pathlib import Path
from typing import Iterator

from tuner import harness
from tuner.families import REGISTRY
from tuner.settings import Settings, StudySettings


@contextlib.contextmanager
def measuring_side(stage_json: str, name: str, device_json: str, device_index: int | None, enqueue: list[dict],
                   seed: int) -> Iterator:  # fmt: skip
    """The measuring process's half (``tuner.measure.remote.serve`` enters it):
    the Bench on this process's GPU, the study's modules compiled ahead in
    background threads (enqueued ones first, each prefetched one at once),
    rows stamped with the stage's clock."""
    from tuner.device.gpu import GpuUnavailable
    from tuner.measure.precompile import Precompiler, study_modules
    from tuner.measure.stopwatch import Stopwatch, stage_started

    settings = Settings.from_stage_json(stage_json)
    study = settings.study(name)
    try:
        bench, _ = harness.open_bench(settings, Path(device_json), study.timing, device_index, energy=study.energy)
    except GpuUnavailable as error:  # the line and status the command gives without a GPU
        print(f"error: {error}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
    family = REGISTRY[study.family]
    ahead = study_modules(family, study.problem, study.domains(), enqueue, seed) if study.compile_ahead else []
    with Precompiler(family, study.problem, ahead, arch=bench.gpu.arch, cache_dir=bench.cache_dir, jobs=settings.run.compile_jobs) as precompiler:  # fmt: skip
        harness.load_peaks(bench, settings.run.gpu_dir / "peaks.json")
        session = bench.problem(family, study.problem)
        stopwatch = Stopwatch(stage_started(), lambda: bench.phases.get("compile", 0.0))  # rows carry wall and nvcc seconds
        yield (
            stopwatch.measuring(lambda cfg: session.measure(cfg, f"study:{name}")),
            precompiler.hurry,
            lambda: (str(bench.phases), precompiler.summary()),
        )


def run(args, settings: Settings, study: StudySettings, storage_name: str, device_json: Path) -> None:
    """Search the study on this worker's GPU until its budget, shared with
    every worker, is spent; print where the time went."""
    from tuner.measure.remote import MeasuringProcess
    from tuner.measure.stopwatch import Phases
    from tuner.progress import Progress
    from tuner.search.storage import finished_trials
    from tuner.search.study import run_study
    from tuner.search.warm import study_start

    family = REGISTRY[study.family]
    seed = study.seed + args.worker
    enqueue, sampler, warm_start = study_start(study, family, seed)  # with its warm start, if any
    side = (settings.stage_json("study", args.name), args.name, str(device_json), args.device_index, enqueue, seed)
    with MeasuringProcess(measuring_side, *side) as measuring:
        measuring.wait_ready()  # the GPU first: without one, the study's storage is not touched
        source = f"study:{args.name}"
        # The GPU as its host numbers it (a --gpus child sees only its own, as device 0).
        gpu = os.environ.get("CUDA_VISIBLE_DEVICES") or args.device_index or settings.run.device_index
        worker = f"gpu{gpu}@{socket.gethostname()}"
        # One tick per configuration this worker measures, towards the budget all workers share.
        done = finished_trials(study.storage, storage_name)
        phases = Phases()
        with phases("study (all)"), Progress(f"{source} ({worker})", study.budget_trials, initial=min(done, study.budget_trials or done)) as progress:  # fmt: skip
            outcome = run_study(family=family, problem=study.problem, domains=study.domains(), storage=study.storage, study_name=storage_name,
                      measure=progress.counting(measuring.measure), budget_trials=study.budget_trials, timeout_s=study.timeout_s,
                      sampler=sampler, seed=seed, enqueue=enqueue, worker=worker, claimed=measuring.prefetch,
                      warm_start=warm_start)  # fmt: skip
        measured, compiled = measuring.close() or ("", "")
    print(
        f"study {args.name} phases: {', '.join(filter(None, [str(phases), measured]))}; {compiled}; {outcome.ask_summary()}",
        flush=True,
    )
