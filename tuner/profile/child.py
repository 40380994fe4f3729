"""The profiled process: the measuring harness (``ProblemBench.measure``) on
each planned configuration (same input placement, compile and verification as
a timed run), then one more launch on restored inputs between
cuProfilerStart/Stop for ncu to count. Nothing here is timed. Each
configuration leaves one line in the manifest, in launch order."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from tuner.families import Family, Problem


def run_plan(bench, family_of: Callable[[str], Family], plan: Path, manifest: Path) -> int:
    """Profile every configuration of ``plan`` (problems of several sweeps;
    ``family_of(sweep)`` names each one's family); returns how many were
    profiled. Problems that several sweeps share keep their inputs on the
    device from one sweep to the next."""
    count, current, session = 0, None, None
    problems = json.loads(Path(plan).read_text())["problems"]
    with open(manifest, "w") as lines:
        for item in sorted(problems, key=lambda p: (family_of(p["sweep"]).name, p["dtype"], int(p["n"]))):
            family = family_of(item["sweep"])
            problem = Problem(family.name, item["dtype"], int(item["n"]))
            if (family.name, problem) != current:
                session = None  # frees the previous problem's buffers before the next is placed
                session, current = bench.problem(family, problem), (family.name, problem)
            for cfg in item["configs"]:
                launched: list[bool] = []
                row = session.measure(
                    cfg, f"sweep:{item['sweep']}", profile=lambda run, seen=launched: (bench.gpu.profiled(run), seen.append(True))
                )
                entry = {"sweep": item["sweep"], "dtype": problem.dtype, "n": problem.n, "config_key": row["config_key"],
                         "kernel": family.kernel_name(cfg), "grid": row.get("grid"), "block": row.get("block"),
                         "status": row["status"], "profiled": bool(launched), "error": row.get("error")}  # fmt: skip
                lines.write(json.dumps(entry) + "\n")
                lines.flush()
                count += bool(launched)
    return count
