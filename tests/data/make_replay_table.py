"""Writes replay_table.parquet: an exhaustive synthetic sweep of the fake
family (every combination, infeasible ones as status ``infeasible``).

Run from the repository root: ``python tests/data/make_replay_table.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # fake_family sits beside this script

from fake_family import PROBLEM, FakeFamily, measure  # noqa: E402

from tuner.data.results import COLUMNS, config_key, to_frame, write_atomic  # noqa: E402


def rows() -> list[dict]:
    family = FakeFamily()
    result = []
    for cfg in family.configs({p.name: list(p.values) for p in family.params}):
        reasons = family.violations(cfg, PROBLEM)
        row = {"status": "infeasible", "error": "; ".join(reasons)} if reasons else measure(cfg)
        row.update(
            cfg,
            run_id="replay-fixture",
            timestamp="2024-01-01T00:00:00+00:00",
            source="sweep:fake_exhaustive",
            family=PROBLEM.family,
            dtype=PROBLEM.dtype,
            n=PROBLEM.n,
            config_key=config_key(cfg),
        )
        # Every column present (None where unknown): to_frame cannot cast a
        # column that is missing from all rows to float under pandas 3.
        result.append({**dict.fromkeys(COLUMNS), **row})
    return result


def main() -> None:
    path = write_atomic(to_frame(rows()), HERE / "replay_table.parquet")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
