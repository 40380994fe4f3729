"""The large-space benchmark (benchmarks/space_scale.py) on small spaces."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import space_scale  # noqa: E402


def test_a_restricted_table_leaves_out_what_its_expression_excludes():
    table = space_scale.synthetic_table(3, restricted=True)
    assert table.size == 790 and table.restrictions == [space_scale.RESTRICTION]
    assert all(p0 + p1 <= 12 for p0, p1, _ in table.entries)
    assert len(space_scale.synthetic_table(3, restricted=False).entries) == 1000


def test_the_benchmark_times_setup_and_asks_of_each_strategy(capsys):
    assert space_scale.main(["--sizes", "2", "3", "--trials", "20", "--strategies", "ordinal_global", "random", "--restricted"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [line.split() for line in lines[2:]]
    assert [(r[0], r[1], r[2]) for r in rows] == [("79", "ordinal_global", "20"), ("79", "random", "20"),
                                                  ("790", "ordinal_global", "20"), ("790", "random", "20")]  # fmt: skip
    assert all(float(value) >= 0 for r in rows for value in r[3:])


def test_it_refuses_sizes_it_cannot_build(capsys):
    with pytest.raises(SystemExit):
        space_scale.main(["--sizes", "7"])
    assert "--sizes must be of 2 to 6 and --trials >= 2, got [7] and 200" in capsys.readouterr().err
