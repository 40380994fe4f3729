"""The time-energy study (tuner.search.study.pareto) replayed on a table: its front
is Optuna's, each configuration is measured once, a bound on time holds,
a study resumes, the knee's arithmetic, and optuna-dashboard serving the
study with both objectives named."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import optuna
import pandas as pd
import pytest

from tuner.data.results import config_key
from tuner.search.study.pareto import METRICS, knee, pareto_mask, run_pareto_study
from tuner.search.tables.replay import problem_rows, table_domains, table_measure

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent / "data"))
from fake_family import PROBLEM, FakeFamily  # noqa: E402
from test_dashboard import STARTUP_S, dashboard_executable, free_port  # noqa: E402

TABLE = Path(__file__).parent / "data" / "replay_table.parquet"


def energy_table() -> pd.DataFrame:
    """The replay table with joules per launch: power grows with the vector
    width and the unroll (wider loads draw more), so the fastest is not the
    most frugal and the front holds several configurations."""
    table = pd.read_parquet(TABLE)
    ok = (table.status == "ok").to_numpy(bool)
    width, unroll = table.vector_width.to_numpy(float), table.unroll.to_numpy(float)
    watts = 250.0 + 25.0 * np.log2(width) + 15.0 * np.log2(unroll) + 10.0 * (table.cache_hint == "cg").to_numpy(float)
    table["energy_j"] = np.where(ok, table.time_ms_median.to_numpy(float) * 1e-3 * watts, np.nan)
    table["energy_j_err"] = table["energy_j"] * 0.01
    return table


def replayed(tmp_path, *, budget=40, sampler="nsga2", calls=None, **kwargs):
    rows = problem_rows(energy_table(), PROBLEM)
    lookup = table_measure(rows, FakeFamily())

    def measure(cfg):
        if calls is not None:
            calls.append(config_key(cfg))
        return lookup(cfg)

    return run_pareto_study(family=FakeFamily(), problem=PROBLEM, domains=table_domains(rows, FakeFamily()), measure=measure,
                            storage=str(tmp_path / "optuna.log"), study_name="pareto-check", budget_trials=budget,
                            sampler=sampler, seed=3, **kwargs)  # fmt: skip


@pytest.fixture(autouse=True)
def quiet():
    optuna.logging.set_verbosity(optuna.logging.WARNING)


def test_the_front_is_the_non_dominated_set():
    times = [1.0, 1.1, 1.5, 3.0, 1.2, 1.0, np.nan]
    energy = [10.0, 6.0, 5.0, 4.9, 7.0, 10.0, 1.0]
    # (1.2, 7) is dominated by (1.1, 6); equal points are both kept; a missing value never counts
    assert pareto_mask(times, energy).tolist() == [True, True, True, True, False, True, False]


def test_the_knee_and_its_ratio():
    rows = pd.DataFrame({"time_ms_median": [1.0, 1.1, 1.5, 3.0, 1.2], "energy_j": [10.0, 6.0, 5.0, 4.9, 7.0]})
    found = knee(rows)
    assert found.points == 4 and found.knee["time_ms_median"] == 1.1
    assert (
        found.energy_saved == pytest.approx(0.4) and found.time_lost == pytest.approx(0.1) and found.ratio == pytest.approx(4.0)
    )
    assert "at its knee 40.0% less energy for 10.0% more time (ratio 4.00)" in found.sentence()
    alone = knee(pd.DataFrame({"time_ms_median": [1.0, 2.0], "energy_j": [1.0, 3.0]}))
    assert alone.points == 1 and alone.ratio is None and alone.sentence().startswith("no trade-off")


def test_a_replayed_study_stores_optunas_front_of_what_it_measured(tmp_path):
    calls = []
    outcome = replayed(tmp_path, calls=calls)
    study = outcome.study
    assert study.metric_names == list(METRICS) and len(study.directions) == 2
    assert len(calls) == len(set(calls))  # asked again, never measured again
    assert len([t for t in study.trials if t.state.is_finished()]) == 40
    ours = {tuple(v) for v in outcome.front[["time_ms_median", "energy_j"]].to_numpy()}
    optunas = {tuple(t.values) for t in study.best_trials}
    assert ours == optunas and len(ours) >= 2
    # the front against the whole table's: each point of the study's front is
    # on the table's front or within 5 % of it in energy at no more time
    table = energy_table()
    table = table[table.status == "ok"]
    exhaustive = table[pareto_mask(table.time_ms_median, table.energy_j)]
    for t, e in ours:
        best_e = exhaustive[exhaustive.time_ms_median <= t * (1 + 1e-9)].energy_j.min()
        assert e <= best_e * 1.05
    assert {a["key"] for t in study.best_trials for a in [{"key": k} for k in t.user_attrs]} >= {"config_key", "status"}


@pytest.mark.parametrize("known", [True, False])
def test_a_bound_on_time_keeps_the_front_near_the_fastest(tmp_path, known):
    table = energy_table()
    fastest = float(table[table.status == "ok"].time_ms_median.min()) if known else None
    outcome = replayed(tmp_path, budget=40, time_bound=1.1, sampler="tpe", fastest_ms=fastest)
    told = [t for t in outcome.study.trials if t.values]
    assert any(max(t.constraints.values()) > 0 for t in told)  # the bound bit: some were too slow
    front = outcome.study.best_trials
    assert front and all(max(t.constraints.values()) <= 0 for t in front)
    # against the known fastest the bound holds exactly; against the fastest so far, as each trial was told
    reference = [fastest] * len(front) if known else [t.values[0] / t.user_attrs["time_over_fastest"] for t in front]
    assert all(t.values[0] <= 1.1 * r * (1 + 1e-9) for t, r in zip(front, reference))
    with pytest.raises(ValueError, match=r"^time_bound must be >= 1"):
        replayed(tmp_path, time_bound=0.9)


def test_a_study_resumes_without_measuring_again(tmp_path):
    first = []
    replayed(tmp_path, budget=15, calls=first)
    again = []
    outcome = replayed(tmp_path, budget=30, calls=again)
    assert len([t for t in outcome.study.trials if t.state.is_finished()]) == 30
    assert not set(first) & set(again)


def test_the_dashboard_serves_both_objectives_and_the_front(tmp_path):
    executable = dashboard_executable()
    outcome = replayed(tmp_path)
    url = str(tmp_path / "optuna.log")
    port = free_port()
    log = (tmp_path / "dashboard.log").open("w")
    process = subprocess.Popen(
        [executable, url, "--host", "127.0.0.1", "--port", str(port)], stdout=log, stderr=subprocess.STDOUT
    )
    try:
        deadline, body = time.monotonic() + STARTUP_S, None
        while time.monotonic() < deadline and process.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/studies", timeout=2) as response:
                    body = json.load(response)
                break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.2)
        log.flush()
        assert body is not None, (
            f"no answer from optuna-dashboard within {STARTUP_S} s:\n{(tmp_path / 'dashboard.log').read_text()}"
        )
        studies = body.get("studies", body.get("study_summaries"))
        assert [s["study_name"] for s in studies] == ["pareto-check"]
        assert studies[0]["directions"] == ["minimize", "minimize"]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/studies/{studies[0]['study_id']}", timeout=10) as response:
            detail = json.load(response)
        assert detail["objective_names"] == list(METRICS)  # the axes of its Pareto-front plot
        served = {tuple(t["values"]) for t in detail["best_trials"]}
        assert served == {tuple(v) for v in outcome.front[["time_ms_median", "energy_j"]].to_numpy()}
        assert all({"config_key", "energy_j_err"} <= {a["key"] for a in t["user_attrs"]} for t in detail["best_trials"])
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def test_enqueueing_the_whole_space_finds_the_exhaustive_front(tmp_path):
    rows = problem_rows(energy_table(), PROBLEM)
    domains = table_domains(rows, FakeFamily())
    space = FakeFamily().space(PROBLEM, domains)
    calls = []
    outcome = replayed(tmp_path, budget=len(space), calls=calls, enqueue=space)
    assert sorted(calls) == sorted(config_key(c) for c in space)  # each once, nothing else
    table = energy_table()
    table = table[table.status == "ok"]
    exhaustive = table[pareto_mask(table.time_ms_median, table.energy_j)]
    assert {tuple(v) for v in outcome.front[["time_ms_median", "energy_j"]].to_numpy()} == {
        tuple(v) for v in exhaustive[["time_ms_median", "energy_j"]].to_numpy()
    }


def test_the_command_line_replays_a_table_into_a_storage(tmp_path, monkeypatch, capsys):
    from tuner.families import REGISTRY
    from tuner.search.tables.replay_pareto import main

    monkeypatch.setitem(REGISTRY.families, "fake", FakeFamily())  # a table of the test family, for this test only
    table = tmp_path / "sweep.parquet"
    energy_table().to_parquet(table)
    storage = tmp_path / "pareto.log"
    args = [str(table), "--family", "fake", "--dtype", "int32", "--n", str(PROBLEM.n), "--storage", str(storage)]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{PROBLEM.key}: 140 configurations with energy of ") and "on the front; at its knee" in out
    study = optuna.load_study(study_name=f"pareto/{PROBLEM.key}", storage=optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(storage))))  # fmt: skip
    assert study.metric_names == list(METRICS) and len(study.best_trials) == out.count(" mJ  ")
    no_energy = tmp_path / "plain.parquet"
    pd.read_parquet(TABLE).to_parquet(no_energy)
    with pytest.raises(SystemExit):
        main([str(no_energy), *args[1:]])
    assert "table must hold rows with energy_j for fake-int32-n1048576" in capsys.readouterr().err


def test_identical_points_count_once_on_the_front():
    """Two configurations measured alike are one point: the front of two
    identical points is no trade-off (it read '2 configurations on the front;
    0.0% less energy for 0.0% more time'), and the first row stands for it."""
    twins = pd.DataFrame({"config_key": ["a", "b"], "time_ms_median": [1.0, 1.0], "energy_j": [5.0, 5.0]})
    found = knee(twins)
    assert found.points == 1 and found.fastest["config_key"] == found.frugal["config_key"] == "a"
    assert found.sentence() == "no trade-off: the fastest configuration is also the most frugal"
    # beside a real trade-off, the twins are still one end of it
    traded = pd.DataFrame({"config_key": ["b", "a", "c"], "time_ms_median": [1.0, 1.0, 2.0], "energy_j": [5.0, 5.0, 3.0]})
    found = knee(traded)
    assert found.points == 2 and found.fastest["config_key"] == "b" and found.knee["config_key"] == "c"
    assert "2 configurations on the front; at its knee 40.0% less energy for 100.0% more time" in found.sentence()


def test_a_time_or_energy_that_is_not_finite_and_positive_is_on_no_front():
    """A zero time (it raised ZeroDivisionError), a negative energy (it read
    '150.0% less energy') or an infinite one (all infinite raised IndexError)
    places no point: the knee is that of the other rows, or none at all."""
    assert pareto_mask([0.0, 1.0, 2.0, 3.0], [5.0, 4.0, -1.0, np.inf]).tolist() == [False, True, False, False]
    zero_time = knee(pd.DataFrame({"time_ms_median": [0.0, 1.0, 2.0], "energy_j": [5.0, 4.0, 3.0]}))
    assert zero_time.points == 2 and zero_time.fastest["time_ms_median"] == 1.0
    assert "the most frugal saves 25.0% for 100.0%" in zero_time.sentence()
    negative = knee(pd.DataFrame({"time_ms_median": [1.0, 2.0], "energy_j": [5.0, -2.5]}))
    assert negative.points == 1 and negative.sentence().startswith("no trade-off")
    # none left: as for rows without energy (the report leaves the problem out, `pareto` prints 'none with energy')
    assert knee(pd.DataFrame({"time_ms_median": [1.0, 2.0], "energy_j": [np.inf, np.inf]})) is None
    assert knee(pd.DataFrame({"time_ms_median": [0.0, -1.0], "energy_j": [1.0, 2.0]})) is None
