"""``DistinctSampler``, which wraps the sampler of the strategy a study names
(``tuner.search.samplers.registry``) so that every trial is a distinct, feasible
configuration claimed for this worker before it exists (why a sampler: see
``tuner.search.study.run``).
"""

from __future__ import annotations

import itertools
import json
import random
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution
from optuna.trial import FrozenTrial, TrialState

from tuner.data.results import config_key, plain_value
from tuner.families.base import Family, Problem
from tuner.search.samplers.feasible_draws import FeasibleDraws
from tuner.search.samplers.space_aware import BudgetAware, Foreseeing, SpaceAware
from tuner.search.study.claims import (
    BUDGET,
    OK,
    ClaimStore,
)
from tuner.search.study.owners import this_owner

# Proposals asked of the wrapped sampler per trial before a rescue (fewer where
# it proposes the same configuration twice: it is stuck).
PROPOSALS_PER_ASK = 8
RANDOM_TRIES = 200  # random draws of a rescue where the space is not enumerated


def distributions(family: Family, domains: Mapping[str, Sequence] | None) -> dict[str, CategoricalDistribution]:
    """One categorical distribution per family parameter, over ``domains`` (or
    the parameter's full domain where it is not listed), in family order.

    Raises:
        ValueError: a domain names an unknown parameter, is empty, or holds a
            value the parameter's rule does not accept (the same rule sweeps
            and the config's validation apply, ``Param.accepts``).
    """
    domains = dict(domains or {})
    unknown = sorted(set(domains) - set(family.param_names))
    if unknown:
        raise ValueError(f"domains must name parameters of family {family.name!r} ({list(family.param_names)}), got {unknown}")
    result = {}
    for param in family.params:
        values = [plain_value(v) for v in domains.get(param.name, param.values)]
        if not values:
            raise ValueError(f"domain of {param.name} must not be empty, got {values}")
        outside = [v for v in values if not param.accepts(v)]
        if outside:
            raise ValueError(f"domain of {param.name} must hold values that are {param.rule_description()}, got {outside}")
        # Duplicated choices would skew the samplers; keep the first of each.
        result[param.name] = CategoricalDistribution(tuple(dict.fromkeys(values)))
    return result


@dataclass
class Decision:
    """What ``DistinctSampler`` chose for one trial."""

    config: dict | None = None  # the claimed configuration
    key: str | None = None
    trial: int | None = None  # the claim's trial number (the study's, from its claims)
    how: str = ""  # enqueued | sampler | neighbour | random
    refused: str = ""  # why nothing was claimed
    warm_start: str = ""  # where a warm start's configuration came from
    infeasible: int = 0  # infeasible proposals passed over
    repeated: int = 0  # claimed or measured proposals passed over
    upcoming: list[dict] = field(default_factory=list)  # what the sampler would likely propose next, unclaimed and feasible


class DistinctSampler(optuna.samplers.BaseSampler):
    """A sampler whose every trial is a feasible configuration claimed for it.

    Wraps ``base`` (any Optuna sampler). At the start of each trial
    (``before_trial``) it picks and claims, in ``claims``, the trial's whole
    configuration; ``sample_relative`` then hands it to Optuna over the fixed
    search space ``dists``. In order it tries: the ``enqueue`` configurations
    (partial ones completed by ``base``), each until some configuration that
    matches it is claimed; for a ``BruteForceSampler`` base over an
    enumerable space, the feasible configurations in order; else up to
    ``PROPOSALS_PER_ASK`` whole configurations proposed by ``base`` (fewer
    where it proposes one twice); then the neighbours of its first proposal
    (configurations one parameter away, then two), in random order; then
    unclaimed feasible configurations at random. Infeasible and claimed
    proposals are passed over without a trial. See the module's docstring
    for why this is a sampler.

    ``decision(number)`` tells the loop what was claimed for trial
    ``number``: where nothing could be (``budget`` reached by other workers
    meanwhile, nothing unclaimed found), ``refused`` says why, and the trial's
    parameters come from ``base``. A decision for an enqueued configuration
    whose ``config_key`` is in ``warm_start`` names its source there (the loop
    puts it on the trial as the user attribute ``warm_start``).

    What ``base`` may learn beyond Optuna's sampler interface it learns
    through ``SpaceAware``, where it implements it: the space and its
    feasible configurations once, the claimed configurations before each
    proposal; and through ``BudgetAware``, the study's budget and the size of
    its space, once. Nothing else is set on it.

    ``held`` (the run's) gets the ``config_key`` of every configuration this
    sampler claims; the run takes it out once the claim is settled. ``at``,
    where given, is called with "claiming" before each claim is tried.
    """

    def __init__(
        self,
        base: optuna.samplers.BaseSampler,
        family: Family,
        problem: Problem,
        dists: Mapping[str, CategoricalDistribution],
        claims: ClaimStore,
        *,
        budget: int | None = None,
        enqueue: Iterable[Mapping] = (),
        seed: int = 0,
        worker: str | None = None,
        warm_start: Mapping[str, str] | None = None,
        held: set[str] | None = None,
        at: Callable[[str], None] | None = None,
    ) -> None:
        self.base = base
        self.held = held if held is not None else set()
        self.at = at
        self.family = family
        self.problem = problem
        self.dists = dict(dists)
        self.claims = claims
        self.budget = budget
        self.enqueue = [dict(cfg) for cfg in enqueue]
        self.seed = seed
        self.owner = this_owner()
        self.worker = worker or self.owner
        listed = family.listed_space(problem, {name: d.choices for name, d in self.dists.items()})
        self.feasible = None if listed is None else {config_key(cfg): cfg for cfg in listed}
        self._ordered = list(self.feasible.items()) if self.feasible is not None else None
        self._cursor = 0
        self._spent: set[int] = set()  # enqueued configurations dealt with
        self._configs: dict[str, dict] = {}  # config_key -> config, parsed once
        self._violates: dict[str, bool] = {}
        self._decisions: dict[int, Decision] = {}
        self.warm_start = dict(warm_start or {})
        self.draws = None
        if self.feasible is None:  # not checked through _infeasible: a walk's millions of keys are not kept
            self.draws = FeasibleDraws({name: d.choices for name, d in self.dists.items()}, _whole_check(family, problem),
                                       family.scoped_rules(problem), seed)  # fmt: skip
        if isinstance(base, BudgetAware):
            base.plan(budget, None if self.feasible is None else len(self.feasible))
        self._space_aware = isinstance(base, SpaceAware)
        if self._space_aware:
            base.bind(self.dists, lambda cfg: not self._infeasible(cfg, config_key(cfg)), self.feasible, self.draws)

    # Optuna's sampler interface.

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        return dict(self.dists)

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        decision = self._decisions.get(trial.number) or self._decide(study, trial)
        return {name: value for name, value in (decision.config or {}).items() if name in search_space}

    def sample_independent(
        self, study: optuna.Study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution
    ) -> Any:
        decision = self._decisions.get(trial.number)
        if decision is not None and decision.config is not None and param_name in decision.config:
            return decision.config[param_name]
        return self.base.sample_independent(study, trial, param_name, param_distribution)

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self.base.before_trial(study, trial)
        self._decide(study, trial)

    def after_trial(self, study: optuna.Study, trial: FrozenTrial, state: TrialState, values: Sequence[float] | None) -> None:
        self.base.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        self.base.reseed_rng()

    def known_feasible(self) -> dict[str, dict] | None:
        """Every feasible configuration by its ``config_key``, where known: the
        listed space, or, on a space too large to list, what a walk of its
        whole product found (``FeasibleDraws``); else None."""
        if self.feasible is None and self.draws is not None and self.draws.walked_whole:
            return self.draws.found
        return self.feasible

    def decision(self, number: int) -> Decision | None:
        """What was claimed for trial ``number`` (forgotten once asked)."""
        return self._decisions.pop(number, None)

    # Choosing.

    def _decide(self, study: optuna.Study, trial: FrozenTrial) -> Decision:
        decision = Decision()
        if self.draws is not None:
            self.draws.allow()  # each ask walks a sparse product a bounded share further
        self._decisions[trial.number] = decision
        snapshot = self.claims.snapshot()
        taken, number = set(snapshot), self.claims.next_trial(snapshot)
        if self._space_aware:
            self.base.taken(taken)
        for cfg, how in self._candidates(study, trial, taken):
            key = config_key(cfg)
            proposed = how in ("enqueued", "sampler")  # rescues are draws, not proposals
            if key in taken:
                decision.repeated += proposed
                continue
            if self._infeasible(cfg, key):
                decision.infeasible += proposed
                continue
            if self.at is not None:
                self.at("claiming")
            answer = self.claims.claim(key, number, self.owner, self.worker, self.budget)
            if answer == OK:
                self.held.add(key)
                decision.config, decision.key, decision.how = cfg, key, how
                decision.trial = self.claims.numbered(key)
                if how == "enqueued":
                    decision.warm_start = self.warm_start.get(key, "")
                elif how == "sampler" and isinstance(self.base, Foreseeing):
                    taken.add(key)
                    decision.upcoming = [cfg for cfg in self.base.upcoming()
                                         if (k := config_key(cfg)) not in taken and not self._infeasible(cfg, k)]  # fmt: skip
                return decision
            if answer == BUDGET:
                decision.refused = "the budget was taken by other workers"
                return decision
            taken.add(key)  # claimed by another worker since the snapshot
            decision.repeated += 1
        decision.refused = "no unclaimed feasible configuration found"
        return decision

    def _candidates(self, study: optuna.Study, trial: FrozenTrial, taken: set[str]) -> Iterator[tuple[dict, str]]:
        rng = random.Random(self.seed * 1_000_003 + trial.number)
        for index, wanted in enumerate(self.enqueue):
            if index in self._spent:
                continue
            if any(_matches(self._config(key), wanted) for key in taken):
                self._spent.add(index)  # done, here or by another worker
                continue
            if wanted.keys() >= self.dists.keys():
                yield wanted, "enqueued"
            else:
                for _ in range(2):
                    yield {**self._propose(study, trial), **wanted}, "enqueued"
                if self.feasible is not None:
                    matching = [cfg for cfg in self.feasible.values() if _matches(cfg, wanted)]
                    rng.shuffle(matching)
                    yield from ((cfg, "enqueued") for cfg in matching)
            self._spent.add(index)  # nothing that matches it can be claimed

        if self._ordered is not None and isinstance(self.base, optuna.samplers.BruteForceSampler):
            # Brute force: the feasible configurations in order.
            for i in range(len(self._ordered)):
                index = (self._cursor + i) % len(self._ordered)
                key, cfg = self._ordered[index]
                if key not in taken:
                    self._cursor = index
                    yield cfg, "sampler"
            return

        seen: set[str] = set()
        favourite = None
        for _ in range(PROPOSALS_PER_ASK):
            cfg = self._propose(study, trial)
            favourite = favourite or cfg
            key = config_key(cfg)
            if key in seen:
                break  # the sampler is stuck on it
            seen.add(key)
            yield cfg, "sampler"

        # Rescues: near what the sampler wants, else anywhere.
        if favourite is not None:
            yield from ((cfg, "neighbour") for cfg in self._neighbours(favourite, rng, taken))
        if self.feasible is not None:
            left = [key for key in self.feasible if key not in taken]
            while left:
                i = rng.randrange(len(left))
                left[i], left[-1] = left[-1], left[i]
                yield self.feasible[left.pop()], "random"
        else:
            for _ in range(RANDOM_TRIES):
                cfg = self.draws.random(rng)
                if cfg is not None:
                    yield cfg, "random"
            # A sparse space: what a walk of its product has found (where random draws found nothing to claim).
            yield from ((cfg, "random") for cfg in self.draws.walked(rng, RANDOM_TRIES, taken, config_key))

    def _neighbours(self, cfg: dict, rng: random.Random, taken: set[str]) -> Iterator[dict]:
        """Unclaimed feasible configurations that differ from ``cfg`` in one
        parameter, then in two, each group in random order."""
        names = [name for name, dist in self.dists.items() if len(dist.choices) > 1]
        for distance in (1, 2):
            found = []
            for changed in itertools.combinations(names, distance):
                others = [[v for v in self.dists[name].choices if v != cfg[name]] for name in changed]
                for values in itertools.product(*others):
                    candidate = {**cfg, **dict(zip(changed, values))}
                    key = config_key(candidate)
                    if key not in taken and not self._infeasible(candidate, key):
                        found.append(candidate)
            rng.shuffle(found)
            yield from found

    def _propose(self, study: optuna.Study, trial: FrozenTrial) -> dict:
        """One whole configuration from ``base``, asked as Optuna's trial would."""
        space = self.base.infer_relative_search_space(study, trial)
        relative = self.base.sample_relative(study, trial, space) if space else {}
        cfg = {}
        for name, dist in self.dists.items():
            if name in relative and plain_value(relative[name]) in dist.choices:
                value = relative[name]
            elif dist.single():
                value = dist.choices[0]
            else:
                value = self.base.sample_independent(study, trial, name, dist)
            cfg[name] = plain_value(value)
        return cfg

    def _config(self, key: str) -> dict:
        cfg = self._configs.get(key)
        if cfg is None:
            cfg = self._configs[key] = json.loads(key)
        return cfg

    def _infeasible(self, cfg: dict, key: str) -> bool:
        answer = self._violates.get(key)
        if answer is None:
            answer = self._violates[key] = bool(self.family.violations(cfg, self.problem))
        return answer


def _whole_check(family: Family, problem: Problem) -> Callable[[dict], bool]:
    """Whether a configuration of the searched domains is feasible: ``violations``, or,
    where that is only the values' rules and the dtype (``Family.space``'s
    reading), the rules between parameters alone: every searched value
    was accepted once (``distributions``), not once per configuration walked."""
    if type(family).violations is Family.violations and problem.dtype in family.dtypes:
        return lambda cfg: not family.constraint_violations(cfg, problem)
    return lambda cfg: not family.violations(cfg, problem)


def _matches(cfg: Mapping, wanted: Mapping) -> bool:
    return all(name in cfg and cfg[name] == value for name, value in wanted.items())
