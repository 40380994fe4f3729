"""The shipped reference results: the H100's report regenerates from them
without a GPU (the README's command), and the H200's rows are verified and
complete and the samplers replay against their exhaustive sweep."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tuner.data import results
from tuner.families import REGISTRY, Problem
from tuner.report import EXPECTED_FIGURES
from tuner.search.tables.replay import replay

REFERENCE = Path(__file__).resolve().parents[1] / "results" / "reference" / "nvidia-h200"

# The tests that read one shared report run in one pytest-xdist process (with --dist loadgroup), so it is drawn once.
pytestmark = pytest.mark.xdist_group("reference_report")


@pytest.fixture(scope="module")
def dataset():
    return results.read(REFERENCE / "measurements.parquet")


def test_reference_rows_are_verified_and_complete(dataset):
    assert set(dataset["gpu"]) == {"NVIDIA H200"}
    ok = dataset[dataset.status == "ok"]
    assert len(ok) > 1500
    assert ok["time_ms_median"].gt(0).all() and ok["samples"].ge(10).all()
    assert ok["bandwidth_gbs"].sub(ok["bytes_moved"] / (ok["time_ms_median"] / 1e3) / 1e9).abs().max() < 1e-6


def test_report_regenerates_from_reference(reference_report):
    folder, printed = reference_report
    # the reference run covers every figure
    assert f"; {len(EXPECTED_FIGURES)} figures, 0 skipped" in printed, printed
    for stem in EXPECTED_FIGURES:
        assert (folder / f"{stem}.png").stat().st_size > 1000
        assert (folder / f"{stem}.svg").exists()
    markdown = (folder / "report.md").read_text()
    shipped = Path(__file__).resolve().parents[1] / "results" / "reference" / "nvidia-h100-80gb-hbm3" / "report" / "report.md"
    assert markdown == shipped.read_text()  # the shipped report is what its results draw today
    headers = re.findall(
        r"^\|\s*blog table\s*\|\s*row\s*\|\s*blog number\s*\|\s*ours\s*\|\s*ratio\s*\|\s*holds\s*\|$", markdown, re.M
    )
    assert headers, "summary table with published and measured columns missing"
    assert re.search(r"^\| reduce_ladder_int32_1050ti\s+\|", markdown, re.M)
    assert (folder / "report.html").read_text().count("<img") >= 3


@pytest.mark.parametrize("gpu", ["nvidia-h100-80gb-hbm3", "nvidia-h200"])
def test_the_shipped_report_is_one_format_each_figure_stored_once(gpu):
    """report.md and the PNG of each figure it links (``--format markdown``), no SVG or HTML copy."""
    report = REFERENCE.parent / gpu / "report"
    files = {p.name for p in report.iterdir()}
    linked = set(re.findall(r"\]\(([^)]+\.png)\)", (report / "report.md").read_text()))
    assert {f"{stem}.png" for stem in EXPECTED_FIGURES} <= linked
    assert files == {"report.md", *linked}


def test_replay_on_the_measured_reduction_space(dataset):
    problem = Problem("reduce", "int32", 1 << 28)
    table = dataset[dataset.source == "sweep:reduce_space"]
    assert len(table) == 1536
    # Ratios are to the table's optimum (an exhaustive replay is 1.0: tests/test_replay.py).
    frame = replay(table, REGISTRY["reduce"], problem, samplers=("random",), budgets=(16,), seeds=range(1))
    # 16 random configurations of 1536 land within 10 % of the optimum on this space, but not on it.
    random16 = frame[(frame.sampler == "random") & (frame.budget == 16)]["median_ratio"].iloc[0]
    assert 0.9 < random16 < 1.0
