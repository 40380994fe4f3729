"""A study's bookkeeping around one configuration: claim, measure, record
the row in the claim, tell Optuna; and the settling of what dead workers left
(rows recorded but never told, claims whose owner is gone). See
``tuner.search.study`` for the rules these keep.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import optuna
from optuna.distributions import CategoricalDistribution
from optuna.storages import BaseStorage
from optuna.trial import TrialState

from tuner.data.results import columns, config_key, plain_value
from tuner.errors import FatalDeviceError, measure_raised
from tuner.families.base import Problem
from tuner.search.claim_records import claim_row
from tuner.search.claims import (
    CLAIMED,
    DONE,
    Claim,
    ClaimStore,
)
from tuner.search.owners import Heartbeat, owner_alive
from tuner.search.samplers import (
    _HELD,
    _at,
    _Decision,
)

_logger = logging.getLogger("tuner.search.study")


class _AsksInFlight:
    """Asks submitted, not finished. Tests that kill a worker at a hook point
    wait until none is, so the kill never lands between a trial's creation and its claim."""

    def __init__(self) -> None:
        self._count, self._idle = 0, threading.Condition()

    def begin(self, change: int = 1) -> None:
        with self._idle:
            self._count += change
            self._idle.notify_all()

    def end(self) -> None:
        self.begin(-1)

    def wait_idle(self) -> None:
        with self._idle:
            self._idle.wait_for(lambda: self._count == 0)


ASKS_IN_FLIGHT = _AsksInFlight()

# Statuses a measurement may return; "infeasible" is decided here, never measured.
MEASURED_STATUSES = ("ok", "compile_error", "launch_error", "wrong_result")

# User attributes copied from the row onto every measured trial (for the dashboard).
# A trial carries only what the dashboard needs to tell trials apart; its full
# results row lives in its claim (``study_rows`` reads it there). Every user
# attribute is one more storage write per trial, under the storage's lock.
TRIAL_ATTRS = ("status",)


@dataclass
class _Run:
    """What the loop's helpers share."""

    study: optuna.Study
    storage: BaseStorage  # the study's, for its trials by number (BaseStorage's public methods)
    study_id: int
    claims: ClaimStore
    owner: str
    worker: str
    lease_s: float
    problem: Problem
    source: str
    measure: Callable[[dict], dict]
    heartbeat: Heartbeat  # refreshes the lease of the claim being measured


def _measure_claimed(run: _Run, trial: optuna.Trial, cfg: dict, key: str) -> dict | None:
    """Measure the claimed ``cfg`` in ``trial``, record and tell it; the row,
    or None where the claim was lost meanwhile (judged stale)."""
    settled = False  # the claim is recorded or released
    try:
        _at("claimed")
        try:
            with run.heartbeat.holding(key):
                result = run.measure(dict(cfg))
        except FatalDeviceError as error:
            settled = True
            if error.row is None:
                _abandon(run, trial, key, "device context lost")
            else:
                # The configuration that poisoned the context: a measurement.
                row = _complete_row(_fault_row(error), cfg, trial.number, run.problem, run.source)
                _commit(run, trial.number, key, row)
            raise
        except Exception as exc:  # noqa: BLE001 - any failure of one config is data
            result = measure_raised(exc)
        _at("measured")
        problem_text = _row_problem(result)
        if problem_text is not None:
            settled = True
            _abandon(run, trial, key, problem_text)
            raise ValueError(problem_text)
        row = _complete_row(result, cfg, trial.number, run.problem, run.source)
        settled = True
        return row if _commit(run, trial.number, key, row) else None
    except optuna.exceptions.UpdateFinishedTrialError:
        # Another worker took this one for dead (its lease expired) and
        # failed the trial; it no longer holds the claim either.
        _logger.warning("trial %d was finished by another worker; %s is left to others", trial.number, key)
        if not settled:
            run.claims.release(key, run.owner)
        return None
    except BaseException as exc:
        if not settled:
            # Interrupted: leave no claim, so that the configuration is measured again.
            _abandon(run, trial, key, "interrupted" if not isinstance(exc, Exception) else f"{type(exc).__name__}: {exc}")
        raise


def _commit(run: _Run, number: int, key: str, row: dict) -> bool:
    """Record ``row`` in the claim (durable from here on), then on the trial,
    and tell Optuna. False where the claim is no longer this worker's."""
    text = _row_text(row)
    if not run.claims.record(key, run.owner, text):
        _logger.warning("trial %d: the claim on %s was taken over while measuring; its row is dropped", number, key)
        _fail_trial(run, number, "claim taken over by another worker while measuring")
        return False
    _at("recorded")
    _finish_trial(run, number, row)
    run.claims.finish(key, run.owner)
    _at("done")
    return True


def _finish_trial(run: _Run, number: int, row: dict) -> None:
    """Put ``row``'s status on a trial and tell it (COMPLETE with the bandwidth where
    ok, else FAIL with the reason); nothing where it is finished already
    (by a worker that took this one for dead: the row stays in the claim,
    where ``study_rows`` finds it)."""
    storage = run.storage
    try:
        trial_id = storage.get_trial_id_from_study_id_trial_number(run.study_id, number)
        if storage.get_trial(trial_id).state.is_finished():
            return
        for name in TRIAL_ATTRS:
            storage.set_trial_user_attr(trial_id, name, row.get(name))
        _at("attrs")
        if _is_ok(row):
            run.study.tell(number, float(row["bandwidth_gbs"]), skip_if_finished=True)
        else:
            storage.set_trial_user_attr(trial_id, "reason", _reason(row))
            run.study.tell(number, state=TrialState.FAIL, skip_if_finished=True)
    except KeyError:
        _logger.warning("trial %d is not in the study's storage; its row is kept in its claim", number)
        return
    except optuna.exceptions.UpdateFinishedTrialError:
        _logger.warning("trial %d was finished by another worker; its row is kept in its claim", number)
        return
    _at("told")


def _abandon(run: _Run, trial: optuna.Trial, key: str, reason: str) -> None:
    """Release the claim (nothing was measured) and fail the trial."""
    try:
        run.claims.release(key, run.owner)
    finally:
        _fail_trial(run, trial.number, reason)


def _fail_trial(run: _Run, number: int, reason: str) -> None:
    """Tell trial ``number`` FAIL with ``reason``, unless it is finished."""
    storage = run.storage
    try:
        trial_id = storage.get_trial_id_from_study_id_trial_number(run.study_id, number)
        if storage.get_trial(trial_id).state.is_finished():
            return
        storage.set_trial_user_attr(trial_id, "reason", reason)
        run.study.tell(number, state=TrialState.FAIL, skip_if_finished=True)
    except (KeyError, optuna.exceptions.UpdateFinishedTrialError):
        pass  # gone, or finished by another worker meanwhile


def _recover(run: _Run, snapshot: Mapping[str, Claim]) -> int:
    """Settle the claims of workers that are gone: release the unmeasured
    ones (their trials fail as stale) and finish the trials of the measured
    ones from their rows. Returns how many trials it settled."""

    def stale(claim: Claim) -> bool:
        if claim.state == DONE:
            return False
        if claim.owner == run.owner:  # this process: stale unless being worked on
            return (run.claims.study, claim.key) not in _HELD
        return not owner_alive(claim, run.lease_s)

    if not any(stale(c) for c in snapshot.values()):
        return 0
    released, taken = run.claims.reap(stale, run.owner, run.worker)
    for claim in released:
        _logger.warning(
            "trial %d: its worker %s is gone before measuring %s; measured again later", claim.trial, claim.worker, claim.key
        )
        _fail_trial(run, claim.trial, "stale: worker gone")
    for claim in taken:
        row = claim_row(run.claims, claim)
        if row is not None:
            _finish_trial(run, claim.trial, row)
        run.claims.finish(claim.key, run.owner)
    return len(released) + len(taken)


def _check_enqueued(cfg: dict, dists: Mapping[str, CategoricalDistribution]) -> dict:
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
    if row["status"] == "ok" and not _is_ok(row):
        # A measurement without a finite bandwidth cannot be ranked.
        row["status"] = "launch_error"
        row["error"] = f"status ok needs a finite bandwidth_gbs, got {result.get('bandwidth_gbs')!r}"
    return row


def _row_text(row: dict) -> str:
    # allow_nan=False: the dashboard parses attributes with JSON.parse.
    return json.dumps(row, sort_keys=True, allow_nan=False, default=str)


def _is_ok(row: Mapping) -> bool:
    value = row.get("bandwidth_gbs")
    return row.get("status") == "ok" and isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _reason(row: Mapping) -> str:
    error = row.get("error")
    return f"{row['status']}: {error}" if error else str(row["status"])


@dataclass
class _Asked:
    """One ``study.ask``: the trial and the configuration it claimed, or no
    trial where nothing was claimed (``idle`` counts towards ``patience``)."""

    trial: optuna.Trial | None
    key: str | None
    cfg: dict | None
    decision: _Decision
    rescue: str = ""
    lost: int = 0
    idle: int = 0


def _ask(study: optuna.Study, distinct: optuna.samplers.BaseSampler, dists: Mapping, claims: ClaimStore, owner: str) -> _Asked:
    """Ask Optuna for a trial; ``distinct`` (a ``DistinctSampler``) chooses
    and claims its configuration. The caller has called
    ``ASKS_IN_FLIGHT.begin()`` (before submitting it to a thread)."""
    try:
        return _ask_unlocked(study, distinct, dists, claims, owner)
    finally:
        ASKS_IN_FLIGHT.end()


def _ask_unlocked(study, distinct, dists, claims, owner) -> _Asked:
    try:
        trial = study.ask(fixed_distributions=dists)
        decision = distinct.decision(trial.number) or _Decision(refused="the sampler was not asked")
        params = trial.params  # a deep copy each time it is read
        cfg = {name: plain_value(params[name]) for name in dists}
        key = config_key(cfg)
        trial.set_user_attr("config_key", key)
        trial.set_user_attr("worker", distinct.worker)
        rescue = decision.how if decision.how in ("neighbour", "random") else ""
        if rescue:
            trial.set_user_attr("rescue", rescue)
        if decision.warm_start and decision.key == key:
            trial.set_user_attr("warm_start", decision.warm_start)
    except optuna.exceptions.UpdateFinishedTrialError:
        # Failed as stale by a worker that took this one for dead (its
        # lease expired) before its parameters were set.
        return _Asked(None, None, None, _Decision(), lost=1)
    if decision.key != key:
        if decision.key is not None:
            # A WAITING trial (enqueued by hand with study.enqueue_trial) was
            # popped with its own parameters, unclaimed: it is failed.
            claims.release(decision.key, owner)
            _HELD.discard((study.study_name, decision.key))
            decision.refused = "its parameters were fixed before the sampler chose"
        trial.set_user_attr("reason", decision.refused)
        study.tell(trial, state=TrialState.FAIL)
        return _Asked(None, None, None, decision, lost=1, idle=1)
    return _Asked(trial, key, cfg, decision, rescue=rescue)


def _count(outcome: Any, asked: _Asked) -> None:  # a StudyOutcome
    outcome.infeasible += asked.decision.infeasible
    outcome.duplicate += asked.decision.repeated
    outcome.lost += asked.lost


def _measure_asked(run: _Run, asked: _Asked, outcome: Any, study_name: str) -> None:
    """Measure an asked trial and count it in ``outcome`` (a ``StudyOutcome``)."""
    try:
        row = _measure_claimed(run, asked.trial, asked.cfg, asked.key)
    finally:
        _HELD.discard((study_name, asked.key))
    if row is None:
        outcome.lost += 1
        return
    outcome.rows.append(row)
    outcome.measured += 1
    outcome.rescued += bool(asked.rescue)
    outcome.failed += not _is_ok(row)


def _stop_reason(measured, budget_trials, deadline, asks, max_asks, idle, patience, unclaimed, snapshot, feasible) -> str:
    """Why the search stops now, or "" to go on."""
    reasons = {
        "budget": budget_trials is not None and measured >= budget_trials,
        "timeout": deadline is not None and time.monotonic() >= deadline,
        "exhausted": unclaimed == set() and not any(snapshot[k].state == CLAIMED for k in feasible),
        "ask_limit": max_asks is not None and asks >= max_asks,
        "stalled": idle >= patience,
    }
    return next((reason for reason, stop in reasons.items() if stop), "")
