"""Where a run's time went: the seconds of each stage, shown at the end of
``snakemake --cores 1``.

Snakemake times every job of the pipeline itself: each rule names a
``benchmark:`` file (``GpuFolder.seconds``: ``<results>/<gpu>/logs/seconds/<job>.tsv``), whose column
``s`` is the job's wall. Only files written since the run started count, so a
job the run did not need (its outputs were current) is left out. The energy of
each problem's fastest configuration is measured inside the sweeps and studies,
so its seconds come from the rows this run measured (``energy_wall_s``): a part
of those stages' seconds, shown beside them. A CPU job that takes none of
``--cores`` (the compile stage beside the peaks; collect, export and the
report's figures beside the profile) overlaps another: the overlap is shown,
and left out of what no job accounts for.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from tuner.data.paths import GpuFolder

# A job's file is named after its rule; a sweep's and a study's carry their name after a dash.
_STAGE_KINDS = {"tune": "study", "describe_device": "describe", "export_best": "export", "draw_report": "report figures"}


@dataclass(frozen=True)
class StageSeconds:
    stage: str
    seconds: float
    finished: float  # epoch seconds: the table lists stages in the order they ended


def stage_seconds(folder: Path, since: float) -> list[StageSeconds]:
    """The jobs of ``folder`` that ended at or after ``since`` (epoch seconds), in the order they ended."""
    stages = []
    for path in sorted(GpuFolder(folder).stage_seconds.glob("*.tsv")):
        finished = path.stat().st_mtime
        if finished < since:
            continue
        with open(path, newline="") as handle:
            rows = list(csv.DictReader(handle, delimiter="\t"))
        try:
            seconds = sum(float(row["s"]) for row in rows)
        except (KeyError, ValueError):
            continue  # not a Snakemake benchmark file: nothing to show for it
        kind, _, name = path.stem.partition("-")
        stages.append(StageSeconds(f"{_STAGE_KINDS.get(kind, kind)} {name}".strip(), seconds, finished))
    return sorted(stages, key=lambda stage: stage.finished)


def energy_seconds(folder: Path, since: float) -> float:
    """Seconds this run spent measuring energy: ``energy_wall_s`` of the rows measured since ``since``."""
    path = GpuFolder(folder).measurements
    if not path.is_file():
        return 0.0
    import pyarrow.parquet as pq

    if not {"timestamp", "energy_wall_s"} <= set(pq.read_schema(path).names):
        return 0.0  # no row of this folder measured energy
    rows = pd.read_parquet(path, columns=["timestamp", "energy_wall_s"])
    started = pd.Timestamp(since, unit="s", tz="UTC")
    return float(rows.loc[pd.to_datetime(rows["timestamp"], utc=True) >= started, "energy_wall_s"].fillna(0.0).sum())


def covered_seconds(stages: list[StageSeconds]) -> float:
    """Seconds during which at least one of ``stages`` ran (each from its end back by its seconds)."""
    covered, reach = 0.0, float("-inf")
    for start, end in sorted((stage.finished - stage.seconds, stage.finished) for stage in stages):
        covered += max(0.0, end - max(start, reach))
        reach = max(reach, end)
    return covered


def seconds_table(folder: Path, since: float, wall: float) -> str:
    """The stages' seconds as a table, with the run's wall (``wall``), the seconds jobs ran beside
    each other (counted in each), and what no job accounts for (Snakemake's own planning, and
    the gaps between jobs); empty when no job of ``folder`` ran."""
    stages = stage_seconds(folder, since)
    if not stages:
        return ""
    energy = energy_seconds(folder, since)
    energy_label, overlap_label = "(energy, within the above)", "(jobs beside each other)"
    width = max([len(stage.stage) for stage in stages] + [len(energy_label), len(overlap_label)])
    lines = [f"Seconds per stage ({folder}):"]
    for stage in stages:
        lines.append(f"  {stage.stage:<{width}} {stage.seconds:7.1f} s  {stage.seconds / wall:6.1%}")
    covered = covered_seconds(stages)
    if energy > 0:
        lines.append(f"  {energy_label:<{width}} {energy:7.1f} s  {energy / wall:6.1%}")
    beside = sum(stage.seconds for stage in stages) - covered
    if beside >= 0.05:
        lines.append(f"  {overlap_label:<{width}} {beside:7.1f} s  {beside / wall:6.1%}")
    lines.append(f"  {'outside the jobs':<{width}} {max(wall - covered, 0.0):7.1f} s  {max(wall - covered, 0.0) / wall:6.1%}")
    lines.append(f"  {'wall':<{width}} {wall:7.1f} s")
    return "\n".join(lines)


def print_run_seconds(results_dir: str | Path, since: float) -> None:
    """For each GPU folder of ``results_dir`` with jobs since ``since``, its table (``onsuccess`` of a run)."""
    import time

    wall = time.time() - since
    for folder in sorted(Path(results_dir).glob("*/")):
        if table := seconds_table(folder, since, wall):
            print(table, flush=True)
