"""The search benchmark's files: the rows of earlier runs it merges
(``--merge NAME.json``, checked field by field before any run, so that a damaged
file stops it before hours of runs, not after) and the two files a run writes
(``NAME.txt`` and ``NAME.json`` under ``--out``, both or neither)."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import tempfile
from pathlib import Path

from search_rivals import ORDERS

from tuner.data.readback import one_line
from tuner.data.t4 import finite_number, not_a_file
from tuner.search.tables.expressions import shown

# What a merged row must have: what every row of this benchmark has had, and the table and summary read.
ROW_KEYS = ("table", "order", "strategy", "budget", "seeds", "space", "within_1pct", "hits_1pct", "median_first_1pct",
            "optimum_gbs", "near_1pct")  # fmt: skip


def _whole(least: int):
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= least


def _share(v) -> bool:
    return finite_number(v) and 0 <= v <= 1


def _text(v) -> bool:
    return isinstance(v, str) and v != ""


BUDGET_LABEL = re.compile(r"\d+(\.\d+)?%|\d+ evaluations")  # Budgets.labels: "2.5%", "50 evaluations"
# Each field of a row as benchmark() writes it (or _fisher adds it): its test and the rule it stands for.
ROW_FIELDS = {
    "table": (_text, "a non-empty string"),
    "order": (lambda v: v in ORDERS, f"one of {list(ORDERS)}"),
    "strategy": (_text, "a non-empty string"),
    "budget": (_whole(1), "a whole number >= 1"),
    "seeds": (_whole(1), "a whole number >= 1"),
    "space": (_whole(1), "a whole number >= 1"),
    "within_1pct": (_share, "a number in [0, 1]"),
    "within_2pct": (_share, "a number in [0, 1]"),
    "hits_1pct": (_whole(0), "a whole number >= 0"),
    "median_first_1pct": (lambda v: v == math.inf or (finite_number(v) and v >= 1), "a number >= 1, or Infinity"),
    "optimum_gbs": (lambda v: finite_number(v) and v > 0, "a positive finite number"),
    "near_1pct": (_whole(0), "a whole number >= 0"),
    "objective": (_text, "a non-empty string"),
    "minimise": (lambda v: isinstance(v, bool), "true or false"),
    "median_ratio": (finite_number, "a finite number"),
    "median_evaluations": (lambda v: finite_number(v) and v >= 0, "a finite number >= 0"),
    "score": (finite_number, "a finite number"),
    "score_m": (lambda v: v is None or finite_number(v), "a finite number or null"),
    "budget_of": (lambda v: isinstance(v, list) and all(isinstance(x, str) and BUDGET_LABEL.fullmatch(x) for x in v),
                  "a list of budget labels ('2.5%', '50 evaluations')"),
    "within_1pct_in_5": (_share, "a number in [0, 1]"),
    "behind_p": (_share, "a number in [0, 1]"),
    "best_kt": (_text, "a non-empty string"),
}  # fmt: skip


def merged_rows(path: str) -> list[dict]:
    """The rows of an earlier run's NAME.json, to merge: each field of each row
    of the type and range this benchmark writes (``ROW_FIELDS``; other fields
    plain values), so that a damaged file stops before the runs, not after.

    Raises:
        ValueError: the file is missing, no regular file (a pipe would block
            the read) or not such a file (one line naming it, the row, the
            field, the rule and the value).
    """
    kind = not_a_file(path)
    if kind:
        raise ValueError(f"--merge {path}: must be a search benchmark's NAME.json in a regular file, got {kind}")
    try:
        document = json.loads(Path(path).read_bytes())
    except (OSError, ValueError, RecursionError, MemoryError) as exc:
        # ValueError: not JSON, not UTF-8, or a number of more digits than Python reads.
        raise ValueError(f"--merge {path}: must be a search benchmark's NAME.json, got {one_line(exc)}") from None
    if not isinstance(document, dict) or "rows" not in document:
        got = f"an object of {shown(sorted(document))}" if isinstance(document, dict) else type(document).__name__
        raise ValueError(f"--merge {path}: must be a search benchmark's NAME.json (an object with rows), got {got}")
    rows = document["rows"]
    if not isinstance(rows, list):
        raise ValueError(f"--merge {path}: rows must be a list, got {type(rows).__name__}")
    for index, row in enumerate(rows):
        if not isinstance(row, dict):
            raise ValueError(f"--merge {path}: rows[{index}] must be an object, got {type(row).__name__}")
        missing = [k for k in ROW_KEYS if k not in row]
        if missing:
            raise ValueError(f"--merge {path}: every row must have {list(ROW_KEYS)}, rows[{index}] lacks {missing}")
        for field, value in row.items():
            test, rule = ROW_FIELDS.get(field, (_plain, "a plain value (a string, a number, a boolean or null)"))
            if not test(value):
                raise ValueError(f"--merge {path}: rows[{index}] {field} must be {rule}, got {shown(value)}")
        if row["hits_1pct"] > row["seeds"]:
            raise ValueError(f"--merge {path}: rows[{index}] hits_1pct must be at most its seeds ({row['seeds']}), "
                             f"got {row['hits_1pct']}")  # fmt: skip
        if row.get("score_m") is not None and "budget_of" not in row:
            raise ValueError(f"--merge {path}: rows[{index}] has a score_m, so it must have budget_of, "
                             f"{ROW_FIELDS['budget_of'][1]}, got none")  # fmt: skip
    return rows


def ranking_of(row: dict) -> tuple:
    """How a row's table was ranked: its optimum (as a rate) and, for a community table, its
    objective and direction (rows written before they named them: a time, minimised)."""
    hub = "score_m" in row
    return (row["optimum_gbs"], row.get("objective", "time" if hub else None), row.get("minimise", True if hub else None))


def ranking_clash(sources: list[tuple[str, list[dict]]]) -> str | None:
    """One line where rows of one table (and value order) from different ``sources`` (name,
    rows) were ranked differently (another optimum, objective or direction: the file of the
    table changed, or an older reader ranked it the other way), else None: their rows would
    share a header and a comparison."""
    seen: dict[tuple, tuple[str, tuple]] = {}
    for source, rows in sources:
        for row in rows:
            table, ranking = (row["table"], row["order"]), ranking_of(row)
            first = seen.setdefault(table, (source, ranking))
            if not _same_ranking(first[1], ranking):
                return (f"--merge {source}: rows of table {row['table']} ({row['order']} values) must be ranked as those of "
                        f"{first[0]}, got optimum {_ranking_text(ranking)} against {_ranking_text(first[1])}")  # fmt: skip
    return None


def _same_ranking(a: tuple, b: tuple) -> bool:
    return math.isclose(a[0], b[0], rel_tol=1e-9) and a[1:] == b[1:]


def _ranking_text(ranking: tuple) -> str:
    optimum, objective, minimise = ranking
    if objective is None:
        return f"{optimum:.6g} GB/s"
    return f"{optimum:.6g} by {objective} ({'lower' if minimise else 'higher'} is better)"


def _plain(value) -> bool:
    return value is None or isinstance(value, (str, bool, int, float))


# What --name may be: a plain file name (NAME.txt and NAME.json, and their temporary
# files .NAME.json.XXXXXXXX.tmp, within the 255 bytes of a file name), not a path.
NAME = re.compile(r"[A-Za-z0-9_+][A-Za-z0-9_+.=-]{0,199}")


def name_unfit(name: str) -> str | None:
    """Why ``name`` cannot name the output files (``NAME``), or None."""
    if NAME.fullmatch(name):
        return None
    value = shown(name) + (f" ({len(name)} characters)" if len(name) > 60 else "")
    return (f"must be a plain file name: 1 to 200 of the characters A-Z a-z 0-9 _ + = . -, not starting with '.', '-' or '=' "
            f"(no folder: --out names it), got {value}")  # fmt: skip


def prepare_out(out: Path, name: str) -> list[Path]:
    """Makes folder ``out`` (and its missing parents) and checks that a file can
    be made in it, and that NAME.txt and NAME.json there are files if anything;
    returns the folders it made, deepest first (a run that stops removes them
    while empty).

    Raises:
        ValueError: ``out`` is not a folder, cannot be made, or takes no file
            (one line naming it and why).
    """
    try:
        if out.exists() and not out.is_dir():
            raise ValueError(f"--out {out}: must be a folder (or one that can be made), got a {'file' if out.is_file() else 'non-folder'}")
        for target in (out / f"{name}.txt", out / f"{name}.json"):
            if target.exists() and not target.is_file():
                raise ValueError(f"--out {out}: {target.name} there must be a file the run can replace, or none, got a folder"
                                 if target.is_dir() else f"--out {out}: {target.name} there must be a file, or none, got another kind")
        created = [p for p in (out, *out.parents) if not p.exists()]
    except OSError as exc:
        raise ValueError(f"--out {out}: must be a folder that can be made, got {type(exc).__name__}: {exc}") from None
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        remove_empty(created)
        raise ValueError(f"--out {out}: must be a folder that can be made, got {type(exc).__name__}: {exc}") from None
    try:
        fd, probe = tempfile.mkstemp(prefix=".search-benchmark-", suffix=".tmp", dir=out)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        remove_empty(created)
        raise ValueError(f"--out {out}: must be a folder a file can be written in, got {type(exc).__name__}: {exc}") from None
    return created


def remove_empty(folders: list[Path]) -> None:
    """Removes ``folders`` (deepest first) while they are empty."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            return


def write_outputs(out: Path, name: str, text: str, document: dict) -> None:
    """``NAME.txt`` (``text``) and ``NAME.json`` (``document``) in ``out``, both or
    neither: each is written whole to a temporary file beside it, and only then
    are both renamed into place; a failure on the way removes the temporary
    files and puts back what was there before (a copy kept until both are in)."""
    contents = {out / f"{name}.txt": text, out / f"{name}.json": json.dumps(document, indent=2, sort_keys=True, default=str)}
    temporary: list[str] = []
    kept: list[str] = []  # copies of the files replaced
    done: list[tuple[Path, str | None]] = []  # files in place, and the copy of what each replaced (None: nothing)
    try:
        for path, content in contents.items():
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=out)
            temporary.append(tmp)
            # A label from a file name undecodable as UTF-8 is written escaped, not refused after the runs.
            with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as handle:
                handle.write(content)
        for path, tmp in zip(contents, temporary):
            old = None
            if path.is_file():
                fd, old = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".old", dir=out)
                os.close(fd)
                kept.append(old)
                shutil.copyfile(path, old)
            os.replace(tmp, path)
            done.append((path, old))
    except BaseException:
        for path, old in reversed(done):
            if old is None:
                path.unlink(missing_ok=True)
            else:
                os.replace(old, path)
        raise
    finally:
        for leftover in temporary + kept:
            Path(leftover).unlink(missing_ok=True)
