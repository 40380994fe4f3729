"""An Optuna search over one family's space for one problem.

The search is an ask/tell loop with fixed categorical distributions (one per
family parameter), so every trial carries every parameter and any sampler can
be swapped in. Around the sampler the loop enforces what the GPU needs:

* **A configuration is measured at most once per study**, across reruns and
  concurrent workers (processes sharing one storage), and the budget (the
  number of distinct configurations measured) is never overshot. Before a
  configuration is measured it is claimed in a store every worker shares
  (``tuner.search.claims``: a lock in memory, a file beside a journal, a table in an
  RDB); the claim succeeds only where the configuration is unclaimed and
  fewer than ``budget_trials`` are claimed or measured, checked atomically.
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
  repeat counts twice in TPE's densities, parameter importances and the
  dashboard's history; told PRUNED, an infeasible or good configuration
  counts as a bad one. Choosing with ``enqueue_trial`` instead races on SQLite
  (its FOR UPDATE is a no-op, so two workers pop one WAITING trial and one
  dies with ``UpdateFinishedTrialError``). A sampler chooses inside ``ask``,
  before the trial has parameters, so rejected proposals leave no trial at
  all (they are counted in ``StudyOutcome``), no queue is shared, and the
  study stays an ordinary Optuna study for storages, the dashboard and
  workers. A trial ends without a value (FAIL, which TPE and GP ignore, with
  user attribute ``reason``) only where no configuration could be claimed:
  another worker took the last of the budget in the meantime, or a space too
  large to enumerate seems exhausted.
* **Nothing measured is lost or redone.** The row is written into the claim
  (state ``measured``) before Optuna is told; a worker killed between the two
  leaves a trial RUNNING whose row the next worker finds in the claim, and it
  finishes that trial with it. A worker killed before the row was written
  leaves a stale claim: once its owner is gone (its process has ended on this
  host, or its lease of ``lease_s`` seconds, refreshed while it measures, has
  expired for a worker on another host) the claim is released, the trial told
  FAIL (``reason`` "stale: worker gone") and the configuration measured again.
* **A poisoned device ends the worker.** ``measure`` raising
  ``tuner.errors.FatalDeviceError`` re-raises after the claim is settled: the
  configuration that caused the fault is recorded with its ``launch_error``
  row (it counts), or, where the error names none, the claim is released (the
  configuration is retried) and the trial fails "device context lost". Any
  other exception from ``measure`` is a ``launch_error`` row and the search
  goes on.

Every measured trial keeps its full results row as JSON in the user attribute
``row`` (and the claim keeps it too), so ``study_rows`` rebuilds the results
from the study alone, one row per configuration.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import logging
import math
import os
import random
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import optuna
import pandas as pd
from optuna.distributions import BaseDistribution, CategoricalDistribution
from optuna.storages import BaseStorage
from optuna.trial import FrozenTrial, TrialState

from tuner.data.results import columns, config_key
from tuner.errors import FatalDeviceError
from tuner.families.base import Family, Problem
from tuner.search.claims import (
    BUDGET,
    CLAIMED,
    DONE,
    OK,
    SQLITE_BUSY_TIMEOUT_S,
    Claim,
    ClaimStore,
    Heartbeat,
    open_claims,
    owner_alive,
    this_owner,
)

SAMPLERS = ("tpe", "gp", "random", "cmaes", "qmc", "brute_force")

# Statuses a measurement may return; "infeasible" is decided here, never measured.
MEASURED_STATUSES = ("ok", "compile_error", "launch_error", "wrong_result")

# User attributes copied from the row onto every measured trial (for the dashboard).
ROW_ATTRS = ("bandwidth_gbs", "time_ms_median", "registers", "spill_bytes", "status")

# Guards against a loop that asks forever without measuring.
ASKS_PER_BUDGET = 50  # at most this many asks per budgeted measurement
DEFAULT_PATIENCE = 200  # consecutive asks that measure nothing before giving up
# Proposals asked of the wrapped sampler per trial before a rescue (fewer where
# it proposes the same configuration twice: it is stuck).
PROPOSALS_PER_ASK = 8
RANDOM_TRIES = 200  # random draws of a rescue where the space is not enumerated
# Spaces up to this many combinations are enumerated to detect exhaustion.
MAX_ENUMERATED = 1_000_000
# A claim whose owner runs on another host is stale once its heartbeat is this old.
DEFAULT_LEASE_S = 60.0
WAIT_S = 0.1  # poll interval while other workers measure the last configurations

_logger = logging.getLogger(__name__)

# Test hook: called with a point's name ("claiming", "claimed", "measured",
# "recorded", "attrs", "told", "done") as a configuration goes through the loop.
_hook: Callable[[str], None] | None = None

# (study name, config key) of the claims this process is working on; any other
# claim of this process is a leftover of an earlier, interrupted call.
_HELD: set[tuple[str, str]] = set()


def _at(point: str) -> None:
    if _hook is not None:
        _hook(point)


@dataclass
class StudyOutcome:
    """What one ``run_study`` call did.

    Attributes:
        study: the Optuna study (all its trials, earlier runs included).
        rows: results rows measured by this call, in trial order.
        best: the best ``ok`` row of the whole study (earlier runs included),
            or None when nothing has measured ok.
        measured: configurations measured by this call (ok and failed).
        infeasible: proposals of infeasible configurations passed over in
            this call (no trial, no measurement).
        duplicate: proposals of configurations already claimed or measured
            passed over in this call (no trial, no measurement).
        rescued: measured configurations this call chose itself (near the
            sampler's proposal, or at random) because the sampler was stuck.
        failed: measured configurations whose status was not ``ok`` (a subset
            of ``measured``), exceptions raised by ``measure`` included.
        lost: trials of this call that ended FAIL without a measurement
            because nothing could be claimed (another worker took the last
            of the budget, or no unclaimed configuration was found).
        recovered: trials of dead workers this call finished from their
            recorded rows, or failed as stale.
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
    lost: int = 0
    recovered: int = 0
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

    def after_trial(self, study, trial, state, values) -> None:
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
        # Workers queue for SQLite's write lock rather than fail after the
        # driver's default 5 s; get_storage adds Optuna's cache of finished trials.
        engine_kwargs = {"connect_args": {"timeout": SQLITE_BUSY_TIMEOUT_S}}
        return optuna.storages.get_storage(_retry(lambda: optuna.storages.RDBStorage(text, engine_kwargs=engine_kwargs)))
    return optuna.storages.get_storage(text)


def _retry(make: Callable[[], Any], attempts: int = 5) -> Any:
    """``make()``, again after a moment where it failed: workers that open a
    new SQLite database together race to create its tables."""
    for attempt in range(attempts):
        try:
            return make()
        except Exception:  # noqa: BLE001 - re-raised on the last attempt
            if attempt == attempts - 1:
                raise
            time.sleep(0.1 * (attempt + 1))


# Driver modules SQLAlchemy dialects import, and what to install for them.
_DRIVER_PACKAGES = {"psycopg2": "psycopg2-binary", "psycopg": "psycopg[binary]", "pymysql": "PyMySQL", "MySQLdb": "mysqlclient"}


def storage_problem(spec: str | os.PathLike | None, workers: int = 1) -> str | None:
    """Why ``spec`` cannot serve as the storage of a study run by ``workers``
    worker processes, in one line, or None where it can. Creates nothing.

    Checked: the form (a journal path ending in .log or .jsonl, or a URL that
    SQLAlchemy parses, of a database it knows, whose driver imports); for a
    journal or SQLite file, that its folder exists or can be created and is
    writable; that storage private to one process (in memory) has one worker.
    SQLite with several workers works (claims take SQLite's write lock, and
    everyone waits up to ``SQLITE_BUSY_TIMEOUT_S`` for it), though not on a
    network file system, where its locks are unreliable.
    """
    if workers < 1:
        return f"workers must be >= 1, got {workers}"
    if spec is None:
        return (
            None
            if workers == 1
            else f"in-memory storage cannot be shared by {workers} worker processes; give a journal file or a database URL"
        )
    text = os.fspath(spec)
    if text.endswith((".log", ".jsonl")):
        if importlib.util.find_spec("fcntl") is None:
            return f"journal storage {text!r} needs fcntl file locks, which this platform lacks; use a database URL"
        return _file_problem(Path(text), "journal file")
    if "://" not in text:
        return f"storage must be an Optuna URL (sqlite:///path.db) or a journal file path ending in .log or .jsonl, got {text!r}"
    import sqlalchemy

    try:
        url = sqlalchemy.engine.make_url(text)
    except Exception as exc:  # noqa: BLE001 - the parser's message says what is wrong
        return f"storage URL {text.split('://')[0]}://... is malformed: {exc}"
    shown = url.render_as_string(hide_password=True)
    try:
        dialect = url.get_dialect()
    except Exception:  # noqa: BLE001 - NoSuchModuleError and kin
        return f"storage URL {shown} names the database {url.drivername!r}, which SQLAlchemy does not know (use sqlite:///path.db or postgresql://...)"
    try:
        dialect.import_dbapi()
    except ImportError as exc:
        module = (exc.name or "").split(".")[0] or str(exc)
        package = _DRIVER_PACKAGES.get(module, module)
        other = ""
        if module == "psycopg2" and importlib.util.find_spec("psycopg") is not None:
            other = (
                f", or use the installed psycopg: {url.set(drivername='postgresql+psycopg').render_as_string(hide_password=True)}"
            )
        return f"storage URL {shown} needs the database driver {module!r}, which is not installed (pip install {package}{other})"
    if url.get_backend_name() == "sqlite":
        database = url.database or ""
        if database in ("", ":memory:") or database.startswith("file::memory:"):
            if workers > 1:
                return f"storage URL {shown} is an in-memory SQLite database, which {workers} worker processes cannot share"
            return None
        return _file_problem(Path(database), "SQLite database")
    return None


def _file_problem(path: Path, what: str) -> str | None:
    if path.is_dir():
        return f"{what} {str(path)!r} is a folder"
    if path.exists():
        return None if os.access(path, os.R_OK | os.W_OK) else f"{what} {str(path)!r} is not writable"
    folder = path.parent
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return f"folder of {what} {str(path)!r} cannot be created: {str(existing)!r} is a file"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"folder of {what} {str(path)!r} cannot be written: {str(existing)!r} is not writable"
    return None


# ---- the search ------------------------------------------------------------


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
class _Decision:
    """What ``DistinctSampler`` chose for one trial."""

    config: dict | None = None  # the claimed configuration
    key: str | None = None
    how: str = ""  # enqueued | sampler | neighbour | random
    refused: str = ""  # why nothing was claimed
    infeasible: int = 0  # infeasible proposals passed over
    repeated: int = 0  # claimed or measured proposals passed over


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
    parameters come from ``base``.
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
    ) -> None:
        self.base = base
        self.family = family
        self.problem = problem
        self.dists = dict(dists)
        self.claims = claims
        self.budget = budget
        self.enqueue = [dict(cfg) for cfg in enqueue]
        self.seed = seed
        self.owner = this_owner()
        self.worker = worker or self.owner
        self.feasible = _feasible_configs(family, problem, self.dists)
        self._ordered = list(self.feasible.items()) if self.feasible is not None else None
        self._cursor = 0
        self._spent: set[int] = set()  # enqueued configurations dealt with
        self._configs: dict[str, dict] = {}  # config_key -> config, parsed once
        self._violates: dict[str, bool] = {}
        self._decisions: dict[int, _Decision] = {}

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

    def decision(self, number: int) -> _Decision | None:
        """What was claimed for trial ``number`` (forgotten once asked)."""
        return self._decisions.pop(number, None)

    # Choosing.

    def _decide(self, study: optuna.Study, trial: FrozenTrial) -> _Decision:
        decision = _Decision()
        self._decisions[trial.number] = decision
        taken = set(self.claims.snapshot())
        for cfg, how in self._candidates(study, trial, taken):
            key = config_key(cfg)
            proposed = how in ("enqueued", "sampler")  # rescues are draws, not proposals
            if key in taken:
                decision.repeated += proposed
                continue
            if self._infeasible(cfg, key):
                decision.infeasible += proposed
                continue
            _at("claiming")
            answer = self.claims.claim(key, trial.number, self.owner, self.worker, self.budget)
            if answer == OK:
                _HELD.add((self.claims.study, key))
                decision.config, decision.key, decision.how = cfg, key, how
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
                yield {name: rng.choice(dist.choices) for name, dist in self.dists.items()}, "random"

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


def _matches(cfg: Mapping, wanted: Mapping) -> bool:
    return all(name in cfg and cfg[name] == value for name, value in wanted.items())


@dataclass
class _Run:
    """What the loop's helpers share."""

    study: optuna.Study
    claims: ClaimStore
    owner: str
    worker: str
    lease_s: float
    problem: Problem
    source: str
    measure: Callable[[dict], dict]


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
    worker: str | None = None,
    lease_s: float = DEFAULT_LEASE_S,
) -> StudyOutcome:
    """Search ``family``'s space for ``problem``, maximising ``bandwidth_gbs``.

    Creates the study or resumes it (same ``storage`` and ``study_name``): the
    budget counts every distinct configuration the study has measured or is
    measuring, by this process, earlier runs and concurrent workers alike.
    Trials that dead workers left RUNNING are settled first (see the module's
    docstring).

    Args:
        family: the kernel family whose parameters are searched.
        problem: what is computed; passed to ``family.violations``.
        domains: parameter name -> values to search (others: full domain).
        storage: see ``open_storage``. Worker processes sharing a study need
            a journal file or a database (``storage_problem`` says whether a
            storage can work).
        study_name: the study's name in the storage.
        measure: config -> results row (``tuner.data.results.columns()`` keys, with at
            least ``status``; ``bandwidth_gbs`` when ok).
        budget_trials: distinct configurations to measure, or None for no limit.
        timeout_s: wall-clock seconds after which no new trial is asked.
        sampler: a name from ``SAMPLERS`` or a sampler object (wrapped in a
            ``DistinctSampler`` either way).
        seed: sampler seed. On resume it is offset by the number of trials so
            far, so the sampler does not replay its earlier proposals; give
            concurrent workers different seeds.
        enqueue: configurations (possibly partial) to try first, in order;
            ones already claimed in the study are skipped.
        patience: consecutive trials that measure nothing (nothing could be
            claimed) before the search is given up as stalled. Only reachable
            where the space is too large to enumerate (``MAX_ENUMERATED``).
        worker: this worker's name in its claims and trials (user attribute
            ``worker``), e.g. "gpu0"; default its process
            (``tuner.search.claims.this_owner``). Claims belong to the process
            whatever the name.
        lease_s: a claim held by a process on another host whose heartbeat
            (every ``lease_s / 4`` while measuring) is older than this is
            taken as abandoned. Processes on this host are checked directly.

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
    enqueue = [_check_enqueued(dict(cfg), dists) for cfg in enqueue]
    if isinstance(sampler, str):
        make_sampler(sampler, seed)  # validates the name and dependencies up front

    deadline = None if timeout_s is None else time.monotonic() + timeout_s
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
        # propose its first trials again (harmless but wasted proposals).
        base = make_sampler(sampler, seed + len(study.get_trials(deepcopy=False)))
    else:
        base = sampler
    claims = open_claims(store, study_name)
    owner = this_owner()
    label = worker or owner
    distinct = DistinctSampler(
        base, family, problem, dists, claims, budget=budget_trials, enqueue=enqueue, seed=seed, worker=label
    )
    study.sampler = distinct
    feasible = distinct.feasible
    run = _Run(study, claims, owner, label, lease_s, problem, f"study:{study_name}", measure)
    _retire_waiting(study)
    _adopt_unclaimed(run)

    outcome = StudyOutcome(study=study)
    asks = idle = 0
    while True:
        # The claims are the shared state between workers: read them fresh.
        snapshot = claims.snapshot()
        recovered = _recover(run, snapshot)
        if recovered:
            outcome.recovered += recovered
            continue
        measured = sum(c.state != CLAIMED for c in snapshot.values())
        in_flight = len(snapshot) - measured
        # Whether any feasible configuration is unclaimed (known without a
        # set difference while there are fewer claims than configurations).
        unclaimed = None if feasible is None or len(snapshot) < len(feasible) else feasible.keys() - snapshot.keys()
        if budget_trials is not None and measured >= budget_trials:
            outcome.stop_reason = "budget"
            break
        if deadline is not None and time.monotonic() >= deadline:
            outcome.stop_reason = "timeout"
            break
        if unclaimed == set() and not any(snapshot[k].state == CLAIMED for k in feasible):
            outcome.stop_reason = "exhausted"
            break
        if max_asks is not None and asks >= max_asks:
            outcome.stop_reason = "ask_limit"
            break
        if idle >= patience:
            outcome.stop_reason = "stalled"
            break
        if (budget_trials is not None and measured + in_flight >= budget_trials) or unclaimed == set():
            # Other workers are measuring the last configurations: wait for
            # them, so that one that dies is replaced.
            time.sleep(WAIT_S)
            continue

        asks += 1
        try:
            trial = study.ask(fixed_distributions=dists)
            decision = distinct.decision(trial.number) or _Decision(refused="the sampler was not asked")
            cfg = {name: plain_value(trial.params[name]) for name in dists}
            key = config_key(cfg)
            trial.set_user_attr("config_key", key)
        except optuna.exceptions.UpdateFinishedTrialError:
            # Failed as stale by a worker that took this one for dead (its
            # lease expired) before its parameters were set.
            outcome.lost += 1
            continue
        outcome.infeasible += decision.infeasible
        outcome.duplicate += decision.repeated
        if decision.key != key:
            if decision.key is not None:
                # A WAITING trial (enqueued by hand, or by an earlier version)
                # was popped with its own parameters.
                claims.release(decision.key, owner)
                _HELD.discard((study_name, decision.key))
                decision.refused = "its parameters were fixed before the sampler chose"
            trial.set_user_attr("reason", decision.refused)
            study.tell(trial, state=TrialState.FAIL)
            outcome.lost += 1
            idle += 1
            continue

        idle = 0
        rescue = decision.how if decision.how in ("neighbour", "random") else ""
        try:
            row = _measure_claimed(run, trial, cfg, key, rescue)
        finally:
            _HELD.discard((study_name, key))
        if row is None:
            outcome.lost += 1
            continue
        outcome.rows.append(row)
        outcome.measured += 1
        outcome.rescued += bool(rescue)
        outcome.failed += not _is_ok(row)

    all_rows = study_rows(study)
    outcome.total_measured = sum(c.state != CLAIMED for c in claims.snapshot().values())
    ok_rows = [r for r in all_rows if _is_ok(r)]
    outcome.best = max(ok_rows, key=lambda r: r["bandwidth_gbs"]) if ok_rows else None
    return outcome


def study_rows(study: optuna.Study) -> list[dict]:
    """The results row of every configuration measured in the study, once
    each, in trial order, with ``trial`` set to the number of the trial that
    measured it.

    Rows come from the trials' ``row`` user attributes, and from the study's
    claims for measurements whose trial was never told (a worker killed in
    between, not yet recovered by a rerun).
    """
    rows: dict[str, dict] = {}
    for trial in study.get_trials(deepcopy=False):
        text = trial.user_attrs.get("row")
        if text is None:
            continue
        row = json.loads(text)
        key = trial.user_attrs.get("config_key") or row.get("config_key")
        if key in rows:
            continue  # measured twice by a version without claims: keep the first
        row["trial"] = trial.number
        rows[key] = row
    claims = open_claims(study._storage, study.study_name, create=False)
    if claims is not None:
        for key, claim in claims.snapshot(rows=True).items():
            if claim.row is not None and key not in rows:
                row = json.loads(claim.row)
                row["trial"] = claim.trial
                rows[key] = row
    return sorted(rows.values(), key=lambda r: r["trial"])


# ---- helpers ---------------------------------------------------------------


def _measure_claimed(run: _Run, trial: optuna.Trial, cfg: dict, key: str, rescue: str) -> dict | None:
    """Measure the claimed ``cfg`` in ``trial``, record and tell it; the row,
    or None where the claim was lost meanwhile (judged stale)."""
    settled = False  # the claim is recorded or released
    try:
        trial.set_user_attr("worker", run.worker)
        if rescue:
            trial.set_user_attr("rescue", rescue)
        _at("claimed")
        interval = run.lease_s / 4 if run.claims.shared else None
        try:
            with Heartbeat(run.claims, key, run.owner, interval):
                result = run.measure(dict(cfg))
        except FatalDeviceError as error:
            settled = True
            if error.row is None:
                _abandon(run, trial, key, "device context lost")
            else:
                # The configuration that poisoned the context: a measurement.
                row = _complete_row(_fault_row(error), cfg, trial.number, run.problem, run.source)
                _commit(run, trial._trial_id, trial.number, key, row)
            raise
        except Exception as exc:  # noqa: BLE001 - any failure of one config is data
            result = {"status": "launch_error", "error": f"measure raised {type(exc).__name__}: {exc}"}
        _at("measured")
        problem_text = _row_problem(result)
        if problem_text is not None:
            settled = True
            _abandon(run, trial, key, problem_text)
            raise ValueError(problem_text)
        row = _complete_row(result, cfg, trial.number, run.problem, run.source)
        settled = True
        return row if _commit(run, trial._trial_id, trial.number, key, row) else None
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


def _commit(run: _Run, trial_id: int, number: int, key: str, row: dict) -> bool:
    """Record ``row`` in the claim (durable from here on), then on the trial,
    and tell Optuna. False where the claim is no longer this worker's."""
    text = _row_text(row)
    if not run.claims.record(key, run.owner, text):
        _logger.warning("trial %d: the claim on %s was taken over while measuring; its row is dropped", number, key)
        _fail_trial(run.study, number, "claim taken over by another worker while measuring")
        return False
    _at("recorded")
    _finish_trial(run.study, trial_id, number, row, text)
    run.claims.finish(key, run.owner)
    _at("done")
    return True


def _finish_trial(study: optuna.Study, trial_id: int, number: int, row: dict, text: str) -> None:
    """Put ``row`` on a trial and tell it (COMPLETE with the bandwidth where
    ok, else FAIL with the reason); nothing where it is finished already
    (by a worker that took this one for dead: the row stays in the claim,
    where ``study_rows`` finds it)."""
    storage = study._storage
    try:
        if storage.get_trial(trial_id).state.is_finished():
            return
        for name in ROW_ATTRS:
            storage.set_trial_user_attr(trial_id, name, row.get(name))
        storage.set_trial_user_attr(trial_id, "config_key", row["config_key"])
        storage.set_trial_user_attr(trial_id, "row", text)
        _at("attrs")
        if _is_ok(row):
            study.tell(number, float(row["bandwidth_gbs"]), skip_if_finished=True)
        else:
            storage.set_trial_user_attr(trial_id, "reason", _reason(row))
            study.tell(number, state=TrialState.FAIL, skip_if_finished=True)
    except optuna.exceptions.UpdateFinishedTrialError:
        _logger.warning("trial %d was finished by another worker; its row is kept in its claim", number)
        return
    _at("told")


def _abandon(run: _Run, trial: optuna.Trial, key: str, reason: str) -> None:
    """Release the claim (nothing was measured) and fail the trial."""
    try:
        run.claims.release(key, run.owner)
    finally:
        _fail_trial(run.study, trial.number, reason)


def _fail_trial(study: optuna.Study, number: int, reason: str) -> None:
    """Tell trial ``number`` FAIL with ``reason``, unless it is finished."""
    storage = study._storage
    try:
        trial_id = storage.get_trial_id_from_study_id_trial_number(study._study_id, number)
        if storage.get_trial(trial_id).state.is_finished():
            return
        storage.set_trial_user_attr(trial_id, "reason", reason)
        study.tell(number, state=TrialState.FAIL, skip_if_finished=True)
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
        _fail_trial(run.study, claim.trial, "stale: worker gone")
    for claim in taken:
        if claim.row is not None:
            try:
                trial_id = run.study._storage.get_trial_id_from_study_id_trial_number(run.study._study_id, claim.trial)
            except KeyError:
                trial_id = None
            if trial_id is not None:
                _finish_trial(run.study, trial_id, claim.trial, json.loads(claim.row), claim.row)
        run.claims.finish(claim.key, run.owner)
    return len(released) + len(taken)


def _adopt_unclaimed(run: _Run) -> None:
    """Claim, as done, measurements that have no claim: made by a version of
    this module without claims, so that they count and are not redone."""
    snapshot = run.claims.snapshot()
    entries = []
    for trial in run.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL)):
        key, text = trial.user_attrs.get("config_key"), trial.user_attrs.get("row")
        if key is not None and text is not None and key not in snapshot:
            entries.append((key, trial.number, text))
    if entries:
        run.claims.adopt(entries, run.owner, run.worker)


def _retire_waiting(study: optuna.Study) -> None:
    """Fail the WAITING trials that versions of this module enqueued: popping
    them races on SQLite, and their parameters were not claimed."""
    storage = study._storage
    for trial in study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
        try:
            storage.set_trial_user_attr(trial._trial_id, "reason", "enqueued by an earlier version; retired")
            storage.set_trial_state_values(trial._trial_id, TrialState.FAIL)
        except (KeyError, optuna.exceptions.UpdateFinishedTrialError):
            pass


def _feasible_configs(family: Family, problem: Problem, dists: Mapping[str, CategoricalDistribution]) -> dict[str, dict] | None:
    """config_key -> config of every feasible configuration, or None where
    the space is too large to enumerate (then exhaustion is not detected)."""
    size = math.prod(len(d.choices) for d in dists.values())
    if size > MAX_ENUMERATED:
        return None
    space = family.space(problem, {name: list(d.choices) for name, d in dists.items()})
    return {config_key(cfg): cfg for cfg in space}


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
