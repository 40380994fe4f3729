"""A report drawn in two jobs: its figures beside the profile, its documents after it.

The pipeline's profile stage is a GPU job of half a minute or more that leaves
the CPUs idle, and every part of the report but the counters section needs only
the collected dataset. So ``python -m tuner.report --draft FILE`` draws that part
(``tuner.report.draw_report``) while the profile runs and keeps it in FILE, and
``--from-draft FILE`` adds the counters section and writes the documents
(``tuner.report.finish_report``). The file is a cache between two jobs of one
run, in the run's own results folder: a line of JSON saying what the draft was
drawn from and by, then the draft, pickled. It is used only where the same report
code drew it from the same inputs into the same folder, in the same format, and
its figures are still there; anything else (no file, a damaged one, an edit
since) draws the whole report again, said in one line. The JSON line is checked
before the draft is unpickled.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuner import resources
from tuner.data.results import write_via_temporary

if TYPE_CHECKING:
    from tuner.report import ReportDraft

VERSION = 1


def report_code_digest() -> str:
    """A digest of the report's code files (``resources.report_code_files``): their names and bytes."""
    digest = hashlib.sha256()
    for path in resources.report_code_files():
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def inputs_key(inputs: list[Path]) -> list[list[Any]]:
    """What a draft is drawn from, as each input file's path, size and modification time."""
    key = []
    for path in inputs:
        found = os.stat(path)
        key.append([str(Path(path).absolute()), found.st_size, found.st_mtime_ns])
    return key


def write_draft(draft: ReportDraft, path: Path, *, inputs: list[list[Any]], report_format: str) -> None:
    """Keep ``draft`` in ``path`` (atomically) with what it was drawn from (``inputs_key``
    of its inputs, taken before they were read) and by."""
    header = {"version": VERSION, "code": report_code_digest(), "inputs": inputs, "format": report_format,
              "folder": str(Path(draft.ctx.out_dir).absolute())}  # fmt: skip

    def write(fd: int, tmp: str) -> None:
        with os.fdopen(fd, "wb") as handle:
            handle.write(json.dumps(header).encode() + b"\n")
            pickle.dump(draft, handle, protocol=pickle.HIGHEST_PROTOCOL)

    write_via_temporary(path, write)


def read_draft(path: Path, *, inputs: list[Path], report_format: str, out_dir: Path) -> tuple[ReportDraft | None, str]:
    """The draft kept in ``path`` and "", or None and why it cannot be used for
    the report of ``inputs`` in ``out_dir`` in ``report_format``."""
    try:
        with open(path, "rb") as handle:
            try:
                header = json.loads(handle.readline())
            except ValueError:
                header = None
            if not isinstance(header, dict) or header.get("version") != VERSION:
                return None, f"{path} is not a report draft of this version"
            why = _unfit(path, header, inputs, report_format, out_dir)
            if why:
                return None, why
            draft = pickle.load(handle)
    except FileNotFoundError:
        return None, f"no draft at {path}"
    except Exception as error:  # a damaged file: the draft is only a cache, so the report is drawn again
        return None, f"{path} cannot be read ({type(error).__name__})"
    missing = next((p for p in _figure_files(draft) if not Path(p).is_file()), None)
    if missing is not None:
        return None, f"{path} was drawn with {missing}, which is gone"
    return draft, ""


def _unfit(path: Path, header: dict[str, Any], inputs: list[Path], report_format: str, out_dir: Path) -> str:
    """Why the draft of ``header`` is not the one asked for, or ""."""
    if header.get("code") != report_code_digest():
        return f"the report code changed since {path} was drawn"
    if header.get("format") != report_format:
        return f"{path} was drawn for --format {header.get('format')}, not {report_format}"
    folder = str(Path(out_dir).absolute())
    if header.get("folder") != folder:
        return f"{path} was drawn into {header.get('folder')}, not {folder}"
    try:
        key = inputs_key(inputs)
    except OSError:
        key = None
    if header.get("inputs") != key:
        return f"the report's inputs changed since {path} was drawn"
    return ""


def _figure_files(draft: ReportDraft) -> list[Path]:
    """Every figure file the documents link or embed: the figures, the families' and the energy section's."""
    results = [*draft.figures, *draft.family_figures.values()]
    files = [path for result in results for path in [*result.paths, *result.placeholder]]
    figure = draft.energy.get("figure") if draft.energy else None
    return files + ([figure["path"]] if figure else [])
