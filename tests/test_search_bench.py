"""The search benchmark (benchmarks/search.py) on a small subset: the shipped
H200 offset = 11 subspace, a few seeds."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import search  # noqa: E402
from search_rivals import Case, kt_cache, run_kt, run_ours, run_random  # noqa: E402

from tuner.families import REGISTRY  # noqa: E402
from tuner.families.base import Problem  # noqa: E402


@pytest.fixture(scope="module")
def case() -> Case:
    return search.load_case("reduce_space_offset11")


def test_the_offset11_subspace_is_the_shipped_hard_half(case):
    assert case.size == 768
    assert sum(v >= 0.99 * case.optimum for v in case.lookup.values()) == 8
    assert [case.budget(f) for f in search.FRACTIONS] == [19, 38, 77]
    assert case.ordered_domains("descending")["block_size"] == [1024, 512, 256, 128]


def test_an_incomplete_table_is_refused(case):
    with pytest.raises(ValueError, match="must hold every feasible configuration, 1 missing"):
        Case.from_table("cut", case.rows.iloc[1:], REGISTRY["reduce"], Problem("reduce", "int32", 268435456))


def test_runs_count_distinct_configurations(case):
    values = run_random(case, 3, 38)
    assert len(values) == 38 and set(values) <= set(case.lookup.values())
    ours = run_ours(case, "ordinal", "descending", 0, 38)
    assert len(ours) == 38
    assert max(ours) >= 0.99 * case.optimum


def test_random_expectation_and_summary_on_a_known_table():
    tiny = Case("tiny", REGISTRY["reduce"], Problem("reduce", "int32", 1), pd.DataFrame(), {}, {"a": 1.0, "b": 2.0, "c": 4.0})
    curve = search.random_expected_best(tiny, 3)
    assert curve == pytest.approx([7 / 3, (2 + 4 + 4) / 3, 4.0])
    runs = [[1.0, 4.0, 2.0], [2.0, 1.0, 4.0], [1.0, 2.0, 4.0]]
    row = search.summarise(tiny, runs, 2, curve)
    assert row["within_1pct"] == pytest.approx(1 / 3)
    assert row["median_first_1pct"] == math.inf  # two of three seeds miss within 2 evaluations
    assert search.summarise(tiny, runs, 3, curve)["median_first_1pct"] == 3
    # The best strategy possible (the optimum first) scores 1, random's expectation 0.
    assert search.summarise(tiny, [[4.0, 1.0, 2.0]], 3, curve)["score"] == pytest.approx(1.0)


def test_kernel_tuner_strategies_replay_the_table(case, tmp_path):
    pytest.importorskip("kernel_tuner")
    cache = kt_cache(case, "ascending", tmp_path)
    stored = json.loads(cache[0].read_text())
    assert len(stored["cache"]) == case.size and "offset" not in stored["tune_params"]  # fixed parameters left out
    values = run_kt(case, "basinhopping", cache, 0, 19)
    assert 0 < len(values) <= 19 and set(values) <= set(case.lookup.values())
    assert values == run_kt(case, "basinhopping", cache, 0, 19)  # seeded


def test_benchmark_rows_and_files(case, tmp_path):
    strategies = ["random", "ordinal"]
    try:
        import kernel_tuner  # noqa: F401

        strategies.append("basinhopping")
    except ImportError:
        pass
    assert search.main(["--tables", "reduce_space_offset11", "--seeds", "3", "--jobs", "1", "--strategies", *strategies,
                        "--out", str(tmp_path)]) == 0  # fmt: skip
    rows = json.loads((tmp_path / "search-benchmark.json").read_text())["rows"]
    assert {(r["order"], r["strategy"], r["budget"]) for r in rows} == {
        (o, s, b) for o in ("ascending", "descending") for s in strategies for b in (19, 38, 77)
    }
    ordinal = {(r["order"], r["budget"]): r for r in rows if r["strategy"] == "ordinal"}
    random = {(r["order"], r["budget"]): r for r in rows if r["strategy"] == "random"}
    for key, row in ordinal.items():
        assert row["within_1pct"] >= random[key]["within_1pct"]
        assert row["median_ratio"] <= 1.0
    assert all(ordinal[(o, 38)]["within_1pct"] == 1.0 for o in ("ascending", "descending"))
    if "basinhopping" in strategies:
        assert all("behind_p" in r and 0 <= r["behind_p"] <= 1 for r in rows)
    text = (tmp_path / "search-benchmark.txt").read_text()
    assert "reduce_space_offset11 (ascending values): 768 configurations" in text
