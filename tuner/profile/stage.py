"""The profile stage: choose each profiled sweep's configurations, run the
measuring harness on all of them in one process under ncu (one profiled
launch each, never timed: one ncu and one harness start for every sweep),
read the counters back and join them to each sweep's rows by configuration key.

What a run leaves in ``results/<gpu>/store/profiles/``: ``plan.json`` (the
configurations, per sweep and problem), ``launches.jsonl`` (one line per
configuration as the harness handled it, in launch order), ``profile.ncu-rep``
(open it in the Nsight Compute GUI), ``raw.csv`` (its raw page), and per
sweep ``<sweep>/plan.json`` and its last profile with the key it was taken
under (``profile.parquet``, ``profile.key``): a sweep whose choice and timed
rows are unchanged is not profiled again when another one is.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from tuner.data import counters as schema
from tuner.data.results import plain_value, read, write_text_atomic
from tuner.families import REGISTRY, Family
from tuner.processes import REFUSAL_FILE, read_refusal
from tuner.profile import ncu
from tuner.progress import Phases
from tuner.settings import ConfigError

TOOL_FAILURE = "not profiled"


def choose(
    rows: pd.DataFrame, family: Family, profile: str | int, shown: frozenset = frozenset()
) -> list[tuple[tuple[str, int], dict, pd.Series]]:
    """The verified configurations to profile, per problem (dtype, n): all of
    them, the ``profile`` fastest (by bandwidth), or (``"report"``) the
    fastest and those whose (source, dtype, n, config_key) is in ``shown``."""
    ok = rows[(rows["status"] == "ok").fillna(False).to_numpy(dtype=bool)]
    chosen = []
    for (dtype, n), group in ok.groupby(["dtype", "n"], sort=True):
        group = group.sort_values("bandwidth_gbs", ascending=False, kind="stable")
        if profile == "report":
            keys = zip(group["source"], group["dtype"], group["n"].astype(int), group["config_key"])
            group = group[[i == 0 or key in shown for i, key in enumerate(keys)]]
        elif profile != "all":
            group = group.head(int(profile))
        for _, row in group.iterrows():
            cfg = {name: plain_value(row[name]) for name in family.param_names}
            chosen.append(((str(dtype), int(n)), cfg, row))
    return chosen


def shown_by_report(rows: list[pd.DataFrame]) -> frozenset:
    """(source, dtype, n, config_key) of every row the report's blog
    comparisons would show, chosen among ``rows`` as the report chooses."""
    from tuner.data.blog_rows import shown_rows  # the report's own choice, so counters sit beside its rows

    return shown_rows(rows)


def plan_problems(chosen) -> list[dict]:
    """The chosen configurations grouped by problem, as the harness's plan lists them."""
    problems: dict[tuple[str, int], list[dict]] = {}
    for problem, cfg, _ in chosen:
        problems.setdefault(problem, []).append(cfg)
    return [{"dtype": d, "n": n, "configs": cfgs} for (d, n), cfgs in problems.items()]


@dataclass
class Profiled:
    """One sweep to profile: its measured rows, what to choose, where to write."""

    name: str
    family: Family
    rows: pd.DataFrame
    profile: str | int
    out: Path


def run(args, settings, *, bench, child: list[str], env: dict) -> None:
    """``python -m tuner profile NAME...``: the stage, or (``--child``) the
    profiled harness; ``bench(settings)`` makes the harness's Bench."""
    if args.child:
        from tuner.profile.child import run_plan

        harness = bench(settings)
        run_plan(harness, lambda name: REGISTRY[settings.sweep(name).family], Path(args.plan), Path(args.manifest))
        print(f"profiled harness phases: {harness.phase_summary().removeprefix('phases: ')}", flush=True)
        return
    if len(args.names) > 1 and (args.out or args.measurements):
        raise ConfigError(f"--out and --measurements: must name one sweep's files, got {len(args.names)} sweeps")
    folder = settings.run.folder
    sweeps = []
    for name in dict.fromkeys(args.names):
        sweep = settings.sweep(name)
        if sweep.profile is None:
            raise ConfigError(f"sweeps.{name}.profile: must be all, report or {{top: N}} to profile this sweep, got nothing")
        measured = Path(args.measurements) if args.measurements else folder.sweep(name)
        if not measured.is_file():
            raise ConfigError(f"--measurements: must be the sweep's Parquet file, got {str(measured)!r}, which does not exist")
        out = Path(args.out) if args.out else folder.profile(name)
        sweeps.append(Profiled(name, REGISTRY[sweep.family], read(measured), sweep.profile, out))
    profile_sweeps(sweeps, work=folder.profile_store, child=child, env=env)


def profile_sweeps(sweeps: list[Profiled], *, work: Path, child: list[str], env: dict | None = None) -> dict[str, tuple[pd.DataFrame, str]]:  # fmt: skip
    """Profile the chosen configurations of every sweep in one run of
    ``child`` (the harness: ``--plan``/``--manifest`` in ``work``) under ncu,
    one ncu and one harness start for them all; write each sweep's ``out``
    and return name -> (profile rows, note). A sweep whose choice, timed rows,
    metrics and ncu are those of its last profile reuses it (``work/<name>/``).
    When ncu is missing or refuses, every profile is empty and says why."""
    started, steps = time.monotonic(), Phases()
    work.mkdir(parents=True, exist_ok=True)
    shown = shown_by_report([s.rows for s in sweeps]) if any(s.profile == "report" for s in sweeps) else frozenset()
    chosen = {s.name: choose(s.rows, s.family, s.profile, shown) for s in sweeps}
    problems = {name: plan_problems(configs) for name, configs in chosen.items()}
    done: dict[str, tuple[pd.DataFrame, str]] = {}
    for s in sweeps:
        (work / s.name).mkdir(exist_ok=True)
        write_text_atomic(json.dumps({"problems": problems[s.name]}, indent=1), work / s.name / "plan.json")
        if not chosen[s.name]:
            done[s.name] = _written([], s.out, f"{TOOL_FAILURE}: the sweep has no verified configuration")
    pending = [s for s in sweeps if s.name not in done]
    if not pending:
        return done
    try:
        tool = ncu.find_ncu()
        with steps("query metrics"):
            offered = offered_metrics(tool, work / "ncu-metrics.json")
    except (ncu.NcuUnavailable, OSError, subprocess.TimeoutExpired) as error:
        return done | {s.name: _written([], s.out, f"{TOOL_FAILURE}: {error}") for s in pending}
    wanted = schema.ncu_metrics()
    metrics = [m for m in wanted if ncu.base_name(m) in offered]
    missing = sorted({ncu.base_name(m) for m in wanted} - offered)
    note = f"metrics this ncu lacks (their counters are empty): {', '.join(missing)}" if missing else ""
    keys = {s.name: _profile_key(chosen[s.name], s.rows, metrics, tool) for s in pending}
    for s in pending:
        kept = _kept(work / s.name, keys[s.name])
        if kept is not None:
            done[s.name] = _written(kept, s.out, note)
            print(f"profile {s.name}: {len(kept)} configurations as profiled before (same choice, rows, metrics and ncu)")
    pending = [s for s in pending if s.name not in done]
    if not pending:
        return done
    plan, manifest, report = work / "plan.json", work / "launches.jsonl", work / "profile.ncu-rep"
    plan_text = json.dumps(
        {"problems": [{"sweep": s.name, **problem} for s in pending for problem in problems[s.name]]}, indent=1
    )
    write_text_atomic(plan_text, plan)
    manifest.unlink(missing_ok=True)
    kernels = sorted({s.family.kernel_name(cfg) for s in pending for _, cfg, _ in chosen[s.name]})
    command = ncu.profile_command(
        tool, report.with_suffix(""), metrics, kernels, [*child, "--plan", str(plan), "--manifest", str(manifest)]
    )
    count = sum(len(chosen[s.name]) for s in pending)
    print(f"profile {', '.join(s.name for s in pending)}: {count} configurations under {tool}", flush=True)
    refusal_file = work / "refusal.json"  # where the harness leaves a refusal of its own (no GPU, a damaged file)
    refusal_file.unlink(missing_ok=True)
    with steps("harness under ncu"):
        finished = subprocess.run(command, env={**(env or os.environ), REFUSAL_FILE: str(refusal_file)},
                                  capture_output=True, text=True)  # fmt: skip
    refused = read_refusal(refusal_file) if finished.returncode != 0 else None
    refusal_file.unlink(missing_ok=True)
    if refused:  # the harness's one line and exit status are the stage's
        print(refused[0], file=sys.stderr, flush=True)
        raise SystemExit(refused[1])
    sys.stdout.write(finished.stdout[-4000:])
    sys.stderr.write(finished.stderr[-4000:])
    reason = ncu.failure_reason(finished.stdout + finished.stderr)
    if reason:
        return done | {s.name: _written([], s.out, f"{TOOL_FAILURE}: {reason}") for s in pending}
    if finished.returncode != 0:
        raise SystemExit(f"error: the profiled harness failed (exit {finished.returncode}); see the log above")
    with steps("import report"):
        raw = subprocess.run(ncu.import_command(tool, report), capture_output=True, text=True, check=True).stdout
    write_text_atomic(raw, work / "raw.csv")
    launches, entries = ncu.parse_raw_csv(raw), read_manifest(manifest)
    profiled = [e for e in entries if e.get("profiled")]
    if len(profiled) != len(launches):
        raise ValueError(f"ncu reported {len(launches)} profiled launches but the harness profiled {len(profiled)}")
    for s in pending:
        mine = [i for i, e in enumerate(profiled) if e["sweep"] == s.name]
        frame = join(launches.iloc[mine].reset_index(drop=True), [profiled[i] for i in mine], s.rows, s.family)
        _keep(work / s.name, keys[s.name], frame)
        done[s.name] = _written(frame, s.out, note)
        print(f"profile {s.name}: {len(frame)} configurations profiled -> {s.out}")
    print(f"profile: {count} configurations of {len(pending)} sweeps in {time.monotonic() - started:.1f} s")
    print(f"profile steps: {steps}", flush=True)
    return done


def _ncu_identity(tool: str) -> str:
    """The ncu binary, by where it lies, its size and when it was written."""
    binary = Path(tool).resolve()
    stat = binary.stat()
    return f"{binary}:{stat.st_size}:{stat.st_mtime_ns}"


def _profile_key(chosen, rows: pd.DataFrame, metrics: list[str], tool: str) -> str:
    """What a sweep's profile depends on: the configurations, their timed
    rows (joined beside the counters), the metrics and the ncu binary."""
    timed = [{c: str(row[c]) for c in schema.IDENTITY_COLUMNS if c in row.index} for _, _, row in chosen]
    text = json.dumps({"configs": [cfg for _, cfg, _ in chosen], "timed": timed, "metrics": metrics,
                       "ncu": _ncu_identity(tool)}, sort_keys=True, default=str)  # fmt: skip
    return hashlib.sha256(text.encode()).hexdigest()


def _kept(folder: Path, key: str) -> pd.DataFrame | None:
    try:
        if (folder / "profile.key").read_text() == key:
            return pd.read_parquet(folder / "profile.parquet")
    except (OSError, ValueError):
        pass
    return None


def _keep(folder: Path, key: str, frame: pd.DataFrame) -> None:
    (folder / "profile.key").unlink(missing_ok=True)  # the rows first, then the key that vouches for them
    schema.write_profile(frame, folder / "profile.parquet", "")
    write_text_atomic(key, folder / "profile.key")


def offered_metrics(tool: str, cache: Path) -> set[str]:
    """The metrics ``tool`` offers on this GPU, asked once per ncu binary (a
    second or two each time) and remembered in ``cache`` beside the profiles
    of this GPU's folder."""
    identity = _ncu_identity(tool)
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
