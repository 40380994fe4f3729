"""Nsight Compute (``ncu``): finding it, the command line, and its raw CSV.

The profiled process is started under ``ncu --profile-from-start off``: only
launches between ``cuProfilerStart`` and ``cuProfilerStop`` are profiled (the
harness brackets exactly one launch per configuration with them), and
``--kernel-name`` narrows that to the family's kernels. The report is
exported (``-o``) and read back with ``ncu --import --page raw --csv``: one
line per profiled launch, a column per metric, a second line of units.
"""

from __future__ import annotations

import csv
import glob
import io
import math
import os
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd

# Where ncu lives when it is not on PATH: beside nvcc, or under /opt/nvidia.
_NCU_GLOBS = ("/usr/local/cuda*/bin/ncu", "/opt/nvidia/nsight-compute/*/ncu")

# Columns of the raw page that are not metrics.
ID_COLUMNS = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
              "Grid Size", "Device", "CC")  # fmt: skip

# Unit prefixes ncu may print; --print-units base avoids most, but not every version honours it everywhere.
_PREFIX = {"": 1.0, "K": 1e3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "m": 1e-3, "u": 1e-6, "n": 1e-9}
_UNIT = re.compile(r"^(?P<prefix>[KkMGTmun]?)(?P<base>byte|second|s|cycle|inst|sector|request|warp|thread|hz|Hz)$")


class NcuUnavailable(RuntimeError):
    """ncu is missing or may not read counters; the message is one line saying which."""


def find_ncu() -> str:
    """``$NCU``, else ``ncu`` on PATH, else the newest one in the usual places."""
    named = os.environ.get("NCU")
    if named:
        if not (Path(named).is_file() and os.access(named, os.X_OK)):
            raise NcuUnavailable(f"NCU={named!r} is not an executable file")
        return named
    found = shutil.which("ncu")
    if found:
        return found
    nvcc = shutil.which("nvcc")
    candidates = [str(Path(nvcc).parent / "ncu")] if nvcc else []
    candidates += sorted((p for pattern in _NCU_GLOBS for p in glob.glob(pattern)), reverse=True)
    for path in candidates:
        if Path(path).is_file() and os.access(path, os.X_OK):
            return path
    raise NcuUnavailable("Nsight Compute (ncu) not found on PATH, beside nvcc or under /opt/nvidia; set NCU=/path/to/ncu")


def available_metrics(ncu: str) -> set[str]:
    """Base names of the metrics this ncu offers for the attached GPU."""
    done = subprocess.run([ncu, "--query-metrics", "--csv"], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise NcuUnavailable(failure_reason(done.stdout + done.stderr) or f"ncu --query-metrics failed ({done.returncode})")
    names = set()
    for row in csv.reader(io.StringIO(done.stdout)):
        if row and re.fullmatch(r"[a-z0-9_]+__[a-z0-9_]+", row[0].strip()):
            names.add(row[0].strip())
    return names


def base_name(metric: str) -> str:
    """``dram__bytes_read.sum.per_second`` -> ``dram__bytes_read``."""
    return metric.split(".", 1)[0]


def profile_command(ncu: str, report: Path, metrics: list[str], kernels: list[str], program: list[str]) -> list[str]:
    """ncu around ``program``: counters of the kernels named ``kernels``,
    launched between cuProfilerStart and cuProfilerStop, into ``report``."""
    pattern = "regex:^(" + "|".join(re.escape(k) for k in sorted(set(kernels))) + ")$"
    return [ncu, "--profile-from-start", "off", "--kernel-name", pattern, "--metrics", ",".join(metrics),
            # Leave the clocks as the timed runs saw them; flush caches before every pass, as the timer does.
            "--clock-control", "none", "--cache-control", "all", "--target-processes", "application-only",
            "--export", str(report), "--force-overwrite", *program]  # fmt: skip


def import_command(ncu: str, report: Path) -> list[str]:
    return [ncu, "--import", str(report), "--page", "raw", "--csv", "--print-units", "base"]


def failure_reason(output: str) -> str | None:
    """One line for the ways ncu refuses to profile, or None."""
    if "ERR_NVGPUCTRPERM" in output:
        return ("counters not permitted (ERR_NVGPUCTRPERM): this user may not read the GPU's performance counters;"
                " see https://developer.nvidia.com/ERR_NVGPUCTRPERM")  # fmt: skip
    for line in output.splitlines():
        if line.startswith("==ERROR=="):
            return "ncu: " + line.removeprefix("==ERROR==").strip()
    return None


def _number(text: str) -> float:
    text = text.strip().replace(",", "")  # thousands separators
    if text in ("", "n/a", "N/A"):
        return math.nan
    try:
        return float(text)
    except ValueError:
        return math.nan


def unit_scale(unit: str) -> float:
    """Factor to SI base units: ``Kbyte/s`` -> 1e3, ``ns`` -> 1e-9, ``%`` -> 1."""
    scale = 1.0
    for position, part in enumerate(unit.strip().split("/")):
        match = _UNIT.match(part.strip())
        if match:
            factor = _PREFIX[match["prefix"]]
            scale = scale * factor if position == 0 else scale / factor
    return scale


def parse_raw_csv(text: str) -> pd.DataFrame:
    """ncu's raw page (CSV) to one row per profiled launch: ``ID``,
    ``Kernel Name``, ``Grid Size``, ``Block Size`` and a float column per
    metric in SI base units (bytes, seconds, cycles). Lines before the header
    (ncu's own messages) are skipped."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        return pd.DataFrame(columns=list(ID_COLUMNS))
    rows = list(csv.reader(lines[start:]))
    header = rows[0]
    has_units = len(rows) > 1 and bool(rows[1]) and not rows[1][0].strip()  # the units line has no ID
    units = rows[1] if has_units else [""] * len(header)
    body = rows[2:] if has_units else rows[1:]
    records = []
    for row in body:
        if len(row) != len(header):
            continue
        record = {}
        for name, unit, value in zip(header, units, row):
            record[name] = value if name in ID_COLUMNS else _number(value) * unit_scale(unit)
        records.append(record)
    frame = pd.DataFrame.from_records(records, columns=header)
    if "ID" in frame:
        frame["ID"] = frame["ID"].astype(int)
        frame = frame.sort_values("ID", kind="stable").reset_index(drop=True)
    return frame


def geometry(text: str) -> str:
    """``"(256, 1, 1)"`` -> ``"256,1,1"``, the results schema's form."""
    return ",".join(p.strip() for p in text.strip().strip("()[]").split(","))
