"""Trials per second of one study spread over 1, 2, ... N GPUs of this host,
with fresh storage each time, and the bookkeeping checked: every configuration
measured once, the budget exact, no row lost. With ``--costs``, also what one
configuration costs all-in in a study and in a sweep on the same space.

    python benchmarks/scaling.py --work /tmp/scaling [--gpus 0,1,2,3] [--budget N]
        [--storage journal|sqlite|URL] [--costs]

The study is the shipped config's ``reduce_int32`` (the 1536-point reduction
space at 2^28 int32) with ``budget_trials`` set to ``--budget``, by default
the whole space: then every worker count measures the same configurations.
With a smaller budget each run's sampler measures a different set, and the
rates follow that set (a slower configuration lowers the rate), so runs of a
smaller budget compare less well. Needs the GPUs.

Two rates per worker count:

* **wall**: trials over the ``tune`` command's wall time, process starts,
  CUDA contexts and input generation included;
* **steady**: trials finished while every worker was searching (from the
  last worker's first finished trial to the first worker's last one), over
  that window: the rate the search itself runs at, which is what more GPUs
  multiply. The speed-ups are ratios to one worker's rates.

``--costs`` measures the marginal all-in cost of one configuration (one
worker): a study of ``--budget`` trials minus one of a quarter of it, and the
sweep of the whole space minus a quarter of it, each difference over the
configurations added, so process start and input generation cancel out.
Prints the tables and writes ``scaling.json`` beside.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[1]
SPACE = "reduce_space"  # the shipped sweep over the study's space


def shipped() -> dict:
    return yaml.safe_load((ROOT / "config.yaml").read_text())


def storage_url(storage: str, folder: Path) -> str:
    if storage == "journal":
        return str(folder / "study.log")
    if storage == "sqlite":
        return f"sqlite:///{folder / 'study.db'}"
    return storage  # a database URL: the caller gives each run a fresh database


def write_config(folder: Path, *, study: dict | None = None, sweep: dict | None = None, sweep_name: str = "space") -> Path:
    """A config in ``folder`` whose results go to the work folder's shared
    ``results`` (one device.json and cubin cache for every run; each run's
    study has its own storage in ``folder``)."""
    base = shipped()
    config = {
        "results_dir": str(folder.parent / "results"),
        "timing": base["timing"],
        "sweeps": {sweep_name: sweep} if sweep else {},
        "studies": {"scaling": study} if study else {},
    }
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def tuner(path: Path, *args: str) -> float:
    """Run ``python -m tuner ARGS --config PATH``; its wall time in seconds."""
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "tuner", *args, "--config", str(path)], cwd=ROOT, capture_output=True, text=True)
    wall = time.monotonic() - start
    # Kept beside the config: the workers' phase lines say where a trial's time went.
    (path.parent / f"{args[0]}.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise SystemExit(f"tuner {' '.join(args)} failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return wall


def whole_space() -> int:
    """Feasible configurations of the study's space."""
    from tuner.families import REGISTRY
    from tuner.settings import parse

    study = parse(shipped()).study("reduce_int32")
    return len(REGISTRY[study.family].space(study.problem, study.domains()))


def study_settings(budget: int, storage: str) -> dict:
    study = dict(shipped()["studies"]["reduce_int32"], budget_trials=budget, storage=storage)
    study.pop("budget_fraction", None)
    study.pop("compare_with_sweep", None)
    return study


def steady_rate(trials) -> tuple[float, int, float]:
    """(trials per second, trials, seconds) inside the window where every
    worker was searching, from the trials' completion times."""
    by_worker: dict[str, list[float]] = {}
    for trial in trials:
        if trial.datetime_complete is not None and "status" in trial.user_attrs:
            by_worker.setdefault(trial.user_attrs.get("worker", "?"), []).append(trial.datetime_complete.timestamp())
    start = max(min(times) for times in by_worker.values())
    end = min(max(times) for times in by_worker.values())
    inside = sum(start < t <= end for times in by_worker.values() for t in times)
    window = end - start
    return (inside / window if window > 0 else float("nan")), inside, window


def run_study(work: Path, gpus: list[str], budget: int, storage: str, label: str) -> dict:
    import optuna

    from tuner.search.study.storage import open_storage

    folder = work / label
    url = storage_url(storage, folder)
    path = write_config(folder, study=study_settings(budget, url))
    tuner(path, "describe")
    tuner(path, "compile")  # the timed run measures the search, not nvcc
    wall = tuner(path, "tune", "scaling", "--gpus", ",".join(gpus))
    rows = pd.read_parquet(next((folder.parent / "results").glob("*/studies/scaling.parquet")))
    (name,) = [s.study_name for s in optuna.get_all_study_summaries(open_storage(url)) if "/scaling/" in s.study_name]
    trials = optuna.load_study(study_name=name, storage=open_storage(url)).get_trials(deepcopy=False)
    rate, inside, window = steady_rate(trials)
    return {
        "workers": len(gpus),
        "gpus": ",".join(gpus),
        "storage": storage if storage in ("journal", "sqlite") else url.split(":")[0],
        "budget": budget,
        "rows": len(rows),
        "distinct": int(rows.config_key.nunique()),
        "ok": int((rows.status == "ok").sum()),
        "trials": len(trials),
        "per_card": {str(k): int(v) for k, v in rows.pci_bus_id.value_counts().items()},
        "wall_s": round(wall, 2),
        "wall_trials_per_s": round(len(rows) / wall, 2),
        "steady_trials": inside,
        "steady_s": round(window, 2),
        "steady_trials_per_s": round(rate, 2),
    }


def costs(work: Path, gpu: str, budget: int, storage: str) -> dict:
    """Marginal all-in milliseconds per configuration, study vs sweep."""
    small = max(budget // 4, 1)
    study_walls = {}
    for count in (small, budget):
        folder = work / f"cost-study-{count}"
        path = write_config(folder, study=study_settings(count, storage_url(storage, folder)))
        tuner(path, "describe")
        tuner(path, "compile")
        study_walls[count] = tuner(path, "tune", "scaling", "--gpus", gpu)
    space = dict(shipped()["sweeps"][SPACE])
    full = space["params"]
    quarter = dict(space, params=dict(full, block_size=full["block_size"][:1]))
    sweep_walls, points = {}, {}
    for label, sweep in (("quarter", quarter), ("full", space)):
        folder, name = work / f"cost-sweep-{label}", f"space_{label}"  # its own row store
        path = write_config(folder, sweep=sweep, sweep_name=name)
        tuner(path, "describe")
        tuner(path, "compile")
        sweep_walls[label] = tuner(path, "sweep", name)
        frame = pd.read_parquet(next((folder.parent / "results").glob(f"*/sweeps/{name}.parquet")))
        points[label] = int((frame.status != "infeasible").sum())
    study_ms = (study_walls[budget] - study_walls[small]) / (budget - small) * 1e3
    sweep_ms = (sweep_walls["full"] - sweep_walls["quarter"]) / (points["full"] - points["quarter"]) * 1e3
    return {
        "study_walls_s": {str(k): round(v, 2) for k, v in study_walls.items()},
        "sweep_walls_s": {k: round(v, 2) for k, v in sweep_walls.items()},
        "sweep_points": points,
        "study_ms_per_trial": round(study_ms, 2),
        "sweep_ms_per_point": round(sweep_ms, 2),
        "ratio": round(study_ms / sweep_ms, 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, required=True, help="empty folder for the runs")
    parser.add_argument("--gpus", default="0,1", help="GPUs to spread over; 1, 2, 4, ... of them are tried (default: 0,1)")
    parser.add_argument("--budget", type=int, help="distinct configurations to measure (default: the whole space)")
    parser.add_argument("--storage", default="journal", help="journal, sqlite, or a database URL (default: journal)")
    parser.add_argument("--costs", action="store_true", help="also measure a trial's and a sweep point's marginal cost")
    args = parser.parse_args()
    gpus = args.gpus.split(",")
    args.budget = args.budget or whole_space()
    counts = sorted({1, *[2**k for k in range(1, 8) if 2**k <= len(gpus)], len(gpus)})
    table = [run_study(args.work, gpus[:count], args.budget, args.storage, f"{count}-gpus") for count in counts]
    for row in table:
        row["wall_speedup"] = round(row["wall_trials_per_s"] / table[0]["wall_trials_per_s"], 2)
        row["steady_speedup"] = round(row["steady_trials_per_s"] / table[0]["steady_trials_per_s"], 2)
    result = {"scaling": table}
    print(f"{'workers':>7} {'rows':>5} {'distinct':>8} {'trials':>6} {'wall s':>7} {'wall t/s':>8} {'x':>5} "
          f"{'steady t/s':>10} {'x':>5}  per card")  # fmt: skip
    for row in table:
        print(
            f"{row['workers']:>7} {row['rows']:>5} {row['distinct']:>8} {row['trials']:>6} {row['wall_s']:>7} "
            f"{row['wall_trials_per_s']:>8} {row['wall_speedup']:>5} {row['steady_trials_per_s']:>10} "
            f"{row['steady_speedup']:>5}  {row['per_card']}"
        )
    exact = all(row["rows"] == row["distinct"] == args.budget for row in table)
    print("bookkeeping:", "exact (every configuration once, budget met)" if exact else "NOT EXACT")
    if args.costs:
        result["costs"] = costs(args.work, gpus[0], args.budget, args.storage)
        c = result["costs"]
        print(f"all-in per configuration: study {c['study_ms_per_trial']} ms/trial, sweep {c['sweep_ms_per_point']} ms/point, "
              f"ratio {c['ratio']} (marginal: walls {c['study_walls_s']} and {c['sweep_walls_s']})")  # fmt: skip
    (args.work / "scaling.json").write_text(json.dumps(result, indent=2))
    return 0 if exact else 1


if __name__ == "__main__":
    sys.exit(main())
