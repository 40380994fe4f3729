"""The answer of a tuning run as files a program can load or include: per
family and problem, the best verified configuration of a GPU's dataset.

- ``best.json``: the winning parameters, launch geometry, GB/s (GFLOP/s where
  the family counts work), fractions of the peaks, and the run that measured it;
  the 95 % interval of the winner's median time, its tie set (every
  configuration whose interval overlaps the winner's) and the member the
  header exports, with the reason (``tuner.data.ties``);
- ``best_configs.h``: a C++ header with the exported member's constants, one
  struct per problem in ``namespace tuner_best``, the other members of its tie
  set in a comment above it, guarded by compute capability: built for another
  GPU (``-DTUNER_TARGET_SM=80``), each struct holds the family's default
  parameters instead, and the same other members (zero grid and block, no
  bandwidth), so that one program builds for any GPU.

Yardstick rows (``source == "peaks"``) are not candidates.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from tuner.data import ties
from tuner.data.results import config_params, plain_value
from tuner.families import REGISTRY


def best_entries(dataset: pd.DataFrame) -> list[dict]:
    """One entry per (family, dtype, n): its best ok row (by GFLOP/s for
    families that count floating-point work, else by GB/s), the 95 % interval
    of its median time, its tie set and the member the header exports
    (``tuner.data.ties``)."""
    ok = dataset[(dataset.status == "ok") & (dataset.source != "peaks")]
    candidates = {}
    for (family_name, dtype, n), rows in ok.groupby(["family", "dtype", "n"], sort=True):
        rows = _complete_if_any(rows)
        by = "gflops" if rows["gflops"].notna().any() else "bandwidth_gbs"
        candidates[(family_name, dtype, int(n))] = (rows, by)
    every = ties.problems(candidates)
    entries = []
    for (family_name, dtype, n), problem in every.items():
        if problem.table.empty:
            continue
        family = REGISTRY.families.get(family_name)
        best = problem.winner
        choice = ties.choose(problem, every)
        chosen = problem.table[problem.table["config_key"] == choice.config_key].iloc[0]
        entries.append({
            "family": family_name, "dtype": dtype, "n": int(n),
            "params": _params(best, family),
            "grid": _dims(best["grid"]), "block": _dims(best["block"]),
            "bandwidth_gbs": plain_value(best["bandwidth_gbs"]), "gflops": plain_value(best["gflops"]), "ranked_by": problem.by,
            "fraction_of_copy_peak": plain_value(best["fraction_of_copy_peak"]),
            "fraction_of_theoretical_peak": plain_value(best["fraction_of_theoretical_peak"]),
            "time_ms_median": plain_value(best["time_ms_median"]),
            "time_ms_interval": _interval(best), "interval": str(best["how"]),
            "run_id": plain_value(best["run_id"]),
            "source": plain_value(best["source"]), "config_key": plain_value(best["config_key"]),
            "candidates": int(len(candidates[(family_name, dtype, n)][0])),
            "energy_optimal": _energy_optimal(candidates[(family_name, dtype, n)][0], best, family),
            "tie_count": int(len(problem.ties)),
            "tie_set": [_member(row, family, problem.by) for _, row in problem.ties.iterrows()],
            "exported": {**_member(chosen, family, problem.by), "grid": _dims(chosen["grid"]),
                         "block": _dims(chosen["block"]), "rule": choice.rule},
        })  # fmt: skip
    return entries


def _energy_optimal(rows: pd.DataFrame, fastest: pd.Series, family) -> dict | None:
    """Of the rows whose energy was measured, the one with the fewest joules
    per launch, beside the fastest's own energy (null where not measured);
    None where no row has energy."""
    if "energy_j" not in rows or rows["energy_j"].isna().all():
        return None
    frugal = rows.loc[rows["energy_j"].idxmin()]
    return {"params": _params(frugal, family), "config_key": plain_value(frugal["config_key"]),
            "energy_j": plain_value(frugal["energy_j"]), "energy_j_err": plain_value(frugal.get("energy_j_err")),
            "time_ms_median": plain_value(frugal["time_ms_median"]), "fastest_energy_j": plain_value(fastest.get("energy_j"))}  # fmt: skip


def _interval(row: pd.Series) -> list[float] | None:
    low, high = plain_value(row["low"]), plain_value(row["high"])
    return None if low is None or high is None else [low, high]


def _member(row: pd.Series, family, by: str) -> dict[str, Any]:
    """A tie set member as best.json lists it."""
    return {
        "config_key": plain_value(row["config_key"]), "params": _params(row, family),
        by: plain_value(row[by]), "time_ms_median": plain_value(row["time_ms_median"]),
        "time_ms_interval": _interval(row), "behind_winner": plain_value(row["behind"]),
        "source": plain_value(row["source"]),
    }  # fmt: skip


def _complete_if_any(rows: pd.DataFrame) -> pd.DataFrame:
    """A reduction's answer is one that finishes on the device: rows whose
    ``finish`` is ``host`` (or unset) leave the last sum to the caller, so
    they win only where no complete one was measured."""
    if "finish" not in rows:
        return rows
    complete = rows[rows["finish"].notna() & (rows["finish"] != "host")]
    return complete if len(complete) else rows


def _params(row: pd.Series, family) -> dict[str, Any]:
    """Every parameter of the winning row, from its configuration key (the
    dataset's own record: a plug-in family's parameters need no registry), in
    the family's order where this process knows the family."""
    params = config_params(row["config_key"])
    order = [name for name in (family.param_names if family else ()) if name in params]
    names = order + [name for name in params if name not in order]
    return {name: plain_value(params[name]) for name in names if plain_value(params[name]) is not None}


def _dims(text: Any) -> list[int] | None:
    return [int(x) for x in str(text).split(",")] if isinstance(text, str) and text else None


def best_json(entries: list[dict], device: Mapping) -> dict:
    return {
        "gpu": device.get("name"),
        "gpu_slug": device.get("slug"),
        "compute_capability": device.get("compute_capability"),
        "problems": entries,
    }


def _identifier(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", text)


def _literal(value: Any) -> tuple[str, str]:
    """(C++ type, literal) of a parameter value."""
    if isinstance(value, bool):
        return "bool", "true" if value else "false"
    if isinstance(value, int):
        return "int", str(value)
    if isinstance(value, float) and math.isfinite(value):
        return "double", repr(value)
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    # A control character (a newline above all) would end the literal: written as an octal escape.
    return "const char*", '"' + re.sub(r"[\x00-\x1f\x7f]", lambda m: f"\\{ord(m.group()):03o}", text) + '"'


def _comment(value: Any) -> str:
    """``value`` as text on one ``//`` comment line: a line break would end
    the comment and put the rest of the text into the code."""
    return re.sub(r"[\x00-\x1f\x7f\x85\u2028\u2029]", " ", str(value))


def header_text(entries: list[dict], device: Mapping) -> str:
    """``best_configs.h``: the tuned constants per problem for this GPU's compute
    capability, the family defaults for any other."""
    sm = str(device.get("compute_capability", "0.0")).replace(".", "")  # "9.0" (export checks the form) -> 90
    lines = [
        f"// Tuned launch configurations measured on {_comment(device.get('name'))} "
        f"(compute capability {_comment(device.get('compute_capability'))}).",
        "// Generated by `python -m tuner best` from the run's measurements.parquet; do not edit.",
        "// Built for another GPU (-DTUNER_TARGET_SM=<major><minor>), each struct holds the family's defaults instead.",
        "#pragma once",
        "",
        "namespace tuner_best {",
        "",
        f"#if !defined(TUNER_TARGET_SM) || TUNER_TARGET_SM == {sm}",
        "constexpr bool tuned = true;",
    ]
    for entry in entries:
        lines += _struct(entry, (entry.get("exported") or entry)["params"], tuned=True)
    lines += ["#else", "constexpr bool tuned = false;"]
    for entry in entries:
        family = REGISTRY.families.get(entry["family"])
        defaults = {p.name: p.default for p in family.params} if family else entry["params"]
        lines += _struct(entry, defaults, tuned=False)
    lines += ["#endif", "", "}  // namespace tuner_best", ""]
    return "\n".join(lines)


def _struct(entry: dict, params: Mapping, *, tuned: bool) -> list[str]:
    name = _identifier(f"{entry['family']}_{entry['dtype']}_n{entry['n']}")
    body = [
        f"    static constexpr {kind} {_identifier(key)} = {text};"
        for key, (kind, text) in ((k, _literal(v)) for k, v in params.items())
    ]
    # The defaults' struct has the tuned one's members, so that a program using
    # them builds for any GPU: zero launch geometry (not tuned: the program's own).
    exported = entry.get("exported") or entry
    for axis in ("grid", "block"):
        if exported.get(axis):
            values = ", ".join(map(str, exported[axis])) if tuned else "0, 0, 0"
            note = "" if tuned else "  // not tuned for this GPU: the program's own"
            body.append(f"    static constexpr unsigned {axis}[3] = {{{values}}};{note}")
    if exported.get("bandwidth_gbs") is not None:
        text = f"{exported['bandwidth_gbs']:.1f};  // measured" if tuned else "0.0;  // not measured on this GPU"
        body.append(f"    static constexpr double bandwidth_gbs = {text}")
    frugal = entry.get("energy_optimal")
    body += _energy_struct(frugal if tuned or not frugal else {"params": params})
    return ["", *(_tie_comment(entry) if tuned else ()), f"struct {name} {{", *body, "};"]


def _energy_struct(frugal: Mapping | None) -> list[str]:
    """The configuration with the fewest joules per launch, as a nested struct
    beside the fastest one (where energy was measured; for another GPU, the
    defaults again)."""
    if not frugal:
        return []
    measured = f"  // {frugal['energy_j'] * 1e3:.1f} mJ per launch, measured" if "energy_j" in frugal else ""
    lines = [f"    struct energy_optimal {{{measured}"]
    lines += [f"        static constexpr {kind} {_identifier(key)} = {text};"
              for key, (kind, text) in ((k, _literal(v)) for k, v in frugal["params"].items())]  # fmt: skip
    return lines + ["    };"]


def _tie_comment(entry: dict) -> list[str]:
    """The struct's comment: the tie set's size, why this member, and the other
    members (any of them is as good an answer on this GPU as far as the run could tell)."""
    members = entry.get("tie_set") or []
    if len(members) < 2:
        return []
    by = entry["ranked_by"]
    unit = "GFLOP/s" if by == "gflops" else "GB/s"
    chosen = entry["exported"]["config_key"]
    lines = [f"// {len(members)} configurations tie (95 % intervals of the median time overlap the winner's);",
             f"// exported: {entry['exported']['rule']}. The others:"]  # fmt: skip
    for member in members:
        if member["config_key"] != chosen:
            winner = " (the winner)" if member["config_key"] == entry["config_key"] else ""
            lines.append(f"//   {_params_text(member['params'])}: {member[by]:.1f} {unit}{winner}")
    return lines


def _params_text(params: Mapping) -> str:
    return _comment(", ".join(f"{k}={v}" for k, v in params.items()))


def export(folder: Path, out: Path) -> list[str]:
    """Write ``best.json`` and ``best_configs.h`` of the results ``folder`` into
    ``out``; returns a line per problem for the terminal.

    Raises:
        FileNotFoundError: ``folder`` lacks measurements.parquet or device.json.
        DamagedFile: one of them cannot be read (one line: which, why, the remedy).
    """
    from tuner.data.readback import damaged, read_json
    from tuner.data.results import read, write_json_atomic, write_text_atomic
    from tuner.errors import DamagedFile

    missing = [name for name in ("measurements.parquet", "device.json") if not (folder / name).is_file()]
    if missing:
        raise FileNotFoundError(
            f"must be a results folder with measurements.parquet and device.json, got {str(folder)!r}, which lacks {missing}"
        )
    device = read_json(folder / "device.json")
    capability = device.get("compute_capability")
    if not isinstance(capability, str) or not re.fullmatch(r"\d{1,2}\.\d", capability):
        # It goes into the header's #if as <major><minor>.
        raise DamagedFile(damaged(folder / "device.json", f"compute_capability is {str(capability)[:40]!r}, not <major>.<minor>"))
    entries = best_entries(read(folder / "measurements.parquet"))
    write_json_atomic(best_json(entries, device), out / "best.json")
    write_text_atomic(header_text(entries, device), out / "best_configs.h")
    lines = []
    for e in entries:
        lines += summary_lines(e)
    return lines + [f"{len(entries)} problems -> {out / 'best.json'}, {out / 'best_configs.h'}"]


def summary_lines(entry: dict) -> list[str]:
    """The terminal lines of one problem: the winner, the interval of its figure
    (from that of its median time), its tie set's size and, where the header
    exports another member, that member."""
    by = entry["ranked_by"]
    unit = "GFLOP/s" if by == "gflops" else "GB/s"
    value = entry[by]
    interval = entry.get("time_ms_interval")
    if interval and value is not None:
        # A figure is work over time: its interval is the time's, reversed.
        low, high = value * entry["time_ms_median"] / interval[1], value * entry["time_ms_median"] / interval[0]
        figure = f"{value:.0f} {unit} [{low:.0f}, {high:.0f}]"
    else:
        figure = f"{value:.0f} {unit}" if value is not None else "—"
    ties = entry.get("tie_count", 1)
    line = f"{entry['family']:12s} {entry['dtype']:8s} n={entry['n']:<10d} {figure:>24s}  {ties:3d} tied  {entry['params']}"
    exported = entry.get("exported")
    if exported and exported["config_key"] != entry["config_key"]:
        return [line, f"{'':36s} header exports {exported['params']} ({exported[by]:.0f} {unit}): {exported['rule']}"]
    return [line]
