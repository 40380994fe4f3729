"""Trials per second of one study spread over 1, 2, ... N GPUs of this host,
with fresh storage each time, and the bookkeeping checked: every configuration
measured once, the budget exact, no row lost.

    python benchmarks/scaling.py --work /tmp/scaling [--gpus 0,1] [--budget 400] [--storage journal|sqlite]

The study is the shipped config's ``reduce_int32`` (the 1536-point reduction
space at 2^28 int32) with ``budget_trials`` set to ``--budget``. Prints one row
per worker count and writes ``scaling.json`` beside. Needs the GPUs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def run(work: Path, gpus: list[str], budget: int, storage: str) -> dict:
    shipped = yaml.safe_load((ROOT / "config.yaml").read_text())
    study = dict(shipped["studies"]["reduce_int32"], budget_trials=budget)
    study.pop("budget_fraction", None)
    study.pop("compare_with_sweep", None)
    folder = work / f"{len(gpus)}-gpus"
    study["storage"] = str(folder / "study.log") if storage == "journal" else f"sqlite:///{folder / 'study.db'}"
    config = {"results_dir": str(folder / "results"), "timing": shipped["timing"], "sweeps": {}, "studies": {"scaling": study}}
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))

    def tuner(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "tuner", *args, "--config", str(path)], cwd=ROOT, capture_output=True, text=True
        )

    described = tuner("describe")
    if described.returncode != 0:
        raise SystemExit(described.stderr)
    # Compile the study's modules first, so the timed run measures the search, not nvcc.
    tuner("compile")
    start = time.monotonic()
    proc = tuner("tune", "scaling", "--gpus", ",".join(gpus))
    wall = time.monotonic() - start
    if proc.returncode != 0:
        raise SystemExit(proc.stdout[-2000:] + proc.stderr[-2000:])
    import pandas as pd

    out = next((folder / "results").glob("*/studies/scaling.parquet"))
    rows = pd.read_parquet(out)
    return {
        "workers": len(gpus),
        "gpus": ",".join(gpus),
        "storage": storage,
        "budget": budget,
        "rows": len(rows),
        "distinct": int(rows.config_key.nunique()),
        "ok": int((rows.status == "ok").sum()),
        "per_card": rows.pci_bus_id.value_counts().to_dict(),
        "wall_s": round(wall, 2),
        "trials_per_s": round(len(rows) / wall, 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, required=True, help="empty folder for the runs")
    parser.add_argument("--gpus", default="0,1", help="GPUs to spread over; 1, 2, 4, ... of them are tried (default: 0,1)")
    parser.add_argument("--budget", type=int, default=400, help="distinct configurations to measure (default: 400)")
    parser.add_argument("--storage", choices=["journal", "sqlite"], default="journal", help="study storage (default: journal)")
    args = parser.parse_args()
    gpus = args.gpus.split(",")
    counts = sorted({1, *[2**k for k in range(1, 8) if 2**k <= len(gpus)], len(gpus)})
    table = [run(args.work, gpus[:count], args.budget, args.storage) for count in counts]
    base = table[0]["trials_per_s"]
    for row in table:
        row["speedup"] = round(row["trials_per_s"] / base, 2)
    (args.work / "scaling.json").write_text(json.dumps(table, indent=2))
    print(f"{'workers':>7} {'rows':>5} {'distinct':>8} {'wall s':>7} {'trials/s':>9} {'speedup':>7}  per card")
    for row in table:
        print(
            f"{row['workers']:>7} {row['rows']:>5} {row['distinct']:>8} {row['wall_s']:>7} {row['trials_per_s']:>9} {row['speedup']:>7}  {row['per_card']}"
        )
    exact = all(row["rows"] == row["distinct"] == args.budget for row in table)
    print("bookkeeping:", "exact (every configuration once, budget met)" if exact else "NOT EXACT")
    return 0 if exact else 1


if __name__ == "__main__":
    sys.exit(main())
