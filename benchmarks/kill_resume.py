"""Kill -9 the pipeline mid-sweep and mid-study, rerun it as the README says,
and check that nothing measured was lost and nothing was measured twice.

    python benchmarks/kill_resume.py --work /tmp/kill-test [--sweep-kill-at 600] [--study-kill-at 40] [--tear-journal]

Runs `snakemake --cores 1` on a config holding the shipped config's
``reduce_space`` sweep (1536 configurations) and ``reduce_int32`` study; kills
the whole process group with SIGKILL once the sweep's store holds
``--sweep-kill-at`` rows, reruns (`snakemake --unlock`, then `snakemake
--cores 1`), kills again once the study has ``--study-kill-at`` measured
trials, reruns to the end, then prints what the store, the study and the
outputs hold. With ``--tear-journal``, the study's journal is also torn by
hand after the study's kill, as an OS crash or a full disk leaves it: half of
its last record appended without an end of line, which the rerun must set
aside rather than glue to its next append. Needs a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def config_for(work: Path) -> Path:
    shipped = yaml.safe_load((ROOT / "config.yaml").read_text())
    config = {
        "results_dir": str(work / "results"),
        "timing": shipped["timing"],
        "sweeps": {"reduce_space": shipped["sweeps"]["reduce_space"]},
        "studies": {"reduce_int32": shipped["studies"]["reduce_int32"]},
    }
    path = work / "kill-test.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def snakemake(config: Path, log: Path, *extra: str) -> subprocess.Popen:
    handle = open(log, "a")
    # Targets before --configfile, which takes every argument after it as a config file.
    command = [sys.executable, "-m", "snakemake", *extra, "--cores", "1", "--rerun-incomplete", "--configfile", str(config)]
    return subprocess.Popen(command,
                            cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip


def kill_when(process: subprocess.Popen, ready, what: str, timeout_s: float = 540) -> dict:
    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        if process.poll() is not None:
            raise SystemExit(f"error: the run ended (status {process.returncode}) before {what}")
        count = ready()
        if count is not None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            return {"killed_at": what, "seen": count, "after_s": round(time.monotonic() - start, 1)}
        time.sleep(0.05)
    raise SystemExit(f"error: {what} not reached in {timeout_s} s")


def store_lines(gpu_dir: Path) -> int:
    path = gpu_dir / "store" / "sweeps" / "reduce_space" / "rows.jsonl"
    return path.read_bytes().count(b"\n") if path.exists() else 0


def measured_trials(gpu_dir: Path) -> int:
    """Rows recorded in the default study storage's claims file (one
    "measured" record per configuration, written before Optuna is told)."""
    path = gpu_dir / "optuna.log.claims"
    return path.read_bytes().count(b'"op":"measured"') if path.exists() else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, required=True, help="empty folder for the run")
    parser.add_argument("--sweep-kill-at", type=int, default=600, help="rows in the sweep's store when the first kill comes")
    parser.add_argument("--study-kill-at", type=int, default=40, help="measured trials when the second kill comes")
    parser.add_argument("--tear-journal", action="store_true", help="after the study's kill, append half a record to its journal")
    args = parser.parse_args()
    from tuner.device.describe import probe_devices, slugify

    # NVML names the GPU the pipeline's results folder is named after; without one, nothing is written.
    names = probe_devices().names
    if not names:
        print("error: kill_resume.py needs a CUDA GPU, and NVML sees none here", file=sys.stderr)
        return 2
    args.work.mkdir(parents=True, exist_ok=True)
    config, log = config_for(args.work), args.work / "snakemake.log"
    gpu_dir = args.work / "results" / slugify(names[0])
    events = []
    start = time.monotonic()
    # The first run is asked for the sweep alone: Snakemake may order independent jobs either way, and a
    # study finished before the sweep's kill would leave the second kill nothing to interrupt.
    run = snakemake(config, log, str(gpu_dir / "sweeps" / "reduce_space.parquet"))
    events.append(kill_when(run, lambda: (n := store_lines(gpu_dir)) >= args.sweep_kill_at and n or None, "sweep"))
    subprocess.run([sys.executable, "-m", "snakemake", "--unlock", "--configfile", str(config)], cwd=ROOT, capture_output=True)
    run = snakemake(config, log)
    events.append(kill_when(run, lambda: (n := measured_trials(gpu_dir)) >= args.study_kill_at and n or None, "study"))
    if args.tear_journal:
        journal = gpu_dir / "optuna.log"
        last = journal.read_bytes().rstrip(b"\n").rsplit(b"\n", 1)[-1]
        with open(journal, "ab") as handle:  # half a record, no end of line: a write cut short
            handle.write(last[: len(last) // 2])
        events.append({"torn_journal": journal.name, "bytes_appended": len(last) // 2})
    subprocess.run([sys.executable, "-m", "snakemake", "--unlock", "--configfile", str(config)], cwd=ROOT, capture_output=True)
    run = snakemake(config, log)
    status = run.wait()
    wall = time.monotonic() - start

    import pandas as pd

    from tuner.data.results import config_key
    from tuner.families import REGISTRY
    from tuner.settings import load

    settings = load(config)
    sweep, study = settings.sweeps["reduce_space"], settings.studies["reduce_int32"]
    family = REGISTRY["reduce"]
    grid = {config_key(c) for p in sweep.problems() for c in family.space(p, sweep.domains())}
    sweep_rows = pd.read_parquet(gpu_dir / "sweeps" / "reduce_space.parquet")
    study_rows = pd.read_parquet(gpu_dir / "studies" / "reduce_int32.parquet")
    lines = (gpu_dir / "store" / "sweeps" / "reduce_space" / "rows.jsonl").read_text().splitlines()
    stored = [json.loads(line) for line in lines]
    # The fastest configuration's row is stored again with its energy (the sweep's ``energy: best``):
    # that is one timing measurement, not two.
    stored_keys = [row["config_key"] for row in stored if "energy_j" not in row]
    summary = {
        "final_status": status,
        "wall_s": round(wall, 1),
        "kills": events,
        "sweep_grid": len(grid),
        "sweep_rows": len(sweep_rows),
        "sweep_rows_match_grid": set(sweep_rows.config_key) == grid,
        "sweep_store_lines": len(lines),
        "sweep_energy_rows": len(stored) - len(stored_keys),
        "sweep_measured_twice": len(stored_keys) - len(set(stored_keys)),
        "sweep_status": sweep_rows.status.value_counts().to_dict(),
        "study_budget": study.budget_trials,
        "study_rows": len(study_rows),
        "study_distinct": int(study_rows.config_key.nunique()),
        "study_status": study_rows.status.value_counts().to_dict(),
        "study_best_over_sweep_best": float(study_rows.bandwidth_gbs.max() / sweep_rows.bandwidth_gbs.max()),
    }
    # Each kill must have landed mid-stage, or it tested nothing.
    summary["kills_mid_stage"] = events[0]["seen"] < len(grid) and events[1]["seen"] < study.budget_trials
    (args.work / "kill-resume.json").write_text(json.dumps(summary, indent=2))
    for key, value in summary.items():
        print(f"{key:30s} {value}")
    ok = (status == 0 and summary["kills_mid_stage"] and summary["sweep_rows_match_grid"] and summary["sweep_measured_twice"] == 0
          and summary["study_rows"] == summary["study_distinct"] == study.budget_trials)  # fmt: skip
    print("kill-resume:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
