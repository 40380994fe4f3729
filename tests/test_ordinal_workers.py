"""The default sampler among several workers: a proposal another worker
claims meanwhile is replaced cheaply (no new history read, no new fit), and
claimed configurations are never proposed."""

from __future__ import annotations

import sys
from pathlib import Path

from tuner.data.results import config_key
from tuner.search.samplers.ordinal import OrdinalSampler
from tuner.search.study import run as study_module
from tuner.search.study.claims import TAKEN
from tuner.search.study.run import StudyOptions, run_study

sys.path.insert(0, str(Path(__file__).parent / "data"))
from fake_family import PROBLEM, FakeFamily, measure  # noqa: E402

FAMILY = FakeFamily()
DOMAINS = {p.name: list(p.values) for p in FAMILY.params}
OTHER = "elsewhere:1:0"  # a worker on another host


class RacingClaims:
    """The study's claims, where another worker claims each trial's first
    proposal just before this worker does (and gives it up right after)."""

    def __init__(self, real) -> None:
        self.real, self.lost, self.won = real, {}, {}

    def claim(self, key, trial, owner, worker, budget):
        if trial not in self.lost:
            self.lost[trial] = key
            assert self.real.claim(key, -1, OTHER, "other", None) == "ok"
            answer = self.real.claim(key, trial, owner, worker, budget)
            assert answer == TAKEN
            self.real.release(key, OTHER)
            return answer
        answer = self.real.claim(key, trial, owner, worker, budget)
        if answer == "ok":
            self.won[trial] = key
        return answer

    def __getattr__(self, name):
        return getattr(self.real, name)


def test_a_proposal_claimed_meanwhile_is_replaced_without_reading_the_history_again(monkeypatch):
    racing = {}
    real_open = study_module.open_claims
    monkeypatch.setattr(
        study_module, "open_claims", lambda *a, **k: racing.setdefault("claims", RacingClaims(real_open(*a, **k)))
    )
    reads = []
    real_history = OrdinalSampler._history
    monkeypatch.setattr(
        OrdinalSampler, "_history", lambda self, study, trial: reads.append(trial.number) or real_history(self, study, trial)
    )

    outcome = run_study(StudyOptions.for_strategy("ordinal", family=FAMILY, problem=PROBLEM, domains=DOMAINS, storage=None,
                                                  study_name="s", measure=measure, budget_trials=25, timeout_s=None,
                                                  seed=3))  # fmt: skip

    keys = [config_key({k: row[k] for k in DOMAINS}) for row in outcome.rows]
    assert len(keys) == len(set(keys)) == 25  # distinct, the budget exactly
    claims = racing["claims"]
    assert outcome.duplicate == len(claims.lost) >= 25  # every trial lost its first proposal
    assert sorted(reads) == sorted(set(reads))  # one history read per trial, however often it was asked
    assert all(claims.won[trial] != claims.lost[trial] for trial in claims.won)  # replaced by another configuration


def test_claimed_configurations_are_not_proposed():
    sampler = OrdinalSampler(seed=0)
    first = run_study(StudyOptions(family=FAMILY, problem=PROBLEM, domains=DOMAINS, storage=None, study_name="a",
                                   measure=measure, budget_trials=12, timeout_s=None, sampler=sampler, seed=0))  # fmt: skip
    proposed_alone = [config_key({k: row[k] for k in DOMAINS}) for row in first.rows]
    # The same search, where the configurations it chose alone are claimed elsewhere from the start.
    taken_sampler = OrdinalSampler(seed=0)
    original = taken_sampler.taken
    taken_sampler.taken = lambda keys: original(keys | set(proposed_alone[6:]))
    second = run_study(StudyOptions(family=FAMILY, problem=PROBLEM, domains=DOMAINS, storage=None, study_name="b",
                                    measure=measure, budget_trials=12, timeout_s=None, sampler=taken_sampler,
                                    seed=0))  # fmt: skip
    chosen = [config_key({k: row[k] for k in DOMAINS}) for row in second.rows]
    assert not set(chosen) & set(proposed_alone[6:])
    assert second.duplicate == 0  # passed over by the sampler itself, not by the claims


def test_the_farthest_candidate_is_found_with_the_same_figures_as_one_at_a_time():
    import random

    import numpy as np

    from tuner.search.samplers.ordinal_grid import grid_distance, nearest_distances

    rng = random.Random(0)
    ordered = [True, True, False, True]  # an unordered parameter is a label >= 10

    def point():
        return [
            rng.choice([0.0, 0.25, 0.5, 0.75, 1.0]),
            rng.random(),
            float(rng.randrange(3)) + 10.0,
            rng.choice([0.0, 1 / 3, 2 / 3, 1.0]),
        ]

    points = [point() for _ in range(70)]
    candidates = [point() for _ in range(100)]  # more than one chunk of 32
    expected = [min(grid_distance(c, p) for p in points) for c in candidates]
    assert nearest_distances(candidates, np.array(points), ordered).tolist() == expected  # bit for bit
