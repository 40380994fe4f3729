"""The report's counter section: rendered from the shipped H100 reference
(measured and profiled on the GPU) without one; a folder without profiles, or
with a profile that could not be taken, says why."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tuner.data import counters, results
from tuner.data.published import load_published
from tuner.report import build_report
from tuner.report.counters import check, load_specs

ROOT = Path(__file__).resolve().parents[1]
H100 = ROOT / "results" / "reference" / "nvidia-h100-80gb-hbm3"
H200 = ROOT / "results" / "reference" / "nvidia-h200"

# The tests that read one shared report run in one pytest-xdist process (with --dist loadgroup), so it is drawn once.
pytestmark = pytest.mark.xdist_group("reference_report")


def report(folder: Path, out: Path, profiles) -> str:
    build_report(results.read(folder / "measurements.parquet"), device=json.loads((folder / "device.json").read_text()),
                 peaks=json.loads((folder / "peaks.json").read_text()), out_dir=out, profiles=profiles)  # fmt: skip
    return (out / "report.md").read_text()


@pytest.fixture(scope="module")
def h100_report(reference_report):
    """The README's command's report of the shipped H100 folder, which holds its profiles."""
    out, _ = reference_report
    return (out / "report.md").read_text(), out


def offset_folder(tmp_path: Path) -> Path:
    """A results folder of the shipped H200's offset rows (enough for a report
    of its own, quick to draw), without profiles."""
    folder = tmp_path / "gpu"
    folder.mkdir()
    for name in ("device.json", "peaks.json"):
        (folder / name).write_text((H200 / name).read_text())
    rows = results.read(H200 / "measurements.parquet")
    results.write_atomic(rows[rows.family == "offset"], folder / "measurements.parquet")
    return folder


def table_after(markdown: str, heading: str) -> pd.DataFrame:
    """The first pipe table after ``heading``."""
    block = markdown[markdown.index(heading) :].split("\n\n")
    lines = next(b for b in block if b.startswith("|")).splitlines()
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines if not set(line) <= set("|- ")]
    return pd.DataFrame(cells[1:], columns=cells[0])


def test_counter_tables_render_from_the_shipped_reference(h100_report):
    markdown, out = h100_report
    assert "## Why it is fast: hardware counters" in markdown and "Not profiled" not in markdown
    reads = table_after(markdown, "#### Misaligned reads, readOffset (M2070)").set_index("step / config")
    assert reads.loc["offset 11, L1 ca (vs offset 0, L1 ca)", "global load efficiency (%), blog"] == "49.8 %"
    assert reads.loc["offset 11, L1 ca (vs offset 0, L1 ca)", "global load efficiency (%), ours"] == "80.0 %"
    assert reads.loc["offset 0, L1 cg", "global load efficiency (%), ours"] == "100.0 %"
    aos = table_after(markdown, "#### Array of structures vs structure of arrays").set_index("step / config")
    assert aos.loc["aos", "global load efficiency (%), ours"] == "50.0 %"
    assert re.search(r"^\| sequential addressing removes the bank conflicts .*\| yes\s+\|$", markdown, re.M)
    assert (out / "roofline.png").stat().st_size > 10_000 and "![roofline](roofline.png)" in markdown
    assert re.search(r"^- \*\*reduce\*\* \(.*% of its peak", markdown, re.M)
    html = (out / "report.html").read_text()
    assert 'id="counters"' in html and 'alt="Roofline"' in html


def test_every_lesson_that_changed_is_explained_from_counters(h100_report):
    markdown, _ = h100_report
    section = markdown[markdown.index("### Conclusions that changed") : markdown.index("### Roofline")]
    lines = [line for line in section.splitlines() if line.startswith("- ")]
    assert any("offset 11" in line and "80 % load efficiency (1.25× the sectors)" in line for line in lines), lines
    assert all(re.search(r"\d\.\d\d× the time of", line) for line in lines)


# A folder without profiles: tests/test_report.py::test_a_folder_without_profiles_says_so, on a report it draws anyway.


def test_a_profile_that_could_not_be_taken_gives_its_reason(tmp_path):
    folder = offset_folder(tmp_path)
    counters.write_profile(
        [], folder / "profiles" / "offset_read_write.parquet", "not profiled: counters not permitted (ERR_NVGPUCTRPERM)"
    )
    frame, notes = counters.read_profiles(folder)
    assert frame.empty and notes == ["offset_read_write: not profiled: counters not permitted (ERR_NVGPUCTRPERM)"]
    markdown = report(folder, tmp_path / "out", (frame, notes))
    assert "Not profiled: offset_read_write: not profiled: counters not permitted (ERR_NVGPUCTRPERM)." in markdown


def test_counter_specs_name_real_rows_and_published_counters():
    from tuner.report.comparisons import BLOG_TABLES

    labels = {t.key: {s.label for s in t.steps} for t in BLOG_TABLES}
    published = load_published()
    for spec in load_specs():
        for conclusion in spec["conclusions"]:
            left, relation, right = conclusion["check"]
            assert left in labels[spec["table"]] and (isinstance(right, (int, float)) or right in labels[spec["table"]])
        assert set(spec["published"]) <= set(published["table"])


@pytest.mark.parametrize(
    "a, relation, b, holds",
    [
        (80.0, "<", 100.0, "yes"),
        (99.0, "<", 100.0, "no"),
        (100.0, "~", 97.0, "yes"),
        (90.0, "~", 100, "no"),
        (np.nan, ">", 1.0, "n/a (not profiled)"),
    ],
)
def test_a_counter_conclusion_needs_a_clear_difference(a, relation, b, holds):
    values = pd.DataFrame({"global_load_efficiency_pct": [a, b]}, index=["x", "y"])
    conclusion = {
        "rule": "r",
        "column": "global_load_efficiency_pct",
        "check": ["x", relation, b if relation == "~" and isinstance(b, int) else "y"],
    }
    assert check(values, conclusion)[2] == holds
