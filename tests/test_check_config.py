"""``python -m tuner check-config FILE``: a config file checked as the
pipeline reads it, before Snakemake's ``--configfile`` reads it (where a
50 MB file keeps it busy for minutes, and deep nesting or bytes that are not
UTF-8 end in its own traceback): one line and exit status 2 for what is
wrong, in a fraction of a second, or one line saying it is fine."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tuner import cli

ROOT = Path(__file__).resolve().parents[1]


def good_config(tmp_path: Path) -> dict:
    return {"results_dir": str(tmp_path / "results"), "gpu": "test-gpu",
            "sweeps": {"ladder": {"family": "reduce", "dtypes": ["int32"], "sizes": [1 << 20], "params": {"unroll": [1, 2]}}}}  # fmt: skip


def test_a_good_config_is_one_line_saying_so(tmp_path, capsys):
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(good_config(tmp_path)))
    assert cli.main(["check-config", str(path)]) == 0
    assert capsys.readouterr().out.splitlines() == [f"{path}: ok: 1 sweeps, 0 studies, results in {tmp_path / 'results' / 'test-gpu'}"]
    assert not (tmp_path / "results").exists()


def write_hostile(path: Path, kind: str) -> None:
    if kind == "50 MB":  # a sparse file: its size is refused before a byte is read
        with open(path, "wb") as handle:
            handle.truncate(50 << 20)
    elif kind == "deep":
        path.write_text("a:\n" + "".join("  " * i + f"k{i}:\n" for i in range(1, 60)) + "  " * 60 + "x: 1\n")
    elif kind == "not utf-8":
        path.write_bytes(b"results_dir: results\ngpu: \xff\xfe\n")
    elif kind == "not yaml":
        path.write_text("sweeps: {ladder: [\n")
    elif kind == "a rule":
        path.write_text(yaml.safe_dump({**good_config(path.parent), "seed": -1}))


@pytest.mark.parametrize(
    "kind, line",
    [
        ("50 MB", "{path}: must be a config of at most 1 MiB, got 52428800 bytes"),
        ("deep", "{path}:32:63: must nest at most 32 levels of mappings and lists, got deeper"),
        ("not utf-8", "{path}:2:6: must be UTF-8 text, got the byte 0xff (byte offset 26), which is not UTF-8 there"),
        ("not yaml", "{path}:2:1: "),
        ("a rule", "seed: "),
    ],
)
def test_a_config_snakemake_would_stall_or_crash_on_is_one_line_in_a_fraction_of_a_second(tmp_path, capsys, kind, line):
    path = tmp_path / "mine.yaml"
    write_hostile(path, kind)
    started = time.process_time()
    assert cli.main(["check-config", str(path)]) == 2
    assert time.process_time() - started < 1.0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("config error: " + line.format(path=path)), err


def test_the_command_as_the_docs_give_it(tmp_path):
    """``python -m tuner check-config``, a process of its own: one line, exit status 2."""
    path = tmp_path / "mine.yaml"
    write_hostile(path, "50 MB")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "tuner", "check-config", str(path)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 2 and proc.stderr.splitlines() == [f"config error: {path}: must be a config of at most 1 MiB, got 52428800 bytes"]
    assert "check-config mine.yaml" in (ROOT / "docs" / "pipeline.md").read_text()
