"""The results schema and its Parquet files.

One row per measured configuration and problem. Every stage that measures
writes rows with these columns (parameters a family lacks are null), so one
``pandas.read_parquet(folder)`` reads a GPU's whole dataset.

Columns:
    run_id, timestamp            which run measured the row, and when it began measuring it (a UTC timestamp)
    stage_started_at, stage_elapsed_s, compile_s   study rows: when the tune command that measured the row started
                                 (a UTC timestamp), seconds from then to the end of this row's measurement, and nvcc
                                 seconds its measuring process spent since its previous row (null in older files)
    source                       the stage and name that measured it (``sweep:reduce_ladder``, ``study:reduce_int32``)
    trial                        the Optuna trial number for study rows (null for sweeps)
    gpu, gpu_slug, pci_bus_id (which card, when several share a study), compute_capability, driver_version, cuda_version,
    nvcc_version, pycuda_version, git_commit (``-dirty`` appended where tracked files differed from that commit)
    family, variant, dtype, n    what was computed (n: elements, or matrix dimension)
    <parameter columns>          one per tuning parameter, see PARAM_COLUMNS
    config_key                   canonical text of the parameters (identifies a configuration)
    grid, block                  launch geometry as "x,y,z"
    registers, shared_bytes, spill_bytes, local_bytes   from the ptxas report
    status                       ok | infeasible | compile_error | launch_error | wrong_result
    error                        the reason when status is not ok (null when ok)
    verify_error                 largest relative error against the host reference (0: exact), for verified rows
    time_ms_median, time_ms_min, time_ms_max, time_ms_p10, time_ms_p90
    time_ms_ci_low, time_ms_ci_high   95 % confidence interval of the median, from order statistics of the kept
                                 samples (``tuner.data.intervals``; null in older files, which it derives from the quantiles)
    rel_spread                   standard deviation / mean of the kept samples
    samples, throttled_samples, converged, measure_wall_s, l2_flushed
    sm_clock_mhz, mem_clock_mhz, temperature_c, power_w   NVML readings (median over the samples)
    bytes_moved, bandwidth_gbs   fewest bytes read + written; GB/s = bytes / median time / 1e9
    gflops                       for families that count floating-point work (else null)
    fraction_of_copy_peak, fraction_of_theoretical_peak
    energy_j, energy_j_err       joules per launch from NVML's energy counter, launches back to back over windows
                                 aligned to the counter's updates (tuner/measure/energy.py), and one standard error
    energy_rel_spread            the windows' joules per launch: standard deviation / mean
    energy_windows, energy_launches   windows and launches measured; energy_launch_ms: back-to-back ms per launch
    energy_wall_s                seconds the energy measurement took (its cost per configuration)
    power_w_energy               average watts over the windows (energy / seconds)
    energy_j_per_byte, energy_j_per_flop   joules per byte of bytes_moved, per floating-point operation (else null)
                                 (energy columns are null where energy was not measured: see the sweep's and
                                 study's ``energy`` setting)
"""

from __future__ import annotations

import json
import math
import os
import re
import secrets
import stat
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import numpy as np
import pandas as pd

from tuner.data.readback import damaged, one_line
from tuner.errors import DamagedFile
from tuner.families.base import Family, config_key  # noqa: F401 - config_key: the identity of a row, re-exported for the stages

TIMESTAMP = "datetime64[us, UTC]"

# Every tuning parameter of every family, each its own column.
PARAM_COLUMNS = {
    "variant": "string",
    "block_size": "Int64",
    "unroll": "Int64",
    "vector_width": "Int64",
    "offset": "Int64",
    "grid_blocks_per_sm": "Int64",
    "cache_hint": "string",
    "min_blocks": "Int64",
    "l1_cache": "string",
    "read_only": "Int64",
    "pitched": "Int64",
    "tile": "Int64",
    "finish": "string",
}


INT64 = 2**63  # a whole-number column's bound (Int64)


def family_columns_unfit(family) -> str | None:
    """Why ``family``'s parameters cannot be columns of the results table (one
    line), or None. Each parameter is a column of its own: one named as another
    column (``status``, ``n``, ``bandwidth_gbs``) would be written over or write
    over it, and a row the store reads back would no longer be its own; one
    named as a built-in parameter takes that column's type."""
    for param in family.params:
        where = f"family {family.name!r}: parameter {param.name!r}"
        if param.name in COLUMNS and param.name not in PARAM_COLUMNS:
            return f"{where} must not be named as a column of the results table (its own data: {param.name}), got it"
        kind = PARAM_COLUMNS.get(param.name)
        for value in param.values:
            if isinstance(value, int) and not -INT64 <= value < INT64:
                return f"{where}: values must fit 64 bits (a results column), got {value}"
            if kind == "Int64" and not isinstance(value, int):
                return f"{where}: values must be integers, as the results column {param.name} of built-in families is, got {value!r}"
            if kind == "string" and not isinstance(value, str):
                return f"{where}: values must be text, as the results column {param.name} of built-in families is, got {value!r}"
    return None

COLUMNS = {
    "run_id": "string",
    "timestamp": TIMESTAMP,
    "stage_started_at": TIMESTAMP,
    "stage_elapsed_s": "float64",
    "compile_s": "float64",
    "source": "string",
    "trial": "Int64",
    "gpu": "string",
    "gpu_slug": "string",
    "pci_bus_id": "string",
    "compute_capability": "string",
    "driver_version": "string",
    "cuda_version": "string",
    "nvcc_version": "string",
    "pycuda_version": "string",
    "git_commit": "string",
    "family": "string",
    "dtype": "string",
    "n": "Int64",
    **PARAM_COLUMNS,
    "config_key": "string",
    "grid": "string",
    "block": "string",
    "registers": "Int64",
    "shared_bytes": "Int64",
    "spill_bytes": "Int64",
    "local_bytes": "Int64",
    "status": "string",
    "error": "string",
    "verify_error": "float64",
    "time_ms_median": "float64",
    "time_ms_min": "float64",
    "time_ms_max": "float64",
    "time_ms_p10": "float64",
    "time_ms_p90": "float64",
    "time_ms_ci_low": "float64",
    "time_ms_ci_high": "float64",
    "rel_spread": "float64",
    "samples": "Int64",
    "throttled_samples": "Int64",
    "converged": "boolean",
    "measure_wall_s": "float64",
    "l2_flushed": "boolean",
    "sm_clock_mhz": "float64",
    "mem_clock_mhz": "float64",
    "temperature_c": "float64",
    "power_w": "float64",
    "bytes_moved": "Int64",
    "bandwidth_gbs": "float64",
    "gflops": "float64",
    "fraction_of_copy_peak": "float64",
    "fraction_of_theoretical_peak": "float64",
    "energy_j": "float64",
    "energy_j_err": "float64",
    "energy_rel_spread": "float64",
    "energy_windows": "Int64",
    "energy_launches": "Int64",
    "energy_launch_ms": "float64",
    "energy_wall_s": "float64",
    "power_w_energy": "float64",
    "energy_j_per_byte": "float64",
    "energy_j_per_flop": "float64",
}


def columns(families: Iterable[Family] | None = None) -> dict[str, str]:
    """The schema of rows of ``families`` (a run's): ``COLUMNS`` plus a column
    for each of their parameters that no built-in family has (a plug-in's:
    integer, number or text, from its values), after the built-in parameters.

    Args:
        families: the families whose rows the table holds. None: every family
            this process has registered, for a check of one row's names by
            code that is not told its family; a table written to a file names
            its families (``to_frame``), so its columns never depend on which
            plug-ins the writing process happened to load.
    """
    if families is None:
        from tuner.families import REGISTRY

        families = REGISTRY
    extra = {}
    for family in families:
        for param in family.params:
            if param.name not in COLUMNS and param.name not in extra:
                extra[param.name] = _column_type(param.values)
    if not extra:
        return COLUMNS
    names = list(COLUMNS)
    at = names.index("config_key")
    return {name: COLUMNS.get(name) or extra[name] for name in names[:at] + list(extra) + names[at:]}


def _column_type(values) -> str:
    """A plug-in parameter's column: whole numbers (switches too), numbers where
    any is fractional (0.5 read back as text was no longer the parameter's
    value), else text."""
    if all(isinstance(v, int) for v in values):
        return "Int64"
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return "float64"
    return "string"


def row_families(frame: pd.DataFrame) -> list[Family]:
    """The families ``frame``'s rows name, those this process knows."""
    from tuner.families import REGISTRY

    if "family" not in frame:
        return []
    names = sorted({str(name) for name in frame["family"].dropna().unique()})
    return [REGISTRY.families[name] for name in names if name in REGISTRY.families]


def to_frame(
    rows: Iterable[Mapping] | pd.DataFrame, *, families: Iterable[Family] | None = None, keep_unknown: bool = False
) -> pd.DataFrame:
    """Rows (dicts, or a frame) to a frame with exactly the schema's columns and
    types: ``columns(families)``, of the run's families where the caller knows
    them, else of the families the rows name. ``keep_unknown`` keeps other
    columns (as parameters, before ``config_key``): files written with a
    plug-in family's parameters read back where that family is not loaded."""
    frame = rows.copy() if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    schema = columns(row_families(frame) if families is None else families)
    if keep_unknown:
        names = list(schema)
        at = names.index("config_key")
        foreign = [c for c in frame.columns if c not in schema]
        schema = {name: schema.get(name) or str(frame[name].dtype) for name in names[:at] + foreign + names[at:]}
    _upgrade_old_rows(frame)
    for column, dtype in schema.items():
        if column not in frame:
            frame[column] = pd.Series([None] * len(frame), index=frame.index, dtype=dtype)
        elif str(frame[column].dtype) != dtype:
            values = frame[column].astype(object)
            frame[column] = values.where(values.notna(), None).astype(dtype)
    unknown = sorted(set(frame.columns) - set(schema))
    if unknown:
        raise ValueError(f"results rows carry columns outside the schema: {unknown}")
    return frame[list(schema)]


def _upgrade_old_rows(frame: pd.DataFrame) -> None:
    """Rows as older files (and the JSON row store) hold them, in place:
    timestamps as ISO 8601 text, and on ok rows the relative verification
    error as text in ``error``, which is null on ok rows now."""
    for column in ("timestamp", "stage_started_at"):
        if column in frame and str(frame[column].dtype) != TIMESTAMP:
            frame[column] = pd.to_datetime(frame[column], utc=True, format="ISO8601").astype(TIMESTAMP)
    if "status" not in frame or "error" not in frame:
        return
    ok = (frame["status"] == "ok").fillna(False).astype(bool)
    old = ok & frame["error"].notna()
    if old.any():
        if "verify_error" not in frame:
            frame["verify_error"] = pd.Series([None] * len(frame), index=frame.index, dtype="float64")
        missing = old & frame["verify_error"].isna()
        frame.loc[missing, "verify_error"] = pd.to_numeric(frame.loc[missing, "error"], errors="coerce")
        frame.loc[ok, "error"] = None


def temporary_beside(path: Path, suffix: str = ".tmp") -> tuple[int, str]:
    """(fd, name) of a new temporary file in ``path``'s folder, to be renamed
    onto ``path``. It is created with mode 0666 for the kernel to narrow, as it
    narrows any new file there (by the umask, or by the folder's default ACL
    where it has one): ``mkstemp`` makes it 0600, and a rename keeps that,
    giving results that the user's colleagues, a CI user or ``nvcc -I`` could
    not read."""
    for _ in range(100):  # a name taken by another writer in between: draw again, as mkstemp does
        tmp = path.parent / f".{path.name}.{secrets.token_hex(4)}{suffix}"
        try:
            return os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666), str(tmp)
        except FileExistsError:
            continue
        except PermissionError as error:  # named by its folder, not by the temporary name it was refused
            raise PermissionError(error.errno, f"{error.strerror}: {path.name} cannot be written in this folder",
                                  str(path.parent)) from None  # fmt: skip
    raise FileExistsError(f"{path.parent}: no unused temporary name beside {path.name} in 100 draws")


def write_via_temporary(path: str | os.PathLike, write: Callable[[int, str], None]) -> Path:
    """Create ``path`` through a temporary file beside it and a rename, so a
    reader never sees a partial file; ``write(fd, tmp)`` fills the temporary
    file (and closes ``fd``)."""
    path = Path(path)
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and not (stat.S_ISREG(mode) or stat.S_ISLNK(mode) or stat.S_ISDIR(mode)):
        # The rename would put the file in place of a device, pipe or socket, not write to it.
        raise ValueError(f"{path}: must be a file to write (or none yet), got a device, pipe or socket")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = temporary_beside(path)
    try:
        write(fd, tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_atomic(frame: pd.DataFrame, path: str | os.PathLike) -> Path:
    """Write ``frame`` to ``path`` as Parquet, atomically."""

    def write(fd: int, tmp: str) -> None:
        os.close(fd)
        frame.to_parquet(tmp, index=False)

    return write_via_temporary(path, write)


def write_text_atomic(text: str, path: str | os.PathLike) -> Path:
    """Write ``text`` to ``path``, atomically."""

    def write(fd: int, tmp: str) -> None:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)

    return write_via_temporary(path, write)


def write_json_atomic(data: Mapping, path: str | os.PathLike) -> Path:
    return write_text_atomic(json.dumps(data, indent=2, sort_keys=True, default=str), path)


def read(path: str | os.PathLike, needs: Iterable[str] = ()) -> pd.DataFrame:
    """A Parquet file or a folder of them, in the schema (empty if none).

    Args:
        needs: columns each file must have itself (the schema's columns a
            file lacks read as nulls otherwise: a file of other rows would
            read as results rows of nothing).

    Raises:
        DamagedFile: a file is not Parquet (zero bytes, cut short), not
            results rows, or gives a verified row a negative time; one line
            naming it and the command that remakes it.
        ValueError: a file lacks a column of ``needs`` (one line naming it
            and the columns), or cannot be opened (a permission, a name the
            locale cannot spell: one line, and no advice to remove it).
    """
    path, needs = Path(path), tuple(needs)
    if path.is_dir():
        files = sorted(path.rglob("*.parquet"))
        if not files:
            return to_frame([])
        return to_frame(pd.concat([_read_one(f, needs) for f in files], ignore_index=True), keep_unknown=True)
    if not path.exists():
        return to_frame([])
    return _read_one(path, needs)


def _read_one(path: Path, needs: tuple[str, ...] = ()) -> pd.DataFrame:
    try:
        open(path, "rb").close()  # pyarrow reads the path itself: a Python file handle in its threads can abort at exit
    except (OSError, UnicodeError) as error:  # not this file's fault: a permission, or a name this locale cannot spell
        raise ValueError(f"{path}: cannot be opened ({one_line(error)})") from None
    try:
        frame = pd.read_parquet(path)
    except Exception as error:  # noqa: BLE001 - pyarrow's errors and kin: the file is what is wrong
        raise DamagedFile(damaged(path, f"not a readable Parquet file ({one_line(error)})")) from None
    lacking = [c for c in needs if c not in frame.columns]
    if lacking:
        raise ValueError(f"{path}: must have the results columns {list(needs)}, lacks {lacking}")
    try:
        frame = to_frame(frame, keep_unknown=True)
    except (ValueError, TypeError, OverflowError) as error:  # OverflowError: a whole number past a column's type
        raise DamagedFile(damaged(path, f"not results rows ({one_line(error)})")) from None
    _check_times(path, frame)
    _check_rows(path, frame)
    return frame


# The timing statistics of a row, in milliseconds: durations, never negative.
TIME_COLUMNS = tuple(c for c in COLUMNS if c.startswith("time_ms_"))
STATUSES = ("ok", "infeasible", "compile_error", "launch_error", "wrong_result")
_GEOMETRY = re.compile(r"\d{1,10},\d{1,10},\d{1,10}")  # "x,y,z", each a whole number that fits 32 bits or near it


def _check_rows(path: Path, frame: pd.DataFrame) -> None:
    """What every reader relies on, checked once as a file is read: a status
    of the schema's (an unknown one was silently no row at all), and on a
    verified row a finite, non-negative rate (an infinite one made a slow
    row the winner), a configuration key that is a JSON object and a launch
    geometry of three whole numbers (each would otherwise be a traceback, or
    a header without parameters, far from this file)."""
    status = frame["status"]
    odd = status.notna() & ~status.isin(STATUSES)
    if odd.any():
        at = int(odd.to_numpy(dtype=bool).argmax())
        raise DamagedFile(damaged(path, f"status is {status.iloc[at]!r} in row {at + 1}, but must be one of {list(STATUSES)}"))
    ok = (status == "ok").fillna(False).to_numpy(dtype=bool)
    for column in ("bandwidth_gbs", "gflops"):
        values = frame[column].to_numpy(dtype="float64", na_value=math.nan)
        bad = ok & (np.isinf(values) | (values < 0))
        if bad.any():
            at = int(bad.argmax())
            raise DamagedFile(damaged(path, f"{column} is {float(values[at])!r} in row {at + 1} (status ok), but a rate is finite "
                                            "and never negative"))  # fmt: skip
    rows = np.flatnonzero(ok)
    for at, key in zip(rows, frame["config_key"].to_numpy(dtype=object)[rows]):
        if isinstance(key, str) and not isinstance(_json_or_none(key), dict):  # none at all: the readers say so
            raise DamagedFile(damaged(path, f"config_key is {str(key)[:80]!r} in row {at + 1} (status ok), but must be a "
                                            "JSON object of the parameters"))  # fmt: skip
    for column in ("grid", "block"):
        for at, geometry in zip(rows, frame[column].to_numpy(dtype=object)[rows]):
            if isinstance(geometry, str) and not _GEOMETRY.fullmatch(geometry):
                raise DamagedFile(damaged(path, f"{column} is {geometry[:80]!r} in row {at + 1} (status ok), but must be "
                                                "three whole numbers, x,y,z"))  # fmt: skip


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _check_times(path: Path, frame: pd.DataFrame) -> None:
    """A verified row (status ok) with a negative time, or a median of 0, is
    damage: ``best`` would export it as its problem's winner (a rate of
    bytes over no time), ``compare`` would divide by it."""
    ok = (frame["status"] == "ok").fillna(False).to_numpy(dtype=bool)
    for column in TIME_COLUMNS:
        negative = ok & (frame[column].to_numpy(dtype="float64", na_value=math.nan) < 0)
        if negative.any():
            at = int(negative.argmax())
            value = float(frame[column].iloc[at])
            raise DamagedFile(damaged(path, f"{column} is {value!r} in row {at + 1} (status ok), but a time is never negative"))
    zero = ok & (frame["time_ms_median"].to_numpy(dtype="float64", na_value=math.nan) == 0)
    if zero.any():
        at = int(zero.argmax())
        raise DamagedFile(damaged(path, f"time_ms_median is 0.0 in row {at + 1} (status ok), but a verified launch takes time"))


def config_params(key: str) -> dict[str, Any]:
    """The parameters of a row, read back from its ``config_key`` (every
    parameter of its family, whatever the package knows of that family)."""
    try:
        params = json.loads(key) if isinstance(key, str) else {}
    except (ValueError, RecursionError):  # no JSON, or nested past the parser's depth (a damaged file)
        return {}
    return params if isinstance(params, dict) else {}


def param_columns(frame: pd.DataFrame) -> list[str]:
    """The parameter columns of ``frame``, read from its rows' configuration
    keys (not from the families this process has loaded), in column order:
    a plug-in family's own parameters are found wherever its rows are read."""
    names: set[str] = set()
    if "config_key" in frame:
        for key in frame["config_key"].dropna().unique():
            names.update(config_params(key))
    return [c for c in frame.columns if c in names]


def collect(paths: Iterable[str | os.PathLike]) -> pd.DataFrame:
    """The rows of several Parquet files as one dataset (what the collect
    stage writes as ``measurements.parquet``); a plug-in's columns are kept."""
    frames = [read(p) for p in paths]
    return to_frame(pd.concat(frames, ignore_index=True), keep_unknown=True) if frames else to_frame([])


def plain_value(value: Any) -> Any:
    """Plain Python for JSON and Optuna: numpy scalars unwrapped, missing and
    non-finite numbers to None."""
    if value is None:
        return None
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        try:
            value = value.item()
        except (TypeError, ValueError):
            pass
    if value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def best_line(frame: pd.DataFrame, what: str) -> str:
    """``what``: its row count by status and its fastest verified row, on one line."""
    ok = frame[frame.status == "ok"]
    counts = frame.status.value_counts().to_dict()
    if ok.empty:
        return f"{what}: no verified configuration; statuses {counts}"
    best = ok.loc[ok.bandwidth_gbs.idxmax()]
    fraction = best.get("fraction_of_copy_peak")
    # Without the peaks stage (a study run on its own) there is no copy peak to be a fraction of.
    peak = "no copy peak measured" if fraction is None or pd.isna(fraction) else f"{fraction:.3f} of copy peak"
    return (f"{what}: {len(frame)} rows {counts}; best {best.bandwidth_gbs:.0f} GB/s "
            f"({peak}) {best['dtype']} n={best['n']} {best['config_key']}")  # fmt: skip
