"""The one-line change of a Kernel Tuner script: its imports of
``kernel_tuner`` made imports of ``tuner.kernel_tuner``, nothing else."""

from __future__ import annotations

import re

IMPORTS = (
    (re.compile(r"^([ \t]*)import kernel_tuner[ \t]*$", re.M), r"\1from tuner import kernel_tuner"),
    (re.compile(r"^([ \t]*)from kernel_tuner(\.\w+)? import\b", re.M), r"\1from tuner.kernel_tuner\2 import"),
)


def with_our_import(text: str) -> str:
    """``text`` (a Python script) with ``import kernel_tuner`` made
    ``from tuner import kernel_tuner`` and ``from kernel_tuner[.module] import
    ...`` made ``from tuner.kernel_tuner[.module] import ...``."""
    for pattern, replacement in IMPORTS:
        text = pattern.sub(replacement, text)
    return text
