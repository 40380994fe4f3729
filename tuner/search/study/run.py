"""An Optuna search over one family's space for one problem.

The search is an ask/tell loop with fixed categorical distributions (one per
family parameter), so every trial carries every parameter and any sampler can
be swapped in. Around the sampler the loop enforces what the GPU needs:

* **A configuration is measured at most once per study**, across reruns and
  concurrent workers (processes sharing one storage), and the budget (the
  number of distinct configurations measured) is never overshot. Before a
  configuration is measured it is claimed in a ledger every worker shares
  (``tuner.search.study.claims``: a list in memory, a file beside a journal, a table
  in an RDB); the claim succeeds only where the configuration is unclaimed
  and fewer than ``budget_trials`` are claimed or measured, checked atomically.
* **Every trial is a distinct, feasible configuration.** ``DistinctSampler``
  wraps the chosen sampler: when Optuna asks for a trial, it tries the
  user's enqueued configurations first, then asks the wrapped sampler for
  whole configurations, passing over infeasible ones (``family.violations``)
  and claimed ones, until it claims one. Should the sampler keep proposing
  those, the trial is rescued (user attribute ``rescue``): an unclaimed
  feasible configuration one or two parameters away from the sampler's
  favourite (``neighbour``), else one at random (``random``). Samplers get
  stuck on categorical spaces: TPE's best candidate stays the same measured
  configuration until the data change, and GP ignores failed trials, so once
  it proposes an infeasible point it proposes it again.

  Why a sampler: an Optuna trial exists before its parameters are chosen,
  and every finished trial is data. Told COMPLETE with a copied value, a
  repeat counts twice in TPE's densities and parameter importances; told
  PRUNED, an infeasible or good configuration counts as a bad one. A sampler
  chooses inside ``ask``, before the trial has parameters, so rejected
  proposals leave no trial at all (they are counted in ``StudyOutcome``).
* **Nothing measured is lost or redone.** The row is recorded in the claim
  (state ``measured``) before anything else learns of it. A worker killed
  before that leaves a stale claim: once its owner is gone (its process has
  ended on this host, or its lease of ``lease_s`` seconds, refreshed while it
  measures, has expired for a worker on another host) the claim is released
  and the configuration measured again. A worker killed after it leaves the
  row, which the next worker finishes (below).
* **A poisoned device ends the worker.** ``measure`` raising
  ``tuner.errors.FatalDeviceError`` re-raises after the claim is settled: the
  configuration that caused the fault is recorded with its ``launch_error``
  row (it counts), or, where the error names none, the claim is released (the
  configuration is retried). Any other exception from ``measure`` is a
  ``launch_error`` row and the search goes on.

**The claims are the study's one record** (``tuner.search.study.claims``): which
configuration each trial measures, the trial's number, and its full results
row, so ``study_rows`` rebuilds the results from the claims alone, one row per
configuration, in trial order. Optuna is a library here, used through its
public API, in two roles:

* *The sampler's memory.* Each worker keeps an Optuna study in memory and,
  before each ask, adds to it every row any worker has recorded since it last
  looked (``add_trial``: COMPLETE with ``bandwidth_gbs`` where ok, else FAIL),
  so its sampler learns from every worker's measurements; the
  ``DistinctSampler`` chooses and claims inside that study's ``ask``.
* *The dashboard.* The study in the persistent storage (a journal file,
  SQLite, PostgreSQL) is written for optuna-dashboard only: once a row is in
  its claim, the finished trial is added there (``add_trial``, with user
  attributes ``config_key``, ``worker``, ``status`` and, where they apply,
  ``reason``, ``rescue``, ``warm_start``), then the claim goes ``done``. A
  worker killed in between leaves the claim ``measured``; the next worker adds
  the trial where the storage does not hold one with that ``config_key`` yet,
  and finishes the claim. So the dashboard shows finished trials only, each
  measurement once: nothing is RUNNING there, and no worker ever updates a
  trial another may have finished. What is being measured now is in the
  claims (state ``claimed``), not on the dashboard.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
import warnings
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Sequence

import optuna
from optuna.storages import BaseStorage

from tuner.families.base import Family, Problem
from tuner.search.samplers.registry import DEFAULT_STRATEGY, SAMPLERS, checked_strategy, make_sampler
from tuner.search.study.blas import one_blas_thread
from tuner.search.study.claims import CLAIMED, claim_row
from tuner.search.study.distinct import DistinctSampler, distributions
from tuner.search.study.outcome import StudyOutcome
from tuner.search.study.owners import Heartbeat, this_owner
from tuner.search.study.storage import open_claims, open_storage, resumed_seed
from tuner.search.study.trials import (
    Asked,
    Run,
    abandon,
    ask,
    check_enqueued,
    count_asked,
    is_ok,
    measure_asked,
    recover,
    stop_reason,
)

# Guards against a loop that asks forever without measuring.
ASKS_PER_BUDGET = 50  # at most this many asks per budgeted measurement
DEFAULT_PATIENCE = 200  # consecutive asks that measure nothing before giving up
# A claim whose owner runs on another host is stale once its heartbeat is this old.
DEFAULT_LEASE_S = 60.0
WAIT_S = 0.1  # poll interval while other workers measure the last configurations

_logger = logging.getLogger(__name__)

# What callers use; samplers and storages live in their own modules.
__all__ = ["SAMPLERS", "StudyOptions", "StudyOutcome", "distributions", "make_sampler", "open_storage", "resumed_seed",
           "run_study", "study_rows"]  # fmt: skip


@dataclass(frozen=True)
class StudyOptions:
    """One study's search: what it searches, where it records, its sampler and
    how its loop runs (``run_study``'s one argument).

    Attributes:
        family: the kernel family whose parameters are searched.
        problem: what is computed; passed to ``family.violations``.
        domains: parameter name -> values to search (others: full domain).
        storage: see ``open_storage``. Worker processes sharing a study need
            a journal file or a database (``storage_spec.storage_problem`` says whether a
            storage can work).
        study_name: the study's name in the storage.
        measure: config -> results row (``tuner.data.results.columns()`` keys, with at
            least ``status``; ``bandwidth_gbs`` when ok).
        sampler: the study's one sampler (``make_sampler`` of a strategy, or
            ``for_strategy``), wrapped in a ``DistinctSampler``.
        budget_trials: distinct configurations to measure, or None for no limit.
        timeout_s: wall-clock seconds after which no new trial is asked.
        seed: the seed of the ``DistinctSampler``'s own draws (rescues); the
            sampler was seeded when it was made.
        enqueue: configurations (possibly partial) to try first, in order;
            ones already claimed in the study are skipped.
        patience: consecutive trials that measure nothing (nothing could be
            claimed) before the search is given up as stalled. Only reachable
            where the space is too large to enumerate (``MAX_ENUMERATED``).
        worker: this worker's name in its claims and the dashboard's trials
            (user attribute ``worker``), e.g. "gpu0"; default its process
            (``tuner.search.study.owners.this_owner``). Claims belong to the process
            whatever the name.
        lease_s: a claim held by a process on another host whose heartbeat
            (every ``lease_s / 4`` while measuring) is older than this is
            taken as abandoned. Processes on this host are checked directly.
        ask_ahead: ask (and claim) the next trial in a thread while this one
            is measured. Off, the loop is strictly ask, measure, tell.
        claimed: called (without raising) with each configuration this worker
            claims, before it is measured; one asked ahead while the one
            before is measured: time to start compiling it.
        likely_next: called (without raising) after ``claimed``, with the
            configurations the sampler would likely propose next, best first
            (where it can tell: ``tuner.search.samplers.space_aware.Foreseeing``): time to compile
            them, if a CPU is free.
        warm_start: ``config_key`` -> source of the enqueued configurations
            that come from a warm start (``tuner.search.study.warm.study_start``);
            their trials carry the user attribute ``warm_start``.
        at: called (in the thread that gets there) with the name of each
            point of the loop a configuration passes: "asking" (an ask
            begins), "claiming" (a claim is tried), "asked" (the ask ended),
            "claimed", "measured", "recorded" (the row is in the claim),
            "added" (the trial is on the dashboard), "done". For tests that
            stop a worker at a point; it must not raise.
    """

    family: Family
    problem: Problem
    domains: Mapping[str, Sequence] | None
    storage: str | os.PathLike | BaseStorage | None
    study_name: str
    measure: Callable[[dict], dict]
    sampler: optuna.samplers.BaseSampler
    budget_trials: int | None = None
    timeout_s: float | None = None
    seed: int = 0
    enqueue: Iterable[Mapping] = ()
    patience: int = DEFAULT_PATIENCE
    worker: str | None = None
    lease_s: float = DEFAULT_LEASE_S
    ask_ahead: bool = True
    claimed: Callable[[dict], None] | None = None
    likely_next: Callable[[list[dict]], None] | None = None
    warm_start: Mapping[str, str] | None = None
    at: Callable[[str], None] | None = None

    @classmethod
    def for_strategy(cls, strategy: str = DEFAULT_STRATEGY, **fields) -> StudyOptions:
        """Options whose sampler is strategy ``strategy``'s, made once: seeded
        with ``seed`` offset by the claims the study holds already
        (``resumed_seed``), so that a resumed study's sampler does not propose
        its first trials again. ``fields``: the other attributes.

        Raises:
            ValueError: ``strategy`` is not one of ``SAMPLERS`` (before any storage is opened).
            ImportError: the strategy's optional packages are missing.
        """
        checked_strategy(strategy)
        seed = resumed_seed(fields.get("storage"), fields.get("study_name", ""), fields.get("seed", 0))
        return cls(sampler=make_sampler(strategy, seed), **fields)


def run_study(options: StudyOptions) -> StudyOutcome:
    """Search ``family``'s space for ``problem``, maximising ``bandwidth_gbs``.

    Creates the study or resumes it (same ``storage`` and ``study_name``): the
    budget counts every distinct configuration the study has measured or is
    measuring, by this process, earlier runs and concurrent workers alike.
    Claims that dead workers left are settled first (see the module's
    docstring).

    Args:
        options: the study, its sampler and its loop's settings (``StudyOptions``).

    Returns:
        A ``StudyOutcome``.

    Raises:
        ValueError: an argument is out of range (checked before anything
            runs), or ``measure`` returned something that is not a results
            row (a bug in ``measure``, unlike its exceptions, which are
            recorded as ``launch_error`` and the search goes on).
        FatalDeviceError: from ``measure``, after its claim was settled; the
            process should end (a fresh one gets a fresh CUDA context).
    """
    family, problem, domains, study_name = options.family, options.problem, options.domains, options.study_name
    budget_trials, timeout_s, patience, lease_s = options.budget_trials, options.timeout_s, options.patience, options.lease_s
    seed, claimed, likely_next, ask_ahead = options.seed, options.claimed, options.likely_next, options.ask_ahead
    if budget_trials is not None and budget_trials < 1:
        raise ValueError(f"budget_trials must be >= 1, got {budget_trials}")
    if timeout_s is not None and not timeout_s > 0:
        raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
    if patience < 1:
        raise ValueError(f"patience must be >= 1, got {patience}")
    if not lease_s > 0:
        raise ValueError(f"lease_s must be > 0, got {lease_s}")
    if not study_name:
        raise ValueError(f"study_name must not be empty, got {study_name!r}")
    if problem.family != family.name:
        raise ValueError(f"problem.family must be {family.name!r}, got {problem.family!r}")
    dists = distributions(family, domains)
    enqueue = [check_enqueued(dict(cfg), dists) for cfg in options.enqueue]

    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    max_asks = None if budget_trials is None else ASKS_PER_BUDGET * budget_trials

    store = open_storage(options.storage)
    dashboard = _dashboard_study(store, study_name)
    claims = open_claims(store, study_name)
    owner = this_owner()
    label = options.worker or owner
    reach = options.at or _nowhere
    held: set[str] = set()
    distinct = DistinctSampler(
        options.sampler, family, problem, dists, claims, budget=budget_trials, enqueue=enqueue, seed=seed, worker=label,
        warm_start=options.warm_start, held=held, at=reach,
    )  # fmt: skip
    # The sampler's own study: in memory, fed from the claims before each ask.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        mind = optuna.create_study(storage=optuna.storages.InMemoryStorage(), sampler=distinct, direction="maximize")
    heartbeat = Heartbeat(claims, owner, lease_s / 4 if claims.shared else None)
    run = Run(mind, dashboard, claims, dists, owner, label, lease_s, problem, f"study:{study_name}", options.measure, heartbeat,
              at=reach, held=held)  # fmt: skip

    outcome = StudyOutcome(study=dashboard, storage=store)
    idle = 0
    # The next configuration is asked (learning, sampler, claim) in a thread
    # while this one is measured: the GPU waits and fsyncs release the GIL, so
    # the host-side cost of choosing overlaps the measurement (the tune command
    # measures in a process of its own: tuner.measure.remote). At most one ask
    # is ahead; it is settled before the claims are read again.
    ahead: Future | None = None
    pending: Asked | None = None

    def timed_ask() -> Asked:
        wall, cpu = time.perf_counter(), time.thread_time()
        asked = ask(run, distinct)
        if claimed is not None and asked.key is not None:
            claimed(asked.cfg)
        if likely_next is not None and asked.decision.upcoming:
            likely_next(asked.decision.upcoming)
        outcome.asks_s += time.perf_counter() - wall
        outcome.asks_cpu_s += time.thread_time() - cpu
        return asked

    # One BLAS thread for the whole loop, set here in the thread that started it: OpenBLAS
    # leaves the setting alone when the ask thread makes it, and the setting is the process's.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="ask") as pool, heartbeat, one_blas_thread():
        try:
            while True:
                if ahead is not None:
                    waited = time.perf_counter()
                    pending, ahead = ahead.result(), None
                    outcome.ask_waits_s += time.perf_counter() - waited
                # The claims are the shared state between workers: read them fresh.
                snapshot = claims.snapshot()
                feasible = distinct.known_feasible()
                recovered = recover(run, snapshot)
                if recovered:
                    outcome.recovered += recovered
                    continue
                measured = sum(c.state != CLAIMED for c in snapshot.values())
                in_flight = len(snapshot) - measured
                # Whether any feasible configuration is unclaimed (known without a
                # set difference while there are fewer claims than configurations).
                unclaimed = None if feasible is None or len(snapshot) < len(feasible) else feasible.keys() - snapshot.keys()
                stop = stop_reason(
                    measured, budget_trials, deadline, outcome.asks, max_asks, idle, patience, unclaimed, snapshot, feasible
                )
                if stop:
                    outcome.stop_reason = stop
                    break
                if pending is None:
                    if (budget_trials is not None and measured + in_flight >= budget_trials) or unclaimed == set():
                        # Other workers are measuring the last configurations: wait for
                        # them, so that one that dies is replaced.
                        time.sleep(WAIT_S)
                        continue
                    outcome.asks += 1
                    reach("asking")
                    pending = timed_ask()
                    in_flight += 1  # its claim, taken after the snapshot
                # Ask ahead only where a configuration would be left to claim.
                claimable = budget_trials is None or measured + in_flight < budget_trials
                claimable &= feasible is None or measured + in_flight < len(feasible)
                asked, pending = pending, None
                count_asked(outcome, asked)
                if asked.key is None:
                    idle += asked.idle
                    continue
                idle = 0
                if ask_ahead and claimable and (deadline is None or time.monotonic() < deadline):
                    outcome.asks += 1
                    reach("asking")
                    ahead = pool.submit(timed_ask)
                measure_asked(run, asked, outcome)
        finally:
            # A configuration asked ahead but not measured (the search stopped,
            # or the measurement raised): it is left to others.
            if ahead is not None:
                with contextlib.suppress(Exception):
                    pending = ahead.result()
            if pending is not None:
                count_asked(outcome, pending)
                if pending.key is not None:
                    abandon(run, pending.key, "not measured: the search stopped")
                    outcome.lost += 1

    all_rows = study_rows(store, study_name)
    outcome.total_measured = sum(c.state != CLAIMED for c in claims.snapshot().values())
    ok_rows = [r for r in all_rows if is_ok(r)]
    outcome.best = max(ok_rows, key=lambda r: r["bandwidth_gbs"]) if ok_rows else None
    return outcome


def _nowhere(point: str) -> None:
    pass


def _dashboard_study(store: BaseStorage, study_name: str) -> optuna.Study:
    """The study in the persistent storage (created where new), which shows
    finished trials to the dashboard."""
    study = optuna.create_study(storage=store, study_name=study_name, direction="maximize", load_if_exists=True)
    if study.direction != optuna.study.StudyDirection.MAXIMIZE:
        raise ValueError(f"study {study_name!r} must maximize bandwidth_gbs, got {study.direction.name}")
    if study.metric_names != ["bandwidth_gbs"]:
        # The dashboard's objective axis reads "bandwidth_gbs", not "Objective 0".
        # Workers starting together may race to set it; any one of them wins.
        with warnings.catch_warnings(), contextlib.suppress(Exception):
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.set_metric_names(["bandwidth_gbs"])
    return study


def study_rows(storage: str | os.PathLike | BaseStorage | None, study_name: str) -> list[dict]:
    """The results row of every configuration measured in study
    ``study_name`` of ``storage`` (a spec or a storage, as ``open_claims``
    takes), once each, in trial order, with ``trial`` set to the number of the
    trial that measured it. The rows come from the study's claims, its one
    record (the dashboard's trials are written after them); none where the
    study has no claims."""
    claims = open_claims(storage, study_name, create=False)
    rows = []
    for claim in (claims.snapshot() if claims is not None else {}).values():
        row = claim_row(claims, claim)
        if row is not None:
            row["trial"] = claim.trial
            rows.append(row)
    return sorted(rows, key=lambda r: r["trial"])
