"""The Snakemake report's figure caption, one per figure, from ``FIGURE_SPECS``.

The workflow marks every figure of ``EXPECTED_FIGURES`` for ``snakemake
--report`` with one caption file, ``workflow/report/figure.rst``. Snakemake
renders that file (Jinja2, then reStructuredText) once per figure but does not
say for which; it renders the figures in order and sets each one's caption
after rendering it, so the figure being rendered is the first whose caption is
not set yet. The template picks that figure's caption from the specs' captions
(and falls back to the common text alone if the order ever changes).

``python -m tuner.report.captions [PATH]`` rewrites the file; a test keeps it
in step with the specs.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Sequence

from tuner.report.figures import FIGURE_SPECS

CAPTION_RST = Path(__file__).resolve().parents[2] / "workflow" / "report" / "figure.rst"
COMMON = (
    "A figure of the tuning report (``report.html`` beside it holds every figure and table in one file): measured "
    "on the GPU named in its title, verified against a numpy reference; bandwidth is the fewest bytes the problem "
    "moves over the median kernel time (L2 flushed before every sample)."
)

_RST_SPECIAL = re.compile(r"([\\*`_|])")


def rst_text(text: str) -> str:
    """Plain text safe in reStructuredText; it must hold no Jinja delimiter."""
    if any(delimiter in text for delimiter in ("{{", "{%", "{#")):
        raise ValueError(f"a caption holds a Jinja delimiter: {text!r}")
    return _RST_SPECIAL.sub(r"\\\1", text)


def caption_template() -> str:
    """The text of ``workflow/report/figure.rst``."""
    lines = [
        "{#- Written by `python -m tuner.report.captions` from FIGURE_SPECS in tuner/report/figures.py:",
        "    edit the specs, not this file. Snakemake renders this caption once per figure; the figure",
        "    being rendered is the first result whose caption is not set yet. -#}",
        '{%- set ns = namespace(current="") -%}',
        "{%- for subcategories in categories.values() -%}{%- for records in subcategories.values() -%}{%- for record in records -%}",
        "{%- if not ns.current and record.caption is not defined -%}{%- set ns.current = record.target -%}{%- endif -%}",
        "{%- endfor -%}{%- endfor -%}{%- endfor -%}",
    ]
    for index, spec in enumerate(FIGURE_SPECS):
        keyword = "if" if index == 0 else "elif"
        lines.append(f'{{%- {keyword} ns.current == "{spec.stem}.png" %}}')
        lines.append(rst_text(spec.caption))
        lines.append("")
    lines += ["{%- endif %}", "", COMMON]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    path = Path(args[0]) if args else CAPTION_RST
    path.write_text(caption_template(), encoding="utf-8")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
