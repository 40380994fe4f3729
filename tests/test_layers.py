"""The house rules of ARCHITECTURE.md, checked: which package may import
which (layers point one way, no cycles)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TUNER = ROOT / "tuner"

# Package -> the tuner packages it may import.
ALLOWED = {
    "host": set(),  # the CPUs this process may use, and its console
    "resources": set(),  # where the kernels, the workflow and the schema lie: the wheel's copies or the checkout's
    "families": {"errors", "host", "resources"},  # a space too large to list is a refusal
    "device": {"errors"},  # GpuUnavailable is a refusal
    "errors": set(),
    "progress": set(),
    "data": {"errors", "families"},
    "processes": set(),
    "measure": {"data", "device", "errors", "families", "host", "progress", "resources"},
    "search": {"data", "errors", "families", "host", "progress"},
    # checked at load as the stages read them: warm-start tables and storage servers (tuner.search)
    # and the results table's columns, which a plug-in's parameters must not be named as (data)
    "settings": {"data", "device", "errors", "families", "measure", "resources", "search"},
    "report": {"data", "errors", "families", "host", "progress", "resources"},  # progress: its steps' seconds
    # it runs the measuring harness (and settings imports measure); `profile: report` profiles the rows the report
    # shows, chosen in data (tuner.data.blog_rows), never by the report itself; it hands its profiled child the
    # file a refusal of the child's is written to (processes)
    "profile": {"data", "families", "measure", "processes", "progress", "settings"},
    "harness": {"data", "device", "errors", "measure", "settings"},
    # sweep and tune: choose and record in the stage's process, measure in a measuring process per GPU
    "stages": {"data", "errors", "families", "harness", "measure", "progress", "search", "settings"},
    "cli": {
        "check_family",
        "data",
        "device",
        "errors",
        "families",
        "harness",
        "host",
        "measure",
        "processes",
        "profile",
        "progress",
        "report",  # `compare --figure` draws with the report's figure code
        "install_check",
        "resources",
        "scaffold",
        "search",
        "settings",
        "stages",
    },
    # tuning from Python: the stages' measuring, in one process (a sweep's row store is the sweep stage's)
    "api": {"data", "device", "families", "measure", "resources", "search", "stages"},
    # Kernel Tuner's tune_kernel: its arguments as a KernelSpec (families), its iterations as timing (measure),
    # its strategies (search), measured by api, returned from the rows and their ties (data)
    "kernel_tuner": {"api", "data", "families", "measure", "search"},
    # a family of one's own checked step by step: load, space, compile, reference, the stages on made-up rows
    "check_family": {"data", "device", "families", "measure", "progress", "report", "resources", "search"},
    # a folder of one's own: its config, its Snakefile (the installed workflow as a module, and the stages'
    # seconds at the end of a run: data), a spec of its kernel
    "scaffold": {"data", "families", "resources"},
    # what an install lacks (nvcc, the CUDA headers, PyCUDA, a driver) and what to do, before pip builds PyCUDA
    "install_check": {"resources"},
    "__main__": {"cli"},
    "__init__": {"api"},
}


def package_of(path: Path) -> str:
    parts = path.relative_to(TUNER).parts
    return parts[0] if len(parts) > 1 else parts[0].removesuffix(".py")


def test_packages_import_only_the_layers_below_them():
    wrong = []
    for path in TUNER.rglob("*.py"):
        package = package_of(path)
        for imported in re.findall(r"^\s*(?:from|import) tuner\.(\w+)", path.read_text(), re.M):
            if imported != package and imported not in ALLOWED[package]:
                wrong.append(f"{path.relative_to(ROOT)} imports tuner.{imported}")
    assert not wrong, wrong


def test_only_the_device_package_touches_pycuda():
    users = [p.relative_to(ROOT) for p in TUNER.rglob("*.py") if re.search(r"^\s*(?:from|import) pycuda", p.read_text(), re.M)]
    assert users and all(p.parts[1] == "device" for p in users), users



def test_no_module_imports_another_modules_private_names():
    """A leading underscore means "this module's own": a name another module needs is public."""
    import ast

    root = Path(__file__).resolve().parents[1]
    found = []
    for path in sorted((root / "tuner").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tuner"):
                found += [f"{path.relative_to(root)}: {node.module}.{a.name}" for a in node.names if a.name.startswith("_")]
    assert not found, found


# tuner.search's subpackages -> those they may import (strategies know no study; a study knows no table).
SEARCH = {"samplers": set(), "study": {"samplers"}, "tables": {"samplers", "study"}}


def test_the_search_subpackages_import_one_way_and_its_modules_in_no_circle():
    search = TUNER / "search"
    imports: dict[str, set[str]] = {}
    wrong = []
    for path in sorted(search.rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        found = set(re.findall(r"^\s*from (tuner\.search\.[\w.]+) import", path.read_text(), re.M))
        found |= set(re.findall(r"^\s*import (tuner\.search\.[\w.]+)", path.read_text(), re.M))
        imports[module] = found
        own = path.relative_to(search).parts[0]
        for name in found:
            other = name.split(".")[2]
            if other != own and other not in SEARCH.get(own, set()):
                wrong.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not wrong, wrong
    assert set(SEARCH) == {p.name for p in search.iterdir() if p.is_dir() and (p / "__init__.py").exists()}

    import graphlib

    try:
        tuple(graphlib.TopologicalSorter(imports).static_order())
    except graphlib.CycleError as error:
        raise AssertionError(f"modules of tuner.search import each other: {error.args[1]}") from None
