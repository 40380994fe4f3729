"""The report's "is the answer stable?" section: every problem's winner with
its interval and tie set, and a sentence where the tie set is large."""

from __future__ import annotations

import json

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from tuner.report.document import environment  # noqa: E402
from tuner.report.ties import ties_section  # noqa: E402

# The tests that read one shared report run in one pytest-xdist process (with --dist loadgroup), so it is drawn once.
pytestmark = pytest.mark.xdist_group("synthetic_report")


def rows(n: int, medians: list[float], half: float) -> list[dict]:
    """Verified copy rows of one problem, block sizes 32, 64...: one per median
    time (ms), each with the interval median -+ half."""
    out = []
    for i, median in enumerate(medians):
        key = json.dumps({"block_size": 32 << i, "variant": "copy"}, sort_keys=True)
        out.append({"status": "ok", "source": "sweep:s", "family": "copy", "dtype": "float32", "n": n,
                    "variant": "copy", "block_size": 32 << i, "config_key": key, "grid": "1,1,1", "block": "32,1,1",
                    "time_ms_median": median, "time_ms_ci_low": median - half, "time_ms_ci_high": median + half,
                    "bandwidth_gbs": 100.0 / median, "gflops": None, "fraction_of_copy_peak": None,
                    "fraction_of_theoretical_peak": None, "run_id": "r", "samples": 10})  # fmt: skip
    return out


def test_a_large_tie_set_gets_its_own_sentence_and_a_small_one_does_not():
    many = rows(1 << 20, [1.0, 1.001, 1.002, 1.003, 1.004, 1.0045, 1.5], half=0.003)  # 6 tied, one far behind
    few = rows(1 << 24, [2.0, 2.001, 3.0], half=0.003)
    section = ties_section(pd.DataFrame(many + few))
    table = section["table"].set_index("problem")
    assert table.loc["float32, n = 2^20", "tied"] == "6" and table.loc["float32, n = 2^24", "tied"] == "2"
    assert table.loc["float32, n = 2^20", "last tied behind by"] == "0.45%"
    assert table.loc["float32, n = 2^20", "figure [95 % interval]"] == "100 GB/s [100, 100]"
    (sentence,) = section["large"]
    assert sentence.startswith("**copy (copy) float32, n = 2^20**: 6 of 7 configurations tie with the winner")
    text = environment().get_template("ties.md.j2").render(ties=section)
    assert "## Is the answer stable?" in text and "Large tie sets (5 configurations or more)" in text


def test_no_verified_rows_no_section():
    assert ties_section(pd.DataFrame(rows(1 << 20, [1.0], 0.01)).assign(status="wrong_result")) is None


def test_the_report_carries_the_section_in_both_documents(synthetic_run, synthetic_report):
    dataset, outputs = synthetic_run[0], synthetic_report
    markdown, html = outputs.markdown.read_text(), outputs.html.read_text()
    assert markdown.index("## Best configuration per family") < markdown.index("## Is the answer stable?")
    assert '<section id="ties">' in html and "header exports" in html
    ok = dataset[(dataset.status == "ok") & (dataset.source != "peaks")]
    # copy's variant names its operation (a copy, or a read-only pass): each has its own answer.
    answers = ok.assign(operation=ok.variant.where(ok.family == "copy", "")).groupby(["family", "dtype", "n", "operation"]).ngroups
    section = markdown.split("## Is the answer stable?")[1].split("\n## ")[0]
    assert section.count("\n| ") == answers + 1  # a row per answer under the header row
