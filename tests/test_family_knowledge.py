"""What a family is, the family says: the report and the data layer ask it
for a problem's text, its rank among families and whether it is
compute-bound, and keep no list of family names of their own."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from tuner.data.selection import compute_bound, family_rank, format_n, measured_families, problem_label
from tuner.families import REGISTRY
from tuner.families.reduce import Reduce

ROOT = Path(__file__).resolve().parents[1]


class Stencil(Reduce):
    """A family of its own words: a 2-D grid of n×n cells, last in a report's lists but for its rank."""

    name = "stencil_words"
    report_rank = 5

    def size_text(self, n: int, *, tex: bool = False) -> str:
        return f"{n}² cells"

    def problem_text(self, dtype: str, n: int, *, tex: bool = False) -> str:
        return f"{dtype} grid of {self.size_text(n)}"

    def flops(self, cfg, problem) -> int:
        return 9 * problem.n**2


@pytest.fixture
def stencil(monkeypatch):
    family = Stencil()
    monkeypatch.setitem(REGISTRY.families, family.name, family)
    return family


def test_labels_come_from_the_family(stencil):
    assert problem_label("stencil_words", "float32", 64) == "float32 grid of 64² cells"
    assert format_n(64, "stencil_words") == "64² cells"
    assert problem_label("matmul", "float32", 1000) == "float32, 1000×1000"
    assert problem_label("reduce", "int32", 1 << 24) == "int32, n = 2^24"
    # A family this process has not loaded is named as any other.
    assert problem_label("not_loaded", "int8", 1 << 20, tex=True) == "int8, n = $2^{20}$"


def test_rank_and_compute_bound_come_from_the_family(stencil):
    names = ["matmul", "not_loaded", "copy", "stencil_words", "reduce"]
    assert sorted(names, key=family_rank) == ["stencil_words", "copy", "reduce", "matmul", "not_loaded"]
    assert stencil.compute_bound and REGISTRY["matmul"].compute_bound and not REGISTRY["reduce"].compute_bound
    with_flops = pd.DataFrame({"family": ["stencil_words", "reduce", "not_loaded"], "gflops": [1.0, 2.0, 3.0]})
    judged = {f: compute_bound(with_flops[with_flops.family == f]) for f in with_flops.family}
    # reduce counts no flops, whatever a row says; an unknown family is judged as it was measured
    assert judged == {"stencil_words": True, "reduce": False, "not_loaded": True}


def test_measured_families_come_in_rank_order_ties_by_name(stencil, monkeypatch):
    monkeypatch.setattr(Stencil, "report_rank", REGISTRY["reduce"].report_rank)  # a tie with reduce
    rows = pd.DataFrame({"family": ["stencil_words", "reduce", "copy", "not_loaded", "matmul", "layout"],
                         "source": ["sweep:a", "study:b", "sweep:c", "sweep:d", "sweep:e", "peaks"]})  # fmt: skip
    assert measured_families(rows) == ["copy", "reduce", "stencil_words", "matmul", "not_loaded"]


def test_the_report_names_no_family():
    """No family-name comparison or list of family names in the report: a
    lesson's figure names the family it draws (``family="reduce"``), and what
    it needs of the family it asks the family."""
    names = "|".join(sorted(REGISTRY.families))
    branch = re.compile(rf"""(==|!=|\bin)\s*\(?["']({names})["']|\(\s*["']({names})["']\s*,\s*["']({names})["']""")
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in sorted((ROOT / "tuner" / "report").rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if branch.search(line)
    ]
    assert not found, found
