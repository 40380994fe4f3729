"""The interaction sampler (tuner.search.samplers.interactions.InteractionSampler)
through the real study loop, on the GPU-free fake family and on a synthetic
replay table."""

from __future__ import annotations

import itertools
import sys
import time
from pathlib import Path

import optuna

from tuner.data.results import config_key
from tuner.search.samplers.interactions import InteractionSampler
from tuner.search.study.run import StudyOptions, make_sampler, run_study
from tuner.search.tables.community import SpaceTable, table_family, table_measure, table_problem

sys.path.insert(0, str(Path(__file__).parent / "data"))
from fake_family import OPTIMUM_GBS, PROBLEM, FakeFamily, is_wrong, measure  # noqa: E402

FAMILY = FakeFamily()
DOMAINS = {p.name: list(p.values) for p in FAMILY.params}


def study(seed: int, budget: int, name="s", ask_ahead: bool = True):
    return run_study(StudyOptions.for_strategy("interactions", family=FAMILY, problem=PROBLEM, domains=DOMAINS, storage=None,
                                               study_name=name, measure=measure, budget_trials=budget, timeout_s=None,
                                               seed=seed, ask_ahead=ask_ahead))  # fmt: skip


def test_make_sampler_knows_it():
    assert isinstance(make_sampler("interactions", 3), InteractionSampler)


def test_it_never_asks_twice_respects_the_constraint_and_reaches_the_optimum():
    for seed in range(4):
        outcome = study(seed, 40, name=f"s{seed}")
        keys = [config_key({k: row[k] for k in DOMAINS}) for row in outcome.rows]
        assert len(set(keys)) == len(keys) == 40
        assert all(row["unroll"] * row["vector_width"] <= 16 for row in outcome.rows)
        # It proposes feasible, unmeasured configurations itself: the loop never rescues.
        assert outcome.rescued == 0 and outcome.infeasible == 0 and outcome.duplicate == 0
        assert outcome.best["bandwidth_gbs"] == OPTIMUM_GBS


def test_failed_configurations_are_learnt_as_slow():
    # The fake family's wrong results report a bandwidth far above the optimum: a sampler that
    # ranked them would keep proposing their neighbours. Taken in at the worst rate, they are avoided.
    outcome = study(0, 60)
    failed = [row for row in outcome.rows if is_wrong(row)]
    assert 0 < len(failed) <= 3, len(failed)


def test_a_run_repeats_for_a_seed():
    # Strictly ask, measure, tell: a trial asked ahead sees the one before it told or not, as the threads fall.
    first = [tuple(row[k] for k in DOMAINS) for row in study(5, 30, name="a", ask_ahead=False).rows]
    second = [tuple(row[k] for k in DOMAINS) for row in study(5, 30, name="b", ask_ahead=False).rows]
    assert first == second


def test_restrictions_of_a_replay_table_are_never_proposed():
    # A table whose absent configurations (a + b > 14) are infeasible: none is ever measured.
    entries = {(a, b, s): ("ok", float(10 + a * b + 5 * s)) for a, b, s in itertools.product(range(10), range(10), (0, 1))
               if a + b <= 14}  # fmt: skip
    table = SpaceTable("syn", {"a": list(range(10)), "b": list(range(10)), "s": [0, 1]}, ["a + b <= 14"], entries)
    outcome = run_study(StudyOptions.for_strategy("interactions", family=table_family(table), problem=table_problem(table),
                                                  domains=dict(table.params), storage=None, study_name="t",
                                                  measure=table_measure(table), budget_trials=50, timeout_s=None,
                                                  seed=1))  # fmt: skip
    assert all(row["a"] + row["b"] <= 14 for row in outcome.rows)
    assert outcome.infeasible == 0 and outcome.rescued == 0


def test_an_ask_stays_cheap_on_a_space_of_a_million_points():
    # 10^6 points (six parameters of 10 values), not enumerated: each ask scores a random share.
    names = [f"p{i}" for i in range(6)]
    dists = {name: optuna.distributions.CategoricalDistribution(list(range(10))) for name in names}
    sampler = InteractionSampler(seed=0)
    sampler.bind(dists, lambda cfg: True, None)
    target = optuna.create_study(direction="maximize", sampler=sampler)
    asks = []
    for _ in range(60):
        started = time.perf_counter()
        trial = target.ask(dists)
        asks.append(time.perf_counter() - started)
        target.tell(trial, 1.0 + sum((trial.params[n] - 3) ** 2 for n in names) ** -0.5 if any(
            trial.params[n] != 3 for n in names) else 10.0)  # fmt: skip
    assert len({tuple(t.params.values()) for t in target.trials}) == 60
    assert sorted(asks)[len(asks) // 2] < 1.0, sorted(asks)
