"""Held-out figures of the search benchmark (``benchmarks/search.py --held-out``).

The project's strategies have no per-table settings, so a strategy's score on
a table is already a score on a table it was not fitted to; what can be fitted
is the *choice* of a default among candidates. Leaving one table out at a
time, the candidate with the highest mean score on the other tables (mean of
the methodology's score over the budgets) is scored on the one left out: the
``held-out choice`` row is what choosing a default this way is worth on a
table it never saw, and each table's line names the candidate chosen without it.

Every figure carries a 95 % interval over seeds: the seeds of each table are
resampled (bootstrap, the same number drawn with replacement) and the score
recomputed from the resampled runs (the methodology's score is of the median
curve over seeds, not a mean of per-seed scores); an aggregate over tables
resamples each table's seeds at once. A difference between two strategies on
one table is a loss beyond the seed-to-seed spread where its interval lies
wholly below zero.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

BOOTSTRAP = 400  # resamples of the seeds per (table, strategy)
LEVEL = 0.95


@dataclass
class Scores:
    """One strategy on one table: per budget label, the methodology's score and
    the share of seeds within 1 % of the optimum over every seed, and the same
    two over each bootstrap resample of the seeds (None where the budget has no
    methodology score)."""

    score: dict[str, float | None] = field(default_factory=dict)
    share: dict[str, float] = field(default_factory=dict)
    score_boot: dict[str, np.ndarray | None] = field(default_factory=dict)
    share_boot: dict[str, np.ndarray] = field(default_factory=dict)


def best_times(stats, runs: list[list[float]], budget: int) -> np.ndarray:
    """(seeds, budget): each seed's best time within 1..budget evaluations; the
    space's worst time before a run finds a valid configuration, and a run that
    ended early keeps its best."""
    worst = float(stats.objective_performances_total_sorted[-1])
    best = np.full((len(runs), budget), worst)
    for i, run in enumerate(runs):
        found = np.maximum.accumulate(np.array(run[:budget] or [0.0], float))
        times = np.where(found > 0, 1000.0 / np.maximum(found, 1e-300), worst)
        best[i, : len(times)] = times
        best[i, len(times) :] = times[-1]
    return best


def table_scores(stats, optimum: float, runs: list[list[float]], budgets: dict[str, int], scored_until: int | None,
                 reps: int = BOOTSTRAP, seed: int = 0) -> Scores:  # fmt: skip
    """``Scores`` of one strategy's ``runs`` (one per seed) at ``budgets``
    (label -> evaluations); ``scored_until``: the first budget the methodology
    cannot score (its random baseline has reached the optimum), or None."""
    from autotuning_methodology.baseline import RandomSearchCalculatedBaseline

    baseline = RandomSearchCalculatedBaseline(stats)
    largest = max(budgets.values())
    scorable = [b for b in budgets.values() if scored_until is None or b < scored_until]
    horizon = max(scorable, default=0)
    best = best_times(stats, runs, largest)
    rng = np.random.default_rng(seed)
    picks = [np.arange(len(runs))] + [rng.integers(0, len(runs), len(runs)) for _ in range(reps)]
    fevals = np.arange(1, horizon + 1)
    # A score at budget b is the mean of the standardised curve over 1..b: one curve per resample serves every budget.
    curves = [baseline.get_standardised_curve(fevals, np.median(best[pick, :horizon], axis=0), "fevals") for pick in picks] if horizon else []
    hits = {b: np.array([max(run[:b], default=0.0) >= 0.99 * optimum for run in runs]) for b in budgets.values()}
    out = Scores()
    for label, b in budgets.items():
        shares = np.array([hits[b][pick].mean() for pick in picks])
        out.share[label], out.share_boot[label] = float(shares[0]), shares[1:]
        if b in scorable:
            values = np.array([float(np.mean(curve[:b])) for curve in curves])
            out.score[label], out.score_boot[label] = float(values[0]), values[1:]
        else:
            out.score[label], out.score_boot[label] = None, None
    return out


def interval(samples: np.ndarray) -> tuple[float, float]:
    """The central ``LEVEL`` interval of bootstrap ``samples``."""
    tail = (1 - LEVEL) / 2 * 100
    lo, hi = np.percentile(samples, [tail, 100 - tail])
    return float(lo), float(hi)


def overall(scores: Scores, labels: list[str]) -> float | None:
    """The mean of a table's scores over ``labels`` that it has, or None."""
    values = [scores.score[label] for label in labels if scores.score.get(label) is not None]
    return statistics.fmean(values) if values else None


def held_out(table: dict[tuple[str, str], Scores], tables: list[str], strategies: list[str],
             labels: list[str], groups: dict[str, str] | None = None) -> dict:  # fmt: skip
    """The held-out figures of ``table`` ((table, strategy) -> ``Scores``);
    ``groups``: table -> its group (a kernel), left out whole with each of its
    tables (None: each table is a group of its own).

    Returns:
        ``aggregate``: strategy (and the two held-out choices) -> label ->
        (mean score over tables, interval, mean share within 1 %, interval,
        tables scored);
        ``choices``: left-out table -> the strategy chosen on the others;
        ``choices_at``: label -> left-out table -> the strategy best at that
        budget on the others, None where none of them scores it (the
        ``held-out choice per budget`` row);
        ``per_table``: (table, strategy) -> label -> (score, interval, share);
        ``tables`` and ``group_count``: how many of each.
    """
    present = [s for s in strategies if all((t, s) in table for t in tables)]
    # A default is chosen among the strategies with every budget (a capped sampler's mean would be over fewer).
    candidates = [s for s in present if all(set(labels) <= set(table[(t, s)].share) for t in tables)]
    group = (groups or {}).get
    chosen_on = {left: [t for t in tables if group(t, t) != group(left, left)] for left in tables}
    choices = {left: _best(table, candidates, others, lambda scores: overall(scores, labels)) for left, others in chosen_on.items()}
    choices_at = {label: {left: _best(table, candidates, others, lambda scores, label=label: scores.score.get(label))
                          for left, others in chosen_on.items()} for label in labels}  # fmt: skip
    rows = {s: {t: table[(t, s)] for t in tables} for s in present}
    if all(choices.values()) and candidates:
        rows["held-out choice"] = {t: table[(t, choices[t])] for t in tables}
    aggregate = _aggregate(rows, labels)
    # A choice made per budget: each budget's cell of each table comes from the strategy best at that budget on
    # the others, which is what a default that switches by budget could be worth on tables it never saw. A
    # budget with a table no choice was made for has no cell.
    per_budget = {}
    for label, chosen in choices_at.items():
        if candidates and all(chosen.values()):
            per_budget |= _aggregate({"": {t: table[(t, chosen[t])] for t in tables}}, [label])[""]
    if per_budget:
        aggregate["held-out choice per budget"] = per_budget
    per_table = {(t, s): {label: (sc.score.get(label), interval(sc.score_boot[label]) if sc.score_boot.get(label) is not None
                                  else None, sc.share[label]) for label in labels if label in sc.share}
                 for (t, s), sc in table.items()}  # fmt: skip
    return {"aggregate": aggregate, "choices": choices, "choices_at": choices_at, "per_table": per_table,
            "tables": len(tables), "group_count": len({group(t, t) for t in tables})}  # fmt: skip


def _best(table: dict[tuple[str, str], Scores], candidates: list[str], others: list[str],
          score: Callable[[Scores], float | None]) -> str | None:  # fmt: skip
    """The candidate with the highest mean ``score`` over the tables ``others`` (None where there is no
    candidate, or no table of ``others`` has a score)."""

    def mean(strategy: str) -> float:
        values = [v for t in others if (v := score(table[(t, strategy)])) is not None]
        return statistics.fmean(values) if values else -np.inf

    best = max(candidates, key=mean) if candidates and others else None
    return best if best is not None and mean(best) > -np.inf else None


def _aggregate(rows: dict[str, dict[str, Scores]], labels: list[str]) -> dict:
    """name -> label -> (mean score over tables, interval, mean share within 1 %, interval, tables scored)."""
    aggregate = {}
    for name, per in rows.items():
        entry = {}
        for label in labels:
            with_score = [s for s in per.values() if s.score.get(label) is not None]
            have = [s for s in per.values() if label in s.share]
            if not have:
                continue
            share = statistics.fmean(s.share[label] for s in have)
            share_iv = interval(np.mean([s.share_boot[label] for s in have], axis=0))
            if with_score:
                score = statistics.fmean(s.score[label] for s in with_score)
                score_iv = interval(np.mean([s.score_boot[label] for s in with_score], axis=0))
            else:
                score, score_iv = None, None
            entry[label] = (score, score_iv, share, share_iv, len(with_score))
        aggregate[name] = entry
    return aggregate


def differences(table: dict[tuple[str, str], Scores], tables: list[str], strategy: str, reference: str,
                labels: list[str]) -> list[tuple[str, str, float, tuple[float, float]]]:  # fmt: skip
    """(table, label, score difference, its interval) of ``strategy`` minus
    ``reference`` on every table and label both have a score for; the two
    strategies' seeds are resampled independently (a seed number pairs nothing)."""
    out = []
    for t in tables:
        mine, theirs = table.get((t, strategy)), table.get((t, reference))
        if mine is None or theirs is None:
            continue
        for label in labels:
            if mine.score.get(label) is None or theirs.score.get(label) is None:
                continue
            out.append((t, label, mine.score[label] - theirs.score[label], interval(mine.score_boot[label] - theirs.score_boot[label])))
    return out


def mean_difference(table: dict[tuple[str, str], Scores], tables: list[str], strategy: str, reference: str,
                    labels: list[str]) -> dict[str, tuple[float, tuple[float, float]]]:  # fmt: skip
    """label -> (mean over ``tables`` of ``strategy``'s score minus ``reference``'s,
    its interval): the held-out table's two means set against each other, each
    table's seeds of each strategy resampled as ``differences`` does. A label
    is left out unless every table scores it for both."""
    out = {}
    for label in labels:
        pairs = [(table.get((t, strategy)), table.get((t, reference))) for t in tables]
        if not all(mine and theirs and mine.score.get(label) is not None and theirs.score.get(label) is not None
                   for mine, theirs in pairs):  # fmt: skip
            continue
        gap = statistics.fmean(mine.score[label] - theirs.score[label] for mine, theirs in pairs)
        out[label] = (gap, interval(np.mean([mine.score_boot[label] - theirs.score_boot[label] for mine, theirs in pairs], axis=0)))
    return out


def _cell(value: float | None, iv: tuple[float, float] | None, share: float | None = None) -> str:
    text = "-" if value is None else f"{value:.3f} [{iv[0]:.2f}, {iv[1]:.2f}]"
    return text if share is None else f"{text} ({share:.0%})"


def format_held_out(result: dict, labels: list[str], loss_checks: list[tuple[str, str, list]]) -> str:
    """The held-out table (strategies x budgets: score [95 % interval over
    seeds] (share of seeds within 1 %)), each left-out table's choice and its
    figures, and the losses beyond the interval of ``loss_checks``
    ((strategy, reference, ``differences``, ``mean_difference``))."""
    aggregate = result["aggregate"]
    header = ["strategy", *labels]
    body = [[name, *(_cell(e[label][0], e[label][1], e[label][2]) if label in e else "-" for label in labels)]
            for name, e in aggregate.items()]  # fmt: skip
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(header)]
    chosen_on = "the others" if result.get("group_count", result["tables"]) == result["tables"] else \
        f"the tables of the other kernels ({result['group_count']} kernels, each left out whole)"
    lines = [f"Held out over {result['tables']} tables: mean methodology score [95 % interval over seeds] "
             "(mean share of seeds within 1 %) per budget; 'held-out choice': each table scored by the strategy "
             f"with the highest mean score on {chosen_on}",
             "  ".join(h.rjust(w) if i else h.ljust(w) for i, (h, w) in enumerate(zip(header, widths))),
             "  ".join("-" * w for w in widths)]  # fmt: skip
    lines += ["  ".join(v.rjust(w) if i else v.ljust(w) for i, (v, w) in enumerate(zip(b, widths))) for b in body]
    unscored = {label: result["tables"] - e[label][4] for e in aggregate.values() for label in labels
                if label in e and e[label][4] < result["tables"]}  # fmt: skip
    if unscored:
        lines.append("scores over fewer tables where the methodology cannot score a budget: "
                     + ", ".join(f"{label}: {n} left out" for label, n in unscored.items()))  # fmt: skip
    if result.get("choices_at") and "held-out choice per budget" in aggregate:
        lines.append("'held-out choice per budget': each budget's cell of each table from the strategy best at that budget "
                     f"on {chosen_on}; chosen, over the tables left out:")  # fmt: skip
        for label, chosen in result["choices_at"].items():
            counts = Counter(s or "no choice" for s in chosen.values()).most_common()
            lines.append(f"  {label}: " + ", ".join(f"{s} {n} of {len(chosen)}" for s, n in counts))
    lines += ["", "Per table: score [interval] (share within 1 %); * the strategy chosen with this table left out"]
    strategies = list(dict.fromkeys(s for _, s in result["per_table"]))
    for t, chosen in result["choices"].items():
        lines.append(f"{t}")
        for s in strategies:
            cells = result["per_table"].get((t, s))
            if cells is None:
                continue
            mark = "*" if s == chosen else " "
            lines.append(f"  {mark} {s:<16} " + "  ".join(f"{label}: {_cell(*cells[label])}" for label in labels if label in cells))
    for strategy, reference, diffs, overall_gap in loss_checks:
        losses = [d for d in diffs if d[3][1] < 0]
        lines += ["", f"{strategy} against {reference}: {len(losses)} of {len(diffs)} (table, budget) scores lower beyond "
                      "the interval over seeds" + (":" if losses else "")]  # fmt: skip
        if overall_gap:
            lines.append("  mean over the tables: " + "  ".join(f"{label}: {d:+.3f} [{iv[0]:+.2f}, {iv[1]:+.2f}]"
                                                                 for label, (d, iv) in overall_gap.items()))  # fmt: skip
        lines += [f"  {t} at {label}: {d:+.3f} [{iv[0]:+.2f}, {iv[1]:+.2f}]" for t, label, d, iv in losses]
    return "\n".join(lines)
