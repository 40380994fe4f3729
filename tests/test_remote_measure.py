"""A study worker's measuring process (``tuner.measure.remote``), with a fake
measuring side in a real spawned process: rows in order, a prefetched
configuration compiled at once and measured back to back with the one before,
queued ones dropped at close, device faults, errors and deaths carried over."""

from __future__ import annotations

import contextlib
import os
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
    if fail_at_start == "raise":
        raise RuntimeError("no CUDA device")
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
    assert summary["measured"][0] == 1 and 4 not in summary["measured"]  # at most the one under way when it was told


def test_an_exception_is_a_launch_error_row_and_the_process_goes_on():
    with MeasuringProcess(fake_side) as measuring:
        row = measuring.measure({"x": -2})
        assert row == {"status": "launch_error", "error": "measure raised ValueError: bad input"}
        assert measuring.measure({"x": 5})["status"] == "ok"


def test_a_device_fault_is_raised_in_the_worker_with_its_row_and_ends_the_process():
    measuring = MeasuringProcess(fake_side)
    measuring.prefetch({"x": -1})
    measuring.prefetch({"x": 6})
    with pytest.raises(FatalDeviceError, match="illegal address") as raised:
        measuring.measure({"x": -1})
    assert raised.value.row == {"status": "launch_error", "x": -1}
    with pytest.raises(FatalDeviceError, match="measuring process is gone"):
        measuring.measure({"x": 6})
    assert measuring.close() is None
    assert not measuring._process.is_alive()


def test_a_measuring_process_that_dies_is_a_device_fault_without_a_row():
    with MeasuringProcess(fake_side) as measuring:
        with pytest.raises(FatalDeviceError, match="measuring process is gone") as raised:
            measuring.measure({"x": -3})
        assert raised.value.row is None


@pytest.mark.parametrize(
    "how, line, code",
    [("exit", "results/device.json describes 'GPU A' but this process sees 'GPU B'", 1), ("raise", "no CUDA device", 2)],
)
def test_a_side_that_cannot_start_stops_the_worker_with_its_line(capsys, how, line, code):
    with MeasuringProcess(fake_side, how) as measuring:
        with pytest.raises(SystemExit) as raised:
            measuring.wait_ready()
    assert raised.value.code == code
    assert capsys.readouterr().err == f"error: {line}\n"
