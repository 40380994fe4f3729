"""Sweeps lose nothing: every measured row is on disk before the next
configuration starts, a kill at any point loses at most the configuration in
flight, a rerun measures only what is missing, and a damaged store is set aside
in one line instead of crashing the resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tuner.data import results
from tuner.errors import FatalDeviceError
from tuner.families import REGISTRY, Problem
from tuner.stages.sweep_store import STORE_FILE, RowStore, run_sweep

FAMILY = REGISTRY["reduce"]
PARAMS = {"variant": ["unrolled", "unrolled_warp"], "block_size": [128, 256, 512, 1024], "unroll": [2, 4, 8]}
PROBLEMS = [Problem("reduce", "int32", 1 << 20), Problem("reduce", "int32", 1 << 22)]
TOTAL = 2 * 24


class FakeSession:
    """Measures nothing: a row whose bandwidth is a function of the configuration."""

    def __init__(self, family, problem, log, *, kill_at=None, fault_at=None):
        self.family, self.problem, self.log = family, problem, log
        self.kill_at, self.fault_at = kill_at, fault_at

    def measure(self, cfg, source):
        self.log.append(results.config_key(cfg))
        row = {"family": self.family.name, "dtype": self.problem.dtype, "n": self.problem.n, "source": source,
               "config_key": results.config_key(cfg), "status": "ok", "bandwidth_gbs": float(cfg["block_size"] * cfg["unroll"]),
               **cfg}  # fmt: skip
        if len(self.log) == self.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)  # mid-measurement: this row was never returned
        if len(self.log) == self.fault_at:
            raise FatalDeviceError("illegal address", row=row | {"status": "launch_error", "bandwidth_gbs": None})
        return row


def sweep(store, log, **session_kwargs):
    return run_sweep("t", FAMILY, PROBLEMS, PARAMS, store=store, log=lambda m: None,
                     open_problem=lambda f, p: FakeSession(f, p, log, **session_kwargs))  # fmt: skip


CHILD = """
import sys
sys.path.insert(0, {tests!r})
from test_sweep import sweep
sweep({store!r}, [], kill_at={kill_at})
"""


@pytest.mark.parametrize("kill_at", [1, 2, 13, 24, 25, 26, 47, 48])
def test_kill_9_at_any_measurement_loses_nothing_and_measures_nothing_twice(tmp_path, kill_at):
    store = tmp_path / "store"
    child = CHILD.format(tests=str(Path(__file__).parent), store=str(store), kill_at=kill_at)
    proc = subprocess.run(
        [sys.executable, "-c", child], cwd=Path(__file__).parents[1], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert len(RowStore(store).rows()) == kill_at - 1  # every row finished before the kill is on disk
    log: list[str] = []
    frame = sweep(store, log)
    assert len(log) == TOTAL - (kill_at - 1)  # only what was missing
    assert len(frame) == TOTAL and frame.groupby(["n", "config_key"]).size().max() == 1
    again: list[str] = []
    sweep(store, again)
    assert again == []


def test_a_row_cut_short_is_set_aside_in_one_line_and_measured_again(tmp_path):
    store = tmp_path / "store"
    sweep(store, [])
    path = store / STORE_FILE
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:-1]) + lines[-1][:25])  # a kill during the last write
    said: list[str] = []
    log: list[str] = []
    frame = run_sweep("t", FAMILY, PROBLEMS, PARAMS, store=store, log=said.append,
                      open_problem=lambda f, p: FakeSession(f, p, log))  # fmt: skip
    warnings = [line for line in said if line.startswith("warning:")]
    assert len(warnings) == 1 and "no end of line (cut short)" in warnings[0] and "\n" not in warnings[0]
    assert len(log) == 1 and len(frame) == TOTAL
    assert len(list(store.glob("*.corrupt"))) == 1
    assert path.read_bytes().endswith(b"\n")  # later rows do not join the broken one


def test_a_device_fault_stores_the_faulting_row_then_stops(tmp_path):
    store = tmp_path / "store"
    with pytest.raises(FatalDeviceError):
        sweep(store, [], fault_at=3)
    saved = RowStore(store).rows()
    assert list(saved.status) == ["ok", "ok", "launch_error"]
    log: list[str] = []
    frame = sweep(store, log)  # a fresh process carries on after the faulting configuration
    assert len(log) == TOTAL - 3 and len(frame) == TOTAL
    assert (frame.status == "launch_error").sum() == 1


def test_a_changed_problem_is_measured_anew(tmp_path):
    store = tmp_path / "store"
    sweep(store, [])
    log: list[str] = []
    other = [Problem("reduce", "float32", 1 << 20)]
    frame = run_sweep("t", FAMILY, other, PARAMS, store=store, log=lambda m: None,
                      open_problem=lambda f, p: FakeSession(f, p, log))  # fmt: skip
    assert len(log) == 24 and set(frame.dtype) == {"float32"}


def test_sweep_output_holds_only_the_configured_grid(tmp_path):
    store = tmp_path / "store"
    sweep(store, [])
    narrower = PARAMS | {"block_size": [256]}
    frame = run_sweep("t", FAMILY, PROBLEMS[:1], narrower, store=store, log=lambda m: None,
                      open_problem=lambda f, p: FakeSession(f, p, []))  # fmt: skip
    assert set(frame["block_size"]) == {256} and len(frame) == 6


def test_store_rows_keep_the_schema_types(tmp_path):
    store = tmp_path / "store"
    sweep(store, [])
    frame = RowStore(store).rows()
    assert list(frame.columns) == list(results.columns([FAMILY]))
    assert str(frame["n"].dtype) == "Int64" and str(frame["bandwidth_gbs"].dtype) == "float64"
    first = json.loads((store / STORE_FILE).read_text().splitlines()[0])
    assert first["config_key"] == frame.config_key.iloc[0]
    assert isinstance(frame, pd.DataFrame)
