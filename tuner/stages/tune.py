"""The ``tune`` stage: one Optuna study, on one GPU or on several sharing its
budget, then the study's rows in one Parquet file.

Each GPU has one search loop and one measuring process. The search loop runs
the study (``run_study``: the sampler, the study's storage, the claims): it
asks and claims the next trial while the measuring process compiles it ahead
(with the ones the sampler would likely propose next) and measures the one
before (``tuner.measure.remote``). A configuration that
poisons the CUDA context is recorded as ``launch_error`` in the study (its
claim settled by ``run_study``), and the loop goes on with a fresh measuring
process.

With one GPU the search loop runs in this process. With several, each GPU's
loop is a process of its own, started here, sharing the study through its
claims as workers on other hosts do: a search loop is Python (an ask costs
2.5 to 4 ms of CPU, a third of a trial on the reduce spaces), so loops in
threads of one process would take turns at the GIL and the GPUs would wait
for each other's asks.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import socket
import sys
from multiprocessing.queues import SimpleQueue
from pathlib import Path
from typing import Iterator

from tuner import harness
from tuner.errors import Refusal, Refused
from tuner.families import REGISTRY
from tuner.measure.remote import MeasuringProcess, restarting
from tuner.progress import Phases
from tuner.settings import Settings


def run(settings: Settings, name: str, *, started: float, gpus: list[int], device: str | None, out: str | None) -> None:
    """Search study ``name`` on ``gpus`` (default: the run's ``study_gpus``,
    else its ``device_index``) until its budget is spent; write its rows to
    ``out`` (default ``studies/<name>.parquet``) and print its best and its
    time to target. ``started``: the stage's start (epoch seconds), which
    every row counts its seconds from."""
    from tuner.search.study.run import study_rows

    study = settings.study(name)
    device_json = harness.measured_against(device, settings)
    gpus = gpus or list(settings.run.study_gpus) or [settings.run.device_index]
    stage_json = settings.stage_json("study", name)
    if len(gpus) == 1:
        search(settings, stage_json, name, device_json, gpus[0], worker=0, started=started)
    else:
        spawn = multiprocessing.get_context("spawn")  # no CUDA or lock state inherited
        refusals = spawn.SimpleQueue()  # each worker's refusal, if any: the stage reports them once
        loops = [spawn.Process(target=_search_process, args=(stage_json, name, str(device_json), gpu, worker, started, refusals),
                               name=f"search-gpu{gpu}") for worker, gpu in enumerate(gpus)]  # fmt: skip
        for loop in loops:
            loop.start()
        for loop in loops:
            loop.join()
        _stop_if_workers_failed(gpus, [loop.exitcode for loop in loops], refusals)
    from tuner.data import results
    from tuner.data.time_to_target import to_final_best

    frame = results.to_frame(study_rows(study.storage, study.storage_name(settings.run.gpu)), families=[REGISTRY[study.family]])
    if not (frame.status == "ok").any():
        raise SystemExit(
            f"error: study {name} measured no configuration that verified; statuses {frame.status.value_counts().to_dict()}"
        )
    path = Path(out) if out else settings.run.folder.study(name)
    results.write_atomic(frame, path)
    print(results.best_line(frame, f"study {name} ({study.sampler}, budget {study.budget_trials})"))
    print(f"study {name}: {to_final_best(frame).sentence('its final best')}")


def search(settings: Settings, stage_json: str, name: str, device_json: Path, gpu: int, *, worker: int, started: float) -> None:
    """The search loop on ``gpu``: the study until its budget, shared with
    every GPU's loop, is spent; then where its time went, in one line.
    ``worker`` numbers the loop (its seed's offset)."""
    from tuner.progress import Progress
    from tuner.search.study.run import StudyOptions, run_study
    from tuner.search.study.storage import finished_trials
    from tuner.search.study.warm import study_sampler, study_start

    study = settings.study(name)
    storage_name = study.storage_name(settings.run.gpu)
    family = REGISTRY[study.family]
    seed = study.seed + worker
    starts = [study_start(study, family)]  # enqueue, prior rows and marks, with the warm start's table, if any
    side = (stage_json, name, str(device_json), gpu, starts[0].enqueue, seed, started)
    source, worker_name = f"study:{name}", f"gpu{gpu}@{socket.gethostname()}"
    phases = Phases()
    with contextlib.ExitStack() as searching:
        progress = None

        def search_study(measuring: MeasuringProcess):
            nonlocal progress
            if progress is None:  # the GPU first: without one, the study's storage is not touched
                searching.enter_context(phases("study (all)"))
                done = finished_trials(study.storage, storage_name)
                # One tick per configuration this loop measures, towards the budget all loops share.
                progress = searching.enter_context(Progress(f"{source} ({worker_name})", study.budget_trials,
                                                            initial=min(done, study.budget_trials or done)))  # fmt: skip
            start = starts.pop() if starts else study_start(study, family)
            sampler = study_sampler(study, start, seed, storage_name)  # the run's one sampler (a fresh one after a fault)
            return run_study(StudyOptions(family=family, problem=study.problem, domains=study.domains(), storage=study.storage,
                                          study_name=storage_name, measure=progress.counting(measuring.measure),
                                          budget_trials=study.budget_trials, timeout_s=study.timeout_s, sampler=sampler,
                                          seed=seed, enqueue=start.enqueue, worker=worker_name, claimed=measuring.prefetch,
                                          likely_next=measuring.expect, warm_start=start.marks))  # fmt: skip

        outcome, summary = restarting(measuring_side, side, search_study, f"study {name} worker on GPU {gpu}")
    measured, compiled = summary or ("", "")
    print(f"study {name} phases: {', '.join(filter(None, [str(phases), measured]))}; {compiled}; {outcome.ask_summary()}", flush=True)


def _search_process(stage_json: str, name: str, device_json: str, gpu: int, worker: int, started: float,
                    refusals: SimpleQueue) -> None:  # fmt: skip
    """One GPU's search loop as a process of its own. A refusal (its own, or
    its measuring process's) goes to the stage through ``refusals``, which
    reports it once for every worker; the worker ends with its exit status."""
    try:
        search(Settings.from_stage_json(stage_json), stage_json, name, Path(device_json), gpu, worker=worker, started=started)
    except Refusal as error:
        refusals.put((" ".join(error.line().split()), error.exit_status))
        raise SystemExit(error.exit_status) from None


def _stop_if_workers_failed(gpus: list[int], exit_codes: list[int | None], refusals: SimpleQueue) -> None:
    """The stage's end where a worker failed: the workers' refusals, each
    line once (where all workers met the same, as they do without a GPU or
    with a damaged file, one line), with the first one's exit status; else
    (a bug: its traceback is in the log above) one line naming the workers."""
    told = []
    while not refusals.empty():
        told.append(refusals.get())
    if told:
        lines = list(dict.fromkeys(line for line, _ in told))
        for other in lines[1:]:
            print(other, file=sys.stderr, flush=True)
        raise Refused(lines[0], told[0][1])
    failed = [gpu for gpu, code in zip(gpus, exit_codes) if code != 0]
    if failed:
        raise SystemExit(f"error: the study workers on GPUs {failed} failed; finished trials are kept in the study storage")


@contextlib.contextmanager
def measuring_side(stage_json: str, name: str, device_json: str, device_index: int, enqueue: list[dict], seed: int,
                   started: float) -> Iterator:  # fmt: skip
    """The measuring process's half (``tuner.measure.remote.serve`` enters
    it): the Bench on its GPU with the study's problem on the device, the
    study's modules compiled ahead in background threads (each prefetched one
    at once, the sampler's likely next ones when a thread is free, enqueued
    ones first, and the whole space only where it is small beside the budget:
    ``tuner.measure.precompile``), rows stamped with the stage's clock."""
    from tuner.measure.precompile import Precompiler, study_modules
    from tuner.measure.stopwatch import Stopwatch

    settings = Settings.from_stage_json(stage_json)
    study = settings.study(name)
    bench = harness.open_measuring_bench(settings, Path(device_json), study.timing, device_index, energy=study.energy)
    family = REGISTRY[study.family]
    ahead = study_modules(family, study.problem, study.domains(), enqueue, seed, study.budget_trials) if study.compile_ahead else []
    with Precompiler(family, study.problem, ahead, arch=bench.gpu.arch, cache_dir=bench.cache_dir, jobs=settings.run.compile_jobs,
                     enabled=study.compile_ahead) as precompiler:  # fmt: skip
        session = bench.problem(family, study.problem)
        stopwatch = Stopwatch(started, lambda: bench.phases.get("compile", 0.0))  # rows carry wall and nvcc seconds
        yield (
            stopwatch.measuring(lambda cfg: session.measure(cfg, f"study:{name}")),
            precompiler.hurry,
            lambda: (str(bench.phases), precompiler.summary()),
            precompiler.expect,
        )
