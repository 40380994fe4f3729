"""tuner/ uses Optuna through its public API only, and pyproject.toml names
the Optuna versions that API is known to be (an upper bound the installed
version meets)."""

from __future__ import annotations

import ast
import re
from importlib.metadata import version
from pathlib import Path

import optuna
import tomllib
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
TUNER = ROOT / "tuner"


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _defined_privately(files) -> set[str]:
    """Private names a body of code defines: functions, classes, attributes
    assigned on an object (``x._name = ...``)."""
    names = set()
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and _private(node.name):
                names.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    for sub in ast.walk(target):
                        if isinstance(sub, ast.Attribute) and _private(sub.attr):
                            names.add(sub.attr)
    return names


def test_no_private_optuna_name_is_used_in_tuner():
    tuner_files = sorted(TUNER.rglob("*.py"))
    optuna_private = _defined_privately(Path(optuna.__file__).parent.rglob("*.py"))
    assert {"_storage", "_study_id", "_trial_id", "_write_log", "_backend"} <= optuna_private  # the scan finds them
    ours = _defined_privately(tuner_files)
    found = []
    for path in tuner_files:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Attribute) and node.attr in optuna_private and node.attr not in ours:
                found.append(f"{where}: .{node.attr}")
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("optuna"):
                private = [n.name for n in node.names if _private(n.name)]
                if any(_private(part) for part in node.module.split(".")) or private:
                    found.append(f"{where}: from {node.module} import {private or '...'}")
            elif isinstance(node, ast.Import):
                found += [f"{where}: import {n.name}" for n in node.names
                          if n.name.startswith("optuna") and any(_private(p) for p in n.name.split("."))]  # fmt: skip
    # Dotted paths in strings or attribute chains, e.g. optuna.storages._rdb.
    for path in tuner_files:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"\boptuna(\.[A-Za-z]\w*)*\._[A-Za-z]", line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert found == []


def test_the_optuna_requirement_has_an_upper_bound_the_installed_version_meets():
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (optuna_requirement,) = [Requirement(d) for d in dependencies if Requirement(d).name == "optuna"]
    upper = [s for s in optuna_requirement.specifier if s.operator in ("<", "<=")]
    assert upper, f"pyproject.toml must bound optuna from above, got {optuna_requirement}"
    assert Version(version("optuna")) in optuna_requirement.specifier
