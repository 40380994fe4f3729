"""Our rows for each blog table: the problem (dtype, n) compared with the
blog's, and per step of the table the row measured for it.

The report compares these rows with the blog's numbers
(``tuner.report.comparisons``); the profile stage's ``profile: report``
profiles the same rows, so that counters sit beside the rows the report shows.
"""

from __future__ import annotations

from typing import Sequence

import pandas as pd

from tuner.data.blog_tables import BlogTable, load_blog_tables
from tuner.data.published import load_published, published_problem
from tuner.data.selection import best, nearest_problem, select, usable


def chosen_problem(candidates: pd.DataFrame, spec: BlogTable, dtype: str | None, n: int | None) -> tuple[str, int] | None:
    """The (dtype, n) with the most of the table's variants, then the one
    nearest to the blog's problem."""
    if candidates.empty:
        return None
    coverage = candidates.groupby(["dtype", "n"])["variant"].nunique()
    most = coverage.max()
    covered = candidates[[coverage.get((d, k), 0) == most for d, k in zip(candidates["dtype"], candidates["n"])]]
    return nearest_problem(covered, dtype, n)


def choose(spec: BlogTable, ok: pd.DataFrame, published: pd.DataFrame) -> tuple[tuple[str, int] | None, tuple[pd.Series | None, ...]]:
    """(the problem compared, per step its best row or None) of ``spec`` among the usable rows ``ok``."""
    pub_dtype, pub_n, _ = published_problem(published, spec.tables)
    candidates = select(ok, spec.family, variants=sorted({s.variant for s in spec.steps}))
    problem = chosen_problem(candidates, spec, pub_dtype, pub_n)
    chosen: list[pd.Series | None] = []
    for step in spec.steps:
        row = None
        if problem is not None:
            rows = select(ok, spec.family, variants=[step.variant], dtype=problem[0], n=problem[1], must=step.must,
                          prefer={**spec.prefer, **step.prefer}, hint=spec.hint)  # fmt: skip
            row = best(rows)
        chosen.append(row)
    return problem, tuple(chosen)


def shown_rows(rows: Sequence[pd.DataFrame]) -> frozenset:
    """(source, dtype, n, config_key) of every row the report's blog
    comparisons show, chosen among ``rows`` as the report chooses."""
    ok = usable(pd.concat(rows, ignore_index=True)) if rows else pd.DataFrame()
    if ok.empty:
        return frozenset()
    published = load_published()
    picked = (row for spec in load_blog_tables() for row in choose(spec, ok, published)[1] if row is not None)
    return frozenset((r["source"], r["dtype"], int(r["n"]), r["config_key"]) for r in picked)
