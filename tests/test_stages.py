"""The sweep and tune stages without a GPU: the command in this process, its
measuring process in a thread (``measure_in_thread``'s way) on a fake bench
whose kernels poison the context where told to. A faulting configuration is
recorded as launch_error, a fresh measuring process measures the rest, and
the GPU index reaches the measuring process as the stage chose it."""

from __future__ import annotations

import queue
import threading
import time
from types import SimpleNamespace

import pytest

from tuner import cli, harness
from tuner.data import results
from tuner.errors import FatalDeviceError
from tuner.families import REGISTRY
from tuner.measure import remote
from tuner.progress import Phases
from tuner.settings import parse

PARAMS = {"variant": ["copy"], "block_size": [128, 256, 512], "vector_width": [1, 4], "unroll": [1],
          "grid_blocks_per_sm": [0], "cache_hint": ["none"], "offset": [0]}  # fmt: skip


class FaultyBench:
    """A Bench whose configurations with block size 256 poison the context (as
    ``ProblemBench.measure`` reports an illegal address) and the rest measure
    by formula; ``opened`` lists the GPU index of each measuring process."""

    def __init__(self, tmp_path) -> None:
        self.gpu, self.cache_dir, self.phases = SimpleNamespace(arch="sm_90"), tmp_path / "cubins", Phases()
        self.opened: list[int] = []
        self.measured: dict[str, int] = {}  # config_key -> the GPU that measured it
        self.lock = threading.Lock()
        self.has_energy_counter = False

    def open_bench(self, settings, device_json, timing, device_index=None, energy=False):
        with self.lock:
            self.opened.append(device_index)
        bench = SimpleNamespace(gpu=self.gpu, cache_dir=self.cache_dir, phases=self.phases, has_energy_counter=False,
                                problem=lambda family, problem: self.Session(self, family, problem, device_index))  # fmt: skip
        return bench, {}

    class Session:
        def __init__(self, bench, family, problem, gpu) -> None:
            self.bench, self.family, self.problem, self.gpu = bench, family, problem, gpu

        def measure(self, cfg, source):
            key = results.config_key(cfg)
            row = {"source": source, "family": self.family.name, "dtype": self.problem.dtype, "n": self.problem.n,
                   "config_key": key, **cfg}  # fmt: skip
            time.sleep(0.01)
            with self.bench.lock:
                self.bench.measured[key] = self.gpu
            if cfg["block_size"] == 256:
                raise FatalDeviceError("illegal address", row | {"status": "launch_error", "error": "illegal address (context lost)"})
            gbs = 100.0 + cfg["block_size"] / 10 + cfg["vector_width"]
            return row | {"status": "ok", "bandwidth_gbs": gbs, "time_ms_median": self.problem.n * 4 / gbs / 1e6}


@pytest.fixture
def faulty_bench(tmp_path, monkeypatch):
    """The stages' measuring processes in threads, on a ``FaultyBench``."""

    class InThread(remote.MeasuringProcess):
        def __init__(self, open_side, *args, in_thread=True):
            super().__init__(open_side, *args, in_thread=True)

    bench = FaultyBench(tmp_path)
    monkeypatch.setattr(harness, "open_bench", bench.open_bench)
    monkeypatch.setattr(remote, "MeasuringProcess", InThread)
    monkeypatch.setenv("TUNER_PROGRESS", "off")
    return bench


def settings_of(tmp_path, **more):
    sweep = {"family": "copy", "dtypes": ["float32"], "sizes": [1 << 20], "params": PARAMS}
    study = {"family": "copy", "dtype": "float32", "n": 1 << 20, "budget_trials": 6, "sampler": "random",
             "storage": str(tmp_path / "study.log"), "params": PARAMS, "compile_ahead": False}  # fmt: skip
    settings = parse({"results_dir": str(tmp_path / "results"), "gpu": "test-gpu", "device_index": 0,
                      "sweeps": {"one": sweep}, "studies": {"search": study}, **more})  # fmt: skip
    settings.run.gpu_dir.mkdir(parents=True)
    (settings.run.gpu_dir / "device.json").write_text("{}")
    return settings


def test_the_sweep_records_a_fault_and_a_fresh_measuring_process_measures_the_rest(tmp_path, monkeypatch, capsys, faulty_bench):
    from tuner.measure import compile as compiling

    prepared = []
    monkeypatch.setattr(compiling, "compile_ahead", lambda arch, cache_dir, jobs: lambda family, problem, configs: prepared.append(len(configs)))  # fmt: skip
    settings = settings_of(tmp_path)
    assert cli.main(["sweep", "one", "--settings", settings.stage_json("sweep", "one")]) == 0
    frame = results.read(settings.run.gpu_dir / "sweeps" / "one.parquet")
    out, err = capsys.readouterr()

    assert len(frame) == 6 and frame.config_key.is_unique
    faulted, fine = frame[frame.block_size == 256], frame[frame.block_size != 256]
    assert set(faulted.status) == {"launch_error"} and faulted.error.str.contains("context lost").all()
    assert set(fine.status) == {"ok"}
    assert err.count("starting a fresh process") == 2  # one per faulting configuration
    assert faulty_bench.opened == [0, 0, 0]  # the run's device_index, to each measuring process
    # Each fresh process compiles ahead what the store lacks: all after the last fault.
    space = REGISTRY["copy"].space(settings.sweep("one").problems()[0], settings.sweep("one").domains())
    faults = [i for i, cfg in enumerate(space) if cfg["block_size"] == 256]
    assert prepared == [6, *(5 - i for i in faults)]
    assert [f"{6 - n} already measured" in out for n in prepared] == [True] * 3  # each process's resume line
    assert "sweep one phases: sweep (all)" in out and "sweep one: 6 rows {'ok': 4, 'launch_error': 2}" in out


def test_the_study_records_a_fault_and_a_fresh_measuring_process_goes_on(tmp_path, capsys, faulty_bench):
    settings = settings_of(tmp_path)
    assert cli.main(["tune", "search", "--settings", settings.stage_json("study", "search")]) == 0
    frame = results.read(settings.run.gpu_dir / "studies" / "search.parquet")
    out, err = capsys.readouterr()

    assert len(frame) == 6 and frame.config_key.is_unique  # the whole space, once each
    faulted = frame[frame.block_size == 256]
    assert len(faulted) == 2 and set(faulted.status) == {"launch_error"}
    assert set(frame.drop(faulted.index).status) == {"ok"}
    assert err.count("starting a fresh process") == 2
    assert faulty_bench.opened == [0, 0, 0]
    assert "study search phases: study (all)" in out and "asks: " in out


class LoopInThread:
    """A search loop's process, as a thread here (the fake bench lives in this process)."""

    started: list[tuple] = []  # each loop's arguments

    def __init__(self, target, args, name):
        self.exitcode, self.name = None, name
        self.thread = threading.Thread(target=self._run, args=(target, args))
        self.started.append(args)

    def _run(self, target, args):
        try:
            target(*args)
            self.exitcode = 0
        except SystemExit as stop:
            self.exitcode = stop.code if isinstance(stop.code, int) else 1

    def start(self):
        self.thread.start()

    def join(self):
        self.thread.join()


@pytest.fixture
def loops_in_threads(monkeypatch) -> list[tuple]:
    """The tune stage's search loops in threads; the arguments each was started with."""
    from tuner.stages import tune

    monkeypatch.setattr(LoopInThread, "started", [])
    monkeypatch.setattr(tune.multiprocessing, "get_context", lambda method: SimpleNamespace(Process=LoopInThread, SimpleQueue=queue.SimpleQueue))
    return LoopInThread.started


def test_a_study_on_two_gpus_runs_one_search_loop_and_one_measuring_process_per_gpu(tmp_path, capsys, faulty_bench, loops_in_threads):
    loops = loops_in_threads
    settings = settings_of(tmp_path, study_gpus=[2, 5])
    assert cli.main(["tune", "search", "--settings", settings.stage_json("study", "search")]) == 0
    frame = results.read(settings.run.gpu_dir / "studies" / "search.parquet")

    assert [(gpu, worker) for _, _, _, gpu, worker, *_ in loops] == [(2, 0), (5, 1)]  # seeds differ by worker
    assert len(frame) == 6 and frame.config_key.is_unique  # one budget, shared through the study's claims
    assert set(faulty_bench.opened) == {2, 5}  # each loop's GPU, to its own measuring processes
    assert set(faulty_bench.measured) == set(frame.config_key)
    assert set(frame[frame.block_size == 256].status) == {"launch_error"}
    out = capsys.readouterr().out
    assert out.count("study search phases:") == 2


def test_search_loops_that_refuse_hand_the_stage_their_one_line_and_exit_status(tmp_path, monkeypatch, capsys, faulty_bench,
                                                                                 loops_in_threads):  # fmt: skip
    """Each loop's measuring process meets a damaged peaks.json: the stage
    says it once, with its exit status, and writes no rows."""
    from tuner.errors import DamagedFile

    def damaged(*args, **kwargs):
        raise DamagedFile("results/test-gpu/peaks.json: not readable JSON; remove it and make it again with `python -m tuner peaks`")

    monkeypatch.setattr(harness, "open_bench", damaged)
    settings = settings_of(tmp_path, study_gpus=[0, 1])
    assert cli.main(["tune", "search", "--settings", settings.stage_json("study", "search")]) == 1
    assert len(loops_in_threads) == 2
    assert capsys.readouterr().err.splitlines() == [
        "error: results/test-gpu/peaks.json: not readable JSON; remove it and make it again with `python -m tuner peaks`"
    ]
    assert not (settings.run.gpu_dir / "studies").exists()


def test_a_failed_search_loop_fails_the_stage_with_one_line(tmp_path, monkeypatch, faulty_bench):
    from tuner.stages import tune

    class NoGpu:
        def __init__(self, target, args, name):
            self.exitcode = None

        def start(self):
            pass

        def join(self):
            self.exitcode = 2  # as a loop whose measuring process found no GPU

    monkeypatch.setattr(tune.multiprocessing, "get_context", lambda method: SimpleNamespace(Process=NoGpu, SimpleQueue=queue.SimpleQueue))
    settings = settings_of(tmp_path)
    with pytest.raises(SystemExit) as stopped:  # python -m tuner prints it as its one line, with exit status 1
        cli.main(["tune", "search", "--gpus", "0,1", "--settings", settings.stage_json("study", "search")])
    assert stopped.value.code == "error: the study workers on GPUs [0, 1] failed; finished trials are kept in the study storage"
    assert not (settings.run.gpu_dir / "studies").exists()
