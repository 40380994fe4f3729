"""The report document: one list of blocks rendered to Markdown and to HTML.

The content is built once (``build_blocks``) from plain blocks (headings,
paragraphs, tables, figures, lists); the two renderers only format them, so the
Markdown and the HTML always say the same thing. Inline markup is limited to
`code` and **bold**.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence, Union

import numpy as np
import pandas as pd

from tuner.report.comparisons import (
    HOLDS_NO_DATA,
    MARGIN,
    ROW_COLUMNS,
    TOLERANCE,
    Comparison,
    problem_text,
    summary,
)
from tuner.report.figures import FIGURE_TITLES, FigureResult
from tuner.report.selection import config_text, problem_label
from tuner.report.studies import StudySummary


@dataclass(frozen=True)
class Heading:
    level: int
    text: str


@dataclass(frozen=True)
class Paragraph:
    text: str


@dataclass(frozen=True)
class Table:
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class Image:
    png: str  # paths relative to the document
    svg: str
    alt: str
    caption: str


@dataclass(frozen=True)
class Bullets:
    items: tuple[str, ...]


Block = Union[Heading, Paragraph, Table, Image, Bullets]


def table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> Table:
    return Table(tuple(columns), tuple(tuple(_cell(v) for v in row) for row in rows))


def _cell(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return "—" if np.isnan(value) else f"{value:.4g}"
    return str(value)


# ---- rendering ---------------------------------------------------------------------


def render_markdown(blocks: Sequence[Block]) -> str:
    out: list[str] = []
    for block in blocks:
        if isinstance(block, Heading):
            out.append(f"{'#' * block.level} {block.text}")
        elif isinstance(block, Paragraph):
            out.append(block.text)
        elif isinstance(block, Table):
            escape = lambda text: text.replace("|", "\\|").replace("\n", " ")  # noqa: E731
            out.append(
                "\n".join(
                    [
                        "| " + " | ".join(escape(c) for c in block.columns) + " |",
                        "|" + "|".join(" --- " for _ in block.columns) + "|",
                    ]
                    + ["| " + " | ".join(escape(c) for c in row) + " |" for row in block.rows]
                )
            )
        elif isinstance(block, Image):
            out.append(f"![{block.alt}]({block.png})\n\n*{block.caption}*")
        elif isinstance(block, Bullets):
            out.append("\n".join(f"- {item}" for item in block.items))
    return "\n\n".join(out) + "\n"


_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*([^*]+)\*\*")


def _inline_html(text: str) -> str:
    text = html.escape(text, quote=False)
    text = _CODE.sub(r"<code>\1</code>", text)
    return _BOLD.sub(r"<strong>\1</strong>", text)


CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 1200px; margin: 2em auto; padding: 0 1em; color: #222; }
h1 { border-bottom: 2px solid #1f77b4; padding-bottom: .2em; }
h2 { margin-top: 2em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: .3em .6em; text-align: left; vertical-align: top; }
th { background: #f3f6fa; }
tr:nth-child(even) td { background: #fafafa; }
td.yes { color: #2a7d2a; font-weight: bold; } td.no { color: #c0392b; font-weight: bold; }
figure { margin: 1.5em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-size: .9em; color: #555; }
code { background: #f3f3f3; padding: 0 .2em; }
"""


def render_html(blocks: Sequence[Block], title: str) -> str:
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title>",
        f"<style>{CSS}</style>",
        "</head><body>",
    ]
    for block in blocks:
        if isinstance(block, Heading):
            out.append(f"<h{block.level}>{_inline_html(block.text)}</h{block.level}>")
        elif isinstance(block, Paragraph):
            out.append(f"<p>{_inline_html(block.text)}</p>")
        elif isinstance(block, Table):
            head = "".join(f"<th>{_inline_html(c)}</th>" for c in block.columns)
            body = "\n".join("<tr>" + "".join(_td(c) for c in row) + "</tr>" for row in block.rows)
            out.append(f"<table><thead><tr>{head}</tr></thead><tbody>\n{body}\n</tbody></table>")
        elif isinstance(block, Image):
            out.append(
                f'<figure><a href="{html.escape(block.svg)}"><img src="{html.escape(block.svg)}" alt="{html.escape(block.alt)}"></a>'
                f"<figcaption>{_inline_html(block.caption)}</figcaption></figure>"
            )
        elif isinstance(block, Bullets):
            out.append("<ul>" + "".join(f"<li>{_inline_html(i)}</li>" for i in block.items) + "</ul>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def _td(text: str) -> str:
    verdict = text.split(" ")[0]
    css = f' class="{verdict}"' if verdict in ("yes", "no") else ""
    return f"<td{css}>{_inline_html(text)}</td>"


# ---- content -----------------------------------------------------------------------


def table_verdict(comparison: Comparison) -> str:
    """The table's conclusion on our data: yes, no, or n/a (no data)."""
    holds = [h for h in comparison.rows[ROW_COLUMNS[4]] if h in ("yes", "no") or h == HOLDS_NO_DATA]
    decided = [h for h in holds if h in ("yes", "no")]
    if not decided:
        return HOLDS_NO_DATA
    if "no" in decided:
        return f"no ({decided.count('no')} of {len(decided)} rows fail)"
    missing = len(holds) - len(decided)
    return "yes" + (f" ({missing} rows without data)" if missing else "")


def _environment(device: Mapping[str, Any]) -> Table:
    def get(key: str) -> Any:
        value = device.get(key)
        return "unknown" if value in (None, "") else value

    l2 = device.get("l2_bytes")
    rows = [
        ("GPU", get("name")),
        ("compute capability", get("compute_capability")),
        ("multiprocessors", get("sm_count")),
        ("L2 cache", f"{l2 / 2**20:.0f} MiB" if l2 else "unknown"),
        ("memory clock (MHz)", get("memory_clock_mhz")),
        ("memory bus width (bits)", get("bus_width_bits")),
        ("driver", get("driver_version")),
        ("CUDA", get("cuda_version")),
        ("nvcc", get("nvcc_version")),
        ("PyCUDA", get("pycuda_version")),
        ("git commit", f"`{device['git_commit']}`" if device.get("git_commit") else "unknown"),
    ]
    return table(("item", "value"), rows)


def _peaks(peaks: Mapping[str, Any]) -> Table:
    theoretical = peaks.get("theoretical_gbs")
    descriptions = {
        "theoretical_gbs": "memory clock × bus width × 2 (DDR) / 8",
        "copy_gbs": "measured: best device-to-device copy kernel (read + write)",
        "read_gbs": "measured: best read-only streaming kernel",
        "cub_reduce_gbs": "measured: CUB device reduction (the library reference for reduce)",
    }
    rows = []
    for key, text in descriptions.items():
        value = peaks.get(key)
        if value:
            fraction = f"{float(value) / float(theoretical):.1%}" if theoretical else "—"
            rows.append((key.removesuffix("_gbs").replace("_", " "), f"{float(value):.1f}", fraction, text))
        else:
            rows.append((key.removesuffix("_gbs").replace("_", " "), "not measured", "—", text))
    return table(("peak", "GB/s", "of theoretical", "what it is"), rows)


def _best_table(bests: pd.DataFrame) -> Table:
    rows = []
    for _, r in bests.iterrows():
        rows.append(
            (
                r["family"],
                r["variant"],
                problem_label(r["family"], r["dtype"], r["n"]),
                r["config"],
                f"{r['bandwidth_gbs']:.1f}",
                f"{r['fraction_of_copy_peak']:.1%}" if pd.notna(r["fraction_of_copy_peak"]) else "—",
                f"{r['fraction_of_theoretical_peak']:.1%}" if pd.notna(r["fraction_of_theoretical_peak"]) else "—",
                f"{r['gflops']:.0f}" if pd.notna(r["gflops"]) else "—",
                f"`{r['source']}`",
            )
        )
    return table(
        ("family", "variant", "problem", "configuration", "GB/s", "of copy peak", "of theoretical peak", "GFLOP/s", "source"),
        rows,
    )


def _comparison_blocks(comparison: Comparison) -> list[Block]:
    spec = comparison.spec
    dtype, n, gpu = comparison.published_problem
    ours = "no data" if comparison.our_problem is None else problem_text(*comparison.our_problem, spec.family)
    blocks: list[Block] = [
        Heading(3, spec.title),
        Paragraph(
            f"Conclusion tested: **{spec.rule}**. Holds on our data: **{table_verdict(comparison)}**. "
            f"Published: {problem_text(dtype, n, spec.family, gpu or 'GPU not stated')} (`{', '.join(spec.tables)}`). "
            f"Ours: {ours}."
        ),
        table(ROW_COLUMNS, comparison.rows[ROW_COLUMNS].itertuples(index=False)),
    ]
    return blocks


def _figure_blocks(result: FigureResult, out_dir: Path) -> list[Block]:
    blocks: list[Block] = [Heading(3, f"{FIGURE_TITLES.get(result.stem, result.stem)} (`{result.stem}`)")]
    if result.drawn:
        png = next(p for p in result.paths if p.suffix == ".png")
        svg = next((p for p in result.paths if p.suffix == ".svg"), png)
        blocks.append(
            Image(png.relative_to(out_dir).as_posix(), svg.relative_to(out_dir).as_posix(), result.stem, result.caption)
        )
        if result.note:
            blocks.append(Paragraph(f"Partly drawn: {result.note}."))
    else:
        blocks.append(Paragraph(f"Skipped: {result.note}."))
    return blocks


def _study_blocks(study: StudySummary) -> list[Block]:
    items = [
        f"problem: {study.family}, {problem_label(study.family, study.dtype, study.n)}; "
        f"{len(study.history)} trials, {study.ok_trials} ok",
    ]
    if study.best is not None:
        items.append(
            f"best: {study.best_gbs:.1f} GB/s at trial {int(study.best['trial']) if pd.notna(study.best['trial']) else '?'}"
            f" (`{study.best['variant']}`; {config_text(study.best)})"
        )
    if not np.isnan(study.exhaustive_gbs):
        reach = study.trials_to_reach(0.98)
        items.append(
            f"exhaustive best: {study.exhaustive_gbs:.1f} GB/s (`{study.exhaustive_source}`); the study reached "
            f"{study.best_gbs / study.exhaustive_gbs:.1%} of it" + (f", 98 % after {reach} trials" if reach else ", never 98 %")
        )
    else:
        items.append("no exhaustive sweep of the same problem to compare with")
    if study.importances:
        top = sorted(study.importances.items(), key=lambda kv: -kv[1])
        items.append("importances: " + ", ".join(f"{k} {v:.2f}" for k, v in top))
    else:
        items.append(f"importances skipped: {study.importance_note}")
    items.extend(study.notes)
    return [Heading(3, f"study `{study.name}`"), Bullets(tuple(items))]


def build_blocks(
    *,
    dataset: pd.DataFrame,
    device: Mapping[str, Any],
    peaks: Mapping[str, Any],
    comparisons: list[Comparison],
    bests: pd.DataFrame,
    figures: list[FigureResult],
    studies: list[StudySummary],
    out_dir: Path,
) -> tuple[list[Block], list[str]]:
    """The report's blocks, and every missing-data line it contains."""
    gpu = str(device.get("name") or "unknown GPU")
    ok_count = int((dataset["status"] == "ok").sum()) if len(dataset) else 0
    sources = dataset["source"].dropna().unique() if len(dataset) else []
    study_sources = [s for s in sources if str(s).startswith("study:")]
    notes: list[str] = []

    blocks: list[Block] = [
        Heading(1, f"Kernel autotuning report — {gpu}"),
        Paragraph(
            f"{len(dataset)} result rows ({ok_count} with status ok) from {_count(len(sources) - len(study_sources), 'sweep')} and "
            f"{_count(len(study_sources), 'study', 'studies')}. Only rows with status `ok` count for performance; bandwidth is the fewest "
            "bytes the computation must move over the median time (GB/s = 10^9 bytes/s)."
        ),
        Heading(2, "Environment"),
        _environment(device),
        Heading(2, "Peaks"),
        _peaks(peaks),
        Heading(2, "Summary: the blogs' conclusions on this GPU"),
        Paragraph(
            "Times from another GPU and another problem size are not comparable, so each row compares speed-ups: "
            "the time of the row's reference step over its time (× in the cells), published and ours. "
            "**ratio** = our speed-up / published speed-up (above 1: the step gains more here). "
            f"“At least as fast” allows {TOLERANCE:.0%} of noise; “faster”, “slower” and “beats” need a difference of more than {MARGIN:.0%}."
        ),
    ]
    head = summary(comparisons)
    blocks.append(
        table(
            ("blog table", "row", "blog number", "ours", "ratio", "holds"),
            [
                (r["blog table"], r["claim"].split(" — ")[-1], r["blog number"], r["ours"], r["ratio"], r["holds"])
                for _, r in head.iterrows()
            ],
        )
    )
    verdicts = [(c.spec.key, c.spec.rule, table_verdict(c)) for c in comparisons]
    blocks.append(table(("blog table", "conclusion", "holds on our data"), verdicts))

    blocks += [Heading(2, "Best configuration per family")]
    if bests.empty:
        blocks.append(Paragraph("No rows with status ok."))
        notes.append("no rows with status ok: no best configurations")
    else:
        blocks.append(
            Paragraph(
                "The highest-bandwidth configuration of each family over all its problems, sweeps and studies alike, "
                "as a fraction of the measured copy peak and of the theoretical peak."
            )
        )
        blocks.append(_best_table(bests))
    missing_families = sorted(
        {"reduce", "copy", "vector_add", "offset", "layout", "matmul"} - set(bests["family"] if len(bests) else [])
    )
    if missing_families:
        notes.append(f"no ok rows for families: {', '.join(missing_families)}")

    blocks.append(Heading(2, "Comparisons with the published tables"))
    for comparison in comparisons:
        blocks += _comparison_blocks(comparison)
        if not comparison.has_data:
            notes.append(f"table `{comparison.spec.key}`: no ok rows of family {comparison.spec.family} for its variants")

    blocks.append(Heading(2, "Figures"))
    for result in figures:
        blocks += _figure_blocks(result, out_dir)
        if result.note:
            notes.append(f"figure `{result.stem}`: {'partly drawn, ' if result.drawn else 'skipped, '}{result.note}")

    blocks.append(Heading(2, "Studies"))
    if not studies:
        blocks.append(Paragraph("No study rows (source `study:<name>`)."))
        notes.append("no study rows (source study:<name>)")
    for study in studies:
        blocks += _study_blocks(study)

    blocks.append(Heading(2, "Missing data"))
    blocks.append(Bullets(tuple(notes)) if notes else Paragraph("Every figure and table had data."))
    return blocks, notes


def _count(number: int, singular: str, plural: str | None = None) -> str:
    return f"{number} {singular if number == 1 else plural or singular + 's'}"


def write_documents(blocks: Sequence[Block], out_dir: Path, title: str) -> list[Path]:
    """``report.md`` and ``report.html`` in ``out_dir``."""
    markdown_path = out_dir / "report.md"
    html_path = out_dir / "report.html"
    markdown_path.write_text(render_markdown(blocks), encoding="utf-8")
    html_path.write_text(render_html(blocks, title), encoding="utf-8")
    return [markdown_path, html_path]
