"""The report stage: figures and a Markdown/HTML document from a GPU's results.

``build_report`` reads nothing from disk but the blogs' published numbers and
tables (``tuner/data``); the CLI (``python -m tuner.report``) loads a results
folder and calls it. ``report.html`` is self-contained (figures embedded);
``report.md`` links the PNGs written beside it. Which of them a folder gets is
its format (``FORMATS``: both with PNG and SVG figures, the Markdown with its
PNGs, or the HTML alone).
"""

from __future__ import annotations

import shutil
import tempfile
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping

import pandas as pd

from tuner.data.paths import REPORT_HTML, REPORT_MARKDOWN
from tuner.data.published import load_published
from tuner.data.selection import best_per_family, study_frames, usable
from tuner.progress import Phases
from tuner.report import family_sections
from tuner.report.comparisons import BLOG_TABLES, Comparison, evaluate_all
from tuner.report.document import build_content, write_documents
from tuner.report.energy import energy_content
from tuner.report.figure_kit import FigureContext, FigureResult
from tuner.report.figures import EXPECTED_FIGURES, FIGURE_SPECS, drawing, figure_pool
from tuner.report.formats import DEFAULT_FORMAT, FORMATS, ReportFormat
from tuner.report.profile_section import profile_content
from tuner.report.studies import summarise_studies
from tuner.report.style import FIGURE_SUFFIXES, report_style, shown_name
from tuner.report.ties import ties_section

__all__ = [
    "BLOG_TABLES",
    "EXPECTED_FIGURES",
    "FIGURE_SPECS",
    "FORMATS",
    "ReportDraft",
    "ReportFormat",
    "ReportOutputs",
    "best_per_family",
    "build_report",
    "draw_report",
    "figure_context",
    "finish_report",
    "load_published",
    "report_style",
]


@dataclass(frozen=True)
class ReportOutputs:
    """What ``build_report`` wrote.

    Attributes:
        out_dir: the report folder.
        figures: every drawn figure's files in the folder (``<stem>.png`` and,
            in the ``all`` format, ``<stem>.svg``; none in the ``html`` format).
        results: per figure of ``EXPECTED_FIGURES``, what was drawn (its files,
            note and the published numbers it shows; in the ``html`` format the
            files were drawn in a scratch folder, gone once embedded).
        family_figures: the figure of each family's section (``family_<name>``,
            named after the family, so not among ``EXPECTED_FIGURES``).
        documents: ``report.md`` and/or ``report.html``, as the format has them.
        skipped: figure stem -> why it was not drawn (missing data).
        placeholders: the files written for skipped stems (an image saying why),
            so every stem of ``EXPECTED_FIGURES`` exists as the format's files.
        notes: every missing-data line the report contains.
        comparisons: the evaluated blog tables.
        steps: seconds of each step of the report's own process: starting the
            workers, the blog tables and study summaries, starting the drawings
            (without workers, drawing them), waiting for them, stopping the
            workers, the sections' text and the documents; from a draft
            (``finish_report``), the counters section, the sections' text and
            the documents.
    """

    out_dir: Path
    figures: tuple[Path, ...]
    documents: tuple[Path, ...]
    skipped: dict[str, str] = field(default_factory=dict)
    placeholders: tuple[Path, ...] = ()
    notes: tuple[str, ...] = ()
    comparisons: tuple[Comparison, ...] = ()
    results: tuple[FigureResult, ...] = ()
    family_figures: tuple[FigureResult, ...] = ()
    steps: Phases = field(default_factory=Phases)

    @property
    def markdown(self) -> Path:
        return self.out_dir / REPORT_MARKDOWN

    @property
    def html(self) -> Path:
        return self.out_dir / REPORT_HTML


@dataclass(frozen=True)
class ReportDraft:
    """What a report's dataset alone decides, drawn (``draw_report``): all of
    it but the counters section and the documents (``finish_report``).

    Attributes:
        ctx: what the figures were drawn from (the figures' folder is ``ctx.out_dir``).
        figures: per figure of ``EXPECTED_FIGURES``, what was drawn.
        family_figures: family -> the figure of its section.
        energy: the energy section's content.
        ties: the ties section's content (None: no ties to show).
        documents: the documents its format writes.
        steps: seconds of each step that drew it.
    """

    ctx: FigureContext
    figures: list[FigureResult]
    family_figures: dict[str, FigureResult]
    energy: dict[str, Any]
    ties: dict[str, Any] | None
    documents: tuple[str, ...]
    steps: Phases = field(default_factory=Phases)


def with_run_environment(device: Mapping[str, Any], dataset: pd.DataFrame) -> dict[str, Any]:
    """device.json describes the card; the toolchain and commit that measured
    the rows live in the rows. Fill what device.json lacks from the most common
    value of each column."""
    filled = dict(device)
    if filled.get("name"):  # drawn in every figure's title and written in the text: cut to a sane length
        filled["name"] = shown_name(filled["name"])
    for key in ("nvcc_version", "pycuda_version", "git_commit", "driver_version", "cuda_version"):
        if not filled.get(key) and key in dataset and dataset[key].notna().any():
            filled[key] = str(dataset[key].dropna().mode().iloc[0])
    return filled


def figure_context(
    dataset: pd.DataFrame,
    *,
    device: Mapping[str, Any],
    peaks: Mapping[str, Any],
    out_dir: Path,
    studies: dict[str, pd.DataFrame] | None = None,
    pool: ProcessPoolExecutor | None = None,
    figure_suffixes: tuple[str, ...] = FIGURE_SUFFIXES,
) -> FigureContext:
    """What the figures and the document are drawn from: the usable rows, the
    device (filled from the rows), the peaks, the blogs' numbers, every blog
    table evaluated on our rows and the study summaries (see ``build_report``;
    with a ``pool``, the summaries are made there while the tables are evaluated here)."""
    device = with_run_environment(device, dataset)
    published = load_published()
    ok = usable(dataset)
    studies = study_frames(dataset) if studies is None else studies
    summarising = pool.submit(summarise_studies, studies, dataset) if pool else None
    comparisons = evaluate_all(ok, published)
    summaries = summarising.result() if summarising else summarise_studies(studies, dataset)
    return FigureContext(
        ok=ok,
        device=device,
        peaks=dict(peaks),
        published=published,
        studies=summaries,
        out_dir=Path(out_dir),
        comparisons={c.spec.key: c for c in comparisons},
        figure_suffixes=figure_suffixes,
    )


def _started(pool: ProcessPoolExecutor | None, work: Callable[..., Any], *args: Any, **kwargs: Any) -> Callable[[], Any]:
    """``work`` started in ``pool`` (without one, done here at once): a call that waits for its result."""
    if pool is None:
        done = work(*args, **kwargs)
        return lambda: done
    return pool.submit(work, *args, **kwargs).result


def build_report(
    dataset: pd.DataFrame,
    *,
    device: Mapping[str, Any],
    peaks: Mapping[str, Any],
    out_dir: Path,
    studies: dict[str, pd.DataFrame] | None = None,
    profiles: tuple[pd.DataFrame, list[str]] | None = None,
    processes: int = 1,
    report_format: str = DEFAULT_FORMAT,
) -> ReportOutputs:
    """Draw every figure of ``EXPECTED_FIGURES`` that has data (a placeholder
    for each other), the figure of each family's section, and write the
    documents of ``report_format`` into ``out_dir``.

    Args:
        dataset: result rows in the schema of ``tuner.data.results`` (all statuses;
            only ``ok`` rows count for performance).
        device: name, slug, compute_capability, driver_version, cuda_version,
            memory_clock_mhz, bus_width_bits, l2_bytes, sm_count, nvcc_version,
            pycuda_version, git_commit.
        peaks: copy_gbs, read_gbs, theoretical_gbs, cub_reduce_gbs (each may be None).
        out_dir: created if needed; figures and documents are written into it.
        studies: study name -> its rows; None: the rows of ``dataset`` whose
            source starts with ``study:``.
        profiles: (counter rows, notes) of ``tuner.data.counters.read_profiles``;
            None: the report has no counters section.
        processes: worker processes drawing the figures (1: this one).
        report_format: a name of ``FORMATS``.
    """
    if report_format not in FORMATS:
        raise ValueError(f"report format: must be one of {', '.join(FORMATS)}, got {report_format!r}")
    chosen = FORMATS[report_format]
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if chosen.figure_suffixes:
        return _build(dataset, device, peaks, out_dir, out_dir, studies, profiles, processes, chosen)
    # Figures only embedded: drawn as PNG in a scratch folder that goes once the document holds them.
    scratch = Path(tempfile.mkdtemp(prefix="tuner-report-figures-"))
    try:
        drawn_as_png = replace(chosen, figure_suffixes=(".png",))
        outputs = _build(dataset, device, peaks, out_dir, scratch, studies, profiles, processes, drawn_as_png)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return replace(outputs, figures=(), placeholders=())


def _build(
    dataset: pd.DataFrame,
    device: Mapping[str, Any],
    peaks: Mapping[str, Any],
    out_dir: Path,
    figure_dir: Path,
    studies: dict[str, pd.DataFrame] | None,
    profiles: tuple[pd.DataFrame, list[str]] | None,
    processes: int,
    chosen: ReportFormat,
) -> ReportOutputs:
    """``build_report`` with the figures written into ``figure_dir`` as ``chosen.figure_suffixes``."""
    draft, counters = _draw(dataset, device, peaks, figure_dir, studies, profiles, processes, chosen)
    return _documents(draft, dataset, profiles, counters, out_dir, Phases(draft.steps))


def draw_report(
    dataset: pd.DataFrame,
    *,
    device: Mapping[str, Any],
    peaks: Mapping[str, Any],
    out_dir: Path,
    studies: dict[str, pd.DataFrame] | None = None,
    processes: int = 1,
    report_format: str = DEFAULT_FORMAT,
) -> ReportDraft:
    """What ``build_report`` draws from the dataset alone (every figure into
    ``out_dir``, the energy and ties sections), without the counters section
    and the documents: ``finish_report`` adds them once the profiles are there.
    The pipeline draws this beside the profile, a GPU job that leaves the CPUs
    idle. Only for a format that writes its figures beside the documents."""
    if report_format not in FORMATS or not FORMATS[report_format].figure_suffixes:
        with_files = ", ".join(name for name, f in FORMATS.items() if f.figure_suffixes)
        raise ValueError(f"report format of a draft: must be one of {with_files} (its figures are files), got {report_format!r}")
    out_dir = Path(out_dir).absolute()  # where finish_report writes and reads the figures, from whichever folder it runs
    out_dir.mkdir(parents=True, exist_ok=True)
    draft, _ = _draw(dataset, device, peaks, out_dir, studies, None, processes, FORMATS[report_format])
    return draft


def finish_report(
    draft: ReportDraft,
    dataset: pd.DataFrame,
    *,
    profiles: tuple[pd.DataFrame, list[str]] | None = None,
) -> ReportOutputs:
    """The report of ``draft`` (``draw_report`` of ``dataset``): the counters
    section of ``profiles`` and the documents, in the folder of its figures."""
    steps = Phases()
    with steps("counters"):
        counters = None if profiles is None else _counters(draft.ctx, profiles)
    return _documents(draft, dataset, profiles, counters, draft.ctx.out_dir, steps)


def _counters(ctx: FigureContext, profiles: tuple[pd.DataFrame, list[str]]) -> dict[str, Any]:
    """The counters section, of the blog tables only where the table has rows of ours: a lesson not measured is left out."""
    return profile_content([c for c in ctx.comparisons.values() if c.has_data], profiles[0], profiles[1],
                           published=ctx.published, peaks=ctx.peaks, gpu=ctx.gpu, out_dir=ctx.out_dir,
                           suffixes=ctx.figure_suffixes)  # fmt: skip


def _draw(
    dataset: pd.DataFrame,
    device: Mapping[str, Any],
    peaks: Mapping[str, Any],
    figure_dir: Path,
    studies: dict[str, pd.DataFrame] | None,
    profiles: tuple[pd.DataFrame, list[str]] | None,
    processes: int,
    chosen: ReportFormat,
) -> tuple[ReportDraft, dict[str, Any] | None]:
    """Draw the report with ``processes`` worker processes (1: here): its draft, with
    the seconds of each step, and the counters section (None without ``profiles``)."""
    steps = Phases()
    with ExitStack() as workers:
        with steps("start workers"):
            pool = workers.enter_context(figure_pool(processes))
        # The pool starts while the blog tables are evaluated, then makes every section's figures and
        # tables side by side. The counters section goes first: its roofline is the longest single
        # drawing, and the report waits for the last one to finish.
        with steps("blog tables and studies"):
            ctx = figure_context(dataset, device=device, peaks=peaks, out_dir=figure_dir, studies=studies, pool=pool,
                                 figure_suffixes=chosen.figure_suffixes)  # fmt: skip
        with steps("start drawings"):  # without workers, the drawing itself
            counters = None if profiles is None else _started(pool, _counters, ctx, profiles)
            energy = _started(pool, energy_content, dataset, gpu=ctx.gpu, out_dir=figure_dir, suffixes=chosen.figure_suffixes)
            ties = _started(pool, ties_section, dataset)  # its own module and templates: tuner/report/ties.py
            drawn = drawing(ctx, pool)
            families_drawn = family_sections.drawing(ctx, pool)
        with steps("wait for drawings"):
            draft = ReportDraft(ctx=ctx, figures=drawn(), family_figures=families_drawn(), energy=energy(), ties=ties(),
                                documents=chosen.documents, steps=steps)  # fmt: skip
            counters_section = None if counters is None else counters()
        with steps("stop workers"):
            workers.close()
    return draft, counters_section


def _documents(
    draft: ReportDraft,
    dataset: pd.DataFrame,
    profiles: tuple[pd.DataFrame, list[str]] | None,
    counters: dict[str, Any] | None,
    out_dir: Path,
    steps: Phases,
) -> ReportOutputs:
    """The sections' text and the documents of ``draft`` with its ``counters`` section."""
    ctx, figures = draft.ctx, draft.figures
    comparisons = list(ctx.comparisons.values())
    with steps("sections"):
        families = family_sections.family_sections(ctx, dataset, draft.family_figures,
                                                   None if profiles is None else profiles[0])  # fmt: skip
        content = build_content(
            dataset=dataset,
            device=ctx.device,
            peaks=ctx.peaks,
            comparisons=comparisons,
            bests=best_per_family(dataset, ctx.peaks),
            figures=figures,
            studies=ctx.studies,
            families=families,
        )
    if counters is not None:
        content["profile"] = counters
    content["ties"] = draft.ties
    content["energy"] = draft.energy
    with steps("documents"):
        documents = write_documents(content, out_dir, draft.documents)
    return ReportOutputs(
        out_dir=out_dir,
        figures=tuple(path for result in figures for path in result.paths),
        documents=tuple(documents),
        skipped={r.stem: r.note for r in figures if not r.drawn},
        placeholders=tuple(path for result in figures for path in result.placeholder),
        notes=tuple(content["notes"]),
        comparisons=tuple(comparisons),
        results=tuple(figures),
        family_figures=tuple(f for f in draft.family_figures.values() if f.drawn),
        steps=steps,
    )
