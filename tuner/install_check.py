"""What this machine lacks for the ``cuda`` extra, and what to do, before pip builds PyCUDA.

PyPI has no PyCUDA wheels: ``pip install 'pycuda>=2024.1'`` (the ``cuda``
extra) compiles its C++ wrapper and the Boost.Python it bundles against the
CUDA toolkit, a few minutes of one core. Its build takes the toolkit from the
first ``nvcc`` on ``PATH`` (``CUDA_ROOT`` is that folder's parent, unless
``~/.aksetup-defaults.py`` or ``/etc/aksetup-defaults.py`` says otherwise) and
needs there ``include/cuda.h``, the driver library ``libcuda.so`` (the
toolkit's stub will do) and cuRAND (``include/curand.h``, ``libcurand.so``;
``CUDA_ENABLE_CURAND = False`` in that file builds without it); beside them a
C++ compiler and Python's headers. A missing one ends the build thousands of lines into pip's
output: ``python -m tuner check-install`` (``tuner check-install``) says it in
one line each first. Running kernels also needs an NVIDIA driver and a GPU.
"""

from __future__ import annotations

import ast
import ctypes
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from tuner.resources import checkout_root, config_schema_file, kernels_dir, resource_missing, root, workflow_snakefile

SUPPORTED_PYTHONS = ((3, 10), (3, 13))  # pyproject.toml's requires-python, first and last
PYCUDA = "pycuda>=2024.1"  # the cuda extra
# PyCUDA 2026.1 from its sdist: 116 s of CPU with gcc 12 (cuRAND left out), its files compiled one after another.
BUILD_MINUTES = "2 to 3"
PREBUILT = "conda install -c conda-forge pycuda (prebuilt, with its own CUDA libraries)"
# Where the linker finds a library without being told (Debian's, Red Hat's, the default).
SYSTEM_LIBRARY_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib")
PYCUDA_CONFIG_FILES = (Path("~/.aksetup-defaults.py").expanduser(), Path("/etc/aksetup-defaults.py"))


@dataclass(frozen=True)
class Finding:
    """One line of the check: ``what: text``; ``blocks_build``: PyCUDA cannot build without it."""

    what: str
    ok: bool
    text: str
    blocks_build: bool = False

    def line(self) -> str:
        return f"{self.what}: {'ok' if self.ok else 'MISSING'}: {self.text}"


def check_install(say: Callable[[str], None] = print) -> int:
    """Print one line per prerequisite; returns 0 when PyCUDA is installed or
    can be built here, 1 when a line marked MISSING stops its build."""
    findings = [_python(), _resources()]
    pycuda_version = _installed_version("pycuda")
    toolkit = _toolkit()
    findings += toolkit.findings
    findings += [_compiler(), _python_headers()]
    findings += [_snakemake(), _driver()]
    for finding in findings:
        say(finding.line())
    blocking = [f for f in findings if f.blocks_build and not f.ok]
    if pycuda_version:
        say(f"PyCUDA: ok: {pycuda_version} is installed; the pipeline's GPU stages can run where the driver line is ok")
        return 0
    if blocking:
        say(f"PyCUDA: MISSING: not installed, and pip install '{PYCUDA}' (the cuda extra) cannot build here: fix the "
            f"{', '.join(f.what for f in blocking)} line{'s' if len(blocking) > 1 else ''} above, or use {PREBUILT}")  # fmt: skip
        return 1
    prefix = f"PATH={toolkit.bin_dir}:$PATH " if toolkit.bin_dir else ""
    say(f"PyCUDA: MISSING: not installed; {prefix}pip install '{PYCUDA}' builds it from source here "
        f"(about {BUILD_MINUTES} minutes), or {PREBUILT}")  # fmt: skip
    return 0


def _python() -> Finding:
    version = sys.version_info[:2]
    (low, high) = SUPPORTED_PYTHONS
    text = f"{sys.version.split()[0]} ({sys.executable}); supported: {low[0]}.{low[1]} to {high[0]}.{high[1]}"
    return Finding("Python", low <= version <= high, text)


def _resources() -> Finding:
    for path in (kernels_dir(), workflow_snakefile(), config_schema_file()):
        missing = resource_missing(path)
        if missing:
            return Finding("tuner's files", False, missing)
    where = "the source checkout" if root() == checkout_root() else "the installed package"
    return Finding("tuner's files", True, f"kernels/ and workflow/ of {where}, {root()}")


@dataclass(frozen=True)
class Toolkit:
    findings: list[Finding]
    bin_dir: str | None  # the toolkit's own bin folder, where PATH's nvcc is a wrapper of another


def _toolkit() -> Toolkit:
    """nvcc, and what PyCUDA's build reads from the folder above it."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        text = ("not on PATH: install the CUDA toolkit (https://developer.nvidia.com/cuda-downloads) and put its bin/ "
                "on PATH (PyCUDA's build finds the toolkit through it; the pipeline compiles every kernel with it)")  # fmt: skip
        return Toolkit([Finding("nvcc", False, text, blocks_build=True)], None)
    version = _nvcc_release(nvcc)
    real_bin = _nvcc_home(nvcc)
    settings, settings_file = _pycuda_settings()
    if isinstance(settings.get("CUDA_ROOT"), str):
        cuda_root, configured = Path(settings["CUDA_ROOT"]), f"set in {settings_file}"
    else:
        cuda_root, configured = Path(os.path.normpath(Path(nvcc).parent.parent)), "the parent of the folder of PATH's first nvcc"
    findings = [Finding("nvcc", True, f"{nvcc}, CUDA {version}; PyCUDA's build takes CUDA_ROOT={cuda_root} ({configured})")]
    # Where the first nvcc on PATH is a wrapper of another toolkit's, that toolkit's bin/ first on PATH gives the build its root.
    better = Path(real_bin).parent if real_bin and Path(real_bin).parent != cuda_root else None
    fix_root = f"; put the toolkit's bin/ first on PATH: PATH={real_bin}:$PATH" if better else ""

    header = cuda_root / "include" / "cuda.h"
    if header.is_file():
        findings.append(Finding("CUDA headers", True, str(header)))
    elif better and (better / "include" / "cuda.h").is_file():
        findings.append(Finding("CUDA headers", False, f"{header} does not exist (PATH's nvcc is a wrapper of "
                                f"{real_bin}/nvcc){fix_root}", blocks_build=True))  # fmt: skip
    else:
        findings.append(Finding("CUDA headers", False, f"{header} does not exist: install the CUDA toolkit's headers "
                                f"(cuda-cudart-dev, or the whole toolkit)", blocks_build=True))  # fmt: skip
    root = better or cuda_root
    findings.append(_library(root, "cuda", "the driver library PyCUDA links (the toolkit's stubs/libcuda.so will do)",
                             settings.get("CUDADRV_LIB_DIR") or []))  # fmt: skip
    if settings.get("CUDA_ENABLE_CURAND", True):
        curand = ("cuRAND, which PyCUDA builds with (the toolkit's libcurand-dev; or CUDA_ENABLE_CURAND = False in "
                  "~/.aksetup-defaults.py)")  # fmt: skip
        header = root / "include" / "curand.h"
        findings.append(_library(root, "curand", curand, settings.get("CURAND_LIB_DIR") or []) if header.is_file() else
                        Finding("curand.h", False, f"{header} does not exist: {curand}", blocks_build=True))  # fmt: skip
    return Toolkit(findings, real_bin if better else None)


def _library(root: Path, name: str, role: str, configured: list) -> Finding:
    """``lib<name>.so`` where PyCUDA's build looks: the folders its configuration
    file names, the toolkit's lib folders and their stubs, then the linker's own."""
    folders = [Path(str(p)) for p in configured] + [root / sub for sub in ("lib64", "lib", "lib64/stubs", "lib/stubs")]
    folders += [Path(p) for p in SYSTEM_LIBRARY_DIRS]
    for folder in folders:
        if (folder / f"lib{name}.so").exists():
            return Finding(f"lib{name}.so", True, str(folder / f"lib{name}.so"))
    return Finding(f"lib{name}.so", False, f"{role}: not in {root}/lib64, {root}/lib (or their stubs/) nor the "
                   f"system's library folders", blocks_build=True)  # fmt: skip


def _compiler() -> Finding:
    compiler = os.environ.get("CXX") or sysconfig.get_config_var("CXX") or "g++"
    found = shutil.which(compiler.split()[0])
    if found:
        return Finding("C++ compiler", True, found)
    return Finding("C++ compiler", False, f"{compiler!r} not on PATH (PyCUDA's wrapper is C++): install g++ (build-essential)",
                   blocks_build=True)  # fmt: skip


def _python_headers() -> Finding:
    header = Path(sysconfig.get_paths()["include"]) / "Python.h"
    if header.is_file():
        return Finding("Python headers", True, str(header))
    major, minor = sys.version_info[:2]
    return Finding("Python headers", False, f"{header} does not exist: install python{major}.{minor}-dev (or your "
                   f"distribution's Python development package)", blocks_build=True)  # fmt: skip


def _snakemake() -> Finding:
    version = _installed_version("snakemake")
    if version:
        return Finding("Snakemake", True, f"{version}: snakemake --cores 1 runs the pipeline")
    if sys.version_info < (3, 11):
        return Finding("Snakemake", False, "Snakemake 8 needs Python 3.11 or later: here tuner.tune, check-family and "
                       "python -m tuner's stages run, the pipeline (snakemake --cores 1) does not")  # fmt: skip
    return Finding("Snakemake", False, "not installed: pip install 'snakemake>=8.0' (a dependency of tuner) for the pipeline")


def _driver() -> Finding:
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return Finding("NVIDIA driver", False, "libcuda.so.1 does not load: no GPU stage can run here (check-family without "
                       "--gpu, report, best and compare do)")  # fmt: skip
    return Finding("NVIDIA driver", True, "libcuda.so.1 loads")


def _installed_version(module: str) -> str | None:
    if importlib.util.find_spec(module) is None:
        return None
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(module)
    except PackageNotFoundError:
        return "a version without metadata"


def _nvcc_release(nvcc: str) -> str:
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    found = re.search(r"release ([\d.]+)", out)
    return found.group(1) if found else "unknown"


def _nvcc_home(nvcc: str) -> str | None:
    """The toolkit's own bin folder, as nvcc states it in a dry run (``_HERE_``):
    PATH's nvcc may be a script or link that runs another toolkit's."""
    try:
        out = subprocess.run([nvcc, "--dryrun", "-c", "-x", "cu", os.devnull, "-o", os.devnull], capture_output=True,
                             text=True, timeout=60)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.search(r"^#\$ _HERE_=(.+)$", out.stdout + out.stderr, re.M)
    return os.path.normpath(found.group(1).strip()) if found else None


def _pycuda_settings() -> tuple[dict, Path | None]:
    """The literal settings of PyCUDA's build configuration file (the first of
    PYCUDA_CONFIG_FILES that exists), and that file."""
    for path in PYCUDA_CONFIG_FILES:
        if not path.is_file():
            continue
        try:
            tree = ast.parse(path.read_text())
        except (OSError, SyntaxError, ValueError):
            return {}, path
        settings = {}
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                try:
                    settings[node.targets[0].id] = ast.literal_eval(node.value)
                except ValueError:
                    continue
        return settings, path
    return {}, None
