"""Which of the lessons a dataset can show.

A lesson is a figure of ``FIGURE_SPECS`` or a blog table of ``BLOG_TABLES``
about one of the built-in families. It is shown only where the dataset has ok
rows of its family: a lesson whose family was not measured is left out of the
report, not drawn or tabled empty, and one note names them all.
"""

from __future__ import annotations

from tuner.report.comparisons import BLOG_TABLES, Comparison
from tuner.report.figure_kit import FigureResult
from tuner.report.figures import FIGURE_SPECS, OVERVIEW

# The families the lessons are about, in the order the report draws them.
LESSON_FAMILIES = tuple(dict.fromkeys([s.family for s in FIGURE_SPECS if s.family] + [t.family for t in BLOG_TABLES]))
FIGURE_FAMILY = {spec.stem: spec.family for spec in FIGURE_SPECS}
MAX_NAMED = 6  # lessons left out are named up to this many, else counted


def lesson_scope(present: set[str], comparisons: list[Comparison], figures: list[FigureResult]) -> tuple[set[str], list[str]]:
    """(the figures left out, the notes on lessons) for a dataset whose ok
    rows of a sweep or study cover the families ``present``. A lesson whose
    family has none is left out, not drawn or tabled empty: one note says
    which, and a dataset with none of the lessons' families (a plug-in's own)
    gets no note."""
    absent = [f for f in LESSON_FAMILIES if f not in present]
    shown = [c for c in comparisons if c.has_data]
    left_out = {r.stem for r in figures if FIGURE_FAMILY.get(r.stem) in absent or (r.stem == OVERVIEW and not shown)}
    notes = [f"table `{c.spec.key}`: no ok rows of family {c.spec.family} for its variants"
             for c in comparisons if not c.has_data and c.spec.family in present]  # fmt: skip
    if absent and len(absent) < len(LESSON_FAMILIES):
        figures_out = [f"figure `{r.stem}`" for r in figures if r.stem in left_out]
        tables_out = [f"blog table `{c.spec.key}`" for c in comparisons if c.spec.family in absent]
        parts = ", ".join(figures_out + tables_out)
        if len(figures_out) + len(tables_out) > MAX_NAMED:  # a wall of names says less than two counts
            parts = f"{len(figures_out)} figures and {len(tables_out)} blog tables"
        notes.insert(0, f"no ok rows of a sweep or study for families: {', '.join(absent)}; their lessons are left out ({parts})")
    return left_out, notes


def scope_text(present: set[str]) -> str:
    """What the report leaves out when the dataset has none of the lessons' families ("" otherwise)."""
    if not present or present & set(LESSON_FAMILIES):
        return ""
    return (
        f"None of the lessons' families ({', '.join(LESSON_FAMILIES)}) has ok rows here, so the blogs' conclusions "
        "are not tested: the report shows each family measured, its parameters read from its own rows."
    )
