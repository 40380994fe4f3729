"""Warm start (tuner.search.study.warm): an earlier table's best configurations
first, its rows as the sampler's prior, the trials recorded as such, and a bad
path refused in the settings."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

from tuner.data.results import config_key, to_frame, write_atomic
from tuner.search.samplers.ordinal import OrdinalSampler
from tuner.search.study.run import StudyOptions, make_sampler, run_study
from tuner.search.study.warm import load_warm_start, marks, warm_start, warm_start_problem
from tuner.settings import ConfigError, parse

sys.path.insert(0, str(Path(__file__).parent / "data"))
from fake_family import OPTIMUM_CFG, OPTIMUM_GBS, PROBLEM, FakeFamily, measure  # noqa: E402

FAMILY = FakeFamily()
DOMAINS = {p.name: list(p.values) for p in FAMILY.params}


def earlier_table(scale: float = 0.8) -> pd.DataFrame:
    """Every configuration of the fake space, measured on a slower GPU, plus
    rows that must not count (another family, a failure, an infeasible one)."""
    rows = []
    for cfg in FAMILY.space(PROBLEM, DOMAINS):
        row = measure(cfg)
        rows.append(cfg | row | {"family": "fake", "dtype": PROBLEM.dtype, "n": PROBLEM.n,
                                 "bandwidth_gbs": row["bandwidth_gbs"] * scale})  # fmt: skip
    rows.append(OPTIMUM_CFG | {"family": "other", "status": "ok", "bandwidth_gbs": 1e9})
    rows.append({**OPTIMUM_CFG, "unroll": 8, "vector_width": 8, "family": "fake", "status": "ok", "bandwidth_gbs": 1e9})
    return pd.DataFrame(rows)


def test_the_best_feasible_configurations_of_the_family_come_first():
    enqueue, prior = warm_start(earlier_table(), FAMILY, PROBLEM, DOMAINS, top=3)
    assert enqueue[0] == OPTIMUM_CFG  # not the other family's nor the infeasible row
    assert len(enqueue) == 3 and len({config_key(c) for c in enqueue}) == 3
    assert [v for _, v in prior] == sorted((v for _, v in prior), reverse=True)
    assert prior[0][1] == pytest.approx(OPTIMUM_GBS * 0.8)
    # wrong results (status wrong_result) are no prior
    assert all(not (cfg["cache_hint"] == "cs" and cfg["unroll"] == 1) for cfg, _ in prior)


def test_configurations_outside_the_study_space_are_left_out():
    narrow = DOMAINS | {"block_size": [64, 128]}
    enqueue, prior = warm_start(earlier_table(), FAMILY, PROBLEM, narrow)
    assert all(cfg["block_size"] in (64, 128) for cfg, _ in prior)
    assert all(cfg["block_size"] in (64, 128) for cfg in enqueue)


def test_repeated_measurements_keep_their_mean():
    table = earlier_table()
    twice = pd.concat([table, table.assign(bandwidth_gbs=table["bandwidth_gbs"] * 0.5)], ignore_index=True)
    _, prior = warm_start(twice, FAMILY, PROBLEM, DOMAINS)
    assert prior[0][1] == pytest.approx(OPTIMUM_GBS * 0.8 * 0.75)


def test_rows_of_another_size_seed_a_space_the_same_size_has_no_row_of():
    """A folder whose rows at the study's size lie outside its space (a sweep
    of other block sizes) seeds it from the rows of another size."""
    table = earlier_table()
    other_size = table[table["family"] == "fake"].assign(n=PROBLEM.n * 4)
    same_size_outside = table[(table["family"] == "fake") & (table["block_size"] == 512)]
    narrow = DOMAINS | {"block_size": [64, 128]}
    enqueue, prior = warm_start(pd.concat([same_size_outside, other_size], ignore_index=True), FAMILY, PROBLEM, narrow)
    assert enqueue and all(cfg["block_size"] in (64, 128) for cfg, _ in prior)
    # the same prior as those rows would give at the study's size
    assert prior == warm_start(other_size.assign(n=PROBLEM.n), FAMILY, PROBLEM, narrow)[1]


def test_rows_of_the_same_size_are_preferred_where_they_lie_within_the_space():
    table = earlier_table()
    faster_elsewhere = table[table["family"] == "fake"].assign(n=PROBLEM.n * 4, bandwidth_gbs=lambda t: 2 * t["bandwidth_gbs"])
    _, prior = warm_start(pd.concat([table, faster_elsewhere], ignore_index=True), FAMILY, PROBLEM, DOMAINS)
    assert prior[0][1] == pytest.approx(OPTIMUM_GBS * 0.8)  # the same size's rows alone, not a mean with the other's


def test_a_warm_study_records_its_warm_trials_and_lands_at_once(tmp_path):
    path = tmp_path / "earlier.parquet"
    write_atomic(to_frame(earlier_table(), keep_unknown=True), path)
    enqueue, prior = load_warm_start(path, FAMILY, PROBLEM, DOMAINS, top=2)
    sampler = make_sampler("ordinal", 0, prior=prior)
    outcome = run_study(StudyOptions(family=FAMILY, problem=PROBLEM, domains=DOMAINS, storage=None, study_name="warm",
                                     measure=measure, budget_trials=6, timeout_s=None, sampler=sampler, seed=0, enqueue=enqueue,
                                     warm_start=marks(enqueue, path)))  # fmt: skip
    assert outcome.rows[0]["bandwidth_gbs"] == OPTIMUM_GBS
    trials = outcome.study.get_trials(deepcopy=False)
    warm = [t for t in trials if t.user_attrs.get("warm_start") == str(path)]
    assert [t.params for t in warm] == enqueue
    assert all("warm_start" not in t.user_attrs for t in trials if t not in warm)


def test_bad_paths_are_named(tmp_path):
    assert "exists" in warm_start_problem(tmp_path / "missing", FAMILY, PROBLEM, DOMAINS)
    assert "which holds none" in warm_start_problem(tmp_path, FAMILY, PROBLEM, DOMAINS)
    (tmp_path / "notes.txt").write_text("x")
    assert ".parquet" in warm_start_problem(tmp_path / "notes.txt", FAMILY, PROBLEM, DOMAINS)
    with pytest.raises(ValueError, match="warm_start: must name"):
        load_warm_start(tmp_path / "missing", FAMILY, PROBLEM, DOMAINS)
    other = tmp_path / "other.parquet"
    write_atomic(to_frame(earlier_table().assign(family="other"), keep_unknown=True), other)
    with pytest.raises(ValueError, match="must hold rows of the study's family fake"):
        load_warm_start(other, FAMILY, PROBLEM, DOMAINS)


def study_config(tmp_path: Path, warm: str) -> dict:
    return {
        "results_dir": str(tmp_path / "results"),
        "gpu": "test-gpu",
        "sweeps": {"one": {"family": "reduce", "dtypes": ["int32"], "sizes": [1 << 20], "params": {"variant": ["shuffle"]}}},
        "studies": {"s": {"family": "reduce", "dtype": "int32", "n": 1 << 20, "budget_trials": 4, "warm_start": warm,
                          "storage": str(tmp_path / "s.log"), "params": {"variant": ["shuffle"], "block_size": [128, 256]}}},
    }  # fmt: skip


def reduce_table(path: Path, block_sizes=(128, 256)) -> Path:
    """Measured-looking rows of the study's problem, one per configuration."""
    from tuner.families import REGISTRY, Problem

    family = REGISTRY["reduce"]
    problem = Problem("reduce", "int32", 1 << 20)
    rows = [cfg | {"family": "reduce", "dtype": "int32", "n": 1 << 20, "status": "ok", "bandwidth_gbs": 100.0 + i,
                   "config_key": config_key(cfg)}
            for i, cfg in enumerate(family.space(problem, {p.name: list(p.values) for p in family.params}
                                                 | {"variant": ["shuffle"], "block_size": list(block_sizes)}))]  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(to_frame(rows), path)
    return path


def test_settings_refuse_a_warm_start_that_is_not_results(tmp_path):
    with pytest.raises(
        ConfigError,
        match=r"^studies\.s\.warm_start: must name a results folder or Parquet file that exists, got '.*missing'$",
    ):
        parse(study_config(tmp_path, str(tmp_path / "missing")))
    reduce_table(tmp_path / "earlier" / "sweeps" / "x.parquet")
    study = parse(study_config(tmp_path, str(tmp_path / "earlier"))).studies["s"]
    assert study.warm_start == str(tmp_path / "earlier")
    assert isinstance(make_sampler("ordinal", 0), OrdinalSampler)
