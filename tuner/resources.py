"""Where the files the package reads at run time lie, in one place.

They are the lessons' CUDA sources (``kernels/``: the families' kernels, the
shared header, the timing and comparison kernels), the workflow (``Snakefile``
and ``workflow/``: the rules, the config schema, the report's figure list) and
the lessons' ``config.yaml``. In a source checkout (an editable install, or
the checkout on ``PYTHONPATH``) they are the checkout's own top-level files
beside the ``tuner`` package. A wheel carries copies of them in
``tuner/_resources/``, laid out as in the checkout (``pyproject.toml`` maps
them there), so an install reads nothing outside itself and the workflow's
relative includes hold in both.

The paths go to nvcc and to Snakemake, which need files on disk: a package
unpacked on the file system, as pip installs it.
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path

# What a wheel carries under tuner/_resources, and a checkout holds at its top.
BUNDLED_FOLDER = "_resources"
BUNDLED_NAMES = ("kernels", "workflow", "Snakefile", "config.yaml")


def package_dir() -> Path:
    """The ``tuner`` package's folder."""
    return Path(str(importlib.resources.files("tuner")))


def checkout_root() -> Path | None:
    """The source checkout this package is imported from (the folder above
    ``tuner/`` holding ``kernels/`` and ``workflow/``), or None for an install."""
    root = package_dir().parent
    if (root / "kernels").is_dir() and (root / "workflow").is_dir() and (root / "pyproject.toml").is_file():
        return root
    return None


def root() -> Path:
    """The folder holding ``kernels/``, ``workflow/``, ``Snakefile`` and
    ``config.yaml``: the wheel's copies where they are installed, else the
    checkout's own (where none is found, the wheel's folder, so that a
    missing file is named by ``resource_missing``)."""
    bundled = package_dir() / BUNDLED_FOLDER
    if bundled.is_dir():
        return bundled
    return checkout_root() or bundled


def kernels_dir() -> Path:
    """The lessons' CUDA sources and ``common.cuh``, which a family's source may include."""
    return root() / "kernels"


def workflow_snakefile() -> Path:
    """The workflow's Snakefile: a folder's own Snakefile uses it as a
    Snakemake ``module`` (``tuner init``)."""
    return root() / "Snakefile"


def config_schema_file() -> Path:
    """The config's JSON schema (YAML)."""
    return root() / "workflow" / "schemas" / "config.schema.yaml"


def figure_list_file() -> Path:
    """The report's figures, in order: each one's stem, title and caption."""
    return root() / "workflow" / "report" / "figures.yaml"


def report_code_files() -> list[Path]:
    """The files a report is drawn by: its code, its templates and the figure list. An edit of
    one rebuilds the shipped reference reports and makes a report's draft (tuner/report/draft.py) stale."""
    code = [p for p in (package_dir() / "report").rglob("*") if p.suffix in (".py", ".j2", ".css")]
    return sorted([*code, figure_list_file()])


def lessons_config() -> Path:
    """The lessons' config: every sweep and study of the lessons."""
    return root() / "config.yaml"


def reference_results() -> Path | None:
    """The checkout's shipped reference results (``results/reference``), which
    a run must not overwrite; an install carries none."""
    checkout = checkout_root()
    return checkout / "results" / "reference" if checkout else None


def resource_missing(path: Path) -> str | None:
    """One line where ``path``, a file or folder of the package's resources,
    is missing (an install of the package without them: a wheel built by
    hand without ``pyproject.toml``'s mapping, or a checkout lacking them), else None."""
    if path.exists():
        return None
    return (f"{path}: missing: the tuner package reads {', '.join(BUNDLED_NAMES)} from its wheel "
            f"(tuner/{BUNDLED_FOLDER}/) or its source checkout; install the wheel python -m build makes, "
            f"or pip install -e <checkout>")  # fmt: skip
