"""The kernel families. Each module declares one family; REGISTRY names them all.

Adding a family: write ``kernels/<name>.cu`` and a ``Family`` subclass here, and
add it to REGISTRY. No stage changes.
"""

from __future__ import annotations

from tuner.families.base import Config, Family, Launch, Param, Problem, Registry, Verdict
from tuner.families.copy import Copy
from tuner.families.reduce import Reduce

REGISTRY = Registry()
for _family in (Reduce(), Copy()):
    REGISTRY.add(_family)

__all__ = ["REGISTRY", "Config", "Family", "Launch", "Param", "Problem", "Registry", "Verdict"]
