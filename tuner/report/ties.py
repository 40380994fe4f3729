"""The report's answer to "is the answer stable?": per problem (and
operation, where a family's configurations do different work), the winner
with the 95 % interval of its figure, how many configurations the run cannot
tell from it and how far behind the last of them is, and the configuration the
header exports (``tuner.data.ties`` decides all of it, as for ``best.json``);
a sentence for each problem whose tie set is large.

Self-contained on purpose: ``ties_section(dataset)`` is the whole section's
content, ``templates/ties.md.j2`` and ``templates/ties.html.j2`` lay it out,
and the report's templates only include those.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from tuner.data.export import best_entries
from tuner.data.intervals import HOW
from tuner.data.selection import problem_label
from tuner.data.ties import LARGE

COLUMNS = ("family", "problem", "winner", "figure [95 % interval]", "tied", "last tied behind by", "header exports")

TEXT = (
    "The figure of each winner comes with the 95 % interval of its median time. A configuration is tied with the "
    "winner unless the 95 % interval of its slowdown behind the winner (the two medians' intervals combined) lies "
    "wholly above 0.5 %: the run cannot tell the tied ones from the winner, and a rerun may name any of them. The C++ header exports the member that also ties at the most other sizes of its family and dtype "
    "(the winner where none does); `best.json` lists every member."
)
OPERATIONS_TEXT = (
    " Where a family's configurations do different work (an operation column), each operation is answered on its own: "
    "its winner, tie set and exported member are chosen among the configurations that do that work."
)


def _params(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())


def ties_section(dataset: pd.DataFrame) -> dict[str, Any] | None:
    """What the templates show: ``text``, ``how`` (how the intervals were
    made), ``table`` (text cells, one row per problem) and ``large`` (a
    sentence per problem with ``LARGE`` or more tied configurations); None
    without verified rows."""
    entries = best_entries(dataset)
    if not entries:
        return None
    # An operation column only where a family's configurations do different work (copy: copy and read).
    operations = any(e.get("operation") is not None for e in entries)
    rows, large = [], []
    for e in entries:
        by = e["ranked_by"]
        unit = "GFLOP/s" if by == "gflops" else "GB/s"
        value, interval = e[by], e["time_ms_interval"]
        figure = f"{value:.0f} {unit}" if value is not None else "—"
        if interval and value is not None:
            figure += f" [{value * e['time_ms_median'] / interval[1]:.0f}, {value * e['time_ms_median'] / interval[0]:.0f}]"
        behind = max(m["behind_winner"] or 0.0 for m in e["tie_set"])
        exported = e["exported"]
        header = "the winner" if exported["config_key"] == e["config_key"] else f"`{_params(exported['params'])}`"
        problem = problem_label(e["family"], e["dtype"], e["n"])
        operation = [e.get("operation") or "—"] if operations else []
        rows.append((e["family"], *operation, problem, f"`{_params(e['params'])}`", figure, str(e["tie_count"]),
                     f"{behind:.2%}" if e["tie_count"] > 1 else "—", header))  # fmt: skip
        if e["tie_count"] >= LARGE:
            what = e["family"] + (f" ({e['operation']})" if e.get("operation") is not None else "")
            large.append(
                f"**{what} {problem}**: {e['tie_count']} of {e['candidates']} configurations tie with the winner, "
                f"the last {behind:.2%} behind it: on this GPU they are one answer, and a rerun's winner may be another "
                f"of them. The header exports {header}; why: {exported['rule']}."
            )
    hows = {e["interval"] for e in entries}
    return {
        "text": TEXT + (OPERATIONS_TEXT if operations else ""),
        "how": "; ".join(f"{how}: {HOW[how]}" for how in sorted(hows) if how in HOW),
        "table": pd.DataFrame(rows, columns=[*COLUMNS[:1], *(["operation"] if operations else []), *COLUMNS[1:]]),
        "large": large,
        "threshold": LARGE,
    }
