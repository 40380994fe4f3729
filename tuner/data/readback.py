"""Files the stages wrote and read back, read so that damage (a file cut
short by a full disk or a crash, emptied, edited by hand) stops a stage with
one line naming the file, what is wrong and the command that makes it again
(``DamagedFile``), never a traceback. Free of pandas: measuring processes
read their device.json and peaks.json through it."""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path

from tuner.errors import DamagedFile


def read_json(path: str | os.PathLike, numbers: tuple[str, ...] = ()) -> dict:
    """The JSON object a stage wrote at ``path``, whose keys ending in one of
    ``numbers`` hold numbers (or null).

    Raises:
        DamagedFile: missing, empty, cut short, not UTF-8, not an object, or
            a non-number under such a key; one line naming the file and the
            command that remakes it.
    """
    path = Path(path)
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        raise DamagedFile(damaged(path, "missing")) from None
    except (OSError, ValueError) as error:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise DamagedFile(damaged(path, f"not readable JSON ({one_line(error)})")) from None
    if not isinstance(data, dict):
        raise DamagedFile(damaged(path, f"a JSON {type(data).__name__}, not an object"))
    for key, value in data.items():
        if key.endswith(numbers) and numbers and value is not None:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise DamagedFile(damaged(path, f"{key} is {str(value)[:40]!r}, not a number"))
    return data


def one_line(error: Exception) -> str:
    text = " ".join(str(error).split())  # one line, whatever the library printed
    return f"{type(error).__name__}: {text[:160]}"


# The command that writes each file a stage reads back, by file name.
_REMAKE = {
    "device.json": "python -m tuner describe",
    "peaks.json": "python -m tuner peaks",
    "peaks.parquet": "python -m tuner peaks",
    "measurements.parquet": "snakemake --cores 1 --forcerun collect",
    "compile.parquet": "python -m tuner compile",
}


def damaged(path: Path, problem: str) -> str:
    """One line: the file, what is wrong, and how to make it again."""
    path = Path(path)
    command, note = _REMAKE.get(path.name), ""
    if command is None and path.suffix == ".parquet" and path.parent.name == "sweeps":
        command, note = f"python -m tuner sweep {path.stem}", " (it reads its rows back from its store, measuring only what is missing)"
    elif command is None and path.suffix == ".parquet" and path.parent.name == "studies":
        command, note = f"python -m tuner tune {path.stem}", " (it reads its rows back from the study's storage)"
    if command is None:
        return f"{path}: {problem}; remove it and run the stage that wrote it again (`snakemake --cores 1` reruns it)"
    return f"{path}: {problem}; remove it and make it again with `{command}`{note}"


# What a path is, before it is read or written: nothing there, a file, or what
# messages name otherwise (a folder, a pipe, a device).
_ABSENT = (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP)


def path_mode(path: str | os.PathLike, what: str) -> int | None:
    """``path``'s mode (links followed), None where nothing is there.

    Raises:
        ValueError: it cannot be looked at, "PATH: must be WHAT, got
            PermissionError: ..." (Path.exists raises PermissionError itself
            on Python 3.11, a traceback rather than a line).
    """
    try:
        return os.stat(path).st_mode
    except ValueError:  # a name no file can have (a NUL byte): nothing there, as Path.exists says
        return None
    except OSError as exc:
        if exc.errno in _ABSENT:
            return None
        raise ValueError(f"{path}: must be {what}, got {one_line(exc)}") from None


def mode_kind(mode: int) -> str:
    """What a mode that is not a regular file's is, as messages name it."""
    return "a folder" if stat.S_ISDIR(mode) else "a pipe" if stat.S_ISFIFO(mode) else "a device or socket"
