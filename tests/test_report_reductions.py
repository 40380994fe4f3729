"""The report's reductions table: only complete reductions against CUB."""

from __future__ import annotations

import pandas as pd

from tuner.report.document import reductions_table


def rows(*specs):
    return pd.DataFrame(
        [{"status": "ok", "family": "reduce", "dtype": d, "n": 1 << 28, "finish": f, "bandwidth_gbs": g} for d, f, g in specs]
    )


def test_the_best_complete_reduction_is_compared_with_cub_and_the_partial_pass_is_shown_beside():
    data = rows(
        ("int32", "host", 3200.0), ("int32", "atomic", 3100.0), ("int32", "last_block", 3050.0), ("float32", None, 3000.0)
    )
    table = reductions_table(data, {"cub_reduce_gbs": 3000.0})
    assert table.to_dict("records") == [
        {
            "problem": "int32, n = 2^28",
            "complete GB/s": "3100.0",
            "finish": "`atomic`",
            "complete / CUB": "1.033x",
            "partial GB/s (not compared)": "3200.0",
        }  # fmt: skip
    ]  # float32 has no complete reduction: no row


def test_no_table_without_complete_reductions_or_a_finish_column():
    assert reductions_table(rows(("int32", "host", 1.0)), {"cub_reduce_gbs": 1.0}) is None
    assert reductions_table(rows(("int32", "host", 1.0)).drop(columns="finish"), {}) is None
    table = reductions_table(rows(("float32", "atomic", 10.0)), {"cub_reduce_gbs": 1.0})
    assert table.iloc[0]["complete / CUB"] == "CUB not measured"
