"""The report of a family the package does not know: a section of its own
(its parameters read from its rows, a figure of the best at each value, the
best configuration of each problem, counters, studies), and no lesson drawn or
tabled empty. The family is a tiled transpose whose parameters ``block_rows``
and ``pad`` no built-in family has: were the report to fall back on a built-in
parameter list, they would be missing."""

from __future__ import annotations

import re

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from fixtures_plugin import FAMILY, PARAMS, STUDY, make_plugin_dataset  # noqa: E402
from fixtures_report import make_dataset  # noqa: E402

from tuner.data.counters import COUNTERS, to_profile_frame  # noqa: E402
from tuner.data.results import PARAM_COLUMNS  # noqa: E402
from tuner.data.selection import usable  # noqa: E402
from tuner.report import BLOG_TABLES, EXPECTED_FIGURES, FIGURE_SPECS, build_report  # noqa: E402

SECTION = f"### Family `{FAMILY}`"


@pytest.fixture(scope="module")
def plugin():
    return make_plugin_dataset(seed=0)


@pytest.fixture(scope="module")
def report(plugin, tmp_path_factory):
    dataset, device, peaks = plugin
    return build_report(dataset, device=device, peaks=peaks, out_dir=tmp_path_factory.mktemp("plugin"))


def section(markdown: str) -> str:
    """The plug-in family's section of the Markdown report."""
    start = markdown.index(SECTION)
    return markdown[start : markdown.index("\n## ", start)]


def test_the_fixture_has_parameters_no_built_in_list_holds():
    assert {"block_rows", "pad"}.isdisjoint(PARAM_COLUMNS)


def test_each_parameter_of_a_plugin_family_reaches_its_section(report):
    text = section(report.markdown.read_text())
    names = re.search(r"Its parameters, read from its rows' configuration keys: (.*)\.", text)[1]
    assert names == ", ".join(f"`{p}`" for p in PARAMS)  # exactly its own, none of the built-in list
    # The best configuration of each problem names every parameter, and its launch.
    assert text.count("| tile=32, block_rows=8, pad=1 |") == 2 and "| (32, 8, 1) |" in text
    assert "| (256, 256, 1) |" in text and "95.0%" in text  # grid of the 8192 x 8192 problem; share of the copy peak
    # Each parameter's row: the best at each value, in numeric order, the best in bold.
    effects = {m[1]: m[2] for m in re.finditer(r"^\| `(\w+)`\s*\| (.*?)\s*\|", text, re.M)}
    assert list(effects) == list(PARAMS)
    assert re.fullmatch(r"8: \d+ · 16: \d+ · \*\*32: \d+\*\* · 64: \d+", effects["tile"])
    assert re.fullmatch(r"0: \d+ · \*\*1: \d+\*\*", effects["pad"])
    # Its study, in a line: found in the family's own section.
    assert f"study `{STUDY}`: 20 trials, 20 ok" in text and "of the exhaustive sweep's best" in text


def test_a_plugin_family_gets_a_figure_with_a_panel_per_parameter(report):
    (figure,) = report.family_figures
    assert figure.stem == f"family_{FAMILY}"
    png, svg = (report.out_dir / f"{figure.stem}.{suffix}" for suffix in ("png", "svg"))
    assert png.stat().st_size > 10_000
    texts = re.findall(r">([^<>]+)</text>", svg.read_text())  # text stays text in the report's SVGs
    assert set(PARAMS) <= set(texts)  # each panel's title
    assert f"]({figure.stem}.png)" in report.markdown.read_text()
    assert f'id="figure-{figure.stem}"' in report.html.read_text()


def test_a_plugin_only_report_is_short_and_has_no_lesson_pages(report):
    markdown, html = report.markdown.read_text(), report.html.read_text()
    assert len(markdown.splitlines()) < 150  # 340 lines, 99 of them "no data", before lessons were left out
    for text in (markdown, html):
        assert "no data" not in text and "Skipped" not in text and "not drawn" not in text.lower()
        assert not any(f"{stem}.png" in text or f"figure-{stem}" in text for stem in EXPECTED_FIGURES
                       if stem not in ("peak_fractions", "study_history", "study_importance"))  # fmt: skip
        assert not any(table.key in text for table in BLOG_TABLES)
        assert "Comparisons with the published tables" not in text and "blogs' conclusions on this GPU" not in text
    assert "None of the lessons' families" in markdown and "### Family `copy`" not in markdown  # the peaks' rows
    assert markdown.rstrip().endswith("Every figure and table had data.")
    # The workflow declares every stem of EXPECTED_FIGURES: each exists, those without data as placeholders.
    for stem in EXPECTED_FIGURES:
        assert (report.out_dir / f"{stem}.png").is_file() and (report.out_dir / f"{stem}.svg").is_file()


def test_a_lesson_family_beside_a_plugin_keeps_its_lessons_and_one_note_names_the_rest(plugin, tmp_path):
    lessons, device, peaks = make_dataset(seed=0)
    dataset = pd.concat([plugin[0], lessons[lessons["family"] == "layout"]], ignore_index=True)
    outputs = build_report(dataset, device=device, peaks=peaks, out_dir=tmp_path)
    markdown = outputs.markdown.read_text()
    assert "](layout_aos_soa.png)" in markdown and "### Array of structures vs structure of arrays" in markdown
    assert "](reduce_ladder.png)" not in markdown and "no data" not in markdown
    (note,) = [line for line in markdown.splitlines() if "their lessons are left out" in line]
    families = "reduce, copy, vector_add, offset, matmul"  # copy: only the peaks stage's rows, which measure the device
    figures = sum(spec.family not in (None, "layout") for spec in FIGURE_SPECS)
    tables = sum(table.family != "layout" for table in BLOG_TABLES)
    left_out = f"their lessons are left out ({figures} figures and {tables} blog tables)"
    assert note == f"- no ok rows of a sweep or study for families: {families}; {left_out}"
    assert SECTION in markdown and "### Family `layout`" in markdown


def test_a_family_that_counts_flops_is_judged_by_gflops_and_its_counters_name_each_parameter(plugin, tmp_path):
    """A plug-in family with a gflops column is compute-bound in every table;
    its profiles keep its own parameter columns, and the counters' line names
    each parameter, from the configuration key (one report shows both)."""
    dataset, device, peaks = plugin
    ok = usable(dataset)[usable(dataset)["family"] == FAMILY].index
    flops = dataset.assign(gflops=np.nan)
    flops.loc[ok, "gflops"] = 2 * dataset.loc[ok, "n"].astype(float) / (dataset.loc[ok, "time_ms_median"] * 1e-3) / 1e9
    top = usable(dataset).sort_values("bandwidth_gbs", ascending=False).head(3)
    counters = {c.column: 50.0 for c in COUNTERS} | {"dram_read_bytes": 2.0**29, "dram_write_bytes": 2.0**29,
                                                       "fp32_flops": 0.0, "fp32_peak_gflops": 60000.0}  # fmt: skip
    profiles = to_profile_frame(top.assign(**counters))
    assert {"tile", "block_rows", "pad"} <= set(profiles.columns)
    markdown = build_report(flops, device=device, peaks=peaks, out_dir=tmp_path, profiles=(profiles, [])).markdown.read_text()
    text = section(markdown)
    assert "judged by GFLOP/s" in text and "| GFLOP/s   | GB/s   |" in text and "best GFLOP/s at each value" in text
    assert f"`{FAMILY}` counts floating-point work and is compute-bound" in markdown
    best = next(line for line in markdown.splitlines() if line.startswith(f"| {FAMILY} "))
    assert "— (compute-bound)" in best
    line = rf"^- \*\*{FAMILY}\*\* \(float32, n = 2\^26; tile=32, block_rows=8, pad=1\): DRAM 50 %"
    assert re.search(line, text, re.M)
    assert "## Why it is fast: hardware counters" in markdown and "Counters of the blog tables" not in markdown


def test_the_report_rebuilt_from_the_same_rows_is_the_same_bytes(plugin, report, tmp_path):
    dataset, device, peaks = plugin
    again = build_report(dataset, device=device, peaks=peaks, out_dir=tmp_path)
    files = sorted(p.name for p in report.out_dir.iterdir())
    assert files == sorted(p.name for p in tmp_path.iterdir())
    for name in files:
        assert (again.out_dir / name).read_bytes() == (report.out_dir / name).read_bytes(), name


def test_parameter_values_keep_their_order():
    """Numbers in numeric order (8 before 16, not as text); other values as the
    sweep listed them, not alphabetically."""
    from tuner.report.family_sections import ordered_values

    assert ordered_values(pd.Series([64, 8, None, 16, 8], dtype="Int64")) == [8, 16, 64]
    assert ordered_values(pd.Series(["none", "ldg", "stream", "ldg", None])) == ["none", "ldg", "stream"]
