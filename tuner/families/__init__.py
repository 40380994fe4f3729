"""The kernel families. Each module declares one family; REGISTRY names them all.

Adding a family touches no stage: write a CUDA source and a ``Family``
subclass (see ``tuner.families.base``), then either put both in a folder named
in the config's ``family_paths`` (every ``*.py`` there is imported and each
``Family`` subclass it defines is registered; ``source`` may be a path beside
it), or install a package that names the class under the ``tuner.families``
entry point group.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import sys
from importlib.metadata import entry_points
from pathlib import Path

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


def _register(cls_or_family) -> str:
    family = cls_or_family() if inspect.isclass(cls_or_family) else cls_or_family
    known = REGISTRY.families.get(family.name)
    if known is not None and type(known) is not type(family):
        raise ValueError(f"family name {family.name!r} is taken by {type(known).__module__}.{type(known).__name__}")
    REGISTRY.add(family)
    return family.name


def load_family_paths(paths) -> list[str]:
    """Import every ``*.py`` of each folder and register the ``Family``
    subclasses it defines; returns their names. Idempotent."""
    names = []
    for folder in map(Path, paths):
        if not folder.is_dir():
            raise ValueError(f"family_paths: must name folders, got {str(folder)!r}, which is not a folder")
        for path in sorted(folder.resolve().glob("*.py")):
            if path.name.startswith("_"):
                continue
            module_name = f"tuner_plugin_{hashlib.sha1(str(path).encode()).hexdigest()[:10]}_{path.stem}"
            module = sys.modules.get(module_name)
            if module is None:
                spec = importlib.util.spec_from_file_location(module_name, path)
                module = importlib.util.module_from_spec(spec)
                sys.modules[module_name] = module
                spec.loader.exec_module(module)
            for value in vars(module).values():
                if (
                    inspect.isclass(value)
                    and issubclass(value, Family)
                    and value.__module__ == module_name
                    and not inspect.isabstract(value)
                ):
                    names.append(_register(value))
    return names


def _load_entry_points() -> None:
    for point in entry_points(group="tuner.families"):
        _register(point.load())


_load_entry_points()

__all__ = ["REGISTRY", "Config", "Family", "Launch", "Param", "Problem", "Registry", "Verdict", "load_family_paths"]
