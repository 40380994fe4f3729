"""The saxpy example's sweep through ``tuner.tune`` (in one process) against the
same sweep measured by the pipeline (``snakemake --configfile
examples/saxpy/config.yaml``): do both pick the same best configuration,
within the run-to-run noise measured here?

    snakemake --cores 1 --configfile examples/saxpy/config.yaml
    python benchmarks/notebook_vs_pipeline.py --pipeline results/saxpy/<gpu>/sweeps/saxpy_space.parquet

Prints the two winners, each one's rank and GB/s in the other run, and the
spread of the per-configuration ratio between the runs (the noise a winner
must beat to count as different).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pipeline", required=True, help="the pipeline's sweeps/saxpy_space.parquet")
    parser.add_argument("--results", default="/tmp/notebook-results", help="results folder of the in-process run")
    args = parser.parse_args(argv)

    import tuner
    from tuner.families import REGISTRY
    from tuner.settings import load

    settings = load(ROOT / "examples" / "saxpy" / "config.yaml")
    sweep = settings.sweeps["saxpy_space"]
    (problem,) = sweep.problems()
    notebook = tuner.tune(REGISTRY["saxpy"], sweep.domains(), n=problem.n, results=args.results, timing=sweep.timing)
    pipeline = pd.read_parquet(args.pipeline)

    def ok(frame: pd.DataFrame) -> pd.DataFrame:
        frame = frame[frame.status == "ok"].set_index("config_key")
        return frame.sort_values("bandwidth_gbs", ascending=False)

    a, b = ok(pipeline), ok(notebook.rows)
    common = a.index.intersection(b.index)
    ratio = (b.loc[common, "bandwidth_gbs"] / a.loc[common, "bandwidth_gbs"]).sort_values()
    noise = (ratio - 1).abs()
    print(f"configurations verified: pipeline {len(a)}, notebook {len(b)}, in both {len(common)}")
    print(f"per-configuration GB/s ratio notebook/pipeline: median {ratio.median():.4f}, |ratio-1| median {noise.median():.4f}, "
          f"p90 {noise.quantile(0.9):.4f}, max {noise.max():.4f}")  # fmt: skip
    for name, mine, other in (("pipeline", a, b), ("notebook", b, a)):
        key = mine.index[0]
        rank = list(other.index).index(key) + 1
        gap = 1 - other.loc[key, "bandwidth_gbs"] / other.bandwidth_gbs.iloc[0]
        print(f"{name} winner {key}: {mine.bandwidth_gbs.iloc[0]:.1f} GB/s; in the other run rank {rank}, "
              f"{gap * 100:.2f} % behind its winner")  # fmt: skip
    same = a.index[0] == b.index[0]
    gap = 1 - b.loc[a.index[0], "bandwidth_gbs"] / b.bandwidth_gbs.iloc[0]
    verdict = "the same winner" if same else ("within noise" if gap <= noise.quantile(0.9) else "different beyond noise")
    print(f"verdict: {verdict} (pipeline winner {gap * 100:.2f} % behind in the notebook run; p90 noise {noise.quantile(0.9) * 100:.2f} %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
