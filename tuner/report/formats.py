"""What a report folder receives: its documents and the files of its figures.

``all`` (the default) writes both documents and every figure as PNG and SVG;
``markdown`` writes ``report.md`` with its PNG figures beside it, each figure
stored once (what a repository shows: the shipped reference reports);
``html`` writes ``report.html`` alone, every figure embedded (one file to send).
Imported without matplotlib, so the command line checks its options first.
"""

from __future__ import annotations

from dataclasses import dataclass

from tuner.data.paths import REPORT_HTML, REPORT_MARKDOWN


@dataclass(frozen=True)
class ReportFormat:
    """What a report folder receives.

    Attributes:
        name: as ``python -m tuner.report --format`` takes it.
        documents: the documents written (``report.md``, ``report.html``).
        figure_suffixes: the files each figure is written to beside them, PNG
            first; none: the figures are drawn elsewhere and only embedded.
        help: one line for the command's help.
    """

    name: str
    documents: tuple[str, ...]
    figure_suffixes: tuple[str, ...]
    help: str


FORMATS = {
    f.name: f
    for f in (
        ReportFormat(
            "all", (REPORT_MARKDOWN, REPORT_HTML), (".png", ".svg"), f"{REPORT_MARKDOWN}, {REPORT_HTML} and every figure as PNG and SVG"
        ),
        ReportFormat("markdown", (REPORT_MARKDOWN,), (".png",), f"{REPORT_MARKDOWN} and its figures as PNG, each stored once"),
        ReportFormat("html", (REPORT_HTML,), (), f"{REPORT_HTML} alone, every figure embedded"),
    )
}
DEFAULT_FORMAT = "all"
