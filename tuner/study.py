"""An Optuna search over one family's space for one problem.

The search is an ask/tell loop with fixed categorical distributions (one per
family parameter), so every trial carries every parameter and any sampler can
be swapped in. Around the sampler the loop enforces what the GPU needs:

* infeasible configurations (``family.violations``) are told PRUNED and never
  measured;
* a configuration already measured in the study is told its stored result
  again (or FAIL) instead of being measured twice;
* the budget is the number of distinct configurations measured, counted from
  the storage before every ask, so worker processes sharing one storage share
  one budget, and a rerun with the same study name resumes where it stopped;
* a sampler that keeps proposing infeasible or measured configurations is
  rescued: after ``RESCUE_AFTER`` such asks in a row, the next trial is an
  unmeasured feasible configuration drawn at random (user attribute
  ``rescue``). Optuna's GP sampler needs this: it ignores PRUNED trials, so
  once it proposes an infeasible point it proposes it forever.

Every measured trial keeps its full results row as JSON in the user attribute
``row``, so ``study_rows`` rebuilds the results from the study alone.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import random
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import optuna
import pandas as pd
from optuna.distributions import CategoricalDistribution
from optuna.storages import BaseStorage
from optuna.trial import FrozenTrial, TrialState

from tuner.families.base import Family, Problem
from tuner.results import COLUMNS, config_key

SAMPLERS = ("tpe", "gp", "random", "cmaes", "qmc", "brute_force")

# Statuses a measurement may return; "infeasible" is decided here, never measured.
MEASURED_STATUSES = ("ok", "compile_error", "launch_error", "wrong_result")

# User attributes copied from the row onto every measured trial (for the dashboard).
ROW_ATTRS = ("bandwidth_gbs", "time_ms_median", "registers", "spill_bytes", "status")

# Guards against a loop that asks forever without measuring.
ASKS_PER_BUDGET = 50  # at most this many asks per budgeted measurement
DEFAULT_PATIENCE = 200  # consecutive asks that measure nothing before giving up
RESCUE_AFTER = 3  # consecutive asks that measure nothing before a random rescue
# Spaces up to this many combinations are enumerated to detect exhaustion.
MAX_ENUMERATED = 1_000_000

_FINISHED = (TrialState.COMPLETE, TrialState.FAIL)


@dataclass
class StudyOutcome:
    """What one ``run_study`` call did.

    Attributes:
        study: the Optuna study (all its trials, earlier runs included).
        rows: results rows measured by this call, in trial order.
        best: the best ``ok`` row of the whole study (earlier runs included),
            or None when nothing has measured ok.
        measured: configurations measured by this call (ok and failed).
        infeasible: trials pruned by the family's constraints in this call.
        duplicate: trials answered from an earlier measurement in this call.
        rescued: measured trials this call chose at random because the
            sampler was stuck (see ``RESCUE_AFTER``).
        failed: measured configurations whose status was not ``ok`` (a subset
            of ``measured``), exceptions raised by ``measure`` included.
        total_measured: distinct configurations measured in the whole study.
        stop_reason: budget | timeout | exhausted | stalled | ask_limit.
    """

    study: optuna.Study
    rows: list[dict] = field(default_factory=list)
    best: dict | None = None
    measured: int = 0
    infeasible: int = 0
    duplicate: int = 0
    rescued: int = 0
    failed: int = 0
    total_measured: int = 0
    stop_reason: str = ""


# ---- samplers and storages -------------------------------------------------


def make_sampler(name: str, seed: int) -> optuna.samplers.BaseSampler:
    """The Optuna sampler called ``name``, seeded with ``seed``.

    Every parameter is categorical, which matters for some of them: CMA-ES has
    no categorical support and samples such spaces with its independent
    (random) sampler; GP needs ``torch`` and ``scipy``, QMC needs ``scipy``.

    Raises:
        ValueError: ``name`` is not one of ``SAMPLERS``.
        ImportError: the sampler's optional dependencies are missing.
    """
    if name not in SAMPLERS:
        raise ValueError(f"sampler must be one of {list(SAMPLERS)}, got {name!r}")
    _require_modules(name)
    # Some samplers (QMC, multivariate TPE) are flagged experimental; the flag
    # is Optuna's API promise, not a problem with the run.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        if name == "tpe":
            # multivariate: parameters interact (unroll x vector_width);
            # constant_liar: concurrent workers do not all propose the same point.
            return optuna.samplers.TPESampler(seed=seed, multivariate=True, constant_liar=True)
        if name == "gp":
            return optuna.samplers.GPSampler(seed=seed)
        if name == "random":
            return optuna.samplers.RandomSampler(seed=seed)
        if name == "cmaes":
            return optuna.samplers.CmaEsSampler(seed=seed, warn_independent_sampling=False)
        if name == "qmc":
            # Scrambled, so that seeds differ (unscrambled Sobol starts at the
            # centre of every domain whatever the seed).
            return optuna.samplers.QMCSampler(seed=seed, scramble=True, warn_independent_sampling=False)
        return _BruteForceSampler(seed=seed)


_SAMPLER_MODULES = {"gp": ("torch", "scipy"), "qmc": ("scipy",)}


def _require_modules(name: str) -> None:
    # Fail at construction, not at the eleventh ask when the GP is first fitted.
    missing = [m for m in _SAMPLER_MODULES.get(name, ()) if importlib.util.find_spec(m) is None]
    if missing:
        raise ImportError(
            f"sampler {name!r} needs the packages {list(_SAMPLER_MODULES[name])}; "
            f"missing: {missing} (pip install {' '.join(missing)})"
        )


class _BruteForceSampler(optuna.samplers.BruteForceSampler):
    """BruteForceSampler that does not call ``study.stop()``.

    The stock sampler stops the study from ``after_trial`` once the grid is
    exhausted, which raises outside ``study.optimize``; the ask/tell loop
    detects exhaustion itself (of the feasible space, which is what matters).
    """

    def after_trial(self, study, trial, state, values) -> None:  # noqa: D102
        pass


def open_storage(spec: str | os.PathLike | BaseStorage | None) -> BaseStorage:
    """The Optuna storage that ``spec`` names.

    Args:
        spec: None for in-memory; a storage object (returned as is); a path
            ending in ``.log`` or ``.jsonl`` for a journal file (safe for
            several processes, no database needed); else an Optuna storage URL
            (``sqlite:///study.db``, ``postgresql://...``).

    Raises:
        ValueError: ``spec`` is a string that is neither a journal path nor a URL.
    """
    if spec is None:
        return optuna.storages.InMemoryStorage()
    if isinstance(spec, BaseStorage):
        return spec
    text = os.fspath(spec)
    if text.endswith((".log", ".jsonl")):
        from optuna.storages.journal import JournalFileBackend

        Path(text).parent.mkdir(parents=True, exist_ok=True)
        return optuna.storages.JournalStorage(JournalFileBackend(text))
    if "://" not in text:
        raise ValueError(
            f"storage must be an Optuna URL (sqlite:///path.db) or a journal file path ending in .log or .jsonl, got {text!r}"
        )
    if text.startswith("sqlite:///"):
        Path(text[len("sqlite:///") :]).parent.mkdir(parents=True, exist_ok=True)
    # get_storage adds Optuna's cache of finished trials in front of an RDB.
    return optuna.storages.get_storage(text)


# ---- the search ------------------------------------------------------------


def distributions(family: Family, domains: Mapping[str, Sequence] | None) -> dict[str, CategoricalDistribution]:
    """One categorical distribution per family parameter, over ``domains`` (or
    the parameter's full domain where it is not listed), in family order.

    Raises:
        ValueError: a domain names an unknown parameter, is empty, or holds a
            value outside the parameter's values.
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
        outside = [v for v in values if v not in param.values]
        if outside:
            raise ValueError(f"domain of {param.name} must be within {list(param.values)}, got {outside}")
        # Duplicated choices would skew the samplers; keep the first of each.
        result[param.name] = CategoricalDistribution(tuple(dict.fromkeys(values)))
    return result


def run_study(
    *,
    family: Family,
    problem: Problem,
    domains: Mapping[str, Sequence] | None,
    storage: str | os.PathLike | BaseStorage | None,
    study_name: str,
    measure: Callable[[dict], dict],
    budget_trials: int | None,
    timeout_s: float | None,
    sampler: str | optuna.samplers.BaseSampler = "tpe",
    seed: int = 0,
    enqueue: Iterable[Mapping] = (),
    patience: int = DEFAULT_PATIENCE,
) -> StudyOutcome:
    """Search ``family``'s space for ``problem``, maximising ``bandwidth_gbs``.

    Creates the study or resumes it (same ``storage`` and ``study_name``): the
    budget counts every distinct configuration the study has measured, by this
    process, earlier runs and concurrent workers alike.

    Args:
        family: the kernel family whose parameters are searched.
        problem: what is computed; passed to ``family.violations``.
        domains: parameter name -> values to search (others: full domain).
        storage: see ``open_storage``.
        study_name: the study's name in the storage.
        measure: config -> results row (``tuner.results.COLUMNS`` keys, with at
            least ``status``; ``bandwidth_gbs`` when ok).
        budget_trials: distinct configurations to measure, or None for no limit.
        timeout_s: wall-clock seconds after which no new trial is asked.
        sampler: a name from ``SAMPLERS`` or a sampler object.
        seed: sampler seed. On resume it is offset by the number of trials so
            far, so the sampler does not replay its earlier proposals; give
            concurrent workers different seeds.
        enqueue: configurations (possibly partial) to try first; ones already
            in the study are skipped.
        patience: consecutive asks that measure nothing (infeasible or
            duplicate proposals, rescues included) before the search is
            given up as stalled. Only reachable where the space is too large
            to enumerate (``MAX_ENUMERATED``); otherwise rescues always find
            an unmeasured configuration until the space is exhausted.

    Returns:
        A ``StudyOutcome``.

    Raises:
        ValueError: an argument is out of range (checked before anything
            runs), or ``measure`` returned something that is not a results
            row (a bug in ``measure``, unlike its exceptions, which are
            recorded as ``launch_error`` and the search goes on).
    """
    if budget_trials is not None and budget_trials < 1:
        raise ValueError(f"budget_trials must be >= 1, got {budget_trials}")
    if timeout_s is not None and not timeout_s > 0:
        raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
    if patience < 1:
        raise ValueError(f"patience must be >= 1, got {patience}")
    if not study_name:
        raise ValueError(f"study_name must not be empty, got {study_name!r}")
    if problem.family != family.name:
        raise ValueError(f"problem.family must be {family.name!r}, got {problem.family!r}")
    dists = distributions(family, domains)
    enqueue = [_check_enqueued(dict(cfg), dists) for cfg in enqueue]
    if isinstance(sampler, str):
        make_sampler(sampler, seed)  # validates the name and dependencies up front

    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    feasible = _feasible_configs(family, problem, dists)
    rng = random.Random(seed)
    max_asks = None if budget_trials is None else ASKS_PER_BUDGET * budget_trials

    store = open_storage(storage)
    study = optuna.create_study(
        storage=store,
        study_name=study_name,
        direction="maximize",
        load_if_exists=True,
    )
    if study.direction != optuna.study.StudyDirection.MAXIMIZE:
        raise ValueError(f"study {study_name!r} must maximize bandwidth_gbs, got {study.direction.name}")
    if isinstance(sampler, str):
        # A resumed study reseeds past its history, else the sampler would
        # propose its first trials again (harmless but wasted asks).
        study.sampler = make_sampler(sampler, seed + len(study.get_trials(deepcopy=False)))
    else:
        study.sampler = sampler
    for cfg in enqueue:
        study.enqueue_trial(cfg, skip_if_exists=True)

    outcome = StudyOutcome(study=study)
    source = f"study:{study_name}"
    asks = idle = 0
    while True:
        # The storage is the only shared state between workers: read it fresh.
        measured = _measured_trials(study)
        if budget_trials is not None and len(measured) >= budget_trials:
            outcome.stop_reason = "budget"
            break
        if deadline is not None and time.monotonic() >= deadline:
            outcome.stop_reason = "timeout"
            break
        if feasible is not None and feasible.keys() <= measured.keys():
            outcome.stop_reason = "exhausted"
            break
        if max_asks is not None and asks >= max_asks:
            outcome.stop_reason = "ask_limit"
            break
        if idle >= patience:
            outcome.stop_reason = "stalled"
            break

        # Enqueued trials still waiting come first; they are not the sampler's.
        rescue = idle > 0 and idle % RESCUE_AFTER == 0 and not study.get_trials(deepcopy=False, states=(TrialState.WAITING,))
        if rescue:
            trial = _rescue_ask(study, dists, feasible, measured, rng, seed + asks)
        else:
            trial = study.ask(fixed_distributions=dists)
        asks += 1
        cfg = {name: trial.params[name] for name in dists}
        key = config_key(cfg)
        trial.set_user_attr("config_key", key)
        if rescue:
            trial.set_user_attr("rescue", True)

        reasons = family.violations(cfg, problem)
        if reasons:
            trial.set_user_attr("infeasible", "; ".join(reasons))
            study.tell(trial, state=TrialState.PRUNED)
            outcome.infeasible += 1
            idle += 1
            continue

        earlier = measured.get(key)
        if earlier is not None:
            trial.set_user_attr("duplicate_of", earlier.number)
            if earlier.state == TrialState.COMPLETE:
                study.tell(trial, earlier.value)
            else:
                trial.set_user_attr("reason", f"duplicate of failed trial {earlier.number}")
                study.tell(trial, state=TrialState.FAIL)
            outcome.duplicate += 1
            idle += 1
            continue

        idle = 0
        row = _measure_row(measure, cfg, trial, problem, source)
        _record(trial, row)
        outcome.rows.append(row)
        outcome.measured += 1
        outcome.rescued += rescue
        if _is_ok(row):
            study.tell(trial, float(row["bandwidth_gbs"]))
        else:
            trial.set_user_attr("reason", _reason(row))
            study.tell(trial, state=TrialState.FAIL)
            outcome.failed += 1

    all_rows = study_rows(study)
    outcome.total_measured = len(_measured_trials(study))
    ok_rows = [r for r in all_rows if _is_ok(r)]
    outcome.best = max(ok_rows, key=lambda r: r["bandwidth_gbs"]) if ok_rows else None
    return outcome


def study_rows(study: optuna.Study) -> list[dict]:
    """The results rows of every measured trial, rebuilt from the ``row`` user
    attributes, in trial order, with ``trial`` set to the trial number.

    Infeasible and duplicate trials carry no row, so each measured
    configuration appears once (per worker that measured it).
    """
    rows = []
    for trial in study.get_trials(deepcopy=False):
        text = trial.user_attrs.get("row")
        if text is None:
            continue
        row = json.loads(text)
        row["trial"] = trial.number
        rows.append(row)
    return rows


# ---- helpers ---------------------------------------------------------------


def _measured_trials(study: optuna.Study) -> dict[str, FrozenTrial]:
    """config_key -> the first finished trial that measured it.

    Trials with a ``row`` were measured here; duplicates have none, and a
    trial interrupted before its row was written may be measured again.
    """
    measured: dict[str, FrozenTrial] = {}
    for trial in study.get_trials(deepcopy=False, states=_FINISHED):
        if "row" in trial.user_attrs:
            measured.setdefault(trial.user_attrs["config_key"], trial)
    return measured


def _feasible_configs(family: Family, problem: Problem, dists: Mapping[str, CategoricalDistribution]) -> dict[str, dict] | None:
    """config_key -> config of every feasible configuration, or None where
    the space is too large to enumerate (then exhaustion is not detected)."""
    size = math.prod(len(d.choices) for d in dists.values())
    if size > MAX_ENUMERATED:
        return None
    space = family.space(problem, {name: list(d.choices) for name, d in dists.items()})
    return {config_key(cfg): cfg for cfg in space}


def _rescue_ask(
    study: optuna.Study,
    dists: Mapping[str, CategoricalDistribution],
    feasible: Mapping[str, dict] | None,
    measured: Mapping[str, FrozenTrial],
    rng: random.Random,
    seed: int,
) -> optuna.Trial:
    """A trial that does not come from the (stuck) sampler: an unmeasured
    feasible configuration when the space is enumerated, else a random one."""
    if feasible is not None:
        left = sorted(feasible.keys() - measured.keys())
        if left:
            study.enqueue_trial(feasible[rng.choice(left)])
            return study.ask(fixed_distributions=dists)
    sampler = study.sampler
    study.sampler = optuna.samplers.RandomSampler(seed=seed)
    try:
        return study.ask(fixed_distributions=dists)
    finally:
        study.sampler = sampler


def _check_enqueued(cfg: dict, dists: Mapping[str, CategoricalDistribution]) -> dict:
    for name, value in cfg.items():
        if name not in dists:
            raise ValueError(f"enqueued configurations must name searched parameters {list(dists)}, got {name!r}")
        if plain_value(value) not in dists[name].choices:
            raise ValueError(f"enqueued {name} must be one of {list(dists[name].choices)}, got {value!r}")
    return {name: plain_value(value) for name, value in cfg.items()}


def _measure_row(measure: Callable[[dict], dict], cfg: dict, trial: optuna.Trial, problem: Problem, source: str) -> dict:
    """Run ``measure`` on a copy of ``cfg`` and complete its row.

    An exception from ``measure`` becomes a ``launch_error`` row, so one bad
    configuration does not end the study. A row that breaks the contract
    (not a mapping, no known status, columns outside the schema) is a bug in
    ``measure``: the trial is told FAIL and the error propagates.
    """
    try:
        result = measure(dict(cfg))
    except Exception as exc:  # noqa: BLE001 - any failure of one config is data
        result = {"status": "launch_error", "error": f"measure raised {type(exc).__name__}: {exc}"}
    except BaseException:
        # Interrupted: leave no row, so a rerun measures this configuration.
        trial.set_user_attr("reason", "interrupted")
        trial.study.tell(trial, state=TrialState.FAIL)
        raise
    problem_text = None
    if not isinstance(result, Mapping):
        problem_text = f"measure must return a mapping, got {type(result).__name__}"
    elif result.get("status") not in MEASURED_STATUSES:
        problem_text = f"measure's row status must be one of {list(MEASURED_STATUSES)}, got {result.get('status')!r}"
    elif set(result) - set(COLUMNS):
        extra = sorted(set(result) - set(COLUMNS))
        problem_text = f"measure's row must only have results columns, got extra {extra}"
    if problem_text is not None:
        trial.set_user_attr("reason", problem_text)
        trial.study.tell(trial, state=TrialState.FAIL)
        raise ValueError(problem_text)

    row = {k: plain_value(v) for k, v in result.items()}
    for name, value in cfg.items():
        row.setdefault(name, value)
    row.setdefault("family", problem.family)
    row.setdefault("dtype", problem.dtype)
    row.setdefault("n", problem.n)
    row.setdefault("config_key", config_key(cfg))
    row.setdefault("source", source)
    row["trial"] = trial.number
    if row["status"] == "ok" and not _is_ok(row):
        # A measurement without a finite bandwidth cannot be ranked.
        row["status"] = "launch_error"
        row["error"] = f"status ok needs a finite bandwidth_gbs, got {result.get('bandwidth_gbs')!r}"
    return row


def _record(trial: optuna.Trial, row: dict) -> None:
    for name in ROW_ATTRS:
        trial.set_user_attr(name, row.get(name))
    # allow_nan=False: the dashboard parses attributes with JSON.parse.
    trial.set_user_attr("row", json.dumps(row, sort_keys=True, allow_nan=False, default=str))


def _is_ok(row: Mapping) -> bool:
    value = row.get("bandwidth_gbs")
    return row.get("status") == "ok" and isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _reason(row: Mapping) -> str:
    error = row.get("error")
    return f"{row['status']}: {error}" if error else str(row["status"])


def plain_value(value: Any) -> Any:
    """Plain Python for JSON and Optuna: numpy scalars unwrapped, missing and
    non-finite numbers to None."""
    if value is None:
        return None
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        try:
            value = value.item()
        except (TypeError, ValueError):
            pass
    if value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
