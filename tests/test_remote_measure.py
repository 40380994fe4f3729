"""A study worker's measuring process (``tuner.measure.remote``), with a fake
measuring side in a real spawned process: rows in order, a prefetched
configuration compiled at once and measured back to back with the one before,
queued ones dropped at close, device faults, errors and deaths carried over."""

from __future__ import annotations

import contextlib
import os
import sys
import time

import pytest

from tuner.errors import FatalDeviceError
from tuner.measure.remote import MeasuringProcess


@contextlib.contextmanager
def fake_side(fail_at_start: str = ""):
    """Measures ``{"x": n, "sleep": s}`` by sleeping ``s``; ``x == -1`` faults
    (poisons the context), ``x == -2`` raises, ``x == -3`` kills the process."""
    if fail_at_start == "exit":
        raise SystemExit("error: results/device.json describes 'GPU A' but this process sees 'GPU B'")
    if fail_at_start == "status":  # the side printed its own line
        print("error: no CUDA device", file=sys.stderr, flush=True)
        raise SystemExit(2)
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


def test_rows_come_back_in_order_and_a_prefetched_one_is_measured_while_the_worker_records():
    with MeasuringProcess(fake_side) as measuring:
        measuring.wait_ready()
        measuring.prefetch({"x": 1, "sleep": 0.5})
        measuring.prefetch({"x": 2, "sleep": 0.05})
        first = measuring.measure({"x": 1, "sleep": 0.5})
        time.sleep(1.0)  # the worker records trial 1; trial 2 is measured meanwhile
        called = time.time()
        second = measuring.measure({"x": 2, "sleep": 0.05})
        third = measuring.measure({"x": 3})  # never prefetched: sent now
        summary = measuring.close()
    assert [first["x"], second["x"], third["x"]] == [1, 2, 3]
    assert 2 in first["hurried"]  # its module was started while 1 was measured
    assert second["started"] >= first["ended"] and second["ended"] < called
    assert summary == {"measured": [1, 2, 3], "hurried": [1, 2, 3]}


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


def test_a_device_fault_is_raised_in_the_worker_with_its_row_and_ends_the_process():
    with MeasuringProcess(fake_side) as measuring:
        measuring.prefetch({"x": -1})
        measuring.prefetch({"x": 6})
        with pytest.raises(FatalDeviceError, match="illegal address") as raised:
            measuring.measure({"x": -1})
        assert raised.value.row == {"status": "launch_error", "x": -1}
        measuring.prefetch({"x": 7})  # the worker asks on meanwhile: no error until it measures
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
        measuring.prefetch({"x": -1})  # prefetched, then dropped by the worker
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
        ("status", "error: no CUDA device", 2),
        ("die", "error: the measuring process ended before it started measuring", 1),
    ],
)
def test_a_side_that_cannot_start_stops_the_worker_with_its_line(capfd, how, line, code):
    with MeasuringProcess(fake_side, how) as measuring:
        with pytest.raises(SystemExit) as raised:
            measuring.wait_ready()
    assert raised.value.code == code
    assert capfd.readouterr().err.strip().splitlines() == [line]


def test_a_side_that_raises_at_start_stops_the_worker_with_its_traceback(capfd):
    with MeasuringProcess(fake_side, "raise") as measuring:
        with pytest.raises(SystemExit) as raised:
            measuring.wait_ready()
    err = capfd.readouterr().err
    assert raised.value.code == 1 and err.startswith("error: Traceback") and err.rstrip().endswith("KeyError: 'compile'")


def test_the_tune_command_without_a_gpu_stops_with_one_line_before_touching_the_study(tmp_path):
    """The measuring process finds no GPU: ``error: ...`` and exit 2, as
    before the split, and the study's storage is never created."""
    import subprocess
    from pathlib import Path

    import yaml

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
    (settings.run.gpu_dir / "device.json").write_text(yaml.safe_dump({"name": "GPU A"}))
    command = ["tune", "search", "--settings", settings.stage_json("study", "search"), "--child"]
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, "-m", "tuner", *command], cwd=root, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and ("PyCUDA" in lines[0] or "CUDA" in lines[0]), lines
    assert not (tmp_path / "store").exists()
