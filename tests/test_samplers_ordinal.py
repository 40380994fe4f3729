"""The default sampler (tuner.search.ordinal.OrdinalSampler) through the real
study loop, on the GPU-free fake family."""

from __future__ import annotations

import sys
from pathlib import Path

import optuna
import pytest

from tuner.data.results import config_key
from tuner.search.ordinal import OrdinalSampler
from tuner.search.study import make_sampler, run_study

sys.path.insert(0, str(Path(__file__).parent / "data"))
from fake_family import OPTIMUM_CFG, OPTIMUM_GBS, PROBLEM, FakeFamily, bandwidth, is_wrong, measure  # noqa: E402

FAMILY = FakeFamily()
DOMAINS = {p.name: list(p.values) for p in FAMILY.params}


def study(seed: int, budget: int, domains=DOMAINS, storage=None, name="s", sampler="ordinal", **kwargs):
    return run_study(family=FAMILY, problem=PROBLEM, domains=domains, storage=storage, study_name=name, measure=measure,
                     budget_trials=budget, timeout_s=None, sampler=sampler, seed=seed, **kwargs)  # fmt: skip


def keys(outcome) -> list[str]:
    return [config_key({k: row[k] for k in DOMAINS}) for row in outcome.rows]


def test_make_sampler_knows_ordinal_and_checks_its_arguments():
    assert isinstance(make_sampler("ordinal", 3), OrdinalSampler)
    with pytest.raises(ValueError, match="n_startup and top_k must be >= 1"):
        OrdinalSampler(n_startup=0)


@pytest.mark.parametrize("seed", range(5))
def test_it_reaches_the_optimum_and_never_needs_a_rescue(seed):
    outcome = study(seed, 30)
    assert len(set(keys(outcome))) == len(outcome.rows) == 30  # distinct, the budget exactly
    assert outcome.best["bandwidth_gbs"] == OPTIMUM_GBS
    # It proposes feasible, unmeasured configurations itself: the loop never rescues.
    assert outcome.rescued == 0 and outcome.infeasible == 0 and outcome.duplicate == 0


def test_it_beats_random_search_on_the_first_hit():
    def first_hit(sampler, seed):
        rows = study(seed, 60, sampler=sampler, name=f"{sampler}-{seed}").rows
        return next((i for i, row in enumerate(rows, 1) if row.get("bandwidth_gbs") == OPTIMUM_GBS), 61)

    ordinal = sorted(first_hit("ordinal", s) for s in range(8))
    random = sorted(first_hit("random", s) for s in range(8))
    assert ordinal[4] < random[4], (ordinal, random)


def test_value_order_does_not_change_the_search():
    reversed_domains = {name: list(reversed(values)) for name, values in DOMAINS.items()}
    for seed in range(3):
        assert keys(study(seed, 20)) == keys(study(seed, 20, domains=reversed_domains))


def test_failed_configurations_are_not_ranked_as_fast():
    # The fake family's wrong results report a huge bandwidth; the study tells them FAIL.
    outcome = study(0, 40)
    wrong = [row for row in outcome.rows if is_wrong({k: row[k] for k in DOMAINS})]
    assert all(row["status"] == "wrong_result" for row in wrong)
    assert outcome.best["bandwidth_gbs"] == OPTIMUM_GBS


def test_a_resumed_study_goes_on_from_its_history(tmp_path):
    storage = str(tmp_path / "journal.log")
    first = study(0, 12, storage=storage)
    second = study(0, 24, storage=storage)
    assert len(first.rows) == 12 and len(second.rows) == 12
    assert not set(keys(first)) & set(keys(second))
    assert second.best["bandwidth_gbs"] == OPTIMUM_GBS


def test_prior_rows_steer_the_first_steps():
    # A prior that knows the whole space: the model ranks by it from the first step.
    prior = [(cfg, bandwidth(cfg)) for cfg in FAMILY.space(PROBLEM, DOMAINS)]
    cold = study(0, 40, name="cold")
    warm = study(0, 40, name="warm", sampler=OrdinalSampler(seed=0, prior=prior))

    def first_hit(outcome):
        return next(i for i, row in enumerate(outcome.rows, 1) if row.get("bandwidth_gbs") == OPTIMUM_GBS)

    assert first_hit(warm) <= first_hit(cold)
    assert first_hit(warm) <= OrdinalSampler(seed=0).n_startup + 3


def test_it_works_inside_an_ordinary_optuna_study_without_the_wrapper():
    sampler = OrdinalSampler(seed=0)  # never bound to a space: it defers to independent sampling
    plain = optuna.create_study(sampler=sampler, direction="maximize")
    plain.optimize(lambda t: t.suggest_categorical("block_size", [64, 128]) * 1.0, n_trials=3)
    assert len(plain.trials) == 3
    assert OPTIMUM_CFG["block_size"] in DOMAINS["block_size"]


def test_a_step_can_jump_an_ordered_parameter_to_either_end():
    sampler = OrdinalSampler(seed=0)
    dists = {"block": optuna.distributions.CategoricalDistribution(list(range(32, 1025, 32))),
             "hint": optuna.distributions.CategoricalDistribution(["a", "b"])}  # fmt: skip
    sampler.bind(dists, lambda cfg: True, None)
    here = {"block": 320, "hint": "a"}
    blocks = {cfg["block"] for _, cfg in sampler._neighbours(config_key(here), here) if cfg["hint"] == "a"}
    # 1, 2, 4, 8, 16 positions either way, and the two ends (32 and 1024 are 9 and 22 positions away).
    assert blocks == {288, 352, 256, 384, 192, 448, 64, 576, 832, 32, 1024}
    plain = OrdinalSampler(seed=0, ends=False)
    plain.bind(dists, lambda cfg: True, None)
    assert 1024 not in {cfg["block"] for _, cfg in plain._neighbours(config_key(here), here)}
