"""The project's results as T4, the auto-tuning community's results format, and
T4 files read back.

T4 (the "Open Autotuning Results Schema" of Kernel Tuner and KTT; its JSON
schema ships in the ``kernel_tuner`` and ``autotuning-methodology`` packages)
holds one result per configuration: its ``configuration``, ``times``,
``invalidity`` (``correct`` or why not), ``correctness`` and named
``measurements``, with the ``objectives`` it was ranked by. A results table of
one problem maps onto it one row to one result:

- ``invalidity`` from our status (``INVALIDITY``), ``correctness`` 1 for rows
  our verification passed (``status == ok``) and 0 otherwise;
- every timing statistic as a measurement in milliseconds (``time`` is the
  median, the name Kernel Tuner's tools read), and the rates, clocks and
  power; a failed row's ``time`` is Kernel Tuner's error marker for it;
- ``objectives``: ``time`` and ``bandwidth_gbs`` (and ``gflops`` where the
  family counts floating-point work, ``energy`` in joules per launch where
  rows have it), with their directions in
  ``metadata.tuner.objectives``;
- ``metadata``: the time unit, the GPU and software versions, and what was
  computed (family, dtype, n, the rows' source, runs and commit).
"""

from __future__ import annotations

import gzip
import json
import math
import os
import re
import stat
import zlib
from importlib import resources
from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd

from tuner.data.readback import mode_kind, one_line, path_mode
from tuner.data.results import config_params, plain_value, write_text_atomic, write_via_temporary

SCHEMA_VERSION = "1.0.0"
TIME_UNIT = "milliseconds"
# Our status -> T4 invalidity, and back (T4's "timeout" is a launch that did not finish).
INVALIDITY = {
    "ok": "correct",
    "infeasible": "constraints",
    "compile_error": "compile",
    "launch_error": "runtime",
    "wrong_result": "correctness",
}
STATUS_OF = {v: k for k, v in INVALIDITY.items()} | {"timeout": "launch_error"}
# Kernel Tuner's markers in place of a failed configuration's time (its readers look for them).
ERROR_MARKER = {
    "infeasible": "InvalidConfig",
    "compile_error": "CompilationFailedConfig",
    "launch_error": "RuntimeFailedConfig",
    "wrong_result": "RuntimeFailedConfig",
}
# T4 measurement name -> (results column, unit). ``time`` first: the objective others read.
MEASUREMENTS = {
    "time": ("time_ms_median", "ms"),
    "time_min": ("time_ms_min", "ms"),
    "time_max": ("time_ms_max", "ms"),
    "time_p10": ("time_ms_p10", "ms"),
    "time_p90": ("time_ms_p90", "ms"),
    "rel_spread": ("rel_spread", ""),
    "samples": ("samples", ""),
    "throttled_samples": ("throttled_samples", ""),
    "bandwidth_gbs": ("bandwidth_gbs", "GB/s"),
    "gflops": ("gflops", "GFLOP/s"),
    "fraction_of_copy_peak": ("fraction_of_copy_peak", ""),
    "fraction_of_theoretical_peak": ("fraction_of_theoretical_peak", ""),
    "verify_error": ("verify_error", ""),
    "sm_clock_mhz": ("sm_clock_mhz", "MHz"),
    "mem_clock_mhz": ("mem_clock_mhz", "MHz"),
    "temperature_c": ("temperature_c", "C"),
    "power_w": ("power_w", "W"),
    # Energy where it was measured (tuner/measure/energy.py): joules per launch, one standard error, watts, per byte
    "energy": ("energy_j", "J"),
    "energy_err": ("energy_j_err", "J"),
    "power_energy": ("power_w_energy", "W"),
    "energy_per_byte": ("energy_j_per_byte", "J/B"),
}
DIRECTIONS = {"time": "min", "bandwidth_gbs": "max", "gflops": "max", "energy": "min"}
# Per-row columns that describe the GPU and software (one value per file, in the metadata).
ENVIRONMENT = ("gpu", "gpu_slug", "pci_bus_id", "compute_capability", "driver_version", "cuda_version")
REQUIREMENTS = ("pycuda_version", "nvcc_version")


def to_t4(rows: pd.DataFrame, params: Iterable[str]) -> dict:
    """One problem's results rows as a T4 document.

    Args:
        rows: results rows (``tuner.data.results`` schema) of one family,
            dtype and n.
        params: the family's parameter names (the ``configuration`` keys;
            parameters null in a row are left out of its configuration).

    Raises:
        ValueError: the rows are of several problems, or a status is unknown.
    """
    params = list(params)
    problems = rows[["family", "dtype", "n"]].drop_duplicates()
    if len(problems) != 1:
        listed = sorted(f"{f}-{d}-n{n}" for f, d, n in problems.itertuples(index=False))
        raise ValueError(f"a T4 file holds one problem's rows, got {len(problems)}: {listed}")
    counts_flops = "gflops" in rows and rows["gflops"].notna().any()
    objectives = ["time", "bandwidth_gbs"] + (["gflops"] if counts_flops else [])
    if "energy_j" in rows and rows["energy_j"].notna().any():  # the second objective of the time-energy trade-off
        objectives.append("energy")
    ranked_by = "gflops" if counts_flops else "bandwidth_gbs"
    results = [_result(record, params, objectives, ["time", ranked_by]) for record in rows.to_dict("records")]
    first = rows.iloc[0]
    tuner = {
        "family": plain_value(first["family"]),
        "dtype": plain_value(first["dtype"]),
        "n": plain_value(first["n"]),
        "sources": _distinct(rows, "source"),
        "run_ids": _distinct(rows, "run_id"),
        "git_commits": _distinct(rows, "git_commit"),
        "parameters": params,
        "objectives": {name: DIRECTIONS[name] for name in objectives},
        "ranked_by": ranked_by,
        "statuses": INVALIDITY,
    }
    device = {c: v for c in ENVIRONMENT if (v := _single(rows, c)) is not None}
    requirements = [f"{c.removesuffix('_version')} {v}" for c in REQUIREMENTS if (v := _single(rows, c)) is not None]
    metadata = {"timeunit": TIME_UNIT, "environment": {"device_query": device, "requirements": requirements}, "tuner": tuner}
    return {"schema_version": SCHEMA_VERSION, "metadata": metadata, "results": results}


def _result(record: Mapping, params: list[str], objectives: list[str], ranked: list[str]) -> dict:
    """One row as a T4 result; ``ranked``: the measurements a reader ranks a correct one by (every such row has them)."""
    status = plain_value(record.get("status"))
    if status not in INVALIDITY:
        raise ValueError(f"results row status must be one of {list(INVALIDITY)}, got {status!r}")
    configuration = _configuration(record, params)
    times = {}
    if (compile_s := _number(record.get("compile_s"))) is not None:
        times["compilation"] = compile_s * 1e3
    if (wall_s := _number(record.get("measure_wall_s"))) is not None:
        times["benchmark"] = wall_s * 1e3
    if status == "ok":
        measurements = [
            {"name": name, "value": value, "unit": unit}
            for name, (column, unit) in MEASUREMENTS.items()
            if (value := _number(record.get(column))) is not None
        ]
        given = {m["name"]: m["value"] for m in measurements}
        missing = next((name for name in ranked if not given.get(name, 0) > 0), None)
        if missing is not None:  # a reader (ours too) ranks a correct result by these; energy may be unmeasured
            raise ValueError(f"a correct results row must give {ranked} as positive numbers, got "
                             f"{MEASUREMENTS[missing][0]} {plain_value(record.get(MEASUREMENTS[missing][0]))!r} for {configuration}")  # fmt: skip
    else:
        measurements = [{"name": "time", "value": ERROR_MARKER[status], "unit": "ms"}]
    result = {
        "configuration": configuration,
        "times": times,
        "invalidity": INVALIDITY[status],
        "correctness": 1 if status == "ok" else 0,
        "measurements": measurements,
        "objectives": objectives,
    }
    stamp = record.get("timestamp")
    if stamp is not None and not pd.isna(stamp):
        result["timestamp"] = pd.Timestamp(stamp).isoformat()
    if status != "ok" and (error := plain_value(record.get("error"))):
        result["error"] = str(error)
    return result


def _configuration(record: Mapping, params: list[str]) -> dict:
    """A row's configuration, of ``params``: as its ``config_key`` holds it (the
    configuration measured, each value of its own type: a switch's True is no 1,
    as its Int64 column reads it), else, for a row without a key, from its
    columns. A parameter null (or absent) there is left out."""
    source = config_params(record.get("config_key")) or record
    return {name: v for name in params if (v := plain_value(source.get(name))) is not None}


def _number(value: Any) -> float | int | None:
    value = plain_value(value)
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return value


def _distinct(rows: pd.DataFrame, column: str) -> list:
    return sorted(str(v) for v in rows[column].dropna().unique()) if column in rows else []


def _single(rows: pd.DataFrame, column: str) -> Any:
    values = _distinct(rows, column)
    return values[0] if len(values) == 1 else (values or None)


def write_t4(document: Mapping, path: str | os.PathLike) -> Path:
    """Write a T4 document atomically (gzipped where ``path`` ends in ``.gz``)."""
    text = json.dumps(document, allow_nan=False)
    path = Path(path)
    if path.suffix.lower() == ".gz":  # as the t4 command's --out check reads it (.json.GZ too)
        return write_via_temporary(path, lambda fd, _tmp: _write_gzip(fd, text))
    return write_text_atomic(text + "\n", path)


def _write_gzip(fd: int, text: str) -> None:
    with os.fdopen(fd, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as out:
        out.write(text.encode())


MAX_JSON_BYTES = 256 << 20  # of a table or T1 file, unpacked (the hub's are at most tens of MiB)


def read_json(path: str | os.PathLike, open_cache: bool = False) -> Any:
    """A JSON file, gzipped or not (Kernel Tuner caches and T4 files come both ways);
    with ``open_cache``, also a Kernel Tuner cache left open (``_json_or_open_cache``).

    Raises:
        ValueError: the file is not JSON (one line naming it).
    """
    path = Path(path)
    kind = not_a_file(path)
    if kind:
        raise ValueError(f"{path}: must be JSON (gzipped or not) in a regular file, got {kind}")
    try:
        with path.open("rb") as raw:
            gzipped = raw.read(2) == b"\x1f\x8b"
            raw.seek(0)
            # At most the limit is read: a small gzip file can unpack to gigabytes.
            data = (gzip.GzipFile(fileobj=raw) if gzipped else raw).read(MAX_JSON_BYTES + 1)
        document = None if len(data) > MAX_JSON_BYTES else _json_or_open_cache(data) if open_cache else json.loads(data)
    except (OSError, EOFError, zlib.error, ValueError, RecursionError, MemoryError) as exc:
        # ValueError: not JSON, not UTF-8, or a number of more digits than Python reads.
        raise ValueError(f"{path}: must be JSON (gzipped or not), got {one_line(exc)}") from None
    if document is None and len(data) > MAX_JSON_BYTES:
        raise ValueError(f"{path}: must hold at most {MAX_JSON_BYTES >> 20} MiB of JSON (unpacked), got more")
    return document


def _json_or_open_cache(data: bytes) -> Any:
    """``data`` as JSON, or as Kernel Tuner reads a cache it left open: Kernel Tuner appends
    each entry with a trailing comma and closes the file only when a run ends, so a cache
    being written, or one of a run that was stopped, ends in a comma (or, with no entry yet,
    in ``"cache": {``). Only those two endings are closed, and only into a cache (an object
    with ``tune_params`` and a ``cache`` object): a file cut anywhere else stays damaged.

    Raises:
        ValueError: neither reads (the first error).
    """
    try:
        return json.loads(data)
    except ValueError as first:
        text = data.strip()
        if not (text.endswith(b",") or re.search(rb'"cache"\s*:\s*\{$', text)):
            raise
        try:
            document = json.loads(text.removesuffix(b",") + b"}\n}")
        except ValueError:
            raise first from None
        if not (isinstance(document, dict) and isinstance(document.get("cache"), dict) and "tune_params" in document):
            raise first from None
        return document


def not_a_file(path: str | os.PathLike) -> str | None:
    """What ``path`` is where it is there but no regular file (nor a link to
    one): "a folder", "a pipe" or "a device or socket", to refuse before
    reading it (a pipe blocks the read until a writer comes, a device may
    never end it); None where it is a regular file or nothing at all.

    Raises:
        ValueError: what is there cannot be looked at (a folder on the way
            this user may not enter): one line naming it.
    """
    mode = path_mode(path, "a readable file")
    if mode is None or stat.S_ISREG(mode):
        return None
    return mode_kind(mode)


# The errors of os.stat that mean nothing is there (as Path.exists reads them).
def finite_number(value: Any) -> bool:
    """A number (not a boolean) that is neither infinite, NaN nor too large for a float."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer too large for a float
        return False


def read_t4(path: str | os.PathLike, document: Any = None) -> list[dict]:
    """A T4 results file's results as ``{"configuration", "status", "values",
    "unread", "repeated", "error"}`` dicts: our status from its ``invalidity``,
    ``values`` its numeric measurements by name (none for a failed result),
    ``unread`` those whose value is not a finite number, as written,
    ``repeated`` the names given more than once with all their values, as
    written (``values`` and ``unread`` hold the last). ``document``: the file
    already read (``read_json``), so that it is parsed once.

    Raises:
        ValueError: the file breaks the rules a replay needs (one line naming
            the file, the rule and the value).
    """
    document = read_json(path) if document is None else document
    if not isinstance(document, dict) or not isinstance(document.get("results"), list):
        got = sorted(document) if isinstance(document, dict) else type(document).__name__
        raise ValueError(f"{path}: a T4 file must hold a 'results' list, got {got}")
    out = []
    for index, result in enumerate(document["results"]):
        where = f"{path}: results[{index}]"
        if not isinstance(result, dict) or not isinstance(result.get("configuration"), dict):
            raise ValueError(f"{where} must have a 'configuration' object, got {str(result)[:80]}")
        invalidity = result.get("invalidity")
        if not isinstance(invalidity, str) or invalidity not in STATUS_OF:
            raise ValueError(f"{where}.invalidity must be one of {sorted(STATUS_OF)}, got {str(invalidity)[:80]}")
        measurements = result.get("measurements") or []
        if not isinstance(measurements, list) or not all(isinstance(m, dict) for m in measurements):
            raise ValueError(
                f"{where}.measurements must be a list of {{name, value, unit}} objects, got {str(measurements)[:80]}"
            )
        values, unread, given = {}, {}, {}
        for m in measurements:
            name, value = m.get("name"), m.get("value")
            if not isinstance(name, str):
                raise ValueError(f"{where}.measurements: a measurement's name must be a string, got {str(name)[:80]}")
            given.setdefault(name, []).append(value)
            if finite_number(value):
                values[name] = float(value)
            else:
                unread[name] = value
        status = STATUS_OF[invalidity]
        correctness = result.get("correctness", 1)
        if not finite_number(correctness):
            raise ValueError(f"{where}.correctness must be a number (1 correct, 0 not), got {str(correctness)[:80]}")
        if status == "ok" and correctness == 0:
            status = "wrong_result"
        # A name given twice is noted, not settled here (the last one would win): the
        # reader of the measurement refuses it (a second time can become the optimum).
        repeated = {name: given[name] for name in given if len(given[name]) > 1}
        out.append({"configuration": result["configuration"], "status": status, "values": values if status == "ok" else {},
                    "unread": unread, "repeated": repeated, "error": result.get("error")})  # fmt: skip
    return out


def t4_metadata(path: str | os.PathLike, document: Any = None) -> dict:
    """A T4 file's ``metadata`` object (empty where it has none); ``document``
    as ``read_t4`` takes it."""
    document = read_json(path) if document is None else document
    metadata = document.get("metadata") if isinstance(document, dict) else None
    return metadata if isinstance(metadata, dict) else {}


def schema_files() -> list[Path]:
    """The published T4 schema files of the installed ``kernel_tuner`` and
    ``autotuning_methodology`` packages (results and metadata), those present.

    Raises:
        ImportError: neither package is installed.
    """
    found = []
    for package, names in (
        ("kernel_tuner", ("schema/T4/1.0.0/results-schema.json", "schema/T4/1.0.0/metadata-schema.json")),
        ("autotuning_methodology", ("schemas/T4.json",)),
    ):
        try:
            root = resources.files(package)
        except ModuleNotFoundError:
            continue
        found += [Path(str(root.joinpath(name))) for name in names if root.joinpath(name).is_file()]
    if not found:
        raise ImportError("validating T4 needs the kernel_tuner or autotuning-methodology package (pip install kernel_tuner)")
    return found


def validate(document: Mapping) -> list[Path]:
    """Validate ``document`` against every published T4 schema installed;
    returns the schema files used.

    Raises:
        jsonschema.ValidationError: the document breaks a schema.
        ImportError: no schema is installed.
    """
    import jsonschema

    files = schema_files()
    for file in files:
        jsonschema.validate(instance=document, schema=json.loads(file.read_text()))
    return files


def problem_rows(frame: pd.DataFrame, problem: str | None = None, source: str | None = None) -> pd.DataFrame:
    """The rows of one problem (``family-dtype-nN``) and one source of a
    results table: where the table holds several, ``problem`` must say which;
    of its sources, ``source`` or the one with the most rows (the exhaustive
    sweep; sweeps and studies of other grids mixed make no one run).

    Raises:
        ValueError: no such problem or source, or several problems and none named.
    """
    frame = frame[frame["status"].notna()]
    keys = frame["family"].astype(str) + "-" + frame["dtype"].astype(str) + "-n" + frame["n"].astype(str)
    present = sorted(keys.unique())
    if problem is None and len(present) != 1:
        raise ValueError(f"--problem must name one of the table's problems {present}, got none")
    problem = problem or present[0]
    rows = frame[keys == problem]
    if rows.empty:
        raise ValueError(f"--problem must be one of {present}, got {problem!r}")
    sources = rows["source"].value_counts()
    source = source or (str(sources.index[0]) if len(sources) else None)
    if source is not None:
        if source not in sources:
            raise ValueError(f"--source must be one of {sorted(sources.index)} for {problem}, got {source!r}")
        rows = rows[rows["source"] == source]
    return rows


# The columns a results file must have for its rows to be told apart by problem and status.
NEEDED = ("family", "dtype", "n", "status")
# What the t4 command reads and writes (its help says so too).
RESULTS_INPUT = "a results Parquet file (measurements.parquet, sweeps/*.parquet) or a results folder"
T4_SUFFIXES = (".json", ".json.gz")
PARQUET_MAGIC = b"PAR1"  # the first (and last) four bytes of every Parquet file


def folder_results(folder: str | os.PathLike) -> list[Path]:
    """The results tables of a folder, as a results folder holds them: its
    ``measurements.parquet`` where present (the collected dataset: every sweep,
    study and peak row once), else what ``collect`` would gather
    (``sweeps/*.parquet``, ``studies/*.parquet`` and ``peaks.parquet``), else,
    for a folder of tables (a results folder's ``sweeps``), its own
    ``*.parquet`` files. Never ``profiles/`` (hardware counters, not results
    rows), never a table twice (a sweep's rows are also in the measurements).
    Empty where there is none."""
    folder = Path(folder)
    collected, peaks = folder / "measurements.parquet", folder / "peaks.parquet"
    if path_mode(collected, "a readable file") is not None:
        return [collected]
    gathered = sorted((folder / "sweeps").glob("*.parquet")) + sorted((folder / "studies").glob("*.parquet"))
    gathered += [peaks] if path_mode(peaks, "a readable file") is not None else []
    return gathered or sorted(folder.glob("*.parquet"))


def check_export_paths(results: str | os.PathLike, out: str | os.PathLike) -> list[Path]:
    """Refuse, before anything is read, what ``export_t4`` must not take: a
    ``results`` that is no Parquet file or folder of them (a T4 or other JSON
    file is no damaged Parquet file: it is the wrong input, and nothing to
    remove), a folder with no results table in it (``folder_results``), and an
    ``out`` that is no ``.json``/``.json.gz`` file or would overwrite
    measurements (the input, one of an input folder's files, any Parquet
    file, or any file there that is no T4 document: a results folder's
    ``peaks.json`` or ``device.json``). Returns the Parquet files to read.

    Raises:
        ValueError: one line naming the path, the rule and what it is.
    """
    results, out = Path(results), Path(out)
    wanted = f"{results}: must be {RESULTS_INPUT}"
    mode = path_mode(results, f"{RESULTS_INPUT} this user may read")
    if mode is None:
        raise ValueError(f"{wanted}, got nothing there")
    if stat.S_ISDIR(mode):
        inputs = folder_results(results)
        if not inputs:
            raise ValueError(f"{wanted}, got a folder that holds no results table (no measurements.parquet, "
                             "sweeps/*.parquet, studies/*.parquet or .parquet file of its own)")  # fmt: skip
        for path in inputs:  # a folder or pipe by a table's name: refused, not read (a pipe blocks the read)
            kind = not_a_file(path)
            if kind:
                raise ValueError(f"{wanted}, got a folder whose {path.relative_to(results)} is {kind}, not a Parquet file")
    elif stat.S_ISREG(mode):
        what = _not_parquet(results)
        if what:
            raise ValueError(f"{wanted}, got {what}")
        inputs = [results]
    else:  # a pipe would block the read until a writer comes
        raise ValueError(f"{wanted}, got {mode_kind(mode)}")
    out_mode = path_mode(out, "a file to write (or none yet)")
    if out_mode is not None and stat.S_ISDIR(out_mode):
        raise ValueError(f"--out must name the file to write, got {str(out)!r}, a folder")
    if out_mode is not None and not stat.S_ISREG(out_mode):  # as write_t4 would say, but before the work
        raise ValueError(f"{out}: must be a file to write (or none yet), got a device, pipe or socket")
    # An existing T4 file is exported over (the command remakes it); measurements never are.
    if out_mode is not None:
        out_id = file_id(out)
        for path in inputs:
            if file_id(path) == out_id:  # by any name: the same path, a link
                which = "the input itself" if path == results else f"the input folder's {path.relative_to(results)}"
                raise ValueError(f"--out: must not be the results it reads (their measurements would be lost), got "
                                 f"{str(out)!r}, {which}")  # fmt: skip
    if not out.name.lower().endswith(T4_SUFFIXES):  # the T4 readers (ours, Kernel Tuner's) read these
        raise ValueError(f"--out: must end in {' or '.join(T4_SUFFIXES)} (a T4 file, gzipped where .gz), got {str(out)!r}")
    if out_mode is None:
        check_folder_above("--out", out)
        return inputs
    if file_head(out).startswith(PARQUET_MAGIC):  # whatever its name says
        raise ValueError(f"--out: must not be a Parquet file (its measurements would be lost), got {str(out)!r}, "
                         "which holds Parquet")  # fmt: skip
    # Nor any other file (a results folder's peaks.json or device.json: measurements that need the GPU to remake).
    what = _not_t4(out)
    if what:
        raise ValueError(f"--out: must be a new file or a T4 file to write over (a JSON object with {list(T4_KEYS)}), "
                         f"got {str(out)!r}, {what}")  # fmt: skip
    return inputs


T4_KEYS = ("results", "schema_version")  # what a T4 document holds, and no other JSON file of ours


def _not_t4(path: Path) -> str | None:
    """What an existing regular file is where it is no T4 document (a JSON
    object with ``T4_KEYS``), None where it is one, or empty (nothing to lose)."""
    if not file_head(path):
        return None
    try:
        document = read_json(path)
    except ValueError:
        return "which holds no JSON (gzipped or not)"
    if not isinstance(document, dict):
        return f"which holds a JSON {type(document).__name__}, not an object"
    missing = [key for key in T4_KEYS if key not in document]
    return f"which holds a JSON object without {missing}" if missing else None


def check_folder_above(option: str, out: Path) -> None:
    """Refuse an ``out`` not there yet whose folders cannot be made: the
    nearest of them that is there must be a folder (not a file, a pipe).

    Raises:
        ValueError: "OPTION: must be in a folder, got 'OUT', under 'ABOVE', a file".
    """
    for above in Path(out).absolute().parents:  # ends at the root, which is there
        above_mode = path_mode(above, "a folder to write in")
        if above_mode is not None:
            break
        if above.is_symlink():  # a link to nothing: no folder can be made in its place
            raise ValueError(f"{option}: must be in a folder, got {str(out)!r}, under {str(above)!r}, "
                             f"a link to nothing ({os.readlink(above)})")  # fmt: skip
    if not stat.S_ISDIR(above_mode):
        kind = "a file" if stat.S_ISREG(above_mode) else mode_kind(above_mode)
        raise ValueError(f"{option}: must be in a folder, got {str(out)!r}, under {str(above)!r}, {kind}")


def file_head(path: Path) -> bytes:
    """A regular file's first bytes.

    Raises:
        ValueError: it cannot be read (one line naming it).
    """
    try:
        with path.open("rb") as handle:
            return handle.read(64)
    except OSError as exc:
        raise ValueError(f"{path}: must be a readable file, got {one_line(exc)}") from None


def _not_parquet(path: Path) -> str | None:
    """What a regular file is where it is no Parquet file (it does not begin
    with Parquet's magic bytes), None where it is one or is empty (zero bytes:
    a results file a stage left damaged, which ``results.read`` names so)."""
    head = file_head(path)
    if not head or head.startswith(PARQUET_MAGIC):
        return None
    if head.startswith(b"\x1f\x8b"):
        return "a gzipped file (a T4 or Kernel Tuner file?), not Parquet"
    if head.lstrip()[:1] in (b"{", b"["):
        return "a JSON file"
    return f"a file that is not Parquet (it begins {head[:8]!r}, not {PARQUET_MAGIC!r})"


def file_id(path: Path) -> tuple[int, int] | None:
    """The device and inode of what ``path`` names (links followed): the same file by any name."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def export_t4(results: str | os.PathLike, out: str | os.PathLike, problem: str | None = None, source: str | None = None) -> str:
    """Write one problem's rows of a results folder or Parquet file as a T4
    file (validated where a published schema is installed); returns a line
    saying what was written.

    Raises:
        ValueError: ``results`` or ``out`` is not what the command reads or
            writes (``check_export_paths``), a file lacks a column of
            ``NEEDED``, the files hold no results rows, or see ``problem_rows``.
    """
    from tuner.data.results import param_columns, read, to_frame
    from tuner.families import REGISTRY

    inputs = check_export_paths(results, out)
    # A folder's tables as folder_results picks them (results.read would take every .parquet below it).
    frame = read(inputs[0], needs=NEEDED) if len(inputs) == 1 else to_frame(
        pd.concat([read(path, needs=NEEDED) for path in inputs], ignore_index=True), keep_unknown=True)  # fmt: skip
    if frame["status"].notna().sum() == 0:
        raise ValueError(f"{results}: must hold results rows (of a sweep, a study or measurements), got none")
    rows = problem_rows(frame, problem, source)
    family = REGISTRY.families.get(str(rows["family"].iloc[0]))
    params = [p.name for p in family.params] if family else param_columns(rows)
    try:
        document = to_t4(rows, [p for p in params if p in rows and rows[p].notna().any()])
    except ValueError as exc:  # a row no T4 reader could rank: the file it came from is what is wrong
        raise ValueError(f"{results}: {exc}") from None
    try:
        checked = f", valid against {len(validate(document))} published schema files"
    except ImportError:
        checked = ", not validated (no kernel_tuner or autotuning-methodology installed)"
    write_t4(document, out)
    ok = sum(r["invalidity"] == "correct" for r in document["results"])
    meta = document["metadata"]["tuner"]
    return f"{len(document['results'])} results ({ok} correct) of {meta['family']}-{meta['dtype']}-n{meta['n']} from {meta['sources']}{checked} -> {out}"
