"""The time-energy trade-off searched: a study with two objectives, the
median time and the joules per launch of a configuration (both minimised),
through Optuna's public multi-objective API (``optuna.create_study(directions=
[...])``, NSGA-II, TPE or random sampling). Its trials are stored like any
study's, so ``optuna-dashboard`` draws their Pareto front, both axes named
(``set_metric_names``).

``measure(cfg) -> row`` is the only link to a GPU: on the GPU, a bench
session's ``measure(cfg, source, energy=True)``; without one, ``table_measure``
of a table of measured rows (a sweep with ``energy: true``), which is how the
study runs under test and how a front is found again from a finished sweep
(``python -m tuner.search.tables.replay_pareto``).

A configuration is measured once per study, however often a sampler asks for
it (samplers of two objectives repeat themselves on small spaces). Optionally
one objective is held within a bound: ``time_bound`` (say 1.1) marks trials
slower than that many times the fastest known (``fastest_ms``, else the
fastest seen so far) as infeasible (``Trial.set_constraint``), so the search spends its budget near the fast end.

The front and its knee: ``tuner.data.front`` (the report draws them too).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import optuna
import pandas as pd
from optuna.trial import TrialState

from tuner.data.front import ENERGY, TIME, Knee, knee, pareto_mask  # noqa: F401 - the front's arithmetic, re-exported
from tuner.data.results import config_key, plain_value
from tuner.families.base import Family, Problem
from tuner.search.samplers.registry import DEFAULT_PARETO_STRATEGY, make_pareto_sampler
from tuner.search.study.blas import one_blas_thread
from tuner.search.study.storage import open_storage

METRICS = ("time_ms", "energy_j")  # the objectives as the dashboard names them
ATTRS = ("config_key", "status", "energy_j_err", "power_w_energy", "bandwidth_gbs")  # shown per trial by the dashboard


@dataclass
class ParetoOutcome:
    study: optuna.Study
    rows: pd.DataFrame  # one per configuration measured, with ``pareto`` (on the front) and ``trial``

    @property
    def front(self) -> pd.DataFrame:
        return self.rows[self.rows["pareto"]].sort_values(TIME)


def run_pareto_study(
    *,
    family: Family,
    problem: Problem,
    domains: Mapping[str, Sequence],
    measure: Callable[[dict], dict],
    storage,
    study_name: str,
    budget_trials: int,
    sampler: str = DEFAULT_PARETO_STRATEGY,
    seed: int = 0,
    time_bound: float | None = None,
    fastest_ms: float | None = None,
    enqueue: Sequence[Mapping] = (),
) -> ParetoOutcome:
    """Search time and energy together until ``budget_trials`` trials of the
    study (this run's and earlier ones') have finished.

    Args:
        domains: each parameter's searched values (a parameter with one value
            is fixed).
        measure: ``cfg -> row``; rows that are not ``ok`` or lack ``energy_j``
            are failed trials (with the reason in the trial's attributes).
        storage: an Optuna storage, URL or journal path (``open_storage``).
        time_bound: trials slower than this many times ``fastest_ms`` are
            infeasible (None: no bound).
        fastest_ms: the fastest time known (a sweep's, a time-only study's);
            None: the fastest this study has seen when each trial is told (an
            early trial may then be told feasible against a slower reference).
        enqueue: configurations tried first, in order (not again where the
            study has tried them); all of a space with a budget of its size
            measures it exhaustively.
    """
    if time_bound is not None and not time_bound >= 1:
        raise ValueError(f"time_bound must be >= 1 (a multiple of the fastest time), got {time_bound!r}")
    storage = open_storage(storage)
    # A resumed study reseeds past its history, else the sampler would propose its first trials again.
    study = optuna.create_study(storage=storage, study_name=study_name, directions=["minimize", "minimize"], load_if_exists=True)
    study.sampler = make_pareto_sampler(sampler, seed + len(study.get_trials(deepcopy=False)), budget_trials)
    if study.metric_names != list(METRICS):  # the dashboard's axes read time_ms and energy_j, not "Objective 0"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.set_metric_names(list(METRICS))
    measured: dict[str, dict] = {}
    for trial in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        # a resumed study: measured already (its objectives and attributes kept, not its whole row)
        measured[trial.user_attrs["config_key"]] = {
            **trial.user_attrs,
            **trial.params,
            TIME: trial.values[0],
            ENERGY: trial.values[1],
        }
    fastest = [min([r[TIME] for r in measured.values()] + [fastest_ms or math.inf])]
    searched = {name: list(values) for name, values in domains.items()}
    for cfg in enqueue:
        study.enqueue_trial({name: cfg[name] for name, values in searched.items() if len(values) > 1}, skip_if_exists=True)
    while _finished(study) < budget_trials:
        with one_blas_thread():
            trial = study.ask()
        cfg = {
            name: trial.suggest_categorical(name, values) if len(values) > 1 else values[0] for name, values in searched.items()
        }
        key = config_key(cfg)
        trial.set_user_attr("config_key", key)
        reasons = family.violations(cfg, problem)
        if reasons:
            _fail(study, trial, "infeasible", "; ".join(reasons))
            continue
        if key not in measured:
            measured[key] = {**measure(cfg), **cfg, "config_key": key}
        row = measured[key]
        if row.get("status") != "ok" or plain_value(row.get(ENERGY)) is None or plain_value(row.get(TIME)) is None:
            _fail(study, trial, row.get("status") or "unknown", row.get("error") or "no energy measured")
            continue
        for name in ATTRS:
            if plain_value(row.get(name)) is not None:
                trial.set_user_attr(name, plain_value(row.get(name)))
        fastest[0] = min(fastest[0], float(row[TIME]))
        trial.set_user_attr("time_over_fastest", float(row[TIME]) / fastest[0])
        if time_bound is not None:  # <= 0 is feasible: within the bound of the fastest seen when it was told
            trial.set_constraint("time_over_fastest", float(row[TIME]) / fastest[0] - time_bound)
        study.tell(trial, [float(row[TIME]), float(row[ENERGY])])
    return ParetoOutcome(study, _rows(study, measured))


def _fail(study: optuna.Study, trial: optuna.Trial, status: str, reason: str) -> None:
    trial.set_user_attr("status", status)
    trial.set_user_attr("reason", str(reason)[:500])
    study.tell(trial, state=TrialState.FAIL)


def _finished(study: optuna.Study) -> int:
    return len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL)))


def _rows(study: optuna.Study, measured: dict[str, dict]) -> pd.DataFrame:
    """One row per configuration measured (its first trial's number), with its
    place on the front."""
    first: dict[str, int] = {}
    for trial in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        first.setdefault(trial.user_attrs["config_key"], trial.number)
    rows = [{**measured[key], "trial": number} for key, number in first.items() if key in measured]
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame.assign(pareto=pd.Series(dtype=bool))
    frame["pareto"] = pareto_mask(frame[TIME].to_numpy(float), frame[ENERGY].to_numpy(float))
    return frame.sort_values("trial").reset_index(drop=True)
