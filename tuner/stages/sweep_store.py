"""Exhaustive sweeps, resumable, losing nothing.

Every measured row is appended to the sweep's store
(``<gpu>/store/sweeps/<name>/rows.jsonl``, no Snakemake rule owns it) and
flushed to disk before the next configuration starts, so a kill at any instant
loses at most the configuration being measured, and a rerun measures only what
the store lacks. A row cut short by a kill is moved aside to ``*.corrupt`` with
one line saying so, never a crash. A row is identified by its family, dtype,
n and configuration key, so changing a sweep's problem measures anew.

The sweep's output file is the store's rows for the configured grid, written
(atomically) once the sweep is complete.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable

from tuner.data.paths import GpuFolder
from tuner.errors import FatalDeviceError
from tuner.families.base import Family, Problem, config_key
from tuner.progress import Progress

if TYPE_CHECKING:
    import pandas as pd

STORE_FILE = "rows.jsonl"


def store_dir(gpu_dir: Path, name: str) -> Path:
    return GpuFolder(gpu_dir).sweep_store(name)


class RowStore:
    """An append-only file of results rows, one JSON object a line, each
    flushed and fsynced before ``append`` returns."""

    def __init__(self, folder: Path, log: Callable[[str], None] = print) -> None:
        self.folder = Path(folder)
        self.path = self.folder / STORE_FILE
        self.log = log

    def rows(self) -> pd.DataFrame:
        from tuner.data import results  # here, not at the top: the measuring process never needs pandas

        return results.to_frame(self._jsonl_rows(tabled=True))

    def identities(self) -> set[tuple]:
        """(family, dtype, n, config_key) of every stored row."""
        return {identity(r) for r in self._jsonl_rows()}

    def append(self, row: dict) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        line = json.dumps(row, sort_keys=True, default=str) + "\n"
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())

    def _jsonl_rows(self, tabled: bool = False) -> list[dict]:
        """The store's rows; lines that are not rows (and, with ``tabled``,
        rows the results schema refuses: that check needs pandas, which the
        measuring process does without) are moved aside."""
        if not self.path.exists():
            return []
        data = self.path.read_bytes()
        *lines, tail = data.split(b"\n")
        good: list[tuple[int, dict, bytes]] = []  # (line number, row, bytes)
        bad: list[tuple[int, bytes, str]] = []  # (line number, bytes, why)
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as error:  # UnicodeDecodeError included
                bad.append((number, line, f"not JSON ({error})"))
                continue
            problem = row_problem(record)
            if problem:
                bad.append((number, line, problem))
            else:
                good.append((number, record, line))
        if tail:
            # Only the last line can be cut short by a kill or a full disk.
            bad.append((len(lines) + 1, tail, "no end of line (cut short)"))
        if tabled:
            good = _rows_the_schema_takes(good, bad)
        if bad:
            self._set_aside([line for _, _, line in good], bad, only_tail=len(bad) == 1 and bad[0][1] is tail)
        return [row for _, row, _ in good]

    def _set_aside(self, kept: list[bytes], bad: list[tuple[int, bytes, str]], only_tail: bool) -> None:
        """Move the ``bad`` lines to a ``*.corrupt`` file beside the store
        (written and fsynced first: nothing is lost), then leave the store
        with the ``kept`` lines only."""
        corrupt = self.path.with_name(f"{STORE_FILE}.{time.strftime('%Y%m%dT%H%M%S')}.corrupt")
        with open(corrupt, "ab") as handle:
            handle.write(b"".join(line + b"\n" for _, line, _ in sorted(bad)))
            handle.flush()
            os.fsync(handle.fileno())
        if only_tail:  # the common case, a kill mid-write: cut the tail in place
            with open(self.path, "r+b") as handle:
                handle.truncate(self.path.stat().st_size - len(bad[0][1]))
                os.fsync(handle.fileno())
        else:
            _replace_durably(self.path, b"".join(line + b"\n" for line in kept))
        for number, _, why in sorted(bad):
            self.log(f"warning: {self.path}:{number}: {why}; moved to {corrupt.name}, that configuration will be measured again")


# What a stored row must hold to be identified (``identity``) and tabled.
ROW_KEYS = {"family": str, "dtype": str, "n": int, "config_key": str, "status": str}


def row_problem(record) -> str | None:
    """Why a decoded line of the store is not a row, or None."""
    if not isinstance(record, dict):
        return f"a JSON {type(record).__name__}, not a row (an object)"
    missing = [key for key in ROW_KEYS if key not in record]
    if missing:
        return f"a row without {missing}"
    for key, kind in ROW_KEYS.items():
        if not isinstance(record[key], kind) or isinstance(record[key], bool):
            return f"a row whose {key} is {record[key]!r}, not {kind.__name__}"
    return None


def _rows_the_schema_takes(good: list[tuple[int, dict, bytes]], bad: list) -> list[tuple[int, dict, bytes]]:
    """The entries whose rows the results schema reads: all of them, as a
    rule, checked as one frame; one by one only where that frame fails (the
    others go to ``bad``)."""
    from tuner.data import results

    try:
        results.to_frame([row for _, row, _ in good])
        return good
    except (ValueError, TypeError):
        pass
    taken = []
    for number, row, line in good:
        try:
            results.to_frame([row])
        except (ValueError, TypeError) as error:
            bad.append((number, line, f"a row the results schema refuses ({str(error)[:120]})"))
            continue
        taken.append((number, row, line))
    return taken


def _replace_durably(path: Path, data: bytes) -> None:
    """``path`` := ``data`` through a fsynced temporary file and a rename, so
    a crash leaves the old file or the new, never a mix."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def identity(row) -> tuple:
    return (row["family"], row["dtype"], int(row["n"]), row["config_key"])


def run_sweep(
    name: str, family: Family, problems: Iterable[Problem], params: dict, *, store: Path, log=print, **measuring
) -> pd.DataFrame:
    """``measure_sweep`` (``measuring``: its ``open_problem`` and ``prepare``),
    then the store's rows for this grid."""
    problems = list(problems)
    measure_sweep(name, family, problems, params, store=store, log=log, **measuring)
    return sweep_rows(store, family, problems, params, RowStore(store, log))


def measure_sweep(
    name: str,
    family: Family,
    problems: Iterable[Problem],
    params: dict,
    *,
    store: Path,
    open_problem: Callable[[Family, Problem], object],
    log: Callable[[str], None] = print,
    prepare: Callable[[Family, Problem, list[dict]], None] | None = None,
    energy_best: bool = False,
) -> None:
    """Measure every feasible configuration not yet in ``store``.

    ``open_problem`` uploads a problem's inputs and returns an object with
    ``measure(cfg, source) -> row``; ``prepare`` (e.g. compile ahead in
    parallel) sees each problem's configurations still to measure. A
    ``FatalDeviceError`` from ``measure`` stores the faulting configuration's
    row, then propagates: the measuring process must end, and a fresh one
    goes on with what the store lacks (``tuner.measure.remote``).

    ``energy_best``: then each problem's fastest verified configuration gets
    its energy (the session's ``measure_energy(cfg) -> columns``, about 0.7 s),
    stored as its row again with the energy columns (the store's latest row
    of a configuration is its row); a rerun measures only what is missing.
    """
    rows = RowStore(store, log)
    done = rows.identities()
    source = f"sweep:{name}"
    problems = list(problems)
    for problem in problems:
        configs = family.space(problem, params)
        keys = [(family.name, problem.dtype, problem.n, config_key(c)) for c in configs]
        todo = [c for c, k in zip(configs, keys) if k not in done]
        log(f"{source} {problem.key}: {len(configs)} feasible configurations, {len(configs) - len(todo)} already measured")
        if not todo:
            if energy_best and (best := fastest_without_energy(rows, problem, {k[3] for k in keys})) is not None:
                session = open_problem(family, problem)
                _store_energy(session, rows, family, problem, best, source, log)
                del session
            continue
        if prepare is not None:
            prepare(family, problem, todo)
        session = open_problem(family, problem)
        with Progress(f"{source} {problem.key}", len(configs), initial=len(configs) - len(todo)) as progress:
            for cfg in todo:
                try:
                    row = session.measure(cfg, source)
                except FatalDeviceError as error:
                    if error.row is not None:
                        rows.append(error.row)
                    raise
                rows.append(row)
                progress.update()
                if row["status"] != "ok":
                    progress.message(f"  {row['status']}: {row['config_key']}: {str(row.get('error'))[:200]}", log)
        if energy_best and (best := fastest_without_energy(rows, problem, {k[3] for k in keys})) is not None:
            _store_energy(session, rows, family, problem, best, source, log)
        del session  # frees the problem's device buffers before the next problem


def fastest_without_energy(rows: RowStore, problem: Problem, keys: set[str]) -> dict | None:
    """The fastest verified row of ``problem`` among the configurations
    ``keys`` (by GFLOP/s where its family counts work, else GB/s, as
    ``best.json`` ranks them), if it has no energy yet; else None."""
    latest = {}
    for row in rows._jsonl_rows():  # plain rows: the measuring process never imports pandas
        same_problem = (row.get("family"), row.get("dtype"), row.get("n")) == (problem.family, problem.dtype, problem.n)
        if same_problem and row.get("config_key") in keys:
            latest[row["config_key"]] = row
    ok = [r for r in latest.values() if r.get("status") == "ok" and r.get("bandwidth_gbs") is not None]
    if not ok:
        return None
    by = "gflops" if any(r.get("gflops") is not None for r in ok) else "bandwidth_gbs"
    best = max(ok, key=lambda r: r.get(by) or 0.0)
    return None if best.get("energy_j") is not None else best


def _store_energy(session, rows: RowStore, family: Family, problem: Problem, best: dict, source: str, log) -> None:
    cfg = {name: best[name] for name in family.param_names}
    try:
        columns = session.measure_energy(cfg)
    except FatalDeviceError:
        raise  # the context is lost: a fresh measuring process carries on (and tries again)
    except Exception as error:  # a configuration that verified and was timed: not worth stopping the sweep for
        log(f"warning: {source} {problem.key}: the energy of the fastest configuration failed: {type(error).__name__}: {error}")
        return
    if not columns:
        return  # no energy counter on this GPU
    rows.append({**best, **columns})
    log(
        f"{source} {problem.key}: the fastest {best['config_key']} takes {columns['energy_j']:.4g} J per launch "
        f"(± {columns['energy_j_err']:.2g}, {columns['power_w_energy']:.0f} W; measured in {columns['energy_wall_s']:.2f} s)"
    )


def sweep_rows(
    store: Path, family: Family, problems: Iterable[Problem], params: dict, rows: RowStore | None = None
) -> pd.DataFrame:
    """The store's rows for the grid (``params`` over ``problems``), one per
    configuration: what the sweep's output file holds."""
    wanted = {(family.name, p.dtype, p.n, config_key(c)) for p in problems for c in family.space(p, params)}
    frame = (rows or RowStore(store)).rows()
    if frame.empty:
        return frame
    mask = [identity(r) in wanted for r in frame[["family", "dtype", "n", "config_key"]].to_dict("records")]
    # A configuration measured twice (an older store, say) keeps its latest row.
    return frame[mask].drop_duplicates(["family", "dtype", "n", "config_key"], keep="last").reset_index(drop=True)
