"""Sweeps are resumable: an interrupted sweep continues where it stopped, and a
rerun measures nothing twice."""

from __future__ import annotations

import pytest

from tuner import results
from tuner.families import REGISTRY, Problem
from tuner.sweep import run_sweep

PARAMS = {"variant": ["unrolled", "unrolled_warp"], "block_size": [128, 256, 512, 1024], "unroll": [2, 4, 8]}


class FakeSession:
    def __init__(self, family, problem, log, fail_after=None):
        self.family, self.problem, self.log, self.fail_after = family, problem, log, fail_after

    def measure(self, cfg, source):
        if self.fail_after is not None and len(self.log) >= self.fail_after:
            raise KeyboardInterrupt  # the machine went away mid-sweep
        self.log.append(results.config_key(cfg))
        return {
            "family": self.family.name,
            "dtype": self.problem.dtype,
            "n": self.problem.n,
            "source": source,
            "config_key": results.config_key(cfg),
            "status": "ok",
            "bandwidth_gbs": float(cfg["block_size"] * cfg["unroll"]),
            **cfg,
        }


def test_sweep_resumes_without_remeasuring(tmp_path):
    family = REGISTRY["reduce"]
    problems = [Problem("reduce", "int32", 1 << 20), Problem("reduce", "int32", 1 << 22)]
    store = tmp_path / "store"
    log: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        run_sweep(
            "t",
            family,
            problems,
            PARAMS,
            store=store,
            flush_every_s=0.0,
            log=lambda m: None,
            open_problem=lambda f, p: FakeSession(f, p, log, fail_after=30),
        )
    saved = results.read(store)
    assert len(saved) == 30  # every configuration measured before the interruption was kept
    log2: list[str] = []
    frame = run_sweep(
        "t", family, problems, PARAMS, store=store, log=lambda m: None, open_problem=lambda f, p: FakeSession(f, p, log2)
    )
    assert len(log2) == 2 * 24 - 30
    assert len(frame) == 48 and frame.groupby(["n", "config_key"]).size().max() == 1
    log3: list[str] = []
    run_sweep("t", family, problems, PARAMS, store=store, log=lambda m: None, open_problem=lambda f, p: FakeSession(f, p, log3))
    assert log3 == []


def test_sweep_output_holds_only_the_configured_grid(tmp_path):
    family = REGISTRY["reduce"]
    problems = [Problem("reduce", "int32", 1 << 20)]
    store = tmp_path / "store"
    run_sweep("t", family, problems, PARAMS, store=store, log=lambda m: None, open_problem=lambda f, p: FakeSession(f, p, []))
    narrower = PARAMS | {"block_size": [256]}
    frame = run_sweep(
        "t", family, problems, narrower, store=store, log=lambda m: None, open_problem=lambda f, p: FakeSession(f, p, [])
    )
    assert set(frame["block_size"]) == {256} and len(frame) == 6
