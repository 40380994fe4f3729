"""The profile stage on the GPU, end to end: describe, sweep, then profile the
sweep under ncu; the counters land beside the timed rows (skips without a GPU
or without ncu)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tuner.data import counters, results

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.gpu


def tuner(*args, cwd):
    proc = subprocess.run([sys.executable, "-m", "tuner", *args], cwd=cwd, env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])},
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc


def test_aos_and_soa_are_profiled_after_their_sweep(tmp_path, gpu):
    from tuner.profile.ncu import NcuUnavailable, find_ncu

    try:
        find_ncu()
    except NcuUnavailable as error:
        pytest.skip(str(error))
    config = {"results_dir": str(tmp_path / "results"), "gpu": "g", "timing": {"max_time_s": 0.05},
              "sweeps": {"aos_soa": {"family": "layout", "dtypes": ["float32"], "sizes": [1 << 20],
                                     "params": {"variant": ["aos", "soa"], "block_size": [128, 256]}, "profile": {"top": 1}}}}  # fmt: skip
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config))
    for stage in (["describe"], ["sweep", "aos_soa"], ["profile", "aos_soa"]):
        tuner(*stage, "--config", str(path), cwd=tmp_path)
    frame, notes = counters.read_profiles(tmp_path / "results" / "g")
    assert notes == [] and len(frame) == 1  # top 1 of the one problem
    timed = results.read(tmp_path / "results" / "g" / "sweeps" / "aos_soa.parquet")
    best = timed.loc[timed.bandwidth_gbs.idxmax()]
    row = frame.iloc[0]
    assert row["config_key"] == best["config_key"] and row["time_ms_median"] == best["time_ms_median"]
    assert row["global_load_efficiency_pct"] == pytest.approx(50.0 if row["variant"] == "aos" else 100.0)
    assert row["dram_read_bytes"] >= 8 * (1 << 20) * 0.9 and row["profiled_duration_ms"] > 0
