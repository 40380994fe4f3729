"""A report drawn in two jobs: its figures beside the profile, its documents after it.

The pipeline's profile stage is a GPU job of half a minute or more that leaves
the CPUs idle, and every part of the report but the counters section needs only
the collected dataset. So ``python -m tuner.report --draft FILE`` draws that part
(``tuner.report.draw_report``) while the profile runs and keeps it in FILE, and
``--from-draft FILE`` adds the counters section and writes the documents
(``tuner.report.finish_report``). The file is a cache between two processes of
one run: it is used only where the same report code drew it from the same
inputs into the same folder, in the same format; anything else (no file, a
damaged one, an edit since) draws the whole report again, said in one line.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from pathlib import Path
from typing import TYPE_CHECKING

from tuner import resources
from tuner.data.results import write_via_temporary

if TYPE_CHECKING:
    from tuner.report import ReportDraft

VERSION = 1


def report_code_digest() -> str:
    """A digest of the files a report is drawn by: its code, its templates and the figure list."""
    package = resources.package_dir() / "report"
    files = sorted(p for p in package.rglob("*") if p.suffix in (".py", ".j2", ".css"))
    digest = hashlib.sha256()
    for path in [*files, resources.figure_list_file()]:
        digest.update(path.relative_to(path.parents[1]).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def inputs_key(inputs: list[Path]) -> list[tuple[str, int, int]]:
    """What the draft was drawn from, as each input file's path, size and modification time."""
    key = []
    for path in inputs:
        found = os.stat(path)
        key.append((str(Path(path).absolute()), found.st_size, found.st_mtime_ns))
    return key


def write_draft(draft: ReportDraft, path: Path, *, inputs: list[Path], report_format: str) -> None:
    """Keep ``draft`` in ``path`` (atomically) with what it was drawn from and by."""
    kept = {"version": VERSION, "code": report_code_digest(), "inputs": inputs_key(inputs), "format": report_format,
            "folder": str(Path(draft.ctx.out_dir).absolute()), "draft": draft}  # fmt: skip

    def write(fd: int, tmp: str) -> None:
        with os.fdopen(fd, "wb") as handle:
            pickle.dump(kept, handle, protocol=pickle.HIGHEST_PROTOCOL)

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    write_via_temporary(path, write)


def read_draft(path: Path, *, inputs: list[Path], report_format: str, out_dir: Path) -> tuple[ReportDraft | None, str]:
    """The draft kept in ``path`` and "", or None and why it cannot be used for
    the report of ``inputs`` in ``out_dir`` in ``report_format``."""
    try:
        with open(path, "rb") as handle:
            kept = pickle.load(handle)
        if not isinstance(kept, dict) or kept.get("version") != VERSION:
            return None, f"{path} is not a draft of this version"
    except FileNotFoundError:
        return None, f"no draft at {path}"
    except Exception as error:  # a damaged or foreign file: the draft is only a cache, so it is drawn again
        return None, f"{path} cannot be read ({type(error).__name__})"
    if kept["code"] != report_code_digest():
        return None, f"the report code changed since {path} was drawn"
    if kept["format"] != report_format:
        return None, f"{path} was drawn for --format {kept['format']}, not {report_format}"
    if kept["folder"] != str(Path(out_dir).absolute()):
        return None, f"{path} was drawn into {kept['folder']}, not {Path(out_dir).absolute()}"
    try:
        key = inputs_key(inputs)
    except OSError:
        key = None
    if kept["inputs"] != key:
        return None, f"the report's inputs changed since {path} was drawn"
    return kept["draft"], ""
