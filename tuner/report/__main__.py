"""The report of one results folder, from its Parquet and JSON files alone::

    python -m tuner.report --results results/<gpu> --out results/<gpu>/report

The results folder holds ``measurements.parquet`` (every row: sweeps and
studies), ``device.json`` and ``peaks.json``. Study rows are those whose source
starts with ``study:``. ``--format markdown`` writes report.md with its figures
as PNG, each stored once (the shipped reference reports); ``--format html`` one
self-contained report.html.

The pipeline draws a report in two steps (``tuner/report/draft.py``): ``--draft
FILE`` draws every figure while the profile runs, and ``--from-draft FILE``
adds the hardware counters and writes the documents once the profiles are there.
"""

from __future__ import annotations

import argparse
import errno
import os
import stat
import sys
from pathlib import Path
from typing import Sequence

from tuner.data.paths import REPORT_HTML, REPORT_MARKDOWN, GpuFolder
from tuner.data.readback import mode_kind
from tuner.host import usable_cpus
from tuner.report.formats import DEFAULT_FORMAT, FORMATS


def main(argv: Sequence[str] | None = None) -> int:
    from tuner.host import OneLineParser, tolerant_console

    tolerant_console()
    parser = OneLineParser(prog="python -m tuner.report", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, required=True, help="folder with measurements.parquet, device.json, peaks.json")
    parser.add_argument("--out", type=Path, default=None, help="report folder (default: <results>/report)")
    parser.add_argument("--processes", type=int, default=usable_cpus(),
                        help="processes drawing the figures (default: one per CPU this process may use, here %(default)s)")  # fmt: skip
    parser.add_argument("--format", choices=list(FORMATS), default=DEFAULT_FORMAT,
                        help="what the report folder gets: " + "; ".join(f"{f.name}: {f.help}" for f in FORMATS.values())
                        + " (default: %(default)s)")  # fmt: skip
    drafting = parser.add_mutually_exclusive_group()
    drafting.add_argument("--draft", type=Path, metavar="FILE",
                          help="draw what the dataset alone decides (every figure; no counters section, no documents) "
                               "into the report folder and keep it in FILE, for --from-draft")  # fmt: skip
    drafting.add_argument("--from-draft", type=Path, metavar="FILE",
                          help="finish the report FILE holds (--draft of the same inputs, folder and format): the "
                               "counters section and the documents; where FILE cannot be used, the whole report is drawn")  # fmt: skip
    args = parser.parse_args(argv)
    if args.draft and not FORMATS[args.format].figure_suffixes:
        with_files = ", ".join(name for name, f in FORMATS.items() if f.figure_suffixes)
        parser.refuse(f"--draft: must be drawn in a format whose figures are files ({with_files}), got --format {args.format}")

    if not args.results.is_dir():
        print(f"error: results folder not found: {args.results}", file=sys.stderr)
        return 2
    folder = GpuFolder(args.results)
    for path in (folder.measurements, folder.device_json, folder.peaks_json):
        if not path.exists():
            print(f"error: missing input file: {path}", file=sys.stderr)
            return 2

    out = args.out or folder.report
    refused = check_out(out)
    if refused:
        print(f"error: {refused}", file=sys.stderr)
        return 2

    # Imported here so that a bad invocation fails fast, before matplotlib loads.
    from tuner.data.counters import read_profiles
    from tuner.data.readback import read_json
    from tuner.data.results import read
    from tuner.errors import DamagedFile
    from tuner.progress import Phases
    from tuner.report import build_report, draw_report, finish_report
    from tuner.report.draft import inputs_key, read_draft, write_draft

    read_inputs = Phases()
    inputs = [folder.measurements, folder.device_json, folder.peaks_json]
    drawn_from = inputs_key(inputs) if args.draft else None  # before they are read: a change meanwhile makes the draft stale
    try:
        with read_inputs("read inputs"):
            dataset = read(folder.measurements)
            device = read_json(folder.device_json)
            peaks = read_json(folder.peaks_json, numbers=("_gbs",))
            profiles = None if args.draft else read_profiles(args.results, log=_warn)
    except DamagedFile as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    processes = max(1, args.processes)
    if args.draft:
        draft = draw_report(dataset, device=device, peaks=peaks, out_dir=out, processes=processes, report_format=args.format)
        write_draft(draft, args.draft, inputs=drawn_from, report_format=args.format)
        drawn = sum(result.drawn for result in draft.figures)
        print(f"report draft: {args.draft}; {drawn} figures, {len(draft.figures) - drawn} skipped, "
              f"{sum(f.drawn for f in draft.family_figures.values())} family figures in {out}")  # fmt: skip
        print(f"report draft steps: {Phases(read_inputs | draft.steps)}", flush=True)
        return 0
    draft = None
    if args.from_draft:
        draft, why = read_draft(args.from_draft, inputs=inputs, report_format=args.format, out_dir=out)
        if draft is None:
            print(f"report: {why}: drawing the whole report", file=sys.stderr, flush=True)
    if draft is not None:
        outputs = finish_report(draft, dataset, profiles=profiles)
    else:
        outputs = build_report(dataset, device=device, peaks=peaks, out_dir=out, profiles=profiles, processes=processes,
                               report_format=args.format)  # fmt: skip
    drawn = sum(result.drawn for result in outputs.results)
    print(f"report: {' and '.join(str(d) for d in outputs.documents)}; {drawn} figures, {len(outputs.skipped)} skipped, "
          f"{len(outputs.family_figures)} family figures")  # fmt: skip
    for stem, why in outputs.skipped.items():
        print(f"  skipped {stem}: {why}")
    print(f"report steps: {Phases(read_inputs | outputs.steps)}", flush=True)  # where its seconds went, largest first
    return 0


# What the report writes into its folder: these two, and figures (PNG and SVG).
DOCUMENTS = (REPORT_MARKDOWN, REPORT_HTML)
FIGURE_SUFFIXES = (".png", ".svg")


def check_out(out: Path) -> str | None:
    """Why the report cannot be written into ``out``, in one line, or None:
    ``out`` must be a folder, or none yet under a folder this user may write
    in, and what the report replaces in it (report.md, report.html, the
    figures) must be files or absent. Checked before anything is drawn.
    """
    got = f"got {str(out)!r}"
    mode = _mode(out)
    if isinstance(mode, str):
        return f"--out: must be a folder this user may look in, {got}, {mode}"
    if mode is None:  # made with its folders: the nearest that is there must be a folder to write in
        above = next(p for p in out.absolute().parents if _mode(p) is not None)  # the root is there
        above_mode = _mode(above)
        if isinstance(above_mode, str) or not stat.S_ISDIR(above_mode):
            kind = above_mode if isinstance(above_mode, str) else _kind(above_mode)
            return f"--out: must be a folder or one that can be made, {got}, under {str(above)!r}, {kind}"
        if not os.access(above, os.W_OK | os.X_OK):
            return f"--out: must be a folder this user may write in, {got}, under {str(above)!r}, which this user may not write in"
        return None
    if not stat.S_ISDIR(mode):
        return f"--out: must be a folder (or none yet), {got}, {_kind(mode)}"
    if not os.access(out, os.W_OK | os.X_OK):
        return f"--out: must be a folder this user may write in, {got}, which this user may not write in"
    try:
        names = sorted(os.listdir(out))
    except OSError as error:
        return f"--out: must be a folder this user may read, {got}, {type(error).__name__}: {error.strerror or error}"
    for name in names:
        if name in DOCUMENTS or name.lower().endswith(FIGURE_SUFFIXES):
            inner = _mode(out / name)
            if isinstance(inner, str) or (inner is not None and not stat.S_ISREG(inner)):
                kind = inner if isinstance(inner, str) else _kind(inner)
                return f"--out: must hold the report's files ({', '.join(DOCUMENTS)}, *.png, *.svg) as files to replace or not " \
                       f"at all, got {str(out / name)!r}, {kind}"  # fmt: skip
    return None


def _mode(path: Path) -> int | str | None:
    """``path``'s mode (links followed), None where nothing is there, or why it cannot be looked at."""
    try:
        return os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        # A link to nothing: a folder cannot be made in its place, nor a file written through it.
        return f"a link to nothing ({os.readlink(path)})" if os.path.islink(path) else None
    except ValueError:  # a NUL byte in the name
        return "a name no file can have"
    except OSError as error:
        if error.errno == errno.ELOOP:  # a link that leads back to itself: nothing can be written there
            return "a link that leads to itself"
        return f"{type(error).__name__}: {error.strerror or error}"


def _kind(mode: int) -> str:
    return "a file" if stat.S_ISREG(mode) else mode_kind(mode)


def _warn(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
