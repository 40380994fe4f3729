"""A study's bookkeeping around one configuration: ask (the sampler claims
it), measure, record the row in the claim, show the trial on the dashboard,
finish the claim; keeping this worker's in-memory Optuna study up to date
from the claims; and settling what dead workers left (claims whose owner is
gone). See ``tuner.search.study.run`` for the rules these keep.
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import optuna
from optuna.distributions import CategoricalDistribution
from optuna.trial import TrialState

from tuner.data.results import columns, config_key, plain_value
from tuner.errors import FatalDeviceError, measure_raised
from tuner.families.base import Problem
from tuner.search.study.claims import CLAIMED, DONE, Claim, ClaimStore, claim_row
from tuner.search.study.distinct import Decision, DistinctSampler
from tuner.search.study.owners import Heartbeat, owner_alive

_logger = logging.getLogger("tuner.search.study.run")

# Statuses a measurement may return. The family's rules are checked before a
# configuration is asked for; "infeasible" comes back from a measurement only
# for a device limit known once the kernel is compiled (its shared memory or
# registers): a failed trial, never one that wins.
MEASURED_STATUSES = ("ok", "infeasible", "compile_error", "launch_error", "wrong_result")


def _nowhere(point: str) -> None:
    pass


@dataclass
class Run:
    """One worker's search: what its steps share.

    ``study`` is the worker's own Optuna study (in memory), which its sampler
    learns from and asks; ``dashboard`` the study in the persistent storage,
    which holds only finished trials, each written once its row is recorded
    in its claim. ``held`` holds the ``config_key`` of the claims this run is
    working on (any other claim of this process is a leftover of an earlier,
    interrupted run); ``at`` is called with the name of each point of the
    loop a configuration passes ("asking", "claiming", "asked", "claimed",
    "measured", "recorded", "added", "done").
    """

    study: optuna.Study
    dashboard: optuna.Study
    claims: ClaimStore
    dists: Mapping[str, CategoricalDistribution]
    owner: str
    worker: str
    lease_s: float
    problem: Problem
    source: str
    measure: Callable[[dict], dict]
    heartbeat: Heartbeat  # refreshes the lease of the claim being measured and recorded
    at: Callable[[str], None] = _nowhere
    held: set[str] = field(default_factory=set)
    # This worker's asked trials in ``study`` whose rows it has not learned: config_key -> trial number.
    asking: dict[str, int] = field(default_factory=dict)
    learned: set[str] = field(default_factory=set)  # config_key of the rows ``study`` holds


@dataclass
class Asked:
    """One ask: the configuration the sampler claimed, with the claim's trial
    number, or none where nothing was claimed (``idle`` counts towards
    ``patience``)."""

    key: str | None
    cfg: dict | None
    decision: Decision
    trial: int | None = None
    rescue: str = ""
    lost: int = 0
    idle: int = 0

    @property
    def marks(self) -> dict[str, str]:
        """What the dashboard's trial carries besides the row."""
        marks = {"rescue": self.rescue} if self.rescue else {}
        if self.decision.warm_start and self.decision.key == self.key:
            marks["warm_start"] = self.decision.warm_start
        return marks


# ---- the in-memory study, fed from the claims ------------------------------------


def learn(run: Run) -> None:
    """Bring ``run.study`` up to date with the claims: every row measured
    since it last looked, by any worker, becomes a finished trial (COMPLETE
    with the bandwidth where ok, else FAIL); this worker's asked trials are
    told so, and those whose claim was released are failed."""
    snapshot = run.claims.snapshot()
    for claim in sorted(snapshot.values(), key=lambda c: c.trial):
        if claim.row is None or claim.key in run.learned:
            continue
        run.learned.add(claim.key)
        row = claim_row(run.claims, claim)
        number = run.asking.pop(claim.key, None)
        if row is None:
            continue
        if number is not None:
            if is_ok(row):
                run.study.tell(number, float(row["bandwidth_gbs"]))
            else:
                run.study.tell(number, state=TrialState.FAIL)
            continue
        cfg = json.loads(claim.key)
        if all(name in cfg and cfg[name] in dist.choices for name, dist in run.dists.items()):
            # (A row of a configuration outside this run's space is not the sampler's business.)
            run.study.add_trial(_finished_trial(cfg, row, run.dists, {}))
    for key, number in list(run.asking.items()):
        claim = snapshot.get(key)
        if claim is None or claim.owner != run.owner:  # released: nothing was measured
            del run.asking[key]
            run.study.tell(number, state=TrialState.FAIL)


def ask(run: Run, distinct: DistinctSampler) -> Asked:
    """Learn what the claims hold, then ask ``run.study`` for a trial;
    ``distinct`` chooses and claims its configuration inside the ask."""
    try:
        learn(run)
        trial = run.study.ask(fixed_distributions=dict(run.dists))
        decision = distinct.decision(trial.number) or Decision(refused="the sampler was not asked")
        if decision.key is None:
            run.study.tell(trial, state=TrialState.FAIL)
            return Asked(None, None, decision, lost=1, idle=1)
        run.asking[decision.key] = trial.number
        rescue = decision.how if decision.how in ("neighbour", "random") else ""
        return Asked(decision.key, dict(decision.config), decision, trial=decision.trial, rescue=rescue)
    finally:
        run.at("asked")


def count_asked(outcome: Any, asked: Asked) -> None:  # a StudyOutcome
    outcome.infeasible += asked.decision.infeasible
    outcome.duplicate += asked.decision.repeated
    outcome.lost += asked.lost


# ---- one configuration -------------------------------------------------------------


def measure_asked(run: Run, asked: Asked, outcome: Any) -> None:
    """Measure an asked configuration and count it in ``outcome`` (a ``StudyOutcome``)."""
    try:
        row = _measure_claimed(run, asked)
    finally:
        run.held.discard(asked.key)
    if row is None:
        outcome.lost += 1
        return
    outcome.rows.append(row)
    outcome.measured += 1
    outcome.rescued += bool(asked.rescue)
    outcome.failed += not is_ok(row)


def _measure_claimed(run: Run, asked: Asked) -> dict | None:
    """Measure the claimed configuration and commit its row; the row, or
    None where the claim was lost meanwhile (judged stale)."""
    key, cfg = asked.key, asked.cfg
    settled = False  # the claim is recorded or released
    try:
        run.at("claimed")
        with run.heartbeat.holding(key):
            try:
                result = run.measure(dict(cfg))
            except FatalDeviceError as error:
                settled = True
                if error.row is None:
                    abandon(run, key, "device context lost")
                else:
                    # The configuration that poisoned the context: a measurement.
                    _commit(run, asked, _complete_row(_fault_row(error), cfg, asked.trial, run.problem, run.source))
                raise
            except Exception as exc:  # noqa: BLE001 - any failure of one config is data
                result = measure_raised(exc)
            run.at("measured")
            problem_text = _row_problem(result)
            if problem_text is not None:
                settled = True
                abandon(run, key, problem_text)
                raise ValueError(problem_text)
            row = _complete_row(result, cfg, asked.trial, run.problem, run.source)
            settled = True
            return row if _commit(run, asked, row) else None
    except BaseException as exc:
        if not settled:
            # Interrupted: leave no claim, so that the configuration is measured again.
            abandon(run, key, "interrupted" if not isinstance(exc, Exception) else f"{type(exc).__name__}: {exc}")
        raise


def _commit(run: Run, asked: Asked, row: dict) -> bool:
    """Record ``row`` in the claim (durable from here on), show it on the
    dashboard, finish the claim. False where the claim is no longer this worker's."""
    marks = asked.marks
    if not run.claims.record(asked.key, run.owner, _row_text(row), marks):
        _logger.warning("trial %d: the claim on %s was taken over while measuring; its row is dropped", asked.trial, asked.key)
        return False
    run.at("recorded")
    _show(run, asked.key, asked.trial, row, run.worker, marks)
    run.at("added")
    run.claims.finish(asked.key, run.owner)
    run.at("done")
    return True


def _show(run: Run, key: str, trial: int, row: dict, worker: str, marks: Mapping[str, str]) -> None:
    """Add the finished trial of ``row`` to the dashboard's study. The dashboard
    numbers trials as they finish; ``trial`` is the record's number, the rows' own."""
    cfg = json.loads(key)
    attrs = {"config_key": key, "trial": int(trial), "worker": worker, "status": row.get("status"), **marks}
    if not is_ok(row):
        attrs["reason"] = _reason(row)
    run.dashboard.add_trial(_finished_trial(cfg, row, run.dists, attrs))


def _finished_trial(
    cfg: dict, row: Mapping, dists: Mapping[str, CategoricalDistribution], attrs: dict
) -> optuna.trial.FrozenTrial:
    # Parameters outside the run's space (a row of an earlier run over other domains) are left off.
    params = {name: cfg[name] for name, dist in dists.items() if name in cfg and cfg[name] in dist.choices}
    space = {name: dists[name] for name in params}
    if is_ok(row):
        return optuna.trial.create_trial(params=params, distributions=space, value=float(row["bandwidth_gbs"]), user_attrs=attrs)
    return optuna.trial.create_trial(state=TrialState.FAIL, params=params, distributions=space, user_attrs=attrs)


def abandon(run: Run, key: str, reason: str) -> None:
    """Release the claim (nothing was measured): the configuration is left to others."""
    _logger.info("%s is left unmeasured: %s", key, reason)
    run.claims.release(key, run.owner)
    run.held.discard(key)


# ---- what dead workers left ----------------------------------------------------------


def recover(run: Run, snapshot: Mapping[str, Claim]) -> int:
    """Settle the claims of workers that are gone: release the unmeasured
    ones, and finish the measured ones (their trial added to the dashboard
    where it is not there yet). Returns how many claims it settled."""

    def stale(claim: Claim) -> bool:
        if claim.state == DONE:
            return False
        if claim.owner == run.owner:  # this process: stale unless being worked on
            return claim.key not in run.held
        return not owner_alive(claim, run.lease_s)

    if not any(stale(c) for c in snapshot.values()):
        return 0
    released, taken = run.claims.reap(stale, run.owner, run.worker)
    for claim in released:
        _logger.warning(
            "trial %d: its worker %s is gone before measuring %s; measured again later", claim.trial, claim.worker, claim.key
        )
    if taken:
        shown = {t.user_attrs.get("config_key") for t in run.dashboard.get_trials(deepcopy=False)}
        for claim in taken:
            row = claim_row(run.claims, claim)
            if row is not None and claim.key not in shown:
                _show(run, claim.key, claim.trial, row, claim.worker, claim.marks or {})
            run.claims.finish(claim.key, run.owner)
    return len(released) + len(taken)


# ---- checks and rows -------------------------------------------------------------------


def check_enqueued(cfg: dict, dists: Mapping[str, CategoricalDistribution]) -> dict:
    """``cfg`` (an enqueued configuration, possibly partial) in plain values.

    Raises:
        ValueError: it names a parameter not searched or a value outside its domain.
    """
    for name, value in cfg.items():
        if name not in dists:
            raise ValueError(f"enqueued configurations must name searched parameters {list(dists)}, got {name!r}")
        if plain_value(value) not in dists[name].choices:
            raise ValueError(f"enqueued {name} must be one of {list(dists[name].choices)}, got {value!r}")
    return {name: plain_value(value) for name, value in cfg.items()}


def _row_problem(result: Any) -> str | None:
    """What makes ``measure``'s result not a results row (a bug in ``measure``)."""
    if not isinstance(result, Mapping):
        return f"measure must return a mapping, got {type(result).__name__}"
    if result.get("status") not in MEASURED_STATUSES:
        return f"measure's row status must be one of {list(MEASURED_STATUSES)}, got {result.get('status')!r}"
    schema = columns()
    if set(result) - set(schema):
        extra = sorted(set(result) - set(schema))
        return f"measure's row must only have results columns, got extra {extra}"
    return None


def _fault_row(error: FatalDeviceError) -> dict:
    """The row a FatalDeviceError carries, as a launch_error row."""
    schema = columns()
    row = {k: v for k, v in dict(error.row).items() if k in schema}
    if row.get("status") not in MEASURED_STATUSES or row.get("status") == "ok":
        row["status"] = "launch_error"
    row.setdefault("error", str(error))
    return row


def _complete_row(result: Mapping, cfg: dict, number: int, problem: Problem, source: str) -> dict:
    row = {k: plain_value(v) for k, v in result.items()}
    for name, value in cfg.items():
        row.setdefault(name, value)
    row.setdefault("family", problem.family)
    row.setdefault("dtype", problem.dtype)
    row.setdefault("n", problem.n)
    row.setdefault("config_key", config_key(cfg))
    row.setdefault("source", source)
    row["trial"] = number
    if row["status"] == "ok" and not is_ok(row):
        # A measurement without a finite bandwidth cannot be ranked.
        row["status"] = "launch_error"
        row["error"] = f"status ok needs a finite bandwidth_gbs, got {result.get('bandwidth_gbs')!r}"
    return row


def _row_text(row: dict) -> str:
    # allow_nan=False: the dashboard parses attributes with JSON.parse.
    return json.dumps(row, sort_keys=True, allow_nan=False, default=str)


def is_ok(row: Mapping) -> bool:
    """Whether ``row`` measured a finite bandwidth (the only rows ranked)."""
    value = row.get("bandwidth_gbs")
    return row.get("status") == "ok" and isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _reason(row: Mapping) -> str:
    error = row.get("error")
    return f"{row['status']}: {error}" if error else str(row["status"])


def stop_reason(measured, budget_trials, deadline, asks, max_asks, idle, patience, unclaimed, snapshot, feasible) -> str:
    """Why the search stops now, or "" to go on."""
    reasons = {
        "budget": budget_trials is not None and measured >= budget_trials,
        "timeout": deadline is not None and time.monotonic() >= deadline,
        "exhausted": unclaimed == set() and not any(snapshot[k].state == CLAIMED for k in feasible),
        "ask_limit": max_asks is not None and asks >= max_asks,
        "stalled": idle >= patience,
    }
    return next((reason for reason, stop in reasons.items() if stop), "")
