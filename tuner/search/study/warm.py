"""Warm start: seed a study with what earlier results of the same family
already know (another GPU, another size, an earlier run).

Measured spaces correlate strongly across GPUs (the H100's and H200's
reduction spaces rank configurations alike), so the best configurations of
an earlier table are the first ones worth measuring here. ``warm_start``
turns a results table into the configurations to enqueue (its best ones,
within the study's space and feasible for its problem) and the prior rows
an ``OrdinalSampler`` fits its model on. Trials of enqueued warm-start
configurations carry the user attribute ``warm_start`` (the table's path):
``study_start`` names them to ``run_study``'s ``warm_start``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import optuna
import pandas as pd

from tuner.data.readback import one_line
from tuner.data.results import config_key, plain_value, to_frame
from tuner.families.base import Family, Problem

TOP = 5  # configurations enqueued from the earlier table


def warm_start(
    table: pd.DataFrame, family: Family, problem: Problem, domains: Mapping[str, Sequence], top: int = TOP
) -> tuple[list[dict], list[tuple[dict, float]]]:
    """(configurations to enqueue, prior (configuration, GB/s) rows) from ``table``.

    Rows of ``family`` measured ok count. Those of ``problem``'s element type
    and size are preferred; where none of them lies within the study's space,
    those of its element type at any size, then any row (a results folder
    whose sweep of this space ran at another size still seeds the study). A
    configuration must lie within ``domains`` (a parameter the table lacks
    takes the domain's only value, or the family default) and be feasible for
    ``problem``; one measured several times keeps its mean. The best ``top``
    are enqueued, best first; every one is a prior row.
    """
    prior: list[tuple[dict, float]] = []
    for rows in _by_preference(_measured(table, family), problem):
        prior = _prior(rows, family, problem, domains)
        if prior:
            break
    return [dict(cfg) for cfg, _ in prior[:top]], prior


def _by_preference(rows: pd.DataFrame, problem: Problem) -> list[pd.DataFrame]:
    """``rows`` of ``problem``'s element type and size, of its element type,
    and all of them: each that holds a row and differs from the one before."""
    same_dtype = rows[(rows["dtype"] == problem.dtype).fillna(False).astype(bool)] if "dtype" in rows else rows
    same_size = same_dtype[(same_dtype["n"] == problem.n).fillna(False).astype(bool)] if "n" in same_dtype else same_dtype
    found: list[pd.DataFrame] = []
    for subset in (same_size, same_dtype, rows):
        if not subset.empty and (not found or len(subset) != len(found[-1])):
            found.append(subset)
    return found


def _prior(rows: pd.DataFrame, family: Family, problem: Problem, domains: Mapping[str, Sequence]) -> list[tuple[dict, float]]:
    """(configuration, mean GB/s) of ``rows`` within ``domains`` and feasible for ``problem``, best first."""
    sums: dict[str, list] = {}
    for record in rows.to_dict("records"):
        cfg = _within(record, family, domains)
        if cfg is None or family.violations(cfg, problem):
            continue
        entry = sums.setdefault(config_key(cfg), [cfg, 0.0, 0])
        entry[1] += float(record["bandwidth_gbs"])
        entry[2] += 1
    return sorted(((cfg, total / count) for cfg, total, count in sums.values()), key=lambda item: -item[1])


# Bounds on what a warm start reads, checked before reading it: every
# `snakemake` start reads the table (the settings check), so it must stay quick.
MAX_TABLE_BYTES = 64 << 20  # Parquet bytes, over all the files read
MAX_TABLE_ROWS = 1_000_000
MAX_TABLE_FILES = 256
MAX_FOLDER_ENTRIES = 10_000  # entries of a folder looked through for GPU folders
FOLDER_LAYOUT = "measurements.parquet, sweeps/*.parquet, studies/*.parquet, */measurements.parquet or *.parquet"


class WarmStartError(ValueError):
    """A warm start no study can use: one line, ``warm_start: <rule>, got <value>``."""


def warm_start_files(path: str | os.PathLike) -> list[Path]:
    """The Parquet files ``path`` names: the file itself, or those of a
    results folder, looked for in this order and never deeper (a GPU folder's
    ``measurements.parquet``; else its ``sweeps/*.parquet`` and
    ``studies/*.parquet``; else each subfolder's ``measurements.parquet``; else
    the folder's own ``*.parquet``), so ``warm_start: /`` walks no disk.

    Raises:
        WarmStartError: missing, not Parquet, or a folder holding none of these.
    """
    path = Path(path)
    shown = str(path)
    if not path.exists():
        raise WarmStartError(f"warm_start: must name a results folder or Parquet file that exists, got {shown!r}")
    if path.is_file():
        if path.suffix != ".parquet":
            raise WarmStartError(f"warm_start: must name a .parquet file or a results folder, got {shown!r}")
        return [path]
    try:
        if (path / "measurements.parquet").is_file():
            return [path / "measurements.parquet"]
        files = sorted(path.glob("sweeps/*.parquet")) + sorted(path.glob("studies/*.parquet"))
        if not files:
            files = sorted(p / "measurements.parquet" for p in _subfolders(path) if (p / "measurements.parquet").is_file())
        if not files:
            files = sorted(p for p in path.glob("*.parquet") if p.is_file())
    except OSError as error:
        raise WarmStartError(f"warm_start: must name a folder this user can read, got {shown!r} ({one_line(error)})") from None
    if not files:
        raise WarmStartError(f"warm_start: must name a Parquet file or a results folder (holding {FOLDER_LAYOUT}; "
                             f"no deeper folder is searched), got {shown!r}, which holds none")  # fmt: skip
    if len(files) > MAX_TABLE_FILES:
        raise WarmStartError(f"warm_start: must name at most {MAX_TABLE_FILES} Parquet files, got {shown!r}, which holds {len(files)}")
    return files


def _subfolders(path: Path) -> list[Path]:
    folders = []
    with os.scandir(path) as entries:
        for count, entry in enumerate(entries):
            if count >= MAX_FOLDER_ENTRIES:
                raise WarmStartError(f"warm_start: must name a results folder of at most {MAX_FOLDER_ENTRIES} entries "
                                     f"(name the GPU folder itself), got {str(path)!r}, which holds more")  # fmt: skip
            if entry.is_dir(follow_symlinks=False):
                folders.append(Path(entry.path))
    return folders


def read_warm_start(path: str | os.PathLike, family: Family) -> pd.DataFrame:
    """The results at ``path``, in the results schema, once checked: within
    the size bounds (from the files' sizes and Parquet footers, before any
    row is read), readable Parquet, and a results table holding ``family``'s
    parameters and measured rows.

    Raises:
        WarmStartError: one line naming the file or folder and what is wrong.
    """
    import pyarrow.parquet as pq

    files = warm_start_files(path)
    total = sum(f.stat().st_size for f in files)
    if total > MAX_TABLE_BYTES:
        raise WarmStartError(f"warm_start: must be at most {MAX_TABLE_BYTES >> 20} MiB of Parquet (name one GPU's "
                             f"folder or table), got {str(path)!r} with {total} bytes in {len(files)} file(s)")  # fmt: skip
    rows = 0
    for f in files:
        try:
            rows += pq.ParquetFile(f).metadata.num_rows
        except Exception as error:  # noqa: BLE001 - pyarrow's errors, OSError and kin: the file is what is wrong
            raise WarmStartError(f"warm_start: must name readable Parquet results, got {str(f)!r}, which is not "
                                 f"a readable Parquet file ({one_line(error)})") from None  # fmt: skip
    if rows > MAX_TABLE_ROWS:
        raise WarmStartError(f"warm_start: must hold at most {MAX_TABLE_ROWS} rows (name one GPU's folder or table), "
                             f"got {str(path)!r} with {rows}")  # fmt: skip
    frames, names = [], set()
    for f in files:
        try:
            raw = pd.read_parquet(f)
        except Exception as error:  # noqa: BLE001 - a footer that reads over data that does not
            raise WarmStartError(f"warm_start: must name readable Parquet results, got {str(f)!r}, which is not "
                                 f"a readable Parquet file ({one_line(error)})") from None  # fmt: skip
        names.update(raw.columns)
        try:
            frames.append(to_frame(raw, keep_unknown=True))
        except (ValueError, TypeError, OverflowError) as error:  # OverflowError: a whole number past its column's type
            raise WarmStartError(f"warm_start: must name results tables, got {str(f)!r}, whose columns are not "
                                 f"results columns ({one_line(error)})") from None  # fmt: skip
    where = f"{str(path)!r}"
    if "bandwidth_gbs" not in names:
        raise WarmStartError(f"warm_start: must name results tables (with a bandwidth_gbs column), got {where}, "
                             f"whose columns are {sorted(names)[:12]}")  # fmt: skip
    if not names & set(family.param_names):
        raise WarmStartError(f"warm_start: must hold {family.name} results (its parameter columns "
                             f"{list(family.param_names)}), got {where}, which has none of them")  # fmt: skip
    table = pd.concat(frames, ignore_index=True)
    # A table without these columns (made by hand, or by another tool) is
    # taken as measured rows of the family whose parameters it holds.
    for column, value in (("family", family.name), ("status", "ok")):
        if column not in names:
            table[column] = value
    if "family" in names:
        held = sorted(str(f) for f in table["family"].dropna().unique())
        if family.name not in held:
            raise WarmStartError(f"warm_start: must hold rows of the study's family {family.name}, got {where}, "
                                 f"which holds {held or 'no family'}")  # fmt: skip
    return table


def load_warm_start(path: str | os.PathLike, family: Family, problem: Problem, domains: Mapping[str, Sequence], top: int = TOP):
    """``warm_start`` of the results at ``path`` (a Parquet file or a results
    folder, see ``warm_start_files``), checked by ``read_warm_start``.

    Raises:
        WarmStartError: ``path`` cannot seed the study, or holds no measured
            row within its space; one line.
    """
    table = read_warm_start(path, family)
    enqueue, prior = warm_start(table, family, problem, domains, top)
    if not enqueue:
        raise WarmStartError(f"warm_start: must hold ok {family.name} rows within the study's space, got "
                             f"{str(path)!r}, {_why_none(table, family, problem, domains)}")  # fmt: skip
    return enqueue, prior


def marks(enqueue: Sequence[Mapping], source: str | os.PathLike) -> dict[str, str]:
    """``config_key`` -> ``source`` of a warm start's enqueued configurations
    (``run_study``'s ``warm_start``: their trials carry the user attribute
    ``warm_start``)."""
    return {config_key(dict(cfg)): str(source) for cfg in enqueue}


def warm_start_problem(path: str | os.PathLike, family: Family, problem: Problem, domains: Mapping[str, Sequence]) -> str | None:
    """Why ``path`` cannot seed a study of ``problem`` over ``domains`` (one
    line, ``warm_start: ...``), or None: the settings check at load and the
    tune stage apply this one rule."""
    try:
        load_warm_start(path, family, problem, domains)
    except WarmStartError as error:
        return str(error)
    return None


def _measured(table: pd.DataFrame, family: Family) -> pd.DataFrame:
    """The rows of ``family`` measured ok, with a bandwidth."""
    rows = table
    for column, value in (("family", family.name), ("status", "ok")):
        if column in rows:
            rows = rows[(rows[column] == value).fillna(False).astype(bool)]
    return rows[rows["bandwidth_gbs"].notna()] if "bandwidth_gbs" in rows else rows.iloc[0:0]


def _why_none(table: pd.DataFrame, family: Family, problem: Problem, domains: Mapping[str, Sequence]) -> str:
    rows = _measured(table, family)
    if rows.empty:
        return f"which holds no ok {family.name} row with a bandwidth"
    record = rows.iloc[0].to_dict()
    for param in family.params:
        values = [plain_value(v) for v in domains.get(param.name, param.values)]
        value = plain_value(record.get(param.name))
        if value is not None and value not in values:
            return f"none of whose {len(rows)} such rows lies within it (the first has {param.name} {value!r}, not among {values})"
    cfg = _within(record, family, domains)
    reasons = family.violations(cfg, problem) if cfg else []
    first = f" (the first: {reasons[0]})" if reasons else ""
    return f"none of whose {len(rows)} such rows is feasible for {problem.key} within the study's values{first}"


def _within(record: Mapping, family: Family, domains: Mapping[str, Sequence]) -> dict | None:
    cfg = {}
    for param in family.params:
        values = [plain_value(v) for v in domains.get(param.name, param.values)]
        value = plain_value(record.get(param.name))
        if value is None:
            value = values[0] if len(values) == 1 else param.default
        if value not in values:
            return None
        cfg[param.name] = value
    return cfg


@dataclass(frozen=True)
class StudyStart:
    """What a study starts from (``study_start``): the configurations to
    measure first, a warm start's prior rows, and the marks of its
    configurations (``marks``)."""

    enqueue: list[dict]
    prior: list[tuple[dict, float]]
    marks: dict[str, str]


def study_start(settings, family: Family) -> StudyStart:
    """A study's start from its ``StudySettings``: with a ``warm_start``, the
    table's best configurations after the study's own enqueued ones, the
    table's prior rows, and the marks of the table's configurations."""
    enqueue = [dict(e) for e in settings.enqueue]
    if not settings.warm_start:
        return StudyStart(enqueue, [], {})
    warm, prior = load_warm_start(settings.warm_start, family, settings.problem, settings.domains())
    return StudyStart(enqueue + warm, prior, marks(warm, settings.warm_start))


def study_sampler(settings, start: StudyStart, seed: int, storage_name: str) -> optuna.samplers.BaseSampler:
    """The study's one sampler, of strategy ``settings.sampler``: with a warm
    start, made with its prior rows and seeded with ``seed``; without one,
    seeded past the claims study ``storage_name`` holds so far
    (``resumed_seed``: a resumed study does not propose its first trials again)."""
    from tuner.search.samplers.registry import make_sampler
    from tuner.search.study.storage import resumed_seed

    if settings.warm_start:
        return make_sampler(settings.sampler, seed, prior=start.prior)
    return make_sampler(settings.sampler, resumed_seed(settings.storage, storage_name, seed))
