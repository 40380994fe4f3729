"""The profile stage of one sweep: choose its configurations, run the
measuring harness on them under ncu (one profiled launch each, never timed),
read the counters back and join them to the sweep's rows by configuration key.

What a run leaves in ``results/<gpu>/store/profiles/<sweep>/``: ``plan.json``
(the configurations), ``launches.jsonl`` (one line per configuration as the
harness handled it, in launch order), ``<sweep>.ncu-rep`` (open it in the
Nsight Compute GUI) and ``raw.csv`` (its raw page).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from tuner.data import counters as schema
from tuner.data.results import read, write_text_atomic
from tuner.families import REGISTRY, Family
from tuner.profile import ncu
from tuner.settings import ConfigError

TOOL_FAILURE = "not profiled"


def choose(rows: pd.DataFrame, family: Family, profile: str | int) -> list[tuple[tuple[str, int], dict, pd.Series]]:
    """The verified configurations to profile, per problem (dtype, n): all of
    them, or the ``profile`` fastest (by bandwidth)."""
    ok = rows[(rows["status"] == "ok").fillna(False).to_numpy(dtype=bool)]
    chosen = []
    for (dtype, n), group in ok.groupby(["dtype", "n"], sort=True):
        group = group.sort_values("bandwidth_gbs", ascending=False, kind="stable")
        if profile != "all":
            group = group.head(int(profile))
        for _, row in group.iterrows():
            cfg = {name: _plain(row[name]) for name in family.param_names}
            chosen.append(((str(dtype), int(n)), cfg, row))
    return chosen


def _plain(value):
    return value.item() if hasattr(value, "item") else value


def write_plan(chosen, path: Path) -> Path:
    problems: dict[tuple[str, int], list[dict]] = {}
    for problem, cfg, _ in chosen:
        problems.setdefault(problem, []).append(cfg)
    plan = {"problems": [{"dtype": d, "n": n, "configs": cfgs} for (d, n), cfgs in problems.items()]}
    return write_text_atomic(json.dumps(plan, indent=1), path)


def arguments(parser, needs_device, measuring_child) -> None:
    """The ``profile`` subcommand's arguments (``tuner/cli.py`` makes the parser)."""
    parser.add_argument("name", help="a sweep of the config's sweeps that sets profile:")
    needs_device(parser)
    measuring_child(parser)
    parser.add_argument("--measurements", help="the sweep's rows (default: results/<gpu>/sweeps/<name>.parquet)")
    parser.add_argument("--plan", help=argparse.SUPPRESS)  # the child's: what to profile, where to say what it did
    parser.add_argument("--manifest", help=argparse.SUPPRESS)


def run(args, settings, *, bench, child: list[str], env: dict) -> None:
    """``python -m tuner profile NAME``: the stage, or (``--child``) the
    profiled harness; ``bench(settings)`` makes the harness's Bench."""
    sweep = settings.sweep(args.name)
    family = REGISTRY[sweep.family]
    if args.child:
        from tuner.profile.child import run_plan

        harness = bench(settings)
        run_plan(harness, family, Path(args.plan), Path(args.manifest), f"sweep:{args.name}")
        print(f"profiled harness {args.name} {harness.phase_summary()}", flush=True)
        return
    if sweep.profile is None:
        raise ConfigError(f"sweeps.{args.name}.profile: must be all or {{top: N}} to profile this sweep, got nothing")
    gpu_dir = settings.run.gpu_dir
    measured = Path(args.measurements) if args.measurements else gpu_dir / "sweeps" / f"{args.name}.parquet"
    if not measured.is_file():
        raise ConfigError(f"--measurements: must be the sweep's Parquet file, got {str(measured)!r}, which does not exist")
    work = gpu_dir / "store" / "profiles" / args.name
    work.mkdir(parents=True, exist_ok=True)
    out = Path(args.out) if args.out else gpu_dir / "profiles" / f"{args.name}.parquet"
    profile_sweep(args.name, family, read(measured), sweep.profile, out=out, work=work, child=child, env=env)


def profile_sweep(name: str, family: Family, rows: pd.DataFrame, profile: str | int, *, out: Path, work: Path,
                  child: list[str], env: dict | None = None) -> tuple[pd.DataFrame, str]:  # fmt: skip
    """Profile the chosen configurations of sweep ``name`` (its measured
    ``rows``) by running ``child`` (the harness: ``--plan``/``--manifest`` in
    ``work``) under ncu; write ``out`` and return (profile rows, note). When
    ncu is missing or refuses, the profile is empty and the note says why."""
    started = time.monotonic()
    chosen = choose(rows, family, profile)
    plan, manifest, report = work / "plan.json", work / "launches.jsonl", work / f"{name}.ncu-rep"
    write_plan(chosen, plan)
    manifest.unlink(missing_ok=True)
    if not chosen:
        return _written([], out, f"{TOOL_FAILURE}: the sweep has no verified configuration")
    steps = Steps()
    try:
        tool = ncu.find_ncu()
        with steps("query metrics"):
            offered = offered_metrics(tool, work.parent / "ncu-metrics.json")
    except (ncu.NcuUnavailable, OSError, subprocess.TimeoutExpired) as error:
        return _written([], out, f"{TOOL_FAILURE}: {error}")
    wanted = schema.ncu_metrics()
    metrics = [m for m in wanted if ncu.base_name(m) in offered]
    missing = sorted({ncu.base_name(m) for m in wanted} - offered)
    kernels = sorted({family.kernel_name(cfg) for _, cfg, _ in chosen})
    command = ncu.profile_command(
        tool, report.with_suffix(""), metrics, kernels, [*child, "--plan", str(plan), "--manifest", str(manifest)]
    )
    print(f"profile {name}: {len(chosen)} configurations under {tool}", flush=True)
    with steps("harness under ncu"):
        done = subprocess.run(command, env=env, capture_output=True, text=True)
    sys.stdout.write(done.stdout[-4000:])
    sys.stderr.write(done.stderr[-4000:])
    reason = ncu.failure_reason(done.stdout + done.stderr)
    if done.returncode != 0 or reason:
        if reason:
            return _written([], out, f"{TOOL_FAILURE}: {reason}")
        raise SystemExit(f"error: the profiled harness of {name} failed (exit {done.returncode}); see the log above")
    with steps("import report"):
        raw = subprocess.run(ncu.import_command(tool, report), capture_output=True, text=True, check=True).stdout
    write_text_atomic(raw, work / "raw.csv")
    frame = join(ncu.parse_raw_csv(raw), read_manifest(manifest), rows, family)
    note = f"metrics this ncu lacks (their counters are empty): {', '.join(missing)}" if missing else ""
    frame, note = _written(frame, out, note)
    print(f"profile {name}: {len(frame)} configurations profiled in {time.monotonic() - started:.1f} s -> {out}")
    print(f"profile {name} steps: {steps}", flush=True)
    return frame, note


class Steps:
    """Seconds per step of the stage, for its log line (where the time goes)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, name: str):
        start = time.monotonic()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.monotonic() - start

    def __str__(self) -> str:
        return ", ".join(f"{name} {seconds:.1f} s" for name, seconds in self.seconds.items())


def offered_metrics(tool: str, cache: Path) -> set[str]:
    """The metrics ``tool`` offers on this GPU, asked once per ncu binary (a
    second or two each time) and remembered in ``cache`` beside the profiles
    of this GPU's folder."""
    binary = Path(tool).resolve()
    stat = binary.stat()
    identity = f"{binary}:{stat.st_size}:{stat.st_mtime_ns}"
    try:
        known = json.loads(cache.read_text())
        if known["ncu"] == identity:
            return set(known["metrics"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    offered = ncu.available_metrics(tool)
    write_text_atomic(json.dumps({"ncu": identity, "metrics": sorted(offered)}), cache)
    return offered


def _written(rows, out: Path, note: str) -> tuple[pd.DataFrame, str]:
    schema.write_profile(rows, out, note)
    if note:
        print(f"profile: {note}", file=sys.stderr)
    return schema.to_profile_frame(rows), note


def read_manifest(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def join(launches: pd.DataFrame, manifest: list[dict], rows: pd.DataFrame, family: Family) -> pd.DataFrame:
    """Counters of each profiled launch beside the timed row of its
    configuration. Launches and manifest lines pair up in order; each pair
    must agree on kernel, grid and block, or nothing is joined."""
    profiled = [m for m in manifest if m.get("profiled")]
    if len(profiled) != len(launches):
        raise ValueError(f"ncu reported {len(launches)} profiled launches but the harness profiled {len(profiled)}")
    key = rows.set_index(["dtype", "n", "config_key"], drop=False)
    out = []
    for (_, launch), entry in zip(launches.iterrows(), profiled):
        seen = (launch["Kernel Name"], ncu.geometry(launch["Grid Size"]), ncu.geometry(launch["Block Size"]))
        expected = (entry["kernel"], entry["grid"], entry["block"])
        if seen != expected:
            raise ValueError(
                f"profiled launch {launch['ID']} is {seen}, but the harness launched {expected} for {entry['config_key']}"
            )
        timed = key.loc[(entry["dtype"], entry["n"], entry["config_key"])]
        timed = timed.iloc[0] if isinstance(timed, pd.DataFrame) else timed
        metrics = {k: float(v) for k, v in launch.items() if k not in ncu.ID_COLUMNS and pd.notna(v)}
        identity = {c: timed[c] for c in schema.IDENTITY_COLUMNS if c in timed.index}
        out.append({**identity, "kernel": entry["kernel"], **schema.counter_values(metrics)})
    return schema.to_profile_frame(out)
