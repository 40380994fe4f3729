"""The report stage on a synthetic dataset: every figure, both documents, the
comparison tables, the status filter, missing data and the CLI."""

from __future__ import annotations

import re
import subprocess
import sys

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from tuner.data.published import ladder_speedups  # noqa: E402
from tuner.data.results import write_atomic, write_json_atomic  # noqa: E402
from tuner.data.selection import family_rank, usable  # noqa: E402
from tuner.data.ties import operations  # noqa: E402
from tuner.report import (  # noqa: E402
    BLOG_TABLES,
    EXPECTED_FIGURES,
    FIGURE_SPECS,
    ReportOutputs,
    best_per_family,
    build_report,
    load_published,
)
from tuner.report.__main__ import main  # noqa: E402
from tuner.report.comparisons import ROW_COLUMNS, evaluate  # noqa: E402
from tuner.report.lessons import LESSON_FAMILIES, lesson_scope  # noqa: E402
from tuner.report.studies import param_importances  # noqa: E402

ALLOWED_HOLDS = re.compile(r"^(yes|no|n/a \(.+\))$")

# The tests that read one shared report run in one pytest-xdist process (with --dist loadgroup), so it is drawn once.
pytestmark = pytest.mark.xdist_group("synthetic_report")


def markdown_tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """(header cells, body rows) of every Markdown table in ``text``."""
    lines = text.splitlines()
    tables = []
    for i in range(len(lines) - 1):
        if lines[i].startswith("|") and re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", lines[i + 1]):
            split = lambda line: [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]  # noqa: E731
            body = []
            for line in lines[i + 2 :]:
                if not line.startswith("|"):
                    break
                body.append(split(line))
            tables.append((split(lines[i]), body))
    return tables


@pytest.fixture
def synthetic(synthetic_run) -> tuple[pd.DataFrame, dict, dict]:
    dataset, device, peaks = synthetic_run
    return dataset.copy(), device, peaks


@pytest.fixture
def report(synthetic_report) -> ReportOutputs:
    return synthetic_report


def test_family_sections_come_in_the_familys_order_not_the_names(report):
    """Each family's section where its ``report_rank`` puts it (ties by name)."""
    sections = re.findall(r"^### Family `(\w+)`$", report.markdown.read_text(), re.M)
    assert len(sections) >= 3 and sections != sorted(sections)  # rank and name disagree on this dataset
    assert sections == sorted(sections, key=family_rank)


def test_every_figure_is_drawn_as_png_and_svg(report):
    assert report.skipped == {}
    for stem in EXPECTED_FIGURES:
        for suffix in ("png", "svg"):
            path = report.out_dir / f"{stem}.{suffix}"
            assert path.is_file() and path.stat().st_size > 1000, path
    assert len(report.figures) == 2 * len(EXPECTED_FIGURES)
    assert (report.out_dir / "reduce_ladder.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_documents_are_written(report):
    assert report.markdown.is_file() and report.html.is_file()
    assert set(report.documents) == {report.markdown, report.html}
    markdown, html = report.markdown.read_text(), report.html.read_text()
    assert markdown.startswith("# Kernel autotuning report — Synthetic GPU X100")
    for stem in EXPECTED_FIGURES:
        assert f"]({stem}.png)" in markdown
        assert f'id="figure-{stem}"' in html
    assert html.count("<table") == len(markdown_tables(markdown))
    assert "0123456789abcdef" in markdown  # the commit, in the environment table


def test_comparison_tables_hold_published_and_measured_columns(report):
    tables = markdown_tables(report.markdown.read_text())
    comparisons = [(head, body) for head, body in tables if head and head[0] == "step / config"]
    assert len(comparisons) == len(BLOG_TABLES)
    for head, body in comparisons:
        assert head == ROW_COLUMNS
        assert any(h.startswith("published") for h in head) and "ours" in head
        assert body and all(ALLOWED_HOLDS.match(row[-1]) for row in body)
    # The synthetic GPU follows every blog's conclusion: all measured rows say yes.
    verdicts = [row[-1] for _, body in comparisons for row in body if not row[-1].startswith("n/a")]
    assert verdicts and set(verdicts) == {"yes"}

    summary = next(body for head, body in tables if head[:1] == ["blog table"] and "blog number" in head)
    assert {row[0] for row in summary} == {spec.key for spec in BLOG_TABLES}
    ladder = next(row for row in summary if row[0] == "reduce_ladder_int32_1050ti")
    assert "GTX 1050 Ti" in ladder[2] and "10.41×" in ladder[2]  # 10.491 ms / 1.008 ms


def test_published_ladder_speedups():
    published = load_published()
    int32 = ladder_speedups(published, "reduce_ladder_int32_1050ti")
    assert list(int32["variant"])[:3] == ["neighbored", "neighbored_less", "interleaved"]
    assert int32["speedup"].iloc[0] == 1.0
    assert int32["speedup"].iloc[-1] == pytest.approx(10.491 / 1.008)
    float32 = ladder_speedups(published, "reduce_v0_v6_gtx1060")
    assert float32["variant"].iloc[-1] == "shared" and float32["unroll"].isna().all()


def test_non_ok_rows_never_appear_as_best(synthetic, report):
    dataset, _, peaks = synthetic
    broken = dataset[dataset["status"] == "wrong_result"]
    assert len(broken) and broken["bandwidth_gbs"].max() > 1e5  # the fixture's trap is armed
    bests = best_per_family(dataset, peaks)
    assert set(bests["status"]) == {"ok"}
    assert bests["bandwidth_gbs"].max() < peaks["read_gbs"] * 1.05

    # Mark each answer's best row (a family's, or an operation's of copy) as wrong: the next best ok row must take its place.
    spoiled = dataset.copy()
    for index in bests.index:
        family, operation = bests.loc[index, "family"], bests["operation"].fillna("").loc[index]
        rows = usable(spoiled)
        mine = (rows["family"] == family) & (operations(rows).fillna("") == operation)
        top = rows[mine.to_numpy(dtype=bool)]["bandwidth_gbs"].idxmax()
        spoiled.loc[top, "status"] = "wrong_result"
    after = best_per_family(spoiled, peaks)
    assert set(after["status"]) == {"ok"}
    before = bests.fillna({"operation": ""}).set_index(["family", "operation"])["bandwidth_gbs"]
    for (family, operation), gbs in after.fillna({"operation": ""}).set_index(["family", "operation"])["bandwidth_gbs"].items():
        assert gbs <= before[(family, operation)], (family, operation)

    head, best_table = next((head, body) for head, body in markdown_tables(report.markdown.read_text()) if "of copy peak" in head)
    assert max(float(row[head.index("GB/s")]) for row in best_table) < 1e4


@pytest.fixture(scope="module")
def offset_run(synthetic_run, tmp_path_factory) -> tuple[pd.DataFrame, dict, dict, ReportOutputs]:
    """The synthetic GPU's offset rows alone (no other family, no study, no
    CUB peak) and their report as ``python -m tuner.report`` builds it (no
    profiles): one family's report is quick to draw."""
    from tuner.data.counters import read_profiles

    dataset, device, peaks = synthetic_run
    offset, peaks = dataset[dataset["family"] == "offset"], {**peaks, "cub_reduce_gbs": None}
    report = build_report(offset, device=device, peaks=peaks, out_dir=tmp_path_factory.mktemp("offset"),
                          profiles=read_profiles(tmp_path_factory.mktemp("no-profiles")))  # fmt: skip
    return offset, device, peaks, report


def test_missing_families_build_with_a_note(offset_run):
    """Every lesson of a family without rows is left out, not drawn or tabled
    empty, and one note says which."""
    *_, outputs = offset_run
    tmp_path = outputs.out_dir
    assert set(outputs.skipped) == {spec.stem for spec in FIGURE_SPECS if spec.family not in (None, "offset")} | {
        "study_history", "study_importance"}  # fmt: skip
    assert "layout" in outputs.skipped["layout_aos_soa"] and "study" in outputs.skipped["study_history"]
    # The workflow still finds every stem: skipped ones are placeholders saying why.
    for stem in EXPECTED_FIGURES:
        assert (tmp_path / f"{stem}.png").is_file() and (tmp_path / f"{stem}.svg").is_file()
    markdown = outputs.markdown.read_text()
    assert ("no ok rows of a sweep or study for families: reduce, copy, vector_add, layout, matmul; their lessons are "
            "left out (8 figures and 10 blog tables)") in markdown  # fmt: skip
    assert "](layout_aos_soa.png)" not in markdown and "AoS vs SoA" not in markdown and "](offset_read_write.png)" in markdown
    assert "### Array of structures vs structure of arrays" not in markdown and "Skipped:" not in markdown
    aos_soa = next(c for c in outputs.comparisons if c.spec.key == "aos_soa_m2070")
    assert set(aos_soa.rows[ROW_COLUMNS[-1]]) <= {"n/a (no data)", "n/a (reference)"}
    peaks = next(body for head, body in markdown_tables(markdown) if head[:2] == ["peak", "GB/s"])
    assert ["cub reduce", "not measured"] == next(row[:2] for row in peaks if row[0] == "cub reduce")
    # One family left out: the note names its lessons.
    _, notes = lesson_scope(set(LESSON_FAMILIES) - {"layout"}, outputs.comparisons, list(outputs.results))
    assert notes[0] == ("no ok rows of a sweep or study for families: layout; their lessons are left out "
                        "(figure `layout_aos_soa`, blog table `aos_soa_m2070`)")  # fmt: skip


def test_a_folder_without_profiles_says_so(offset_run):
    """The offset report reads its profiles from a folder that has none, as
    the command does for a results folder without profiles: the counters
    section says so (one report fewer to draw than a folder of its own)."""
    *_, outputs = offset_run
    assert "Not profiled: this results folder has no profiles" in outputs.markdown.read_text()


def test_a_failed_conclusion_reads_no(synthetic):
    dataset, _, _ = synthetic
    ok = usable(dataset).copy()
    soa = ok["variant"] == "soa"
    ok.loc[soa, "time_ms_median"] *= 10  # SoA now much slower than AoS
    spec = next(s for s in BLOG_TABLES if s.key == "aos_soa_m2070")
    comparison = evaluate(spec, ok, load_published())
    assert list(comparison.rows[ROW_COLUMNS[-1]]) == ["n/a (reference)", "no"]


def test_importances_need_five_ok_trials(synthetic):
    dataset, _, _ = synthetic
    study = usable(dataset[dataset["source"] == "study:reduce_int32"])
    importances, note = param_importances(study.head(4))
    assert importances is None and "only 4 ok trials" in note
    importances, note = param_importances(study)
    assert note == "" and importances and sum(importances.values()) == pytest.approx(1.0)


def test_cli_fails_cleanly_on_a_missing_folder(tmp_path):
    missing = tmp_path / "no-such-gpu"
    run = subprocess.run(
        [sys.executable, "-m", "tuner.report", "--results", str(missing), "--out", str(missing / "report")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode != 0
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and str(missing) in lines[0] and "Traceback" not in run.stderr


def test_cli_names_the_missing_file(tmp_path, capsys):
    (tmp_path / "device.json").write_text("{}")
    assert main(["--results", str(tmp_path)]) != 0
    assert "measurements.parquet" in capsys.readouterr().err


def test_the_command_rebuilds_the_report_elsewhere_with_worker_processes_to_the_same_bytes(offset_run, tmp_path, capsys):
    """Every file (documents, PNG and SVG: no dates, no random clip-path ids, no
    paths; placeholders too), so a rebuilt reference report diffs clean where
    nothing changed."""
    dataset, device, peaks, report = offset_run
    folder = tmp_path / "synthetic-x100"
    write_atomic(dataset, folder / "measurements.parquet")
    write_json_atomic(device, folder / "device.json")
    write_json_atomic(peaks, folder / "peaks.json")
    assert main(["--results", str(folder), "--out", str(folder / "report"), "--processes", "2"]) == 0
    drawn = len(EXPECTED_FIGURES) - len(report.skipped)
    printed = capsys.readouterr().out
    assert f"; {drawn} figures, {len(report.skipped)} skipped, 1 family figures" in printed
    # Where its seconds went, as the pipeline's timing reads it: every step of its own process, largest first.
    steps = re.fullmatch(r"report steps: (.*)", printed.splitlines()[-1])[1].split(", ")
    seconds = {name: float(value) for name, value in (re.fullmatch(r"(.+) (\d+\.\d) s", step).groups() for step in steps)}
    assert set(seconds) == {"read inputs", "start workers", "blog tables and studies", "start drawings", "wait for drawings",
                            "stop workers", "sections", "documents"}  # fmt: skip
    assert list(seconds.values()) == sorted(seconds.values(), reverse=True)
    files = sorted(p.name for p in report.out_dir.iterdir())
    assert files == sorted(p.name for p in (folder / "report").iterdir())
    assert {"report.md", "report.html", "offset_read_write.svg", "family_offset.png", "study_history.png"} <= set(files)
    for name in files:
        assert (folder / "report" / name).read_bytes() == (report.out_dir / name).read_bytes(), name
