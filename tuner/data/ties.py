"""Winners with their ties: per problem, the configurations a run cannot tell
apart from its winner, and which of them the C++ header exports.

**Tie set.** Each configuration's median time has a 95 % interval
(``tuner.data.intervals``: order statistics of its samples). A configuration
ties with the winner unless it is shown slower than the winner by more than
``MARGIN`` (0.5 %): the 95 % interval of its slowdown (the winner's figure
over its own, in the ranking's unit: GB/s, or GFLOP/s for compute-bound
families; the two medians' intervals combined as ``tuner compare`` combines
them) must lie wholly above ``1 + MARGIN`` for it to be left out. This is
``tuner compare``'s own judgment turned on one run: a member of the set is a
configuration that compare would not call SLOWER than the winner. The margin
is there because the set is what a rerun may name, and a rerun differs from
this run by more than this run's noise: on one GPU model, two fresh runs
judged 1829 of 2060 configurations the same within 0.5 %, and their ratios
ranged from 0.985 to 1.022 (``benchmarks/results/compare-two-fresh-h100.txt``),
where the within-run intervals of 10 samples are 0.2 to 0.8 % wide (tenth to
ninetieth percentile of the shipped H100 run). A row without an interval is a point (its
median at both ends): it ties when its figure, with the other side's interval if that has
one, is not shown past the margin. Here the judgment departs from compare's, which calls a
pair AMBIGUOUS where either side lacks a 95 % interval (no interval, or fewer than 6
samples, whose min-to-max span is kept as the interval here): a tie set must still name
what a rerun may pick, so such rows are judged by what they have.

**The exported member.** Every member of a tie set is an equally good answer
for this problem on this GPU, so the header exports the one that also holds up
at the other sizes of the same family and dtype: the member in the tie sets of
the most of those sizes (this one included), then the smallest geometric mean
of its slowdown (each size's best figure over its figure) over the sizes where
it was measured, this one included (so two sizes whose winners tie at both
export the same configuration, not each the other's winner). Where no member
ties at another size, or the tie set is the winner alone, the winner is
exported. ``best.json`` names the winner, the exported member and the reason,
and lists the whole set; the header lists the others in a comment.

A configuration measured twice for one problem (by a sweep and a study)
counts once, by its better row (the one the winner is chosen from).

**One answer per operation.** Where a family's configurations do different
work (``Family.operation_param``: copy's ``variant``, a copy or a read-only
pass), each operation of a problem is ranked on its own, with its own tie set
and exported member, chosen over the sizes of that operation: the fastest read
is no answer to "which copy is fastest".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from tuner.data.intervals import MARGIN, ratio_intervals, row_intervals
from tuner.data.results import config_params
from tuner.families import REGISTRY

# A tie set of this many configurations or more is called large in the report.
LARGE = 5


# What one answer is of: (family, dtype, n, operation), the operation None for a family of one.
AnswerKey = tuple[str, str, int, "str | None"]


def operations(rows: pd.DataFrame) -> pd.Series:
    """Each row's operation (``Family.operation`` of its configuration key),
    None where its family has one operation or is not loaded in this process."""
    out = pd.Series([None] * len(rows), index=rows.index, dtype="object")
    if rows.empty or "family" not in rows:
        return out
    for name, keys in rows.groupby("family", sort=False)["config_key"]:
        family = REGISTRY.families.get(name)
        if family is None or family.operation_param is None:
            continue
        named = {key: family.operation(config_params(key)) for key in keys.unique()}
        out.loc[keys.index] = keys.map(named)
    return out


def operation_order(family_name: str, operation: str | None) -> tuple[int, str]:
    """Where an operation sorts among its family's (``Family.operations``:
    the default first); an operation the family does not list, after them."""
    family = REGISTRY.families.get(family_name)
    listed = family.operations() if family is not None else ()
    name = operation or ""
    return (listed.index(name), "") if name in listed else (len(listed), name)


@dataclass(frozen=True)
class Problem:
    """One problem's distinct configurations, best first, with their intervals.

    ``table`` columns: the rows' own, plus ``low``/``high`` (the interval of
    the median time), ``how`` (how it was made), ``behind`` (the winner's figure
    over this one's, minus one: 0 for the winner) and ``tie`` (in the tie set).
    """

    family: str
    dtype: str
    n: int
    by: str  # "bandwidth_gbs" or "gflops"
    table: pd.DataFrame
    operation: str | None = None  # None: the family's configurations all do the same work

    @property
    def key(self) -> AnswerKey:
        return self.family, self.dtype, self.n, self.operation

    @property
    def series(self) -> tuple[str, str | None, str]:
        """What the sizes whose tie sets ``choose`` weighs have in common."""
        return self.family, self.operation, self.dtype

    @property
    def winner(self) -> pd.Series:
        return self.table.iloc[0]

    @cached_property
    def ties(self) -> pd.DataFrame:
        return self.table[self.table["tie"]]


def rank(rows: pd.DataFrame, by: str, margin: float = MARGIN) -> pd.DataFrame:
    """``rows`` (ok rows of one problem) as distinct configurations, best first,
    with the interval columns and ``tie`` of the module docstring."""
    rows = rows[rows[by].notna()]
    # Equal figures are common (event times come in steps of 32 ns): the configuration key, then the
    # row's source, break ties, so the winner does not depend on the order the rows were read in.
    order = [by, "config_key", *(["source"] if "source" in rows else [])]
    rows = rows.sort_values(order, ascending=[False] + [True] * (len(order) - 1), kind="stable")
    rows = rows.drop_duplicates("config_key").reset_index(drop=True)
    table = rows.join(row_intervals(rows))
    metric, median = table[by].astype("float64"), table["time_ms_median"].astype("float64")
    if table.empty:
        table["behind"], table["tie"] = pd.Series(dtype="float64"), pd.Series(dtype="bool")
        return table
    winner = table.iloc[0]
    table["behind"] = winner[by] / metric - 1.0
    # The slowdown's interval: the ratio of the two medians' intervals, scaled to the ranking's unit. A side
    # without an interval is a point (its median at both ends), so the other side's interval still counts.
    known = table["low"].notna() & table["high"].notna()
    low_end = table["low"].where(known, median).to_numpy(dtype="float64")
    high_end = table["high"].where(known, median).to_numpy(dtype="float64")
    size = len(table)
    ratio, low, _ = ratio_intervals(np.full(size, median.iloc[0]), np.full(size, low_end[0]), np.full(size, high_end[0]),
                                    median.to_numpy(), low_end, high_end)  # fmt: skip
    fastest = (1.0 + table["behind"].to_numpy()) * np.where(np.isfinite(low / ratio), low / ratio, 1.0)
    table["tie"] = fastest <= 1.0 + margin
    table.iloc[0, table.columns.get_loc("tie")] = True
    return table


def problems(candidates: dict[AnswerKey, tuple[pd.DataFrame, str]]) -> dict[AnswerKey, Problem]:
    """Per answer key (family, dtype, n, operation), its ``Problem``:
    ``candidates`` maps a key to (the rows that may win it, the ranking column)."""
    return {
        (family, dtype, n, operation): Problem(family, dtype, n, by=by, table=rank(rows, by), operation=operation)
        for (family, dtype, n, operation), (rows, by) in candidates.items()
    }


@dataclass(frozen=True)
class Choice:
    config_key: str
    rule: str  # why this member: the sentence best.json and the header carry


def choose(problem: Problem, every: dict[AnswerKey, Problem]) -> Choice:
    """The member of ``problem``'s tie set the header exports (module docstring)."""
    ties = problem.ties
    winner = str(problem.winner["config_key"])
    if len(ties) < 2:
        return Choice(winner, "the winner: nothing ties with it")
    sizes = [p for p in every.values() if p.series == problem.series and not p.table.empty]
    if len(sizes) < 2:
        what = "family and dtype" if problem.operation is None else "family, operation and dtype"
        return Choice(winner, f"the winner: no other size of this {what} was measured")
    # config_key -> (tie, behind) per size: a rank's keys are distinct.
    standings = [dict(zip(size.table["config_key"], zip(size.table["tie"], size.table["behind"]))) for size in sizes]
    scores = []
    for position, key in enumerate(ties["config_key"]):
        found = [standing[key] for standing in standings if key in standing]
        tied = sum(bool(tie) for tie, _ in found)
        slowdowns = [1.0 + float(behind) for _, behind in found]
        scores.append((-tied, math.exp(np.mean(np.log(slowdowns))), position, key))
    count, slowdown, position, key = min(scores)
    others = ", ".join(str(p.n) for p in sizes if p is not problem)
    if -count < 2:
        return Choice(winner, f"the winner: no member of its tie set ties at another size (n = {others})")
    what = "the winner, which" if position == 0 else f"of its {len(ties)} tied configurations the one that"
    series = f"{problem.family} {problem.dtype}" + (f" ({problem.operation})" if problem.operation is not None else "")
    return Choice(key, f"{what} ties at the most sizes of {series} ({-count} of {len(sizes)}; "
                       f"{slowdown - 1:.2%} behind each size's best, geometric mean)")  # fmt: skip
