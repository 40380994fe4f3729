"""Study workers sharing a real PostgreSQL server: the storage that workers on
several hosts point at. The server is PyPI's ``pgserver`` (PostgreSQL 16 in a
wheel, part of the ``[test]`` extra), started in a temporary folder by this
module and stopped at its end; the workers are separate processes running
``python -m tuner.search.tables.replay_study worker`` on the shipped H200 sweep of the
1536-point reduction space, so every measurement is a table look-up."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import optuna
import pandas as pd
import pytest

pgserver = pytest.importorskip("pgserver", reason="pgserver is part of the [test] extra")
sqlalchemy = pytest.importorskip("sqlalchemy")

sys.path.insert(0, str(Path(__file__).parent / "data"))
from released import run_released  # noqa: E402

from tuner.data.results import config_key, plain_value  # noqa: E402
from tuner.families import REGISTRY  # noqa: E402
from tuner.search.study.claims import DONE, fold  # noqa: E402
from tuner.search.study.storage import open_claims, open_storage  # noqa: E402
from tuner.search.study.storage_spec import storage_problem  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "results" / "reference" / "nvidia-h200" / "measurements.parquet"
SOURCE = "sweep:reduce_space"
PROBLEM = ["--family", "reduce", "--dtype", "int32", "--n", str(1 << 28)]
WORKERS, BUDGET = 4, 24
TIMEOUT_S = 120

# Each worker imports everything, says so, and waits for the others: all four
# then start on the empty study together, so claims and the budget are contested.
# A look-up takes MEASURE_S, as a measurement takes time on a GPU: without it one
# worker that opened the study first could spend the whole budget before the
# others had read their table, and the study would not be shared.
MEASURE_S = 0.1
STARTER = f"""
import sys, time, pathlib
from tuner.search.tables import replay_study
ready, go = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
table_measure = replay_study.table_measure
def timed_measure(*args, **kwargs):
    lookup = table_measure(*args, **kwargs)
    return lambda cfg: (time.sleep({MEASURE_S}), lookup(cfg))[1]
replay_study.table_measure = timed_measure
ready.touch()
while not go.exists():
    time.sleep(0.005)
sys.exit(replay_study.main(sys.argv[3:]))
"""


@pytest.fixture(scope="module")
def server():
    """A PostgreSQL server of this module's own; stopped, and checked stopped,
    after it. Its folder is not under pytest's temporary folders, which a
    later pytest session on the same machine may delete while this one runs."""
    pgdata = Path(tempfile.mkdtemp(prefix="tuner-pg-"))
    server = pgserver.get_server(pgdata, cleanup_mode="stop")
    # A throwaway server: commits need not wait for the disk (what is tested
    # is how concurrent workers share it, not durability across power loss).
    server.psql("ALTER SYSTEM SET synchronous_commit = off; ALTER SYSTEM SET fsync = off; SELECT pg_reload_conf();")
    pid = server.get_pid()
    yield server
    server.cleanup()
    deadline = time.monotonic() + 30
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _running(pid), f"the PostgreSQL server (pid {pid}) is still running"
    shutil.rmtree(pgdata)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()


@pytest.fixture
def database(server) -> str:
    """A fresh database for one test, as a SQLAlchemy URL with the psycopg2 driver."""
    name = f"t_{os.getpid()}_{time.time_ns()}"
    server.psql(f"CREATE DATABASE {name};")
    url = sqlalchemy.engine.make_url(server.get_uri(name)).set(drivername="postgresql+psycopg2")
    return url.render_as_string(hide_password=False)


def test_the_postgresql_url_passes_the_storage_check(database):
    assert storage_problem(database, workers=WORKERS) is None
    # The driver SQLAlchemy picks for a bare postgresql:// URL is psycopg2, installed by the extras too.
    assert storage_problem(database.replace("postgresql+psycopg2://", "postgresql://"), workers=WORKERS) is None


def test_four_workers_on_postgresql_lose_nothing_and_measure_nothing_twice(database, tmp_path):
    study = "replay/reduce_space"
    go = tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    processes = []
    for i in range(WORKERS):
        # One seed for all: they propose the same configurations in the same order.
        args = ["worker", str(TABLE), *PROBLEM, "--source", SOURCE, "--storage", database, "--study", study,
                "--budget", str(BUDGET), "--seed", "0", "--worker", f"w{i}", "--out", str(tmp_path / f"w{i}.json")]  # fmt: skip
        command = [sys.executable, "-c", STARTER, str(tmp_path / f"ready{i}"), str(go), *args]
        processes.append(subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outputs = run_released(processes, [tmp_path / f"ready{i}" for i in range(WORKERS)], go, TIMEOUT_S)
    for p, (_, err) in zip(processes, outputs):
        assert p.returncode == 0, err[-3000:]

    reports = [json.loads((tmp_path / f"w{i}.json").read_text()) for i in range(WORKERS)]
    assert [r["stop_reason"] for r in reports] == ["budget"] * WORKERS
    measured = [key for r in reports for key in r["keys"]]
    assert [k for k, n in Counter(measured).items() if n > 1] == [], "a configuration was measured twice"
    assert len(measured) == sum(r["measured"] for r in reports) == BUDGET
    assert sum(r["measured"] > 0 for r in reports) >= 2, f"the workers did not share the study: {reports}"

    # The study's rows, read back from PostgreSQL by a fresh process: exactly
    # the measured configurations, each once, each with its table's figure.
    out = tmp_path / "rows.parquet"
    rows_command = [sys.executable, "-m", "tuner.search.tables.replay_study", "rows", "--storage", database, "--study", study,
                    "--budget", str(BUDGET), "--out", str(out)]  # fmt: skip
    done = subprocess.run(rows_command, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.splitlines()[-1])
    print(f"{WORKERS} workers on PostgreSQL: {summary}")
    assert (summary["rows"], summary["distinct"], summary["duplicated"]) == (BUDGET, BUDGET, 0)
    assert summary["rows_by_worker"] == {f"w{i}": r["measured"] for i, r in enumerate(reports) if r["measured"]}
    rows = pd.read_parquet(out)
    assert sorted(rows.config_key) == sorted(measured), "rows lost or invented"
    table = pd.read_parquet(TABLE)
    table = table[table.source == SOURCE]
    # The table's keys as the family names configurations now (a parameter
    # added since it was measured takes its default).
    family = REGISTRY["reduce"]
    table.index = [
        config_key({p.name: plain_value(r.get(p.name)) if pd.notna(r.get(p.name)) else p.default for p in family.params})
        for r in table.to_dict("records")
    ]
    assert rows.set_index("config_key").bandwidth_gbs.equals(
        table.bandwidth_gbs.reindex(rows.config_key).rename_axis("config_key")
    )

    # The claims' records live in the PostgreSQL database itself: their fold
    # is one claim per configuration, all done.
    engine = sqlalchemy.create_engine(database)
    with engine.connect() as conn:
        records = conn.execute(
            sqlalchemy.text("SELECT record FROM tuner_claim_records WHERE study_name = :s ORDER BY id"), {"s": study}
        )
        folded: dict = {}
        for (text,) in records:
            fold(folded, json.loads(text))
        assert Counter(c.state for c in folded.values()) == Counter({DONE: BUDGET})
    engine.dispose()
    storage = open_storage(database)
    assert {s.study_name for s in storage.get_all_studies()} == {study}
    claims = open_claims(storage, study, create=False)
    assert Counter(c.state for c in claims.snapshot().values()) == Counter({DONE: BUDGET})
    # The dashboard's trials: one finished trial per measurement, nothing else.
    trials = storage.get_all_trials(storage.get_study_id_from_name(study), deepcopy=False)
    assert all(t.state in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.FAIL) for t in trials)
    assert sorted(t.user_attrs["config_key"] for t in trials) == sorted(measured)
    assert sum(r["lost"] for r in reports) <= 2 * WORKERS  # lost races for the last of the budget only
