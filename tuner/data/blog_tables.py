"""The blog tables the report reproduces, read from this folder.

``blog_conclusions.yaml`` holds one entry per table: the conclusion it tests
(``rule``) and how our rows are chosen for it. ``blog_steps.csv`` holds the
table's rows, one line each: the kernel we run for it (``variant``, ``must``,
``prefer``), the published row it stands beside (``published_variant``,
``published_params``) and what it expects (``expect``, checked against
``ref``). Parameters are written ``key=value;key=value`` as in ``published.csv``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import pandas as pd
import yaml

from tuner.data.published import parse_params

DATA = Path(__file__).resolve().parent
CONCLUSIONS_YAML = DATA / "blog_conclusions.yaml"
STEPS_CSV = DATA / "blog_steps.csv"
EXPECTS = ("baseline", "faster", "slower", "as_fast", "at_least_prev")


@dataclass(frozen=True)
class Step:
    """One row of a blog table.

    Attributes:
        label: what the row is called in the report.
        variant: our variant.
        must: our parameters that define the step (they must match).
        prefer: our launch parameters the blog used (preferred when measured).
        published: ``(variant, params)`` of the published row; None: no published number.
        expect: one of ``EXPECTS``.
        ref: label of the row speed-ups are taken over; None: the table's first row.
    """

    label: str
    variant: str
    must: Mapping[str, Any] = field(default_factory=dict)
    prefer: Mapping[str, Any] = field(default_factory=dict)
    published: tuple[str, Mapping[str, Any]] | None = None
    expect: str = "faster"
    ref: str | None = None


@dataclass(frozen=True)
class BlogTable:
    """A published table we reproduce and the conclusion we test on it."""

    key: str
    tables: tuple[str, ...]
    title: str
    family: str
    rule: str
    steps: tuple[Step, ...]
    headline: tuple[str, ...]
    hint: str | None = None
    prefer: Mapping[str, Any] = field(default_factory=dict)


def _step(line: Mapping[str, str]) -> Step:
    if line["expect"] not in EXPECTS:
        raise ValueError(f"{STEPS_CSV.name}: row {line['label']!r} expects {line['expect']!r}, not one of {EXPECTS}")
    published = (line["published_variant"], parse_params(line["published_params"])) if line["published_variant"] else None
    return Step(
        label=line["label"],
        variant=line["variant"],
        must=parse_params(line["must"]),
        prefer=parse_params(line["prefer"]),
        published=published,
        expect=line["expect"],
        ref=line["ref"] or None,
    )


def load_blog_tables(
    conclusions: str | Path = CONCLUSIONS_YAML, steps: str | Path = STEPS_CSV, *, tolerance: str = "5%"
) -> tuple[BlogTable, ...]:
    """Every blog table in file order; ``{tolerance}`` in a rule becomes ``tolerance``."""
    entries = yaml.safe_load(Path(conclusions).read_text(encoding="utf-8"))
    rows = pd.read_csv(steps, dtype=str, keep_default_na=False)
    tables = []
    for entry in entries:
        mine = rows[rows["conclusion"] == entry["key"]]
        if mine.empty:
            raise ValueError(f"{Path(steps).name} has no rows for {entry['key']!r}")
        step_list = tuple(_step(line) for line in mine.to_dict("records"))
        labels = {s.label for s in step_list}
        missing = [h for h in entry["headline"] if h not in labels] + [s.ref for s in step_list if s.ref and s.ref not in labels]
        if missing:
            raise ValueError(f"{entry['key']}: headline or ref rows not among its steps: {missing}")
        tables.append(
            BlogTable(
                key=entry["key"],
                tables=tuple(entry["tables"]),
                title=entry["title"],
                family=entry["family"],
                rule=entry["rule"].format(tolerance=tolerance),
                steps=step_list,
                headline=tuple(entry["headline"]),
                hint=entry.get("hint"),
                prefer=dict(entry.get("prefer") or {}),
            )
        )
    unknown = set(rows["conclusion"]) - {t.key for t in tables}
    if unknown:
        raise ValueError(f"{Path(steps).name} has rows for unknown conclusions: {sorted(unknown)}")
    return tuple(tables)
