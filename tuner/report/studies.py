"""What an Optuna study found: its history, its best against the exhaustive
sweep of the same problem, and which parameters mattered.

Importances come from an in-memory study rebuilt from the result rows (every
parameter as a categorical over the values tried), so the report needs no
access to the study database. The evaluator is PED-ANOVA: it is deterministic
and needs no scikit-learn (Optuna's default, fANOVA, does).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tuner.data.results import param_columns, plain_value
from tuner.data.selection import best, is_study, usable
from tuner.data.time_to_target import Reach, Timeline, reach, timeline

MIN_TRIALS_FOR_IMPORTANCE = 5


@dataclass
class StudySummary:
    """One study, ready for a figure and a paragraph.

    Attributes:
        name: the study name (source without ``study:``).
        family, dtype, n: the problem (the most common one among its rows).
        history: per trial: trial, status, bandwidth_gbs (NaN unless ok), best_so_far_gbs.
        best: the best ok row, or None.
        exhaustive_gbs, exhaustive_source, exhaustive_row: the best ok row of the
            sweeps of the same problem within the study's space (else of the same
            problem and variants; NaN / "" / None without one).
        importances: parameter -> importance (sums to 1), None when not computed.
        importance_note: why importances are missing ("" when present).
        timeline: the rows in the order they finished, with their wall and
            compile seconds where recorded (``tuner.data.time_to_target``).
    """

    name: str
    family: str
    dtype: str
    n: int
    history: pd.DataFrame
    best: pd.Series | None
    exhaustive_gbs: float = np.nan
    exhaustive_source: str = ""
    exhaustive_row: pd.Series | None = None
    importances: dict[str, float] | None = None
    importance_note: str = ""
    notes: list[str] = field(default_factory=list)
    timeline: Timeline | None = None

    @property
    def ok_trials(self) -> int:
        return int((self.history["status"] == "ok").sum())

    @property
    def best_gbs(self) -> float:
        return float(self.best["bandwidth_gbs"]) if self.best is not None else np.nan

    def trials_to_reach(self, fraction: float) -> int | None:
        """How many trials it took to reach ``fraction`` of the exhaustive best."""
        if np.isnan(self.exhaustive_gbs):
            return None
        reached = self.history[self.history["best_so_far_gbs"] >= fraction * self.exhaustive_gbs]
        return int(reached.index[0]) + 1 if len(reached) else None

    def reach_final_best(self) -> Reach | None:
        """Evaluations and wall time to within 1 % of the study's own best (None: no ok row)."""
        if self.timeline is None or self.best is None:
            return None
        return reach(self.timeline, self.best_gbs)

    def reach_exhaustive(self) -> Reach | None:
        """Evaluations and wall time to within 1 % of the exhaustive best (None: no sweep to compare with)."""
        if self.timeline is None or np.isnan(self.exhaustive_gbs):
            return None
        return reach(self.timeline, self.exhaustive_gbs)


def _history(rows: pd.DataFrame) -> pd.DataFrame:
    ordered = rows.sort_values("trial", kind="stable", na_position="last").reset_index(drop=True)
    ok_mask = usable(ordered).index
    bandwidth = pd.Series(np.nan, index=ordered.index)
    bandwidth.loc[ok_mask] = pd.to_numeric(ordered.loc[ok_mask, "bandwidth_gbs"]).to_numpy()
    trial = ordered["trial"].astype("Float64").fillna(pd.Series(np.arange(len(ordered)), dtype="Float64"))
    return pd.DataFrame(
        {
            "trial": trial.astype("int64").to_numpy(),
            "status": ordered["status"].astype(str).to_numpy(),
            "bandwidth_gbs": bandwidth.to_numpy(dtype=float),
            "best_so_far_gbs": bandwidth.cummax().ffill().to_numpy(dtype=float),
        }
    )


def param_importances(ok_rows: pd.DataFrame) -> tuple[dict[str, float] | None, str]:
    """PED-ANOVA importances of the parameters that vary among ``ok_rows``
    (objective: bandwidth, maximised), or (None, why not)."""
    if len(ok_rows) < MIN_TRIALS_FOR_IMPORTANCE:
        return None, f"only {len(ok_rows)} ok trials, importances need at least {MIN_TRIALS_FOR_IMPORTANCE}"
    import optuna
    from optuna.distributions import CategoricalDistribution
    from optuna.importance import PedAnovaImportanceEvaluator, get_param_importances

    values = {c: [plain_value(v) for v in ok_rows[c]] for c in param_columns(ok_rows)}
    varying = {c: v for c, v in values.items() if len(set(v)) > 1}
    if not varying:
        return None, "no parameter varies among the ok trials"
    distributions = {
        c: CategoricalDistribution(sorted(set(v), key=lambda x: (x is None, str(type(x)), x if x is not None else 0)))
        for c, v in varying.items()
    }
    trials = [
        optuna.trial.create_trial(
            params={c: varying[c][i] for c in varying},
            distributions=distributions,
            value=float(value),
        )
        for i, value in enumerate(ok_rows["bandwidth_gbs"])
    ]
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # create_study logs one line per call
    try:
        study = optuna.create_study(direction="maximize")
        study.add_trials(trials)
        # PED-ANOVA contrasts the top quantile with the rest; it wants at least
        # MIN_TRIALS_FOR_IMPORTANCE trials in that quantile to be stable.
        quantile = min(0.5, max(0.1, MIN_TRIALS_FOR_IMPORTANCE / len(trials)))
        evaluator = PedAnovaImportanceEvaluator(target_quantile=quantile)
        importances = get_param_importances(study, evaluator=evaluator, normalize=True)
    finally:
        optuna.logging.set_verbosity(verbosity)
    return {k: float(v) for k, v in importances.items()}, ""


def summarise_study(name: str, rows: pd.DataFrame, dataset: pd.DataFrame) -> StudySummary:
    """History, best, the exhaustive best of the matching sweep, importances."""
    problem = rows[["family", "dtype", "n"]].dropna().astype(str).value_counts().index[0]
    family, dtype, n = problem[0], problem[1], int(problem[2])
    mine = rows[((rows["family"] == family) & (rows["dtype"] == dtype) & (rows["n"] == n)).fillna(False).to_numpy(dtype=bool)]
    summary = StudySummary(name, family, dtype, n, _history(mine), best(usable(mine)), timeline=timeline(mine))
    if len(mine) < len(rows):
        summary.notes.append(f"{len(rows) - len(mine)} rows of other problems left out")

    ok = usable(dataset)
    variants = set(mine["variant"].dropna())
    sweeps = ok[
        (~is_study(ok)).to_numpy(dtype=bool)
        & ((ok["family"] == family) & (ok["dtype"] == dtype) & (ok["n"] == n)).fillna(False).to_numpy(dtype=bool)
        & (ok["variant"].isin(variants).fillna(False).to_numpy(dtype=bool) if variants else True)
    ]
    # Judge the study against the sweep rows of its own space (every parameter
    # within the values the study searched); other sweeps of the same problem
    # may hold configurations the study could never propose.
    in_space = sweeps
    for column in param_columns(mine):
        searched = set(mine[column].dropna()) if column in mine else set()
        if searched:
            in_space = in_space[in_space[column].isin(searched).fillna(False).to_numpy(dtype=bool)]
    top = best(in_space) if not in_space.empty else best(sweeps)
    if top is not None:
        summary.exhaustive_gbs = float(top["bandwidth_gbs"])
        summary.exhaustive_source = str(top["source"])
        summary.exhaustive_row = top

    summary.importances, summary.importance_note = param_importances(usable(mine))
    return summary


def summarise_studies(studies: dict[str, pd.DataFrame], dataset: pd.DataFrame) -> list[StudySummary]:
    return [summarise_study(name, rows, dataset) for name, rows in sorted(studies.items()) if not rows.empty]
