"""The default sampler (tuner.search.samplers.ordinal.OrdinalSampler) through the real
study loop, on the GPU-free fake family."""

from __future__ import annotations

import itertools
import math
import sys
from pathlib import Path

import numpy as np
import optuna
import pytest

from tuner.data.results import config_key
from tuner.families.base import MAX_ENUMERATED, Family, Param, Problem
from tuner.search.samplers.ordinal import OrdinalSampler
from tuner.search.study.run import StudyOptions, make_sampler, resumed_seed, run_study

sys.path.insert(0, str(Path(__file__).parent / "data"))
from fake_family import OPTIMUM_CFG, OPTIMUM_GBS, PROBLEM, FakeFamily, bandwidth, is_wrong, measure  # noqa: E402

FAMILY = FakeFamily()
DOMAINS = {p.name: list(p.values) for p in FAMILY.params}


def study(seed: int, budget: int, domains=DOMAINS, storage=None, name="s", sampler="ordinal", **kwargs):
    if isinstance(sampler, str):
        sampler = make_sampler(sampler, resumed_seed(storage, name, seed))
    return run_study(StudyOptions(family=FAMILY, problem=PROBLEM, domains=domains, storage=storage, study_name=name,
                                  measure=measure, budget_trials=budget, timeout_s=None, sampler=sampler, seed=seed,
                                  **kwargs))  # fmt: skip


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


RIDGE_DISTS = {
    "block": optuna.distributions.CategoricalDistribution([64, 128, 256, 512, 1024]),
    "unroll": optuna.distributions.CategoricalDistribution([1, 2, 4, 8, 16]),
    "vector": optuna.distributions.CategoricalDistribution([1, 2, 4]),
}


def ridge(cfg: dict) -> float:
    """Fast along unroll x vector = 8 (a diagonal ridge), best at unroll 2,
    vector 4, block 512: from (4, 2) on the ridge every one-parameter step is slower."""
    work = math.log2(cfg["unroll"]) + math.log2(cfg["vector"])
    return 1000.0 - 200 * (work - 3) ** 2 - 20 * (math.log2(cfg["unroll"]) - 1) ** 2 - abs(math.log2(cfg["block"] / 512))


def first_ridge_hit(seed: int, **options) -> int:
    sampler = OrdinalSampler(seed=seed, **options)
    sampler.bind(RIDGE_DISTS, lambda cfg: True, None)
    plain = optuna.create_study(sampler=sampler, direction="maximize")
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        plain.optimize(
            lambda t: ridge({name: t.suggest_categorical(name, d.choices) for name, d in RIDGE_DISTS.items()}), n_trials=60
        )
    finally:
        optuna.logging.set_verbosity(verbosity)
    values = [t.value for t in plain.trials]
    assert len({config_key(t.params) for t in plain.trials}) == len(values)  # never a configuration twice
    return next((i for i, v in enumerate(values, 1) if v == 1000.0), 61)


def test_a_step_can_move_two_ordered_parameters_at_once():
    sampler = OrdinalSampler(seed=0)
    sampler.bind(RIDGE_DISTS, lambda cfg: True, None)
    here = {"block": 512, "unroll": 4, "vector": 2}
    near = [cfg for _, cfg in sampler._neighbours(config_key(here), here)]
    assert {"block": 512, "unroll": 2, "vector": 4} in near  # along the ridge
    assert {"block": 256, "unroll": 8, "vector": 2} in near  # any two ordered parameters, either way
    assert {"block": 512, "unroll": 1, "vector": 4} not in near  # one position each, no more
    plain = OrdinalSampler(seed=0, diagonals=False)
    plain.bind(RIDGE_DISTS, lambda cfg: True, None)
    assert {"block": 512, "unroll": 2, "vector": 4} not in [cfg for _, cfg in plain._neighbours(config_key(here), here)]


def test_diagonal_steps_climb_a_diagonal_ridge_sooner():
    with_diagonals = sorted(first_ridge_hit(seed) for seed in range(6))
    without = sorted(first_ridge_hit(seed, diagonals=False) for seed in range(6))
    assert with_diagonals[-1] <= 25, with_diagonals
    assert with_diagonals[3] < without[3], (with_diagonals, without)


def test_a_climb_restarts_after_patience_steps_without_progress():
    sampler = OrdinalSampler(seed=0, patience=3)
    sampler.bind(RIDGE_DISTS, lambda cfg: True, None)
    cfgs = [{"block": b, "unroll": 1, "vector": 1} for b in (64, 128, 256, 512, 1024)]
    values = [100.0, 100.1, 90.0, 95.0, 50.0]  # 100.1 is within the noise of 100: no progress
    measured = {config_key(cfg): (cfg, value) for cfg, value in zip(cfgs, values)}
    assert list(sampler._climb(dict(list(measured.items())[:3]))) == list(measured)[:3]
    assert sampler._climb(dict(list(measured.items())[:4])) == {}  # three steps without progress: restart
    assert list(sampler._climb(measured)) == list(measured)[4:]  # the new climb starts at the next point
    never = OrdinalSampler(seed=0, patience=0)
    never.bind(RIDGE_DISTS, lambda cfg: True, None)
    assert never._climb(measured) == measured
    with pytest.raises(ValueError, match="patience must be >= 0"):
        OrdinalSampler(patience=-1)


def test_the_default_strategy_starts_with_a_parzen_phase_from_the_far_corner():
    from tuner.search.samplers.registry import DEFAULT_STRATEGY

    assert DEFAULT_STRATEGY == "ordinal_adaptive"
    small, large = make_sampler(DEFAULT_STRATEGY, 0).early, make_sampler(DEFAULT_STRATEGY, 0).late
    for default, climb_from in ((small, "best"), (large, "centre")):
        assert (default.global_phase, default.start_phase, default.landmarks, default.climb_from) == (30, 80, ("last",), climb_from)
    ordinal = make_sampler("ordinal", 0)
    assert (ordinal.global_phase, ordinal.start_phase, ordinal.landmarks) == (0, 0, ("centre", "last", "first"))
    with pytest.raises(ValueError, match="landmarks must be of"):
        OrdinalSampler(landmarks=("middle",))
    with pytest.raises(ValueError, match="global_phase, start_phase and slice_after must be >= 0"):
        OrdinalSampler(start_phase=-1)


@pytest.mark.parametrize("seed", range(3))
def test_the_start_phase_draws_from_the_parzen_model_before_the_first_climb(seed, monkeypatch):
    calls = []
    for method in ("_spread", "_parzen", "_step"):
        original = getattr(OrdinalSampler, method)

        def spy(self, *args, _original=original, _method=method, **kwargs):
            found = _original(self, *args, **kwargs)
            if found is not None:
                calls.append(_method)
            return found

        monkeypatch.setattr(OrdinalSampler, method, spy)
    sampler = OrdinalSampler(seed=seed, start_phase=20, global_phase=30, landmarks=("last",))
    domains = {**DOMAINS, "vector_width": [1, 2]}  # so that the far corner (unroll 8, width 2) is feasible
    outcome = study(seed, 40, domains=domains, sampler=sampler, name=f"start-{seed}")
    assert len(set(keys(outcome))) == len(outcome.rows) == 40
    # The space-filling start (5), then Parzen proposals up to the 20th measurement (a wrong
    # result is no measurement), then steps.
    first_step = calls.index("_step")
    assert calls[:5] == ["_spread"] * 5 and calls[5:first_step] == ["_parzen"] * (first_step - 5), calls
    assert sum(row["status"] == "ok" for row in outcome.rows[:first_step]) == 20, outcome.rows[:first_step]
    # The first proposal is the far corner: every ordered parameter at its largest value.
    first = outcome.rows[0]
    assert (first["block_size"], first["unroll"], first["vector_width"]) == (512, 8, 2), first


def test_the_start_phase_is_not_counted_against_patience():
    sampler = OrdinalSampler(seed=0, patience=2, start_phase=4)
    sampler.bind(RIDGE_DISTS, lambda cfg: True, None)
    cfgs = [{"block": b, "unroll": u, "vector": 1} for b in (64, 128, 256, 512, 1024) for u in (1, 2)]
    values = [100.0, 90.0, 80.0, 70.0, 60.0, 50.0]
    measured = {config_key(cfg): (cfg, value) for cfg, value in zip(cfgs, values)}
    # Three measurements without progress inside the start phase: no restart; two after it: one.
    assert sampler._climbs.read(dict(list(measured.items())[:4]))["start"] == 0
    assert sampler._climbs.read(dict(list(measured.items())[:5]))["start"] == 0
    assert sampler._climbs.read(measured)["start"] == 6


def test_after_a_restart_the_global_phase_is_not_counted_against_patience():
    sampler = OrdinalSampler(seed=0, patience=2, global_phase=3)
    sampler.bind(RIDGE_DISTS, lambda cfg: True, None)
    cfgs = [{"block": b, "unroll": u, "vector": 1} for b in (64, 128, 256, 512, 1024) for u in (1, 2)]
    values = [100.0, 90.0, 80.0] + [50.0, 40.0, 30.0] + [60.0, 55.0] + [20.0, 10.0]
    measured = {config_key(cfg): (cfg, value) for cfg, value in zip(cfgs, values)}
    # Two measurements without progress: a restart at position 3, then three of the global
    # phase (no progress after its first, yet no restart), then two more without: a restart.
    assert sampler._climbs.read(dict(list(measured.items())[:6]))["start"] == 3
    assert sampler._climbs.read(dict(list(measured.items())[:6]))["until"] == 6
    assert sampler._climbs.read(dict(list(measured.items())[:7]))["start"] == 3  # 60 gains on the phase's 50
    assert sampler._climbs.read(dict(list(measured.items())[:9]))["start"] == 9
    plain = OrdinalSampler(seed=0, patience=2, global_phase=0)
    plain.bind(RIDGE_DISTS, lambda cfg: True, None)
    assert plain._climbs.read(dict(list(measured.items())[:6]))["start"] == 6  # no phase: 40 and 30 end the climb of 50
    with pytest.raises(ValueError, match="global_phase, start_phase and slice_after must be >= 0"):
        OrdinalSampler(global_phase=-1)
    with pytest.raises(ValueError, match="bound_every must be >= 0, got -1"):
        OrdinalSampler(bound_every=-1)


PARZEN_DISTS = {name: optuna.distributions.CategoricalDistribution([f"v{i}" for i in range(8)]) for name in "abcd"}


def parzen_measurements(seed: int, label) -> dict:
    """60 measurements of four 8-valued parameters: the fast ones (one in ten) share a = 7 and b = 0, the slow
    ones are anything else (c and d do not matter). ``label`` makes a value of its position."""
    rng = __import__("random").Random(seed)
    measured = {}
    for _ in range(60):
        at = {name: rng.randrange(8) for name in "abcd"}
        fast = rng.random() < 0.1
        if fast:
            at |= {"a": 7, "b": 0}
        elif at["a"] == 7 and at["b"] == 0:
            at["a"] = 3
        cfg = {name: label(i) for name, i in at.items()}
        measured[config_key(cfg)] = (cfg, 100.0 + rng.random() if fast else 10.0 + rng.random())
    return measured


@pytest.mark.parametrize("seed", range(4))
def test_the_global_phase_proposes_what_the_best_measured_configurations_share(seed):
    # Unordered values: the Parzen proposal keeps both of the fast ones' values, where a random draw would keep
    # them together one time in 64.
    sampler = OrdinalSampler(seed=seed)
    sampler.bind(PARZEN_DISTS, lambda cfg: True, None)
    measured = parzen_measurements(seed, lambda i: f"v{i}")
    proposals = [sampler._parzen(measured, set(measured), __import__("random").Random(seed * 100 + i)) for i in range(20)]
    assert all(cfg is not None and config_key(cfg) not in measured for cfg in proposals)
    assert sum(cfg["a"] == "v7" and cfg["b"] == "v0" for cfg in proposals) >= 10, proposals


@pytest.mark.parametrize("seed", range(4))
def test_the_global_phase_also_proposes_the_neighbours_of_ordered_values(seed):
    # The same measurements with ordered values 1..8 (a = 8 and b = 1 fast): the kernels move a share of each
    # ordered value to the values nearest twice and half it (8: 4; 1: 2), so the proposals keep the fast values
    # or step beside them, each far more often than at random (both kept 1 in 64, both within that 9 in 64).
    dists = {name: optuna.distributions.CategoricalDistribution(list(range(1, 9))) for name in "abcd"}
    sampler = OrdinalSampler(seed=seed)
    sampler.bind(dists, lambda cfg: True, None)
    measured = parzen_measurements(seed, lambda i: i + 1)
    proposals = [sampler._parzen(measured, set(measured), __import__("random").Random(seed * 100 + i)) for i in range(20)]
    kept = sum(cfg["a"] == 8 and cfg["b"] == 1 for cfg in proposals)
    beside = sum(cfg["a"] in (4, 8) and cfg["b"] in (1, 2) and (cfg["a"], cfg["b"]) != (8, 1) for cfg in proposals)
    assert kept >= 4 and beside >= 2 and kept + beside >= 10, proposals


def test_ordered_parzen_kernels_move_a_share_to_the_values_nearest_twice_and_half():
    from tuner.search.samplers.ordinal_grid import log_neighbours, parzen_kernels

    # Block sizes in steps of 64: 256's neighbours are 128 and 512; 320's are 192 and 640 (160 is absent:
    # 192 is nearer it than 128 on a log scale); the largest has only its half. Values with a zero: the adjacent ones.
    blocks = list(range(64, 1025, 64))
    near = log_neighbours(blocks)
    assert [blocks[i] for i in near[blocks.index(256)]] == [128, 512]
    assert [blocks[i] for i in near[blocks.index(320)]] == [192, 640]
    assert [blocks[i] for i in near[-1]] == [512]
    assert log_neighbours([0, 1, 2]) == [[1], [0, 2], [1]]
    ordered, unordered = (kernel.dense() for kernel in parzen_kernels([(True, blocks), (False, ["ldg", "none", "stream"])], 9, 0.15))
    assert np.allclose(ordered.sum(axis=1), 1.0) and np.allclose(unordered.sum(axis=1), 1.0)
    keep = (1 + 0.1) / (1 + 16 * 0.1)  # the categorical kernel of 9 observations: e = 1 / 10
    row = ordered[blocks.index(256)]
    assert row[blocks.index(256)] == pytest.approx(0.85 * keep)
    assert row[blocks.index(128)] == row[blocks.index(512)] == pytest.approx(0.85 * (1 - keep) / 15 + 0.075)
    assert row[blocks.index(960)] == pytest.approx(0.85 * (1 - keep) / 15)
    assert unordered[0, 0] == pytest.approx((1 + 0.1) / (1 + 3 * 0.1)) and unordered[0, 1] == unordered[0, 2]


def test_a_parzen_draw_is_the_one_random_choices_makes_from_the_same_state():
    import random

    from tuner.search.samplers.ordinal_grid import parzen_kernels, weighted_choice

    rng = np.random.default_rng(5)
    for trial in range(200):
        weights = rng.random(int(rng.integers(1, 50))) * 10.0 ** int(rng.integers(-6, 7))
        ours, theirs = random.Random(trial), random.Random(trial)
        assert weighted_choice(weights, ours) == theirs.choices(range(len(weights)), weights=weights)[0]
        assert ours.random() == theirs.random()  # one draw each: the states stay together
    # A kernel's row is its dense matrix's, for a parameter too wide for one (no k x k matrix is made).
    wide = list(range(1, 5001))
    (kernel,) = parzen_kernels([(True, wide)], 20, 0.15)
    row = kernel.row(999)  # the value 1000: its neighbours 500 and 2000
    assert row.shape == (5000,) and row.sum() == pytest.approx(1.0)
    # Among 5,000 values the categorical part is nearly flat (e = 1 / 21): the neighbours' share stands out.
    assert row[499] == row[1999] == row.max() and row[999] > row[998] == row[0]  # 999 is no neighbour of 1000
    small = parzen_kernels([(True, [1, 2, 4, 8, 16])], 20, 0.15)[0]
    assert np.array_equal(np.array([small.row(c) for c in range(5)]), small.dense())


def test_the_parzen_density_is_the_mixture_of_its_kernels():
    from tuner.search.samplers.ordinal_grid import parzen_kernels, parzen_log_density

    rng = np.random.default_rng(3)
    kernels = parzen_kernels([(True, [1, 2, 4, 8, 16]), (False, ["x", "y"]), (True, [0, 1])], 300, 0.15)
    dense = [kernel.dense() for kernel in kernels]
    observed = np.column_stack([rng.integers(0, 5, 300), rng.integers(0, 2, 300), rng.integers(0, 2, 300)])
    drawn = np.array([[0, 0, 0], [4, 1, 1], [2, 0, 1]])
    expected = []
    for row in drawn:
        mixture = sum(np.prod([dense[j][o[j], row[j]] for j in range(3)]) for o in observed)
        expected.append(np.log((mixture + 1 / 20) / 301))  # one kernel per observation and the uniform one
    assert np.allclose(parzen_log_density(drawn, observed, kernels), expected)
    assert np.allclose(parzen_log_density(drawn, observed[:0], kernels), np.log(1 / 20))


@pytest.mark.parametrize("seed", range(3))
def test_landmarks_first_tries_the_far_corner_with_other_unordered_values(seed):
    domains = {**DOMAINS, "vector_width": [1, 2]}  # the far corner (512, 8, 2) is feasible, with any of 3 hints

    def corners(landmarks_first):
        sampler = OrdinalSampler(seed=seed, landmarks=("last",), landmarks_first=landmarks_first, patience=0)
        rows = study(seed, 5, domains=domains, sampler=sampler, name=f"corner-{landmarks_first}-{seed}").rows
        return [row["cache_hint"] for row in rows if (row["block_size"], row["unroll"], row["vector_width"]) == (512, 8, 2)]

    first = corners(True)
    assert len(first) >= 2 and len(set(first)) == len(first), first  # distinct hints, before any far-apart point
    assert len(corners(False)) == 1  # otherwise the corner starts, then far-apart points follow


SLICE_DISTS = {
    "block": optuna.distributions.CategoricalDistribution([16, 32, 48, 64, 80, 96]),  # wide: a slice's free parameters
    "rows": optuna.distributions.CategoricalDistribution([1, 2, 4, 8, 16]),
    "tile": optuna.distributions.CategoricalDistribution([1, 2, 3]),  # narrow: fixed within a slice
    "shared": optuna.distributions.CategoricalDistribution([0, 1]),
}


def lone_peak_history(neighbour_value: float, stalled: int) -> tuple[dict, dict]:
    """A climb whose best (block 64, rows 2, tile 3, shared) has had ``stalled``
    measurements without progress since, its one-step neighbours measured
    at ``neighbour_value``."""
    peak = {"block": 64, "rows": 2, "tile": 3, "shared": 1}
    sampler = OrdinalSampler(seed=0)
    sampler.bind(SLICE_DISTS, lambda cfg: True, None)
    neighbours = [cfg for _, cfg in sampler._neighbours(config_key(peak), peak)]
    assert len(neighbours) > stalled
    measured = {config_key(peak): (peak, 100.0)}
    for cfg in neighbours[:stalled]:
        measured[config_key(cfg)] = (cfg, neighbour_value)
    return peak, measured


def slice_sweep(measured, slice_after=15, enumerated=True):
    sampler = OrdinalSampler(seed=0, patience=100, slice_after=slice_after)
    space = [dict(zip(SLICE_DISTS, values)) for values in __import__("itertools").product(
        *(dist.choices for dist in SLICE_DISTS.values()))]  # fmt: skip
    sampler.bind(SLICE_DISTS, lambda cfg: True, {config_key(cfg): cfg for cfg in space} if enumerated else None)
    return sampler._slice_sweep(measured, measured, set(measured), __import__("random").Random(0))


def test_a_climb_stalled_on_a_lone_peak_sweeps_the_peaks_slice():
    peak, measured = lone_peak_history(50.0, stalled=15)
    found = slice_sweep(measured)
    slice_keys = {config_key({**peak, "block": b, "rows": r}) for b in SLICE_DISTS["block"].choices
                  for r in SLICE_DISTS["rows"].choices} - set(measured)  # fmt: skip
    # Every unvisited configuration of the peak's tile and switch (the wide block and rows free) is a candidate,
    # block 32 x 4 rows among them: two positions away in each, no step of one or two parameters reaches it.
    assert slice_keys <= set(found)
    assert config_key({**peak, "block": 32, "rows": 4}) in found
    assert not set(found) & set(measured)
    # Listed from the space or built from the parameters' values where none is enumerated: the same slice.
    assert slice_keys <= set(slice_sweep(measured, enumerated=False))


@pytest.mark.parametrize(("neighbour_value", "stalled", "slice_after"), [
    (90.0, 15, 15),  # a plateau: the neighbours' median is 0.9 of the best
    (50.0, 14, 15),  # not yet stalled for long enough
    (50.0, 15, 0),  # the sweep off (strategy ordinal)
])  # fmt: skip
def test_no_slice_sweep_on_a_plateau_before_the_stall_or_where_it_is_off(neighbour_value, stalled, slice_after):
    _, measured = lone_peak_history(neighbour_value, stalled)
    assert slice_sweep(measured, slice_after=slice_after) == {}


def test_the_default_strategy_sweeps_slices_and_ordinal_does_not():
    assert make_sampler("ordinal_global", 0).slice_after == 15
    assert make_sampler("ordinal", 0).slice_after == 0
    with pytest.raises(ValueError, match="slice_after must be >= 0"):
        OrdinalSampler(slice_after=-1)


PAIR_DISTS = {
    "block": optuna.distributions.CategoricalDistribution([32, 64, 96, 128, 160, 192]),  # wide: no pairs
    "read_only": optuna.distributions.CategoricalDistribution([0, 1]),
    "shared": optuna.distributions.CategoricalDistribution([0, 1]),
}


def interaction_history() -> dict:
    """Read-only loads and shared memory each slow alone, fast together (as
    on the benchmark hub's A100 convolution): many measurements of either
    switch alone, two of both at once."""
    rates = {(0, 0): 100.0, (1, 0): 30.0, (0, 1): 30.0}
    measured = {}
    for block in (32, 64, 96, 128):
        for (read_only, shared), rate in rates.items():
            cfg = {"block": block, "read_only": read_only, "shared": shared}
            measured[config_key(cfg)] = (cfg, rate)
    for block in (32, 64):
        both = {"block": block, "read_only": 1, "shared": 1}
        measured[config_key(both)] = (both, 140.0)
    return measured


def favourite(measured: dict, pairs: bool, prior=()) -> dict:
    """The model's favourite of the two unmeasured configurations at block 160."""
    sampler = OrdinalSampler(seed=0, pairs=pairs, prior=prior)
    sampler.bind(PAIR_DISTS, lambda cfg: True, None)
    candidates = {config_key(cfg): cfg for cfg in ({"block": 160, "read_only": 0, "shared": 0},
                                                   {"block": 160, "read_only": 1, "shared": 1})}  # fmt: skip
    return sampler._favourite(candidates, measured, __import__("random").Random(0))


def test_the_pair_model_ranks_two_switches_that_are_fast_only_together():
    measured = interaction_history()
    # Main effects average each switch over the slow configurations it was measured in: both on looks slowest.
    assert (favourite(measured, pairs=False)["read_only"], favourite(measured, pairs=False)["shared"]) == (0, 0)
    # A column for the pair (read-only, shared) learns what the measurements of both together showed.
    assert (favourite(measured, pairs=True)["read_only"], favourite(measured, pairs=True)["shared"]) == (1, 1)


def test_the_pair_columns_stay_out_where_the_switches_do_not_interact():
    noise = __import__("random").Random(1)
    additive = {}  # each switch worth the same whatever the other, measured with 5 % noise
    for i, block in enumerate(PAIR_DISTS["block"].choices):
        for read_only, shared in itertools.product((0, 1), (0, 1)):
            cfg = {"block": block, "read_only": read_only, "shared": shared}
            rate = 100.0 * (1 + 0.1 * i) * (0.9 if read_only else 1.0) * (1.1 if shared else 1.0)
            additive[config_key(cfg)] = (cfg, rate * (1 + 0.1 * (noise.random() - 0.5)))
    for measured, paired in ((additive, False), (interaction_history(), True)):
        sampler = OrdinalSampler(seed=0, pairs=True)
        sampler.bind(PAIR_DISTS, lambda cfg: True, None)
        weights, _ = sampler._fit(measured)
        # Without an interaction the model with pairs predicts left-out measurements worse: the one without them ranks.
        assert bool(weights[sorted(sampler._pair_columns.values())].any()) is paired


def test_a_warm_starts_rows_teach_the_pair_model_too():
    prior = list(interaction_history().values())  # known before the study, which has measured one configuration
    first = {"block": 192, "read_only": 0, "shared": 0}
    measured = {config_key(first): (first, 100.0)}
    without, with_pairs = (favourite(measured, pairs=pairs, prior=prior) for pairs in (False, True))
    assert (without["read_only"], without["shared"]) == (0, 0)
    assert (with_pairs["read_only"], with_pairs["shared"]) == (1, 1)


def test_the_pairs_are_judged_on_the_studys_own_rows_and_the_best_prior_rows(monkeypatch):
    import tuner.search.samplers.ordinal_model as ordinal

    monkeypatch.setattr(ordinal, "LEFT_OUT_ROWS", 6)  # fewer than the 15 rows of the study and its warm start
    sampler = OrdinalSampler(seed=0, pairs=True, prior=list(interaction_history().values()))
    sampler.bind(PAIR_DISTS, lambda cfg: True, None)
    judged = []
    real = sampler._fit_with_or_without_pairs
    monkeypatch.setattr(sampler, "_fit_with_or_without_pairs", lambda gram, moment, rows, centred: (
        judged.append(sorted(centred)), real(gram, moment, rows, centred))[1])  # fmt: skip
    first = {"block": 192, "read_only": 0, "shared": 0}
    _, mean = sampler._fit({config_key(first): (first, 100.0)})
    rates = [round(float(math.exp(value + mean)), 6) for value in judged[0]]
    # The study's own row, then the warm start's best (both switches on, then both off), not its worst.
    prior_shift = 100.0 / math.exp(sampler._prior_mean)
    assert len(rates) == 6 and rates.count(100.0) == 1
    assert sorted(rates)[-2:] == [round(140.0 * prior_shift, 6)] * 2 and round(30.0 * prior_shift, 6) not in rates


def test_the_pair_columns_cover_narrow_parameters_only_and_stop_at_their_cap(monkeypatch):
    import tuner.search.samplers.ordinal_model as ordinal

    sampler = OrdinalSampler(seed=0, pairs=True)
    sampler.bind(PAIR_DISTS, lambda cfg: True, None)
    # One pair of narrow parameters of two values each (block is wide): four columns after the ten one-hot ones.
    assert sorted(sampler._pair_columns.values()) == [10, 11, 12, 13]
    cfg = {"block": 64, "read_only": 1, "shared": 0}
    assert sampler._features_of([config_key(cfg)]).shape == (1, 4)
    monkeypatch.setattr(ordinal, "PAIR_COLUMNS_MAX", 3)
    sampler.bind(PAIR_DISTS, lambda cfg: True, None)
    assert sampler._pair_columns == {} and sampler._features_of([config_key(cfg)]).shape == (1, 3)


def test_over_the_cap_the_pairs_with_a_switch_keep_their_columns_then_the_pairs_of_switches(monkeypatch):
    import tuner.search.samplers.ordinal_model as ordinal

    Choices = optuna.distributions.CategoricalDistribution
    # block has more values than the model has columns for one parameter: they share them.
    dists = {"block": Choices(list(range(32, 3232, 32))), "tile_x": Choices([1, 2, 3]),
             "tile_y": Choices([1, 2, 3]), "read_only": Choices([0, 1]),
             "shared": Choices([0, 1])}  # fmt: skip
    sampler = OrdinalSampler(seed=0, pairs=True)
    kept = {}
    for cap in (37, 36, 28, 27, 4, 3):  # every pair: 9 + 4 x 6 + 4 columns; with a switch 28; of two switches 4
        monkeypatch.setattr(ordinal, "PAIR_COLUMNS_MAX", cap)
        sampler.bind(dists, lambda cfg: True, None)
        kept[cap] = (len(sampler._pair_columns), sampler._pair_names)
        cfg = {"block": 64, "tile_x": 3, "tile_y": 1, "read_only": 1, "shared": 0}
        features = sampler._features_of([config_key(cfg)])
        assert features.shape == (1, 5 + len(sampler._pair_names)) and features.max() < sampler._width
    assert kept[37][0] == 37 and len(kept[37][1]) == 6
    assert kept[36] == kept[28] and kept[28][0] == 28 and ("tile_x", "tile_y") not in kept[28][1]
    assert kept[27] == kept[4] == (4, [("read_only", "shared")])
    assert kept[3] == (0, [])


def test_the_default_strategy_models_pairs_and_ordinal_does_not():
    assert make_sampler("ordinal_global", 0).pairs is True
    assert make_sampler("ordinal", 0).pairs is False


def test_the_running_sums_of_the_pair_model_are_those_of_every_row_at_once():
    from tuner.search.samplers.ordinal_grid import one_hot_sums

    sampler = OrdinalSampler(seed=0, pairs=True)
    sampler.bind(PAIR_DISTS, lambda cfg: True, None)
    measured = interaction_history()
    first = dict(list(measured.items())[:5])
    sampler._sums.read(first)  # folded in two goes, as asks read a growing history
    gram, moment, ones = sampler._sums.read(measured)
    keys = list(measured)
    y = __import__("numpy").log([measured[key][1] for key in keys])
    expected = one_hot_sums(sampler._features_of(keys), y, sampler._width)
    for got, want in zip((gram, moment, ones), expected):
        assert (abs(got - want) < 1e-9).all()


def restart_phase_sources(monkeypatch, asks: int, wide: bool = True, stalled: bool = True, near: int = 0,
                          bound_every: int = 0, start: int = 20, fail: frozenset = frozenset()):
    """What each of ``asks`` global-phase asks of a restart draws from, each
    proposal measured before the next (those of the asks in ``fail`` fail:
    visited, not measured): ("parzen", keys its model sees), ("spread",
    landmarks) or ("bound", measurements), and the keys measured."""
    from optuna.distributions import CategoricalDistribution

    dists = {"a": CategoricalDistribution(list(range(8))), "b": CategoricalDistribution(list(range(8)))}
    configs = [{"a": a, "b": b} for a in range(8) for b in range(8)]
    sampler = OrdinalSampler(seed=0, global_phase=30, start_phase=5, wide_restarts=wide, bound_every=bound_every)
    sampler.bind(dists, lambda cfg: True, {config_key(cfg): cfg for cfg in configs})
    before = [100.0] + [98.0 if i < near else 50.0 for i in range(19)]  # the study's best, then the rest
    measured = {config_key(cfg): (cfg, value) for cfg, value in zip(configs, before)}
    first = list(measured)
    state = {"start": start, "stalled": stalled, "top_before": 100.0, "until": 50, "since": 0, "best": 60.0}
    monkeypatch.setattr(sampler._climbs, "read", lambda measured: state)
    fresh = iter(configs[20:])
    sources = []
    monkeypatch.setattr(sampler, "_parzen", lambda seen, visited, rng: (sources.append(("parzen", sorted(seen))), next(fresh))[1])
    monkeypatch.setattr(sampler, "_spread", lambda visited, rng, with_landmarks=True: (sources.append(("spread", with_landmarks)),
                                                                                   next(fresh))[1])  # fmt: skip
    monkeypatch.setattr(sampler, "_bound", lambda seen, visited, rng: (sources.append(("bound", len(seen))), next(fresh))[1])
    visited = set(measured)
    for ask in range(asks):
        cfg = sampler._restart_draw(measured, set(visited), __import__("random").Random(0))
        visited.add(config_key(cfg))
        if ask not in fail:
            measured[config_key(cfg)] = (cfg, 60.0)
    return sources, first, list(measured)


def test_after_a_restart_that_found_nothing_every_other_draw_is_apart_from_what_is_measured(monkeypatch):
    sources, first, keys = restart_phase_sources(monkeypatch, asks=12)
    # Every other draw from the model of every measurement so far, the phase's first among them.
    assert [source for source in sources[::2]] == [("parzen", sorted(keys[: 20 + i])) for i in range(0, 12, 2)]
    # The others: far-apart points, the start's landmarks left out, until five of them are measured; then the
    # model of those five alone.
    assert sources[1:10:2] == [("spread", False)] * 5
    assert sources[11] == ("parzen", sorted(keys[21:31:2]))
    # Not after a restart that found something, not on a plateau (10 measurements within 3 % of the best; 9 are
    # not one), not when off.
    assert restart_phase_sources(monkeypatch, asks=2, near=8)[0][1] == ("spread", False)  # 9 with the best
    for options in ({"stalled": False}, {"near": 9}, {"wide": False}):
        sources, first, keys = restart_phase_sources(monkeypatch, asks=2, **options)
        assert sources == [("parzen", sorted(keys[:20])), ("parzen", sorted(keys[:21]))], options


def test_a_stalled_restart_draws_apart_through_the_study_loop(monkeypatch):
    """The restart's asks go through the draw above in a real study: with a
    patience of 3 and a global phase of 4 it restarts several times in 60 trials."""
    calls = []
    real = OrdinalSampler._restart_draw
    monkeypatch.setattr(OrdinalSampler, "_restart_draw", lambda self, *a: (calls.append(1), real(self, *a))[1])
    sampler = OrdinalSampler(seed=0, global_phase=4, start_phase=8, patience=3, wide_restarts=True)
    outcome = run_study(StudyOptions(family=FAMILY, problem=PROBLEM, domains=DOMAINS, storage=None, study_name="w",
                                     measure=measure, budget_trials=60, timeout_s=None, sampler=sampler, seed=0))  # fmt: skip
    assert len(outcome.rows) == 60 and len(calls) >= 3 + 4


def test_the_default_strategy_draws_restarts_apart_and_ordinal_does_not():
    assert make_sampler("ordinal_global", 0).wide_restarts is True
    assert make_sampler("ordinal", 0).wide_restarts is False


def test_every_third_draw_of_a_restart_is_the_upper_bounds_but_not_on_a_plateau_nor_in_the_start(monkeypatch):
    sources, first, keys = restart_phase_sources(monkeypatch, asks=9, bound_every=3)
    # The phase's 1st, 4th and 7th measurement: the bound's; the others as without it (every other one, counted
    # from the phase's first, drawn apart after a restart that found nothing).
    assert [source for source, _ in sources] == ["bound", "spread", "parzen", "bound", "parzen", "spread", "bound",
                                                 "spread", "parzen"]  # fmt: skip
    assert [seen for source, seen in sources if source == "bound"] == [20, 23, 26]
    for options in ({"near": 9}, {"start": 0}, {"bound_every": 0}):
        sources, _, _ = restart_phase_sources(monkeypatch, asks=6, **{"bound_every": 3, **options})
        assert all(source != "bound" for source, _ in sources), options


def test_a_failed_upper_bound_proposal_is_not_followed_by_another(monkeypatch):
    """A failure leaves the count of measurements where it was; the bound never
    sees failures, so taken again it would go back to the same unmeasured (and
    failing) region, ask after ask. It is taken once a slot."""
    sources, _, _ = restart_phase_sources(monkeypatch, asks=5, bound_every=3, fail=frozenset({0}))
    assert [source for source, _ in sources] == ["bound", "parzen", "spread", "parzen", "bound"]
    assert [seen for source, seen in sources if source == "bound"] == [20, 23]


def test_the_upper_bound_tries_the_value_pair_never_measured():
    """Two switches and a wide parameter: every combination of the switches but
    both on is measured (alike, with noise). The model predicts both on from the
    main effects alone; its pair column is unmeasured, so its bound is the widest."""
    from optuna.distributions import CategoricalDistribution

    dists = {"a": CategoricalDistribution([0, 1]), "b": CategoricalDistribution([0, 1]),
             "c": CategoricalDistribution(list(range(8)))}  # fmt: skip
    configs = [{"a": a, "b": b, "c": c} for a in (0, 1) for b in (0, 1) for c in range(8)]
    noise = np.random.default_rng(0)
    measured = {config_key(cfg): (cfg, 100.0 * math.exp(noise.normal(0, 0.05))) for cfg in configs
                if (cfg["a"], cfg["b"]) != (1, 1) and cfg["c"] < 6}  # fmt: skip
    picks = []
    for seed in range(5):
        sampler = OrdinalSampler(seed=seed, pairs=True, bound_every=3)
        sampler.bind(dists, lambda cfg: True, {config_key(cfg): cfg for cfg in configs})
        cfg = sampler._bound(measured, set(measured), __import__("random").Random(seed))
        picks.append((cfg["a"], cfg["b"]))
    assert picks == [(1, 1)] * 5  # 8 of the 14 unvisited have both on


def test_the_upper_bound_is_the_posterior_mean_plus_one_sd_of_the_bayesian_regression():
    """Worked out here from a one-hot design of its own (a column per value and
    per pair of values of two parameters): the posterior mean X'(y - mean)
    through (X'X + I)^-1 and the variance s^2 x'(X'X + I)^-1 x, s^2 the
    residuals' mean square. The candidates are every unvisited configuration
    (fewer than the pool), so the pick is the argmax over all of them, and on
    this table it is not the mean's own favourite: the bound's term decides."""
    from optuna.distributions import CategoricalDistribution

    from tuner.search.samplers.ordinal_model import BOUND_KAPPA

    values = {"a": [0, 1, 2], "b": [0, 1, 2, 3], "c": [0, 1]}
    dists = {name: CategoricalDistribution(choices) for name, choices in values.items()}
    configs = [dict(zip(values, combo)) for combo in itertools.product(*values.values())]
    noise = np.random.default_rng(3)
    measured = {config_key(cfg): (cfg, float(math.exp(0.2 * cfg["a"] + 0.3 * cfg["c"] - 0.1 * cfg["b"] + noise.normal(0, 0.2))))
                for cfg in configs if not (cfg["a"] == 2 and cfg["c"] == 1) and noise.random() < 0.7}  # fmt: skip
    columns = {(name, value): i for i, (name, value) in enumerate((n, v) for n in values for v in values[n])}
    for x, y in itertools.combinations(values, 2):
        for u, v in itertools.product(values[x], values[y]):
            columns[(x, u, y, v)] = len(columns)

    def row(cfg):
        out = np.zeros(len(columns))
        out[[columns[(name, cfg[name])] for name in values]] = 1
        out[[columns[(x, cfg[x], y, cfg[y])] for x, y in itertools.combinations(values, 2)]] = 1
        return out

    design = np.array([row(cfg) for cfg, _ in measured.values()])
    target = np.log([value for _, value in measured.values()])
    inverse = np.linalg.inv(design.T @ design + np.eye(len(columns)))
    weights = inverse @ design.T @ (target - target.mean())
    variance = float(((target - target.mean() - design @ weights) ** 2).sum()) / (len(target) - 1)
    unvisited = [cfg for cfg in configs if config_key(cfg) not in measured]
    mean = np.array([row(cfg) @ weights for cfg in unvisited])
    spread = np.array([row(cfg) @ inverse @ row(cfg) for cfg in unvisited])
    want = unvisited[int(np.argmax(mean + BOUND_KAPPA * np.sqrt(variance * spread)))]
    # Neither the mean alone nor a bound without the residual variance picks it: (a 2, c 1) is never measured.
    assert (want["a"], want["c"]) == (2, 1)
    assert want != unvisited[int(np.argmax(mean))] and want != unvisited[int(np.argmax(mean + np.sqrt(spread)))]
    sampler = OrdinalSampler(seed=0, pairs=True, bound_every=3)
    sampler.bind(dists, lambda cfg: True, {config_key(cfg): cfg for cfg in configs})
    for seed in range(3):  # the candidates drawn in another order each time
        assert sampler._bound(measured, set(measured), __import__("random").Random(seed)) == want


def test_the_upper_bound_draws_its_pool_in_a_space_too_large_to_list():
    """Without an enumerated space the candidates are random feasible draws: as
    many as the pool holds, not the 200 a single unvisited draw may take."""
    from optuna.distributions import CategoricalDistribution

    from tuner.search.samplers.ordinal import UNSEEN
    from tuner.search.samplers.ordinal_model import BOUND_POOL

    dists = {name: CategoricalDistribution(list(range(10))) for name in "abcdef"}  # 10^6 points, none listed
    sampler = OrdinalSampler(seed=0, pairs=True, bound_every=3)
    sampler.bind(dists, lambda cfg: cfg["a"] != 0, None)
    drawn = sampler._random_unseen(set(), __import__("random").Random(0), BOUND_POOL)
    assert UNSEEN < len(drawn) <= BOUND_POOL and all(cfg["a"] != 0 for cfg in drawn)


def test_the_default_strategy_takes_the_upper_bound_in_its_restarts_and_ordinal_does_not():
    from tuner.search.samplers.ordinal import BOUND_EVERY

    assert make_sampler("ordinal_global", 0).bound_every == BOUND_EVERY > 0
    assert make_sampler("ordinal", 0).bound_every == 0


def test_a_restart_takes_the_upper_bound_through_the_study_loop(monkeypatch):
    calls = []
    real = OrdinalSampler._bound
    monkeypatch.setattr(OrdinalSampler, "_bound", lambda self, *a: (calls.append(1), real(self, *a))[1])
    sampler = OrdinalSampler(seed=0, global_phase=6, start_phase=8, patience=3, pairs=True, bound_every=3)
    outcome = run_study(StudyOptions(family=FAMILY, problem=PROBLEM, domains=DOMAINS, storage=None, study_name="u",
                                     measure=measure, budget_trials=60, timeout_s=None, sampler=sampler, seed=0))  # fmt: skip
    assert len(outcome.rows) == 60 and len(calls) >= 2


def test_a_parameter_of_many_values_shares_the_models_columns_among_neighbours():
    """The model's sums grow with the square of its columns and are kept for the latest
    positions of the history: 5,000 values of one parameter would take gigabytes. Past
    MODEL_VALUES values, runs of neighbouring values (in order) share a column."""
    from optuna.distributions import CategoricalDistribution

    from tuner.search.samplers.ordinal_model import MODEL_VALUES

    wide = list(range(5000, 0, -1))  # listed from the largest: columns follow the order of the values
    dists = {"x": CategoricalDistribution(wide), "h": CategoricalDistribution(["a", "b", "c"])}
    sampler = OrdinalSampler(seed=0, pairs=True)
    sampler.bind(dists, lambda cfg: True, None)
    assert sampler._main_width == MODEL_VALUES + 3 and sampler._width == MODEL_VALUES + 3  # no pairs: x is wide
    column = {value: sampler._model_columns[("x", value)] for value in wide}
    assert column[1] == column[2] == 0 and column[5000] == MODEL_VALUES - 1
    assert all(column[v] <= column[v + 1] for v in range(1, 5000))  # neighbours together, in order
    assert sorted(set(column.values())) == list(range(MODEL_VALUES))
    # A study over it proposes from the model as over any space.
    study = optuna.create_study(direction="maximize", sampler=sampler)
    for _ in range(150):
        trial = study.ask(fixed_distributions=dists)
        study.tell(trial, 1000.0 - abs(trial.params["x"] - 3000) / 10 + (trial.params["h"] == "b"))
    assert sampler._sums.state[0].shape == (MODEL_VALUES + 3, MODEL_VALUES + 3)
    # The model learns where the fast values lie (its best column of x beside the optimum's), and the
    # steps it ranks stay there: random draws would measure some 58 of the 64 columns in 150 trials.
    measured = sampler._recent[1]
    weights, _ = sampler._fit(measured)
    assert abs(int(np.argmax(weights[:MODEL_VALUES])) - column[3000]) <= 1
    assert len({column[cfg["x"]] for cfg, _ in measured.values()}) < 40


def test_a_space_of_at_most_model_values_per_parameter_keeps_one_column_per_value():
    from optuna.distributions import CategoricalDistribution

    from tuner.search.samplers.ordinal_model import MODEL_VALUES

    dists = {"x": CategoricalDistribution(list(range(MODEL_VALUES))), "h": CategoricalDistribution([0, 1])}
    sampler = OrdinalSampler(seed=0)
    sampler.bind(dists, lambda cfg: True, None)
    assert sampler._model_columns is sampler._columns and sampler._width == MODEL_VALUES + 2


BASIN_DISTS = {"a": optuna.distributions.CategoricalDistribution(list(range(16))),
               "b": optuna.distributions.CategoricalDistribution(list(range(16))),
               "c": optuna.distributions.CategoricalDistribution(["x", "y", "z"])}  # fmt: skip


def two_basins(cfg: dict) -> float:
    """A broad region at 97.5 % far from the grid's centre and a narrow peak
    (1.0, falling 4 % a position) beside the centre (8, 8): the Parzen draws
    gather in the broad region."""
    broad = 0.975 * math.exp(-((cfg["a"] - 2) ** 2 + (cfg["b"] - 13) ** 2) / 40)
    narrow = 1.0 - 0.04 * (abs(cfg["a"] - 9) + abs(cfg["b"] - 6))
    return max(broad, narrow, 0.3) * (1.0 if cfg["c"] == "x" else 0.995)


def plateau(cfg: dict) -> float:
    """A plateau: most of the grid within 3 % of the best, at (9, 6); each
    position towards it a gain above the measurement noise (0.3 %)."""
    return 1.0 - 0.003 * (abs(cfg["a"] - 9) + abs(cfg["b"] - 6)) - (0.0 if cfg["c"] == "x" else 0.001)


def basin_study(seed: int, start_climb: int, trials: int = 80, objective=two_basins,
                climb_from: str = "centre") -> tuple[OrdinalSampler, list]:  # fmt: skip
    sampler = OrdinalSampler(seed=seed, global_phase=30, start_phase=80, landmarks=("last",), landmarks_first=True,
                             start_climb=start_climb, climb_from=climb_from)  # fmt: skip
    sampler.bind(BASIN_DISTS, lambda cfg: True, None)
    plain = optuna.create_study(sampler=sampler, direction="maximize")
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        plain.optimize(lambda t: objective({n: t.suggest_categorical(n, d.choices) for n, d in BASIN_DISTS.items()}),
                       n_trials=trials)  # fmt: skip
    finally:
        optuna.logging.set_verbosity(verbosity)
    assert len({config_key(t.params) for t in plain.trials}) == trials  # never a configuration twice
    return sampler, plain.trials


def test_the_start_climb_takes_every_other_start_phase_measurement_from_the_centre():
    from tuner.search.samplers.ordinal_phases import CLIMB_EVERY

    for seed in range(3):
        sampler, trials = basin_study(seed, start_climb=12, trials=60)
        keys = [config_key(t.params) for t in trials]
        own = [i for i, key in enumerate(keys) if key in sampler._start_climb_keys]
        # Its first proposal is the centre (each ordered parameter's middle value), at the first even count of
        # measurements after the space-filling start; then one every CLIMB_EVERY measurements, 12 in all.
        assert trials[own[0]].params["a"] == trials[own[0]].params["b"] == 8
        assert own == list(range(6, 6 + CLIMB_EVERY * 12, CLIMB_EVERY)), own
        # Each later one is a step from the best of the climb's measurements before it.
        for before, i in zip(own, own[1:]):
            climb = {keys[j]: (trials[j].params, trials[j].value) for j in own if j <= before}
            best_key, (best, _) = max(climb.items(), key=lambda item: item[1][1])
            assert keys[i] in {key for key, _ in sampler._neighbours(best_key, best)}, (seed, i)
        off, _ = basin_study(seed, start_climb=0, trials=30)
        assert off._start_climb_keys is None


def test_a_climb_from_the_best_goes_on_from_the_fastest_measurement_of_the_start():
    from tuner.search.samplers.ordinal_phases import CLIMB_EVERY

    capped = 0
    for seed in range(3):
        sampler, trials = basin_study(seed, start_climb=12, trials=60, climb_from="best")
        keys = [config_key(t.params) for t in trials]
        values = [t.value for t in trials]
        own = [i for i, key in enumerate(keys) if key in sampler._start_climb_keys]
        # It begins at the first even count of measurements after the space-filling start (6), from the
        # fastest of them, measured already; then one proposal every CLIMB_EVERY measurements, each a step
        # from the climb's best so far, 11 at most (or fewer, once it falls behind the Parzen draws).
        first = max(range(6), key=lambda i: values[i])
        assert own[0] == first and own[1:] == list(range(6, 6 + CLIMB_EVERY * (len(own) - 1), CLIMB_EVERY)), own
        capped += len(own) == 12
        for before, i in zip(own[1:], own[2:]):
            climb = {keys[j]: (trials[j].params, values[j]) for j in own if j <= before}
            best_key, (best, _) = max(climb.items(), key=lambda item: item[1][1])
            assert keys[i] in {key for key, _ in sampler._neighbours(best_key, best)}, (seed, i)
        assert keys[6] in {key for key, _ in sampler._neighbours(keys[first], trials[first].params)}
    assert capped  # the cap ends a climb that keeps up
    with pytest.raises(ValueError, match="climb_from must be one of"):
        OrdinalSampler(climb_from="middle")


def test_on_a_plateau_every_start_phase_measurement_is_the_start_climbs_past_its_cap():
    from tuner.search.samplers.ordinal_phases import CLIMB_EVERY, crowded

    for seed in range(3):
        sampler, trials = basin_study(seed, start_climb=4, trials=80, objective=plateau)
        keys = [config_key(t.params) for t in trials]
        own = [i for i, key in enumerate(keys) if key in sampler._start_climb_keys]
        values = [t.value for t in trials]
        # The first ask once CROWD measurements lie within CROWD_SHARE of the best (after the climb's centre).
        crowd = next(n for n in range(own[0] + 1, len(trials)) if crowded(values[:n], max(values[:n])))
        assert own[0] == 6 and all(i % CLIMB_EVERY == 0 for i in own if i < crowd), (seed, own, crowd)
        assert len(own) > 4, own  # its cap of 4 lifted
        last = max(own)
        assert own[own.index(crowd):] == list(range(crowd, last + 1)), (seed, own, crowd)  # every measurement
        assert max(values[: last + 1]) == 1.0  # it climbed to the peak
        # It ended after `patience` of its measurements without progress, or with every step from its best
        # measured, and the Parzen draws went on.
        reached = max(own, key=lambda i: (values[i], -i))
        left = {key for key, _ in sampler._neighbours(keys[reached], trials[reached].params)} - set(keys[: last + 1])
        assert len([i for i in own if i > reached]) == sampler.patience or not left, (seed, reached, last)
        assert last < 79 and keys[last + 1] not in sampler._start_climb_keys


def test_the_start_climb_ranks_its_steps_by_its_own_measurements_not_the_draws_beside_it():
    rng = __import__("random").Random(0)
    sampler = OrdinalSampler(seed=0, start_climb=100)
    sampler.bind(BASIN_DISTS, lambda cfg: True, None)
    start = [{"a": a, "b": b, "c": c} for a, b, c in ((15, 15, "x"), (0, 0, "y"), (15, 0, "z"), (0, 15, "x"), (4, 4, "y"))]
    measured = {config_key(cfg): (cfg, 50.0) for cfg in start}
    centre = start_climb_step(sampler, measured, rng)
    measured[config_key(centre)] = (centre, 100.0)
    step = {**centre, "a": 9}
    sampler._start_climb_keys.add(config_key(step))
    measured[config_key(step)] = (step, 105.0)  # the climb's best
    for a in range(8):  # the draws beside it: a broad region at b = 15, a little faster
        draw = {**centre, "a": a, "b": 15}
        measured[config_key(draw)] = (draw, 110.0)
    proposal = start_climb_step(sampler, measured, rng)
    assert config_key(proposal) in {key for key, _ in sampler._neighbours(config_key(step), step)}
    assert proposal["b"] != 15, proposal  # not pulled into the draws' region
    # A model of every measurement would have taken it there.
    steps = {key: cfg for key, cfg in sampler._neighbours(config_key(step), step) if key not in measured}
    assert sampler._favourite(steps, measured, rng)["b"] == 15


def start_climb_step(sampler: OrdinalSampler, measured: dict, rng) -> dict | None:
    """The start climb's proposal with every measured configuration visited."""
    top = max((value for _, value in measured.values()), default=0.0)
    return sampler._start_climb_step(measured, set(measured), rng, top)


def test_the_start_climb_ends_after_its_patience_without_progress():
    from tuner.search.samplers.ordinal_phases import CLIMB_PATIENCE

    sampler = OrdinalSampler(seed=0, start_climb=100)
    sampler.bind(BASIN_DISTS, lambda cfg: True, None)
    rng = __import__("random").Random(0)
    centre = start_climb_step(sampler, {}, rng)
    measured = {config_key(centre): (centre, 100.0)}
    for _ in range(CLIMB_PATIENCE):  # each no better than the centre: no progress
        step = start_climb_step(sampler, measured, rng)
        assert step is not None
        measured[config_key(step)] = (step, 99.0)
    assert start_climb_step(sampler, measured, rng) is None
    measured[config_key(step)] = (step, 101.0)  # the last one gained after all: the climb goes on from it
    follow = start_climb_step(sampler, measured, rng)
    assert config_key(follow) in {key for key, _ in sampler._neighbours(config_key(step), step)}
    with pytest.raises(ValueError, match="start_climb must be >= 0, got -1"):
        OrdinalSampler(start_climb=-1)


def test_the_start_climb_ends_once_it_falls_behind_the_studys_best():
    from tuner.search.samplers.ordinal_phases import CLIMB_BEHIND, CLIMB_GRACE

    sampler = OrdinalSampler(seed=0, start_climb=100)
    sampler.bind(BASIN_DISTS, lambda cfg: True, None)
    rng = __import__("random").Random(0)
    elsewhere = {"a": 0, "b": 15, "c": "x"}
    measured = {config_key(elsewhere): (elsewhere, 100.0)}  # the study's best, not the climb's
    step = start_climb_step(sampler, measured, rng)
    value = 50.0
    while len(sampler._start_climb_keys) < CLIMB_GRACE:  # each a gain, and far behind
        measured[config_key(step)] = (step, value)
        value += 1.0
        step = start_climb_step(sampler, measured, rng)
        assert step is not None  # fewer than CLIMB_GRACE measured: not judged yet
    measured[config_key(step)] = (step, value)
    assert start_climb_step(sampler, measured, rng) is None  # 54 < 0.9 x 100
    measured[config_key(step)] = (step, CLIMB_BEHIND * 100.0 + 1.0)  # its last one within reach after all
    assert start_climb_step(sampler, measured, rng) is not None


def test_a_climb_from_the_centre_finds_a_narrow_peak_the_parzen_draws_pass_by():
    with_climb = sorted(first_hit for first_hit in (first_two_basins_hit(seed, 20) for seed in range(10)))
    without = sorted(first_hit for first_hit in (first_two_basins_hit(seed, 0) for seed in range(10)))
    assert with_climb[5] < without[5] and with_climb[-1] <= 60, (with_climb, without)


def first_two_basins_hit(seed: int, start_climb: int) -> int:
    _, trials = basin_study(seed, start_climb)
    return next((i for i, t in enumerate(trials, 1) if t.value >= 0.99), 81)


def test_the_default_strategy_climbs_from_the_centre_and_ordinal_does_not():
    from tuner.search.samplers.ordinal import START_CLIMB

    assert make_sampler("ordinal_global", 0).start_climb == START_CLIMB == 20
    assert make_sampler("ordinal", 0).start_climb == 0


class SparseFamily(Family):
    """Parameters of 16, 16, 16, 16, 12 and 4 values (a product of 3,145,728,
    Kernel Tuner's convolution's) of which only the 28 whose values add up to
    at most 2 are feasible; ``first`` values of the first (1: a product of
    196,608, listed in full)."""

    name, source, dtypes, arg_types = "sparse", "sparse.cu", ("float32",), ""

    def __init__(self, first: int = 16) -> None:
        sizes = [first, 16, 16, 16, 12, 4]
        self.params = tuple(Param(f"p{i}", tuple(range(size)), "a value") for i, size in enumerate(sizes))

    def constraint_violations(self, cfg, problem):
        return [] if sum(cfg.values()) <= 2 else [f"the values must add up to at most 2, got {sum(cfg.values())}"]

    def kernel_name(self, cfg):
        return "sparse"

    def defines(self, cfg, problem):
        return {name.upper(): str(value) for name, value in cfg.items()}

    def bytes_moved(self, cfg, problem):
        return 4 * problem.n

    make_inputs = reference = bind = allocate = None


@pytest.mark.parametrize("first", [16, 1])
def test_the_default_search_works_on_a_sparse_space_whether_or_not_it_is_listed(first):
    # A 3.1 M product with 28 feasible points is too large to list: random
    # draws find none of them, and the search once went on to its Parzen
    # phase without a measurement (IndexError). A walk of the product finds them.
    family = SparseFamily(first)
    assert (math.prod(len(p.values) for p in family.params) > MAX_ENUMERATED) == (first == 16)
    outcome = run_study(StudyOptions.for_strategy(family=family, problem=Problem("sparse", "float32", 1024), domains=None,
                                                  storage=None, study_name="s",
                                                  measure=lambda cfg: {"status": "ok", "bandwidth_gbs": 1.0 + cfg["p1"] + 0.5 * cfg["p2"]},
                                                  budget_trials=12, timeout_s=None, seed=0))  # fmt: skip
    keys = {config_key({p.name: row[p.name] for p in family.params}) for row in outcome.rows}
    assert outcome.stop_reason == "budget" and len(keys) == len(outcome.rows) == 12
    assert all(sum(row[p.name] for p in family.params) <= 2 for row in outcome.rows)
    assert outcome.asks_cpu_s / outcome.asks < 1.0  # seconds of CPU an ask
