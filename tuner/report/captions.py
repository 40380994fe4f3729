"""The Snakemake report's figure captions, one file per figure, from the figure list.

The workflow marks every figure of ``EXPECTED_FIGURES`` for ``snakemake
--report`` with its own caption file, ``workflow/report/captions/<stem>.rst``:
the figure's caption from the figure list (``workflow/report/figures.yaml``),
then the text every figure shares.

``python -m tuner.report.captions [FOLDER]`` rewrites the files; a test keeps
them in step with the list.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Sequence

from tuner.report.figures import FIGURE_SPECS
from tuner.resources import captions_dir

CAPTIONS_DIR = captions_dir()
COMMON = (
    "A figure of the tuning report (``report.html`` beside it holds every figure and table in one file): measured "
    "on the GPU named in its title, verified against a numpy reference; bandwidth is the fewest bytes the problem "
    "moves over the median kernel time (L2 flushed before every sample)."
)

_RST_SPECIAL = re.compile(r"([\\*`_|])")


def rst_text(text: str) -> str:
    """Plain text safe in reStructuredText (Snakemake renders captions with
    Jinja2 first, so no Jinja delimiter either)."""
    if any(delimiter in text for delimiter in ("{{", "{%", "{#")):
        raise ValueError(f"a caption holds a Jinja delimiter: {text!r}")
    return _RST_SPECIAL.sub(r"\\\1", text)


def caption_files() -> dict[str, str]:
    """File name -> text of every figure's caption file."""
    return {f"{spec.stem}.rst": f"{rst_text(spec.caption)}\n\n{COMMON}\n" for spec in FIGURE_SPECS}


def main(argv: Sequence[str] | None = None) -> int:
    from tuner.host import OneLineParser

    parser = OneLineParser(prog="python -m tuner.report.captions", description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", nargs="?", type=Path, default=CAPTIONS_DIR, help=f"where the caption files go (default: {CAPTIONS_DIR})")
    folder = parser.parse_args(argv).folder
    if folder.exists() and not folder.is_dir():
        parser.refuse(f"FOLDER: must be a folder (or none yet), got {str(folder)!r}, which is not one")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in caption_files().items():
            (folder / name).write_text(text, encoding="utf-8")
    except OSError as error:
        parser.refuse(f"FOLDER: must be a folder this user may write in, got {str(folder)!r}: {error.strerror or error}")
    print(f"wrote {len(FIGURE_SPECS)} captions to {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
