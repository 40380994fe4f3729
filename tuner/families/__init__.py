"""The kernel families. Each module declares one family; REGISTRY names them all.

Adding a family: write ``kernels/<name>.cu`` and a ``Family`` subclass here, and
add it to REGISTRY. No stage changes.
"""

from __future__ import annotations

from tuner.families.base import (
    Config,
    Family,
    Launch,
    Param,
    Problem,
    Registry,
    Verdict,
)
from tuner.families.copy import Copy
from tuner.families.layout import Layout
from tuner.families.matmul import Matmul
from tuner.families.offset import Offset
from tuner.families.reduce import Reduce
from tuner.families.vector_add import VectorAdd

REGISTRY = Registry()
for _family in (Reduce(), Copy(), VectorAdd(), Offset(), Layout(), Matmul()):
    REGISTRY.add(_family)

__all__ = ["REGISTRY", "Config", "Family", "Launch", "Param", "Problem", "Registry", "Verdict"]
