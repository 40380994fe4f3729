"""The report of one results folder, from its Parquet and JSON files alone::

    python -m tuner.report --results results/<gpu> --out results/<gpu>/report

The results folder holds ``measurements.parquet`` (every row: sweeps and
studies), ``device.json`` and ``peaks.json``. Study rows are those whose source
starts with ``study:``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Sequence

INPUTS = ("measurements.parquet", "device.json", "peaks.json")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tuner.report", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--results", type=Path, required=True, help="folder with measurements.parquet, device.json, peaks.json")
    parser.add_argument("--out", type=Path, default=None, help="report folder (default: <results>/report)")
    parser.add_argument("--processes", type=int, default=os.cpu_count() or 1,
                        help="processes drawing the figures (default: one per CPU)")  # fmt: skip
    args = parser.parse_args(argv)

    if not args.results.is_dir():
        print(f"error: results folder not found: {args.results}", file=sys.stderr)
        return 2
    for name in INPUTS:
        if not (args.results / name).exists():
            print(f"error: missing input file: {args.results / name}", file=sys.stderr)
            return 2

    # Imported here so that a bad invocation fails fast, before matplotlib loads.
    from tuner.data.counters import read_profiles
    from tuner.data.readback import read_json
    from tuner.data.results import read
    from tuner.errors import DamagedFile
    from tuner.report import build_report

    try:
        dataset = read(args.results / "measurements.parquet")
        device = read_json(args.results / "device.json")
        peaks = read_json(args.results / "peaks.json", numbers=("_gbs",))
    except DamagedFile as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    outputs = build_report(dataset, device=device, peaks=peaks, out_dir=args.out or args.results / "report",
                           profiles=read_profiles(args.results, log=_warn), processes=max(1, args.processes))  # fmt: skip
    drawn = len(outputs.figures) // 2
    print(f"report: {outputs.markdown} and {outputs.html}; {drawn} figures, {len(outputs.skipped)} skipped, "
          f"{len(outputs.family_figures)} family figures")  # fmt: skip
    for stem, why in outputs.skipped.items():
        print(f"  skipped {stem}: {why}")
    return 0


def _warn(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
