"""Winners with their ties: the tie set of a problem (what is not shown slower
than the winner by more than the margin), the member the header exports, and how best.json,
the header and `tuner best` show them."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from tuner import cli
from tuner.data.export import best_entries, header_text


def row(n: int, width: int, median: float, low: float, high: float, *, block: int = 256, source: str = "sweep:x") -> dict:
    """A verified vector_add row of 2^20 bytes moved, whose median time (ms)
    has the 95 % interval [low, high]."""
    key = json.dumps({"block_size": block, "variant": "add", "vector_width": width}, sort_keys=True)
    return {
        "status": "ok", "source": source, "family": "vector_add", "dtype": "float32", "n": n, "variant": "add",
        "block_size": block, "vector_width": width, "config_key": key, "grid": "64,1,1", "block": f"{block},1,1",
        "time_ms_median": median, "time_ms_ci_low": low, "time_ms_ci_high": high, "samples": 10,
        "bandwidth_gbs": 1.0 / median, "gflops": None, "fraction_of_copy_peak": None,
        "fraction_of_theoretical_peak": None, "run_id": "r",
    }  # fmt: skip


def entry(entries, n):
    return next(e for e in entries if e["n"] == n)


def test_a_configuration_ties_unless_shown_slower_than_the_winner_by_more_than_the_margin():
    rows = pd.DataFrame([
        row(1024, 4, 1.000, 0.9995, 1.0005),  # the winner
        row(1024, 2, 1.002, 1.001, 1.003),  # 0.2 % behind, well inside the 0.5 % margin: tied
        row(1024, 1, 1.008, 1.0075, 1.0085),  # 0.8 % behind at low noise: its whole interval is past the margin
        row(1024, 8, 1.008, 1.000, 1.016),  # as far behind, but too noisy to say it is slower: tied
        row(1024, 16, 1.020, 1.018, 1.022),  # 2 % behind: not tied
    ])  # fmt: skip
    (e,) = best_entries(rows)
    assert e["params"]["vector_width"] == 4 and e["time_ms_interval"] == [0.9995, 1.0005] and e["interval"] == "order statistics"
    assert e["tie_count"] == 3 and [m["params"]["vector_width"] for m in e["tie_set"]] == [4, 2, 8]
    assert e["tie_set"][1]["behind_winner"] == pytest.approx(0.002)
    assert e["exported"]["params"]["vector_width"] == 4 and "nothing ties" not in e["exported"]["rule"]


def test_the_tie_set_is_what_compare_would_not_call_slower():
    """The same judgment as ``tuner compare``: a configuration left out of the
    tie set is one compare's verdict calls SLOWER than the winner."""
    from tuner.data import compare, ties
    from tuner.data.intervals import ratio_interval

    medians = [1.000, 1.003, 1.0052, 1.006, 1.007, 1.012]
    rows = pd.DataFrame([row(1024, 2**i, m, m - 0.0008, m + 0.0008) for i, m in enumerate(medians)])
    table = ties.rank(rows, "bandwidth_gbs")
    verdicts = [compare.verdict(*ratio_interval(1.0, 0.9992, 1.0008, m, m - 0.0008, m + 0.0008)) for m in medians]
    assert [not t for t in table["tie"]] == [v == "SLOWER" for v in verdicts]
    assert list(table["tie"]) == [True, True, True, True, False, False]  # 1.006: its interval reaches 1.0049


def test_a_lone_winner_and_a_row_without_interval_claim_no_ties():
    rows = pd.DataFrame([row(1024, 4, 1.000, 0.999, 1.001), row(1024, 2, 1.008, None, None)])
    rows.loc[1, ["samples"]] = None  # no interval and nothing to derive one from: a point, past the margin
    (e,) = best_entries(rows)
    assert e["tie_count"] == 1 and e["exported"]["rule"] == "the winner: nothing ties with it"
    rows.loc[1, "time_ms_median"] = 1.004  # a point within the margin ties with it
    rows.loc[1, "bandwidth_gbs"] = 1 / 1.004
    assert best_entries(rows)[0]["tie_count"] == 2


def test_the_header_exports_the_member_that_also_ties_at_the_other_size():
    rows = pd.DataFrame([
        row(1024, 4, 1.000, 0.998, 1.003), row(1024, 2, 1.002, 1.001, 1.006),  # 2 ties with 4 here...
        row(4096, 2, 2.000, 1.998, 2.003), row(4096, 4, 2.100, 2.090, 2.110),  # ...and wins here, where 4 is 5 % behind
    ])  # fmt: skip
    entries = best_entries(rows)
    small, large = entry(entries, 1024), entry(entries, 4096)
    assert small["params"]["vector_width"] == 4 and small["exported"]["params"]["vector_width"] == 2
    assert "ties at the most sizes" in small["exported"]["rule"] and "2 of 2" in small["exported"]["rule"]
    assert large["exported"]["params"]["vector_width"] == 2 and large["tie_count"] == 1
    header = header_text(entries, {"name": "GPU", "compute_capability": "9.0"})
    tuned = header.split("#else")[0]
    struct = tuned.split("struct vector_add_float32_n1024 {")[1].split("\n};")[0]
    assert "vector_width = 2;" in struct and "bandwidth_gbs = 1.0;" in struct  # the exported member's own figure
    comment = tuned.split("struct vector_add_float32_n1024 {")[0].rsplit("\n};", 1)[-1]
    assert "2 configurations tie" in comment and "vector_width=4" in comment and "(the winner)" in comment


def test_two_sizes_whose_winners_tie_at_both_export_the_same_configuration():
    rows = pd.DataFrame([
        row(1024, 4, 1.000, 0.998, 1.003), row(1024, 2, 1.001, 0.999, 1.004),
        row(4096, 2, 2.000, 1.996, 2.006), row(4096, 4, 2.004, 2.000, 2.008),
    ])  # fmt: skip
    entries = best_entries(rows)
    # 2 is 0.1 % behind at one size and 4 is 0.2 % behind at the other: 2 holds up better over both.
    assert {e["exported"]["params"]["vector_width"] for e in entries} == {2}


def test_without_a_tie_at_another_size_the_winner_is_exported():
    rows = pd.DataFrame([
        row(1024, 4, 1.000, 0.998, 1.003), row(1024, 2, 1.002, 1.001, 1.006),
        row(4096, 1, 2.000, 1.999, 2.001), row(4096, 2, 2.100, 2.090, 2.110),  # 2 measured there, far behind
    ])  # fmt: skip
    small = entry(best_entries(rows), 1024)
    assert small["exported"]["params"]["vector_width"] == 4 and small["exported"]["rule"].startswith("the winner: no member")


def test_a_configuration_measured_twice_counts_once_by_its_better_row():
    rows = pd.DataFrame([
        row(1024, 4, 1.000, 0.998, 1.003), row(1024, 2, 1.002, 1.001, 1.006),
        row(1024, 2, 1.050, 1.04, 1.06, source="study:x"),
    ])  # fmt: skip
    (e,) = best_entries(rows)
    assert e["tie_count"] == 2 and e["candidates"] == 3 and e["tie_set"][1]["source"] == "sweep:x"


def test_older_rows_get_their_interval_from_their_quantiles(tmp_path):
    old = row(1024, 4, 1.0, None, None)
    old |= {"time_ms_min": 0.99, "time_ms_p10": 0.995, "time_ms_p90": 1.006, "time_ms_max": 1.01}
    (e,) = best_entries(pd.DataFrame([old]))
    assert e["interval"] == "from quantiles" and 0.995 < e["time_ms_interval"][0] < 1.0 < e["time_ms_interval"][1] < 1.006


def test_tuner_best_prints_the_interval_and_the_tie_count(tmp_path, capsys):
    from tuner.data import results

    folder = tmp_path / "gpu"
    rows = [row(1024, 4, 1.000, 0.998, 1.003), row(1024, 2, 1.002, 1.001, 1.006),
            row(4096, 2, 2.000, 1.998, 2.003), row(4096, 4, 2.100, 2.090, 2.110)]  # fmt: skip
    results.write_atomic(results.to_frame(rows), folder / "measurements.parquet")
    (folder / "device.json").write_text(json.dumps({"name": "GPU", "compute_capability": "9.0"}))
    assert cli.main(["best", "--results", str(folder)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "1.000 GB/s" not in out[0] and "[0.997, 1.002]" not in out[0]  # figures are rounded to whole units
    assert "  2 tied" in out[0] and "header exports {'vector_width': 2" in out[1].replace("'variant': 'add', ", "")
    best = json.loads((folder / "best.json").read_text())
    assert [e["tie_count"] for e in best["problems"]] == [2, 1]


def test_two_h100_sweeps_of_the_hard_space_name_winners_in_each_others_tie_sets():
    """The README's claim, on the two shipped sweeps of one space at two commits."""
    from pathlib import Path

    from tuner.data import results, ties

    root = Path(__file__).resolve().parents[1]
    one, two = (ties.rank(results.read(root / path), "bandwidth_gbs")
                for path in ("benchmarks/tables/reduce_hard_2e24_h100.parquet",
                             "benchmarks/tables/reduce_hard_2e24_h100_rerun.parquet"))  # fmt: skip
    winners = one.iloc[0]["config_key"], two.iloc[0]["config_key"]
    assert winners[0] != winners[1] and (int(one["tie"].sum()), int(two["tie"].sum())) == (37, 38)
    assert winners[1] in set(one[one["tie"]]["config_key"]) and winners[0] in set(two[two["tie"]]["config_key"])
    assert one.set_index("config_key").loc[winners[1], "behind"] == pytest.approx(0.0006, abs=0.0001)


def test_equal_figures_name_the_same_winner_and_tie_set_whatever_the_rows_order():
    # Event times come in steps of 32 ns, so two configurations often share a median.
    from tuner.data import ties

    rng = np.random.default_rng(3)
    rows = pd.DataFrame({
        "config_key": [f'{{"block_size": {b}}}' for b in (128, 256, 512, 1024)],
        "bandwidth_gbs": [3000.0, 3000.0, 2990.0, 2000.0],
        "time_ms_median": [1.0, 1.0, 1.0033, 1.5],
        "time_ms_ci_low": [0.999, 0.9995, 1.002, 1.49],
        "time_ms_ci_high": [1.001, 1.0005, 1.004, 1.51],
        "samples": [10, 10, 10, 10],
        "source": ["sweep:s"] * 4,
    })
    seen = set()
    for _ in range(12):
        shuffled = rows.sample(frac=1.0, random_state=int(rng.integers(1 << 30)))
        table = ties.rank(shuffled, "bandwidth_gbs")
        seen.add((table.iloc[0]["config_key"], tuple(table[table["tie"]]["config_key"])))
    assert seen == {('{"block_size": 128}', ('{"block_size": 128}', '{"block_size": 256}', '{"block_size": 512}'))}


def test_a_side_without_an_interval_is_a_point_and_the_other_sides_interval_still_counts():
    """A winner from rows that kept no interval is its median alone: a runner-up 1 % behind whose own interval
    reaches the winner's figure ties; one as far behind with a narrow interval does not; and two rows of one
    sample each (min to max: a point) are judged by their figures."""
    from tuner.data import ties

    def without_interval(r: dict) -> dict:
        return {**r, "time_ms_ci_low": np.nan, "time_ms_ci_high": np.nan, "samples": np.nan}

    rows = pd.DataFrame([
        without_interval(row(1024, 4, 1.000, 0, 0)),
        row(1024, 2, 1.010, 0.96, 1.06),  # 1 % behind, too noisy to be shown slower
        row(1024, 1, 1.010, 1.009, 1.011),  # 1 % behind, shown slower
        without_interval(row(1024, 8, 1.003, 0, 0)),  # 0.3 % behind, no interval: within the margin
        without_interval(row(1024, 16, 1.010, 0, 0)),  # 1 % behind, no interval: past it
    ])  # fmt: skip
    table = ties.rank(rows, "bandwidth_gbs").set_index("vector_width")
    assert table["tie"].to_dict() == {4: True, 2: True, 1: False, 8: True, 16: False}

    one_sample = [{**row(1024, w, m, m, m), "samples": 1} for w, m in ((4, 1.0), (2, 1.003), (1, 1.01))]
    table = ties.rank(pd.DataFrame(one_sample), "bandwidth_gbs").set_index("vector_width")
    assert table["how"].tolist() == ["min to max"] * 3
    assert table["tie"].to_dict() == {4: True, 2: True, 1: False}
