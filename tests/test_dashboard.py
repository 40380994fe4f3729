"""optuna-dashboard serves a study that tuner.search.study.run wrote."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import optuna
import pytest

from tuner.search.study.run import StudyOptions, open_storage, run_study

sys.path.insert(0, str(Path(__file__).parent / "data"))
from fake_family import PROBLEM, FakeFamily, measure  # noqa: E402

STARTUP_S = 30


def dashboard_executable() -> str:
    pytest.importorskip("optuna_dashboard", reason="optuna-dashboard is not installed (pip install optuna-dashboard)")
    beside = Path(sys.executable).with_name("optuna-dashboard")
    found = str(beside) if beside.exists() else shutil.which("optuna-dashboard")
    if found is None:
        pytest.skip("optuna_dashboard imports but its optuna-dashboard executable is not on PATH")
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("storage", ["optuna.log", "sqlite"])  # the default journal file, and SQLite
def test_dashboard_lists_the_study(tmp_path, storage):
    executable = dashboard_executable()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    url = str(tmp_path / storage) if storage.endswith(".log") else f"sqlite:///{tmp_path / 'study.db'}"
    run_study(
        StudyOptions.for_strategy("random", family=FakeFamily(), problem=PROBLEM, domains=None, storage=url,
                                  study_name="dashboard-check", measure=measure, budget_trials=3, timeout_s=None),
    )

    port = free_port()
    log = (tmp_path / "dashboard.log").open("w")
    process = subprocess.Popen(
        [executable, url, "--host", "127.0.0.1", "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + STARTUP_S
        body = None
        while time.monotonic() < deadline:
            if process.poll() is not None:
                break
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/studies", timeout=2) as response:
                    body = json.load(response)
                break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.2)
        log.flush()
        output = (tmp_path / "dashboard.log").read_text()
        assert body is not None, f"no answer from optuna-dashboard within {STARTUP_S} s (exit {process.poll()}):\n{output}"
        # optuna-dashboard 0.x names the list "study_summaries" (a TODO there
        # renames it "studies"); accept either.
        studies = body.get("studies", body.get("study_summaries"))
        assert studies is not None, f"unexpected /api/studies answer: {body}"
        names = [study["study_name"] for study in studies]
        assert names == ["dashboard-check"]
        assert optuna.load_study(study_name="dashboard-check", storage=open_storage(url)).metric_names == ["bandwidth_gbs"]

        # The trials and their slim user attributes load too.
        study_id = studies[0]["study_id"]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/studies/{study_id}", timeout=10) as response:
            detail = json.load(response)
        assert len(detail["trials"]) >= 3
        assert detail.get("objective_names") == ["bandwidth_gbs"]  # the axis the dashboard draws, not "Objective 0"
        keys = {attr["key"] for trial in detail["trials"] for attr in trial["user_attrs"]}
        assert {"status", "config_key"} <= keys and "row" not in keys
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
