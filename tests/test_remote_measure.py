"""A stage's measuring process (``tuner.measure.remote``), with a fake
measuring side in a real spawned process: rows in order, a prefetched
configuration compiled at once and measured back to back with the one before,
queued ones dropped at close, device faults, errors and deaths carried over,
and a fresh process after each fault (``restarting``)."""

from __future__ import annotations

import contextlib
import os
import sys
import time

import pytest

from tuner.device.gpu import GpuUnavailable
from tuner.errors import DamagedFile, FatalDeviceError, Refused
from tuner.measure import remote
from tuner.measure.remote import MeasuringProcess, restarting
from tuner.settings import ConfigError

# What a measuring side may refuse to start with: a damaged file the stage made
# earlier, a config error, no GPU (each a ``tuner.errors.Refusal``).
REFUSALS = {
    "damaged": DamagedFile("results/gpu/peaks.json: not readable JSON (JSONDecodeError: Expecting value: line 1 column 1 "
                           "(char 0)); remove it and make it again with `python -m tuner peaks`"),
    "config": ConfigError("sweep name: must be one of ['ladder'], got 'nosuch'"),
    "no gpu": GpuUnavailable("no usable CUDA device (LogicError: cuInit failed: no CUDA-capable device is detected)"),
}


@contextlib.contextmanager
def fake_side(fail_at_start: str = ""):
    """Measures ``{"x": n, "sleep": s}`` by sleeping ``s``; ``x == -1`` faults
    (poisons the context), ``x == -2`` raises, ``x == -3`` kills the process."""
    if fail_at_start == "exit":
        raise SystemExit("error: results/device.json describes 'GPU A' but this process sees 'GPU B'")
    if fail_at_start == "status":  # the side printed its own line
        print("error: no CUDA device", file=sys.stderr, flush=True)
        raise SystemExit(2)
    if fail_at_start in REFUSALS:
        raise REFUSALS[fail_at_start]
    if fail_at_start == "raise":
        raise KeyError("compile")
    if fail_at_start == "die":
        os._exit(9)
    hurried, measured = [], []

    def measure(cfg):
        started = time.time()
        if cfg["x"] == -1:
            raise FatalDeviceError("illegal address", {"status": "launch_error", "x": -1})
        if cfg["x"] == -2:
            raise ValueError("bad input")
        if cfg["x"] == -3:
            os._exit(9)
        time.sleep(cfg.get("sleep", 0.0))
        measured.append(cfg["x"])
        return {"x": cfg["x"], "status": "ok", "started": started, "ended": time.time(), "hurried": list(hurried)}

    yield measure, lambda cfg: hurried.append(cfg["x"]), lambda: {"measured": measured, "hurried": hurried}


def test_rows_come_back_in_order_and_a_prefetched_one_is_measured_while_the_stage_records():
    with MeasuringProcess(fake_side) as measuring:
        measuring.wait_ready()
        measuring.prefetch({"x": 1, "sleep": 0.5})
        measuring.prefetch({"x": 2, "sleep": 0.05})
        first = measuring.measure({"x": 1, "sleep": 0.5})
        time.sleep(1.0)  # the stage records trial 1; trial 2 is measured meanwhile
        called = time.time()
        second = measuring.measure({"x": 2, "sleep": 0.05})
        third = measuring.measure({"x": 3})  # never prefetched: sent now
        summary = measuring.close()
    assert [first["x"], second["x"], third["x"]] == [1, 2, 3]
    assert 2 in first["hurried"]  # its module was started while 1 was measured
    assert second["started"] >= first["ended"] and second["ended"] < called
    assert summary == {"measured": [1, 2, 3], "hurried": [1, 2, 3]}


@contextlib.contextmanager
def expecting_side():
    """A side that records what it is told to expect beside what it measures."""
    expected, measured = [], []
    yield (lambda cfg: measured.append(cfg["x"]) or {"x": cfg["x"], "status": "ok", "expected": list(expected)},
           lambda cfg: None, lambda: {"measured": measured, "expected": expected}, lambda cfgs: expected.extend(c["x"] for c in cfgs))


def test_expected_configurations_reach_the_side_and_are_not_measured():
    with MeasuringProcess(expecting_side) as measuring:
        measuring.wait_ready()
        measuring.expect([{"x": 7}, {"x": 8}])
        row = measuring.measure({"x": 1})
        measuring.expect([{"x": 9}])
        assert measuring.measure({"x": 2})["expected"] == [7, 8, 9]  # told in order, before what was sent after
        summary = measuring.close()
    assert row["expected"] == [7, 8] and summary == {"measured": [1, 2], "expected": [7, 8, 9]}
    with MeasuringProcess(fake_side) as measuring:  # a side without an expect of its own: told nothing, fine
        measuring.expect([{"x": 7}])
        assert measuring.measure({"x": 1})["x"] == 1


def test_close_drops_what_is_queued():
    with MeasuringProcess(fake_side) as measuring:
        for x in range(1, 5):
            measuring.prefetch({"x": x, "sleep": 0.3})
        assert measuring.measure({"x": 1, "sleep": 0.3})["x"] == 1
        summary = measuring.close()
    assert summary["measured"] in ([1], [1, 2])  # and the one under way when it was told, if any


def test_an_exception_is_a_launch_error_row_and_the_process_goes_on():
    with MeasuringProcess(fake_side) as measuring:
        row = measuring.measure({"x": -2})
        assert row == {"status": "launch_error", "error": "measure raised ValueError: bad input"}
        assert measuring.measure({"x": 5})["status"] == "ok"


def test_a_device_fault_is_raised_in_the_stage_with_its_row_and_ends_the_process():
    with MeasuringProcess(fake_side) as measuring:
        measuring.prefetch({"x": -1})
        measuring.prefetch({"x": 6})
        with pytest.raises(FatalDeviceError, match="illegal address") as raised:
            measuring.measure({"x": -1})
        assert raised.value.row == {"status": "launch_error", "x": -1}
        measuring.prefetch({"x": 7})  # the stage asks on meanwhile: no error until it measures
        with pytest.raises(FatalDeviceError, match="measuring process is gone"):
            measuring.measure({"x": 6})
        assert measuring.close() is None
        assert not measuring._process.is_alive()


def test_asking_on_after_a_fault_not_yet_read_raises_nothing_until_it_is_measured():
    with MeasuringProcess(fake_side) as measuring:
        measuring.prefetch({"x": 9})
        measuring.prefetch({"x": -1})  # faults right after 9: the process ends
        assert measuring.measure({"x": 9})["status"] == "ok"
        measuring._process.join(timeout=60)
        assert not measuring._process.is_alive()
        measuring.prefetch({"x": 10})  # the ask thread claims the next one: the pipe is broken
        with pytest.raises(FatalDeviceError, match="illegal address") as raised:
            measuring.measure({"x": -1})
        assert raised.value.row == {"status": "launch_error", "x": -1}
        with pytest.raises(FatalDeviceError, match="measuring process is gone"):
            measuring.measure({"x": 10})


def test_a_fault_in_a_configuration_measured_ahead_is_not_put_on_the_one_asked_for():
    with MeasuringProcess(fake_side) as measuring:
        measuring.prefetch({"x": -1})  # prefetched, then dropped by the stage
        with pytest.raises(FatalDeviceError, match="illegal address") as raised:
            measuring.measure({"x": 8})
        assert raised.value.row is None


def test_a_measuring_process_that_dies_is_a_device_fault_without_a_row():
    with MeasuringProcess(fake_side) as measuring:
        with pytest.raises(FatalDeviceError, match="measuring process is gone") as raised:
            measuring.measure({"x": -3})
        assert raised.value.row is None


@pytest.mark.parametrize(
    "how, line, code",
    [
        ("exit", "error: results/device.json describes 'GPU A' but this process sees 'GPU B'", 1),
        ("damaged", f"error: {REFUSALS['damaged']}", 1),
        ("config", "config error: sweep name: must be one of ['ladder'], got 'nosuch'", 2),
        ("no gpu", f"error: {REFUSALS['no gpu']}", 2),
    ],
)
def test_a_side_that_refuses_to_start_hands_the_stage_its_one_line_and_status(capfd, how, line, code):
    """A refusal in the measuring process (a damaged peaks.json, a config
    error, no GPU) is the stage's to report, as if it had met it itself: one
    line and the exit status, no traceback."""
    with MeasuringProcess(fake_side, how) as measuring:
        with pytest.raises(Refused) as raised:
            measuring.wait_ready()
    assert (raised.value.line(), raised.value.exit_status) == (line, code)
    assert "Traceback" not in capfd.readouterr().err


@pytest.mark.parametrize(
    "how, line, code",
    [
        ("status", "error: no CUDA device", 2),
        ("die", "error: the measuring process ended before it started measuring", 1),
    ],
)
def test_a_side_that_cannot_start_stops_the_stage_with_its_line(capfd, how, line, code):
    with MeasuringProcess(fake_side, how) as measuring:
        with pytest.raises(SystemExit) as raised:
            measuring.wait_ready()
    assert raised.value.code == code
    assert capfd.readouterr().err.strip().splitlines() == [line]


def test_a_side_that_raises_at_start_stops_the_stage_with_its_traceback(capfd):
    with MeasuringProcess(fake_side, "raise") as measuring:
        with pytest.raises(SystemExit) as raised:
            measuring.wait_ready()
    err = capfd.readouterr().err
    assert raised.value.code == 1 and err.startswith("error: Traceback") and err.rstrip().endswith("KeyError: 'compile'")



# ---- a fresh process after each fault ---------------------------------------------


def measure_until_done(todo: list[dict], recorded: list[dict]):
    """A stage's body: measure what ``recorded`` lacks, recording each row and
    a fault's row before the fault goes on up, as the sweep and study do."""

    def body(measuring: MeasuringProcess) -> int:
        for cfg in [c for c in todo if c["x"] not in {r["x"] for r in recorded}]:
            try:
                recorded.append(measuring.measure(cfg))
            except FatalDeviceError as fault:
                recorded.append(fault.row)
                raise
        return len(recorded)

    return body


def test_a_fault_is_recorded_and_a_fresh_process_measures_the_rest(capfd):
    recorded: list[dict] = []
    todo = [{"x": 1}, {"x": -1}, {"x": 2}, {"x": -1.5}, {"x": 3}]
    # Each fault ends its process: three processes measure the five configurations.
    count, summary = restarting(_tagged_fault_side, (), measure_until_done(todo, recorded), "sweep t")
    assert count == 5 and [r["x"] for r in recorded] == [1, -1, 2, -1.5, 3]
    assert [r["status"] for r in recorded] == ["ok", "launch_error", "ok", "launch_error", "ok"]
    assert summary == {"measured": [3], "hurried": [3]}  # the last process's
    err = capfd.readouterr().err.splitlines()
    assert [line.split(" (")[0] for line in err] == ["sweep t: device fault recorded"] * 2
    assert err[1].endswith("starting a fresh process (fresh CUDA context), restart 2")


@contextlib.contextmanager
def _tagged_fault_side():
    """``fake_side``, where a negative ``x`` poisons the context, its row naming it."""
    with fake_side() as (measure, hurry, summary):

        def measure_or_fault(cfg):
            if cfg["x"] < 0:
                raise FatalDeviceError("illegal address", {"status": "launch_error", "x": cfg["x"]})
            return measure(cfg)

        yield measure_or_fault, hurry, summary


def test_endless_device_faults_stop_with_one_line(monkeypatch):
    monkeypatch.setattr(remote, "MAX_RESTARTS", 2)
    recorded: list[dict] = []
    todo = [{"x": -1 - i} for i in range(5)]
    with pytest.raises(SystemExit, match=r"^error: sweep x hit 3 device faults in a row; stopped \(what was measured is kept\)$"):
        restarting(_tagged_fault_side, (), measure_until_done(todo, recorded), "sweep x")
    assert len(recorded) == 3  # each fault's row recorded before the next process


def test_a_side_that_cannot_start_is_not_restarted(capfd):
    calls = []
    with pytest.raises(SystemExit) as raised:
        restarting(fake_side, ("status",), lambda measuring: calls.append(1), "sweep t")
    assert raised.value.code == 2 and calls == []
    assert capfd.readouterr().err.strip().splitlines() == ["error: no CUDA device"]


def test_the_tune_command_without_a_gpu_stops_with_one_line_before_touching_the_study(tmp_path):
    """The measuring process finds no GPU: one ``error: ...`` line and exit
    2, and the study's storage is never created."""
    import json
    import subprocess
    from pathlib import Path

    from tuner.device.gpu import GpuUnavailable, require_gpu
    from tuner.settings import parse

    try:
        require_gpu()
        pytest.skip("a GPU is here")
    except GpuUnavailable:
        pass
    params = {"variant": ["shuffle"], "block_size": [128, 256], "unroll": [1, 2]}
    study = {"family": "reduce", "dtype": "int32", "n": 1 << 20, "budget_trials": 2, "storage": str(tmp_path / "store" / "study.log"),
             "params": params}  # fmt: skip
    settings = parse({"results_dir": str(tmp_path / "results"), "gpu": "test-gpu", "sweeps": {}, "studies": {"search": study}})
    settings.run.gpu_dir.mkdir(parents=True)
    (settings.run.gpu_dir / "device.json").write_text(json.dumps({"name": "GPU A"}))
    command = ["tune", "search", "--settings", settings.stage_json("study", "search")]
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, "-m", "tuner", *command], cwd=root, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and ("PyCUDA" in lines[0] or "CUDA" in lines[0]), lines
    assert not (tmp_path / "store").exists()


def test_a_measuring_process_starts_without_pandas():
    """Each sweep and study starts one: what its side imports (the stage's module, the Bench, the
    settings it reads) leaves pandas, pyarrow, matplotlib and Optuna out, so none is loaded at each start."""
    code = (
        "import sys; import tuner.stages.sweep, tuner.stages.tune, tuner.measure.bench; "
        "from tuner.settings import Settings; "
        "print(sorted(m for m in ('pandas', 'pyarrow', 'matplotlib', 'optuna') if m in sys.modules))"
    )
    import subprocess

    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "[]"
