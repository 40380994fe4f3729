"""The report as one self-contained document: figures embedded, the overview
first, the blogs' numbers on the figures, honest axes, correct counts and
math, and the blog tables read from data files."""

from __future__ import annotations

import base64
import re
import shutil
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from tuner.data import results  # noqa: E402
from tuner.data.blog_tables import load_blog_tables  # noqa: E402
from tuner.data.published import load_published, published_value  # noqa: E402
from tuner.report import EXPECTED_FIGURES, FIGURE_SPECS, figure_context  # noqa: E402
from tuner.report.comparisons import BLOG_TABLES  # noqa: E402
from tuner.report.figure_kit import build, render  # noqa: E402
from tuner.report.style import styled  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "results" / "reference" / "nvidia-h200"
PNG = b"\x89PNG\r\n\x1a\n"

# The tests that read one shared report run in one pytest-xdist process (with --dist loadgroup), so it is drawn once.
pytestmark = pytest.mark.xdist_group("synthetic_report")


@pytest.fixture
def synthetic(synthetic_run):
    dataset, device, peaks = synthetic_run
    return dataset.copy(), device, peaks


@pytest.fixture
def report(synthetic_report):
    return synthetic_report


@pytest.fixture(scope="module")
def reference_ctx(tmp_path_factory):
    import json

    return figure_context(
        results.read(REFERENCE / "measurements.parquet"),
        device=json.loads((REFERENCE / "device.json").read_text()),
        peaks=json.loads((REFERENCE / "peaks.json").read_text()),
        out_dir=tmp_path_factory.mktemp("reference"),
    )


@pytest.fixture(scope="module")
def synthetic_ctx(synthetic_run, tmp_path_factory):
    dataset, device, peaks = synthetic_run
    return figure_context(dataset.copy(), device=device, peaks=peaks, out_dir=tmp_path_factory.mktemp("synthetic"))


def figures_of(ctx):
    """stem -> the rendered matplotlib Figure (not written)."""
    drawn = {}
    with styled():
        for spec in FIGURE_SPECS:
            panels, _ = build(ctx, spec)
            if panels:
                drawn[spec.stem] = render(ctx, spec, panels)
    return drawn


@pytest.fixture(scope="module")
def drawn(synthetic_ctx, reference_ctx):
    """source -> its figures, drawn once for the module's tests, which only read them."""
    cache = {}

    def figures(source):
        if source not in cache:
            cache[source] = figures_of(synthetic_ctx if source == "synthetic" else reference_ctx)
        return cache[source]

    return figures


# ---- one self-contained HTML ---------------------------------------------------------------


def test_html_embeds_every_figure_and_works_alone(report, tmp_path):
    alone = tmp_path / "copied" / "report.html"
    alone.parent.mkdir()
    shutil.copy(report.html, alone)
    html = alone.read_text()
    sources = re.findall(r'<img src="([^"]*)"', html)
    assert sources and all(s.startswith("data:image/png;base64,") for s in sources)
    assert not re.search(r'(src|href)="(?!data:|#)', html), "the HTML points at another file"
    drawn = [r for r in report.results if r.drawn] + list(report.family_figures)  # in the document's order
    assert len(report.family_figures) == 6  # one per family of the synthetic GPU
    assert len(sources) == len(drawn) == len(EXPECTED_FIGURES) + len(report.family_figures)
    for source, result in zip(sources, drawn):
        image = base64.b64decode(source.split(",", 1)[1])
        assert image[:8] == PNG and image == result.png.read_bytes(), result.stem


def test_overview_comes_first_then_figures_then_tables(report):
    html, markdown = report.html.read_text(), report.markdown.read_text()
    assert EXPECTED_FIGURES[0] == "overview"
    overview = html.index('id="figure-overview"')
    first_table = html.index("<table")
    assert overview < first_table
    assert all(overview < html.index(f'id="figure-{stem}"') < first_table for stem in EXPECTED_FIGURES[1:])
    assert markdown.index("](overview.png)") < markdown.index("](reduce_ladder.png)") < markdown.index("\n|")


def test_overview_draws_every_conclusion_published_and_ours(drawn):
    figure = drawn("synthetic")["overview"]
    gids = [line.get_gid() for ax in figure.axes for line in ax.get_lines() if line.get_gid()]
    assert {f"published:{t.key}" for t in BLOG_TABLES} <= {gid.rpartition(":")[0] for gid in gids}
    assert len(set(gids)) == len(gids)  # unique ids in the SVG
    texts = {t.get_text() for ax in figure.axes for t in ax.texts}
    assert "holds" in texts and "conclusion" in texts and "ratio" in texts


# ---- counts and math ---------------------------------------------------------------------------


def test_header_counts_distinct_sweep_sources(report, synthetic):
    dataset, _, _ = synthetic
    sweeps = dataset["source"][dataset["source"].str.startswith("sweep:")].nunique()
    studies = dataset["source"][dataset["source"].str.startswith("study:")].nunique()
    assert dataset["source"].nunique() > sweeps + studies  # the "peaks" rows are there
    for text in (report.markdown.read_text(), report.html.read_text()):
        found = re.search(r"from (\d+) sweeps?, (\d+) stud(?:y|ies) and 1 other source", text)
        assert found and (int(found[1]), int(found[2])) == (sweeps, studies)


def test_powers_render_as_superscripts_in_html_only(report):
    html, markdown = report.html.read_text(), report.markdown.read_text()
    assert "^" not in html
    assert "2<sup>24</sup>" in html and "10<sup>9</sup>" in html
    assert "2^24" in markdown and "<sup>" not in markdown


# ---- the blogs' numbers on the figures ----------------------------------------------------------


@pytest.mark.parametrize("source", ["synthetic", "reference"])
def test_each_published_number_is_drawn(source, reference_ctx, synthetic_ctx, drawn):
    ctx = synthetic_ctx if source == "synthetic" else reference_ctx
    figures = drawn(source)
    specs = [s for s in FIGURE_SPECS if s.published]
    assert len(specs) >= 8
    for spec in specs:
        lines = [
            line for ax in figures[spec.stem].axes for line in ax.get_lines() if (line.get_gid() or "").startswith("published:")
        ]
        assert {line.get_gid().split(":")[1] for line in lines} == set(spec.published), spec.stem
        assert len({line.get_gid() for line in lines}) == len(lines)  # unique ids in the SVG
        panels, _ = build(ctx, spec)
        for mark in (m for p in panels for m in p.marks):
            comparison = ctx.comparisons[mark.table]
            assert mark.speedup in set(comparison.rows["published_speedup"]), (spec.stem, mark)
            line = next(ln for ln in lines if ln.get_gid().split(":")[1] == mark.table and ln.get_ydata()[0] == mark.y)
            assert line.get_marker() == "D"


def test_published_mark_is_our_reference_times_the_blog_speedup(reference_ctx):
    spec = next(s for s in FIGURE_SPECS if s.stem == "offset_read_write")
    (panel,), _ = build(reference_ctx, spec)
    data = panel.data.set_index(["series", "x"])["y"]
    mark = next(m for m in panel.marks if m.table == "offset_write_m2070" and m.x == 11)
    assert mark.speedup == pytest.approx(0.134 / 0.184)  # writeOffset, M2070: offset 11 vs offset 0
    assert mark.y == pytest.approx(data[("write", 0)] * mark.speedup)


# ---- axes -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("source", ["synthetic", "reference"])
def test_value_axes_start_at_zero(source, drawn):
    checked = 0
    for stem, figure in drawn(source).items():
        for ax in figure.axes:
            if any(unit in ax.get_ylabel() for unit in ("GB/s", "GFLOP/s", "speed-up", "fraction")):
                assert ax.get_ylim()[0] == 0, (stem, ax.get_title(), ax.get_ylim())
                checked += 1
    assert checked >= 15


def test_offset_bars_carry_their_ratio_to_offset_zero(drawn):
    figure = drawn("reference")["offset_read_write"]
    labels = [text.get_text() for ax in figure.axes for text in ax.texts]  # bar labels are axes texts
    assert any(re.fullmatch(r"0\.9\d×", text) for text in labels)


# ---- matmul is compute-bound ------------------------------------------------------------------


def test_matmul_is_shown_in_gflops_and_never_as_a_share_of_a_bandwidth_peak(report, reference_ctx):
    matmul = next(s for s in FIGURE_SPECS if s.stem == "matmul_variants")
    assert matmul.ys == ("gflops",)
    peaks = next(s for s in FIGURE_SPECS if s.stem == "peak_fractions")
    (panel,), _ = build(reference_ctx, peaks)
    assert not any(str(x).startswith("matmul") for x in panel.data["x"])
    row = next(line for line in report.markdown.read_text().splitlines() if line.startswith("| matmul "))
    assert "compute-bound" in row and "%" not in row


# ---- data files, module sizes --------------------------------------------------------


def test_blog_tables_come_from_the_data_files():
    tables = load_blog_tables(tolerance="5%")
    assert [t.key for t in tables] == [t.key for t in BLOG_TABLES] and len(tables) == 14
    published = load_published()
    for table in tables:
        assert "{tolerance}" not in table.rule
        for step in table.steps:
            if step.published is not None:
                variant, params = step.published
                assert published_value(published, table.tables, variant, params, ("time_ms", "bandwidth_gbs", "speedup")), (
                    table.key,
                    step.label,
                )


def test_blog_table_reader_rejects_a_bad_row(tmp_path):
    steps = (Path(__file__).resolve().parents[1] / "tuner" / "data" / "blog_steps.csv").read_text()
    bad = tmp_path / "steps.csv"
    bad.write_text(steps.replace(",faster,", ",quicker,", 1))
    with pytest.raises(ValueError, match="quicker"):
        load_blog_tables(steps=bad)


def test_report_modules_stay_small():
    for module in (ROOT / "tuner" / "report").glob("*.py"):
        assert len(module.read_text().splitlines()) < 400, module.name


def test_the_unroll_conclusion_reads_the_sweep_its_figure_shows(reference_ctx):
    """Each step of a blog table from the sweep made for it: the pragma-unroll
    speed-ups once took unroll 1 from the vector-width sweep (another grid)
    and unroll 2 and 4 from the unroll sweep, a 1.10x that no sweep measured."""
    comparison = reference_ctx.comparisons["vector_add_pragma_unroll"]
    assert {row["source"] for row in comparison.chosen} == {"sweep:vector_add_unroll"}
    spec = next(s for s in FIGURE_SPECS if s.stem == "vector_add_unroll")
    panels, _ = build(reference_ctx, spec)
    (panel,) = [p for p in panels if p.marks]  # the panel of the compared problem
    bars = panel.data.set_index(["series", "x"])["y"]
    our = comparison.rows.set_index("step / config")["our_speedup"]
    assert our["unroll 4"] == pytest.approx(bars[(1, 4)] / bars[(1, 1)], rel=1e-9)  # vector width 1, unroll 4 over 1
