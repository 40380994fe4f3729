"""Bad configuration: one clear error naming the key, the rule and the value,
before any work starts."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from tuner import config as configuration
from tuner.config import ConfigError

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def good():
    return yaml.safe_load((ROOT / "config.yaml").read_text())


def test_shipped_config_is_valid(good):
    configuration.validate(good)


def broken(good, path, value):
    cfg = copy.deepcopy(good)
    node = cfg
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return cfg


@pytest.mark.parametrize(
    "path,value,expected",
    [
        (
            ("sweeps", "reduce_block_unroll", "params", "block_size"),
            [128, 100],
            r"sweeps\.reduce_block_unroll\.params\.block_size: block_size must be a multiple of 32 from 32 to 1024, got 100",
        ),
        (
            ("sweeps", "reduce_block_unroll", "params", "unroll"),
            [2, 3],
            r"params\.unroll: unroll must be one of \[1, 2, 4, 8, 16\], got 3",
        ),
        (
            ("sweeps", "reduce_ladder", "family"),
            "reduction",
            r"sweeps\.reduce_ladder\.family: family must be one of .*'reduce'.*got 'reduction'",
        ),
        (
            ("sweeps", "reduce_ladder", "dtypes"),
            ["int64"],
            r"sweeps\.reduce_ladder\.dtypes: dtype must be one of \['int32', 'float32'\] for family reduce, got 'int64'",
        ),
        (("sweeps", "reduce_ladder", "params", "blocksize"), [256], r"parameter must be one of .* got 'blocksize'"),
        (("sweeps", "reduce_space", "params", "offset"), [0, 200], r"offset must be an integer from 0 to 128, got 200"),
        (("studies", "reduce_int32", "sampler"), "annealing", r"studies\.reduce_int32\.sampler: 'annealing' is not one of"),
        (("timing", "max_time_s"), -1, r"timing\.max_time_s"),
        (("studies", "reduce_int32", "compare_with_sweep"), "nope", r"compare_with_sweep: must name a sweep"),
        (("sweeps", "reduce_ladder", "params", "variant"), ["neighbored"], None),  # unroll 8 infeasible but unroll 1 works
        (("sweeps", "reduce_ladder", "params", "unroll"), [3], r"unroll must be one of"),
    ],
)
def test_bad_values_are_named(good, path, value, expected):
    cfg = broken(good, path, value)
    if expected is None:
        configuration.validate(cfg)
        return
    with pytest.raises(ConfigError, match=expected):
        configuration.validate(cfg)


def test_grid_with_no_feasible_point_is_refused(good):
    cfg = broken(good, ("sweeps", "reduce_ladder", "params"), {"variant": ["unrolled"], "unroll": [1]})
    with pytest.raises(ConfigError, match=r"sweeps\.reduce_ladder: the grid must hold at least one feasible configuration"):
        configuration.validate(cfg)


def test_unknown_top_level_key(good):
    cfg = dict(good, colour="blue")
    with pytest.raises(ConfigError, match="Additional properties are not allowed"):
        configuration.validate(cfg)


def test_study_budget_defaults_to_ten_percent_of_space(good, tmp_path):
    settings = configuration.study_settings(good, "reduce_int32", tmp_path)
    assert settings.budget_trials == round(0.1 * 1536)
    assert settings.storage == f"sqlite:///{(tmp_path / 'optuna.db').resolve()}"


def test_every_family_states_its_space(capsys):
    """`python -m tuner space` prints each family's variants and space size; the
    reduction's tuning space at 2^28 int32 has at least 1,000 feasible points."""
    from tuner.cli import main
    from tuner.families import REGISTRY, Problem

    assert main(["space"]) == 0
    out = capsys.readouterr().out
    for family in REGISTRY:
        assert family.name in out
    assert len(REGISTRY["reduce"].space(Problem("reduce", "int32", 1 << 28))) >= 1000
