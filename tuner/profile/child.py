"""The profiled process: the measuring harness (``ProblemBench.measure``) on
each planned configuration (same input placement, compile and verification as
a timed run), then one more launch on restored inputs between
cuProfilerStart/Stop for ncu to count. Nothing here is timed. Each
configuration leaves one line in the manifest, in launch order."""

from __future__ import annotations

import json
from pathlib import Path

from tuner.families import Family, Problem


def run_plan(bench, family: Family, plan: Path, manifest: Path, source: str) -> int:
    """Profile every configuration of ``plan``; returns how many were profiled."""
    count = 0
    with open(manifest, "w") as lines:
        for item in json.loads(Path(plan).read_text())["problems"]:
            problem = Problem(family.name, item["dtype"], int(item["n"]))
            session = bench.problem(family, problem)
            for cfg in item["configs"]:
                launched: list[bool] = []
                row = session.measure(
                    cfg, source, profile=lambda run, seen=launched: (bench.gpu.profiled(run), seen.append(True))
                )
                entry = {"dtype": problem.dtype, "n": problem.n, "config_key": row["config_key"], "kernel": family.kernel_name(cfg),
                         "grid": row.get("grid"), "block": row.get("block"), "status": row["status"], "profiled": bool(launched),
                         "error": row.get("error")}  # fmt: skip
                lines.write(json.dumps(entry) + "\n")
                lines.flush()
                count += bool(launched)
            del session  # frees this problem's buffers before the next is placed
    return count
