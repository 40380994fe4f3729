"""The kernel families. Each module declares one family; REGISTRY names them all.

Adding a family touches no stage: write a CUDA source and declare it with a
``KernelSpec`` (``tuner.families.spec``), or, for what a spec cannot say, a
``Family`` subclass (``tuner.families.base``); then name the Python file in
the config's ``family_paths`` (only the files named are imported), or
install a package that names the family under the ``tuner.families`` entry
point group.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import sys
from importlib.metadata import entry_points
from pathlib import Path

from tuner.families.base import (
    DTYPES,
    Config,
    Family,
    Launch,
    Param,
    Problem,
    Registry,
    Verdict,
    amount_unfit,
)
from tuner.families.copy import Copy
from tuner.families.layout import Layout
from tuner.families.matmul import Matmul
from tuner.families.offset import Offset
from tuner.families.reduce import Reduce
from tuner.families.spec import Constant, In, InOut, KernelSpec, Out, Scalar
from tuner.families.vector_add import VectorAdd

REGISTRY = Registry()
for _family in (Reduce(), Copy(), VectorAdd(), Offset(), Layout(), Matmul()):
    REGISTRY.add(_family)


def register(cls_or_family) -> str:
    """Add a family (a ``Family`` or a subclass) to ``REGISTRY`` after checking
    it (``check_family``); returns its name. Registering it again is harmless."""
    family = cls_or_family() if inspect.isclass(cls_or_family) else cls_or_family
    check_family(family)
    known = REGISTRY.families.get(family.name)
    if known is not None and known is not family and (type(known) is not type(family) or isinstance(family, KernelSpec)):
        raise ValueError(f"family name {family.name!r} is taken by {type(known).__module__}.{type(known).__name__}")
    REGISTRY.add(family)
    return family.name


def check_family(family: Family) -> None:
    """The rules a built-in family keeps, for one from elsewhere: a name, known
    dtypes, parameters named as identifiers, once each, whose defaults their
    own rule accepts; a finite tolerance above 0; check sizes of at least 1;
    at the first check size, device bytes above 0 and, for the default
    configuration where it is feasible, bytes moved above 0 and FLOPs of at
    least 0, all finite (``check_amounts``)."""
    name = getattr(family, "name", None)
    if not (isinstance(name, str) and name.isidentifier()):
        raise ValueError(f"a family's name must be an identifier, got {name!r} ({type(family).__name__})")
    for dtype in family.dtypes:
        if dtype not in DTYPES:
            raise ValueError(f"family {name!r}: dtypes must be among {sorted(DTYPES)}, got {dtype!r}")
    seen = set()
    for param in family.params:
        if not param.name.isidentifier() or param.name in seen:
            raise ValueError(f"family {name!r}: parameter names must be distinct identifiers, got {param.name!r}")
        seen.add(param.name)
        if not param.values:
            raise ValueError(f"family {name!r}: parameter {param.name!r} must have at least one value")
        if not param.accepts(param.default):
            raise ValueError(f"family {name!r}: parameter {param.name!r}'s default must be {param.rule_description()}, got {param.default!r}")
    check_amounts(family)


def check_amounts(family: Family) -> None:
    """A family's tolerance, check sizes and, at the first check size, its
    device bytes and the bytes and FLOPs of its default configuration: finite
    and above 0 (FLOPs: at least 0, none counted).

    Raises:
        ValueError: one line naming the family, the setting and the value.
    """
    name = family.name
    why = amount_unfit(family.tolerance)
    if why:
        raise ValueError(f"family {name!r}: tolerance {why}")
    sizes = family.check_sizes
    if not (isinstance(sizes, (tuple, list)) and len(sizes) == 2 and all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in sizes)):
        raise ValueError(f"family {name!r}: check_sizes must be two integers >= 1, got {sizes!r}")
    default = {p.name: p.default for p in family.params}
    for dtype in family.dtypes:
        problem = Problem(name, dtype, sizes[0])
        amounts = [("device bytes", family.device_bytes, (problem,), False)]
        if not family.violations(default, problem):
            amounts += [("bytes_moved", family.bytes_moved, (default, problem), False), ("flops", family.flops, (default, problem), True)]
        for what, amount, args, zero in amounts:
            try:
                value = amount(*args)
            except Exception as error:  # noqa: BLE001 - a plug-in's own code: whatever it raises is its one line
                raise ValueError(f"family {name!r}: {what} of {problem.key} must be a number, got {type(error).__name__}: {error}") from None
            why = amount_unfit(value, zero=zero)
            if why:
                raise ValueError(f"family {name!r}: {what} of {problem.key}" + (" for its default configuration" if args[0] is default else "")
                                 + f" {why}")  # fmt: skip


def load_family_paths(paths) -> list[str]:
    """Import each Python file named and register the families it defines (a
    ``Family`` subclass, or a ``Family`` such as a ``KernelSpec`` bound to a
    module-level name); returns their names. Only the files named are
    imported. Idempotent.

    Raises:
        ValueError: a path is not a Python file, the file fails to import
            (the message names it), or it defines no family.
    """
    names = []
    for path in map(Path, paths):
        if not (path.is_file() and path.suffix == ".py"):
            raise ValueError(f"family_paths: must name Python files that define families, got {str(path)!r}"
                             + (", a folder (name the family's .py file in it)" if path.is_dir() else ""))  # fmt: skip
        path = path.resolve()
        module_name = f"tuner_plugin_{hashlib.sha1(str(path).encode()).hexdigest()[:10]}_{path.stem}"
        module = sys.modules.get(module_name)
        if module is None:
            spec = importlib.util.spec_from_file_location(module_name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = module
            try:
                spec.loader.exec_module(module)
            except ValueError as error:  # a declaration's own one line (a KernelSpec's SpecError)
                del sys.modules[module_name]
                raise ValueError(f"family_paths: {path}: {error}") from None
            except (Exception, SystemExit) as error:  # sys.exit() in a plug-in would end the run in silence
                del sys.modules[module_name]
                raise ValueError(f"family_paths: {path} failed to import: {type(error).__name__}: {error}") from None
        found = []
        for value in vars(module).values():
            if inspect.isclass(value) and issubclass(value, Family) and value.__module__ == module_name and not inspect.isabstract(value):
                found.append(value)
            elif isinstance(value, Family):
                found.append(value)
        if not found:
            raise ValueError(f"family_paths: {path} must define a family (a Family subclass or a KernelSpec), got none")
        try:
            names += [register(value) for value in found]
        except ValueError as error:
            raise ValueError(f"family_paths: {path}: {error}") from None
    return names


# Installed plug-in families that failed to load: entry point name -> why (one line).
UNLOADED: dict[str, str] = {}


def _load_entry_points() -> None:
    """Register the installed ``tuner.families`` entry points. One that fails
    to import or register is left out with one line on stderr, naming it and
    why: every command imports this module, and a broken plug-in of one
    project stopped ``report`` and ``best`` of every other with a traceback."""
    for point in entry_points(group="tuner.families"):
        try:
            register(point.load())
        except Exception as error:  # noqa: BLE001 - a plug-in's own code: whatever it raises, it is left out
            why = " ".join(f"{type(error).__name__}: {error}".split())
            UNLOADED[point.name] = why
            print(f"tuner: plug-in family {point.name!r} ({point.value}) left out: it failed to load ({why})", file=sys.stderr)


_load_entry_points()

__all__ = ["REGISTRY", "Config", "Constant", "Family", "In", "InOut", "KernelSpec", "Launch", "Out", "Param", "Problem",
           "Registry", "Scalar", "Verdict", "check_family", "load_family_paths", "register"]
