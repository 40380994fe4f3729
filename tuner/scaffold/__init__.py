"""A folder of one's own that runs the pipeline: ``tuner init [FOLDER]``.

It writes the folder's ``config.yaml`` and a ``Snakefile`` that runs the
installed workflow (``tuner.resources.workflow_snakefile()``) as a Snakemake
``module`` on that config, so ``snakemake --cores 1`` there sweeps, studies,
reports and exports what the config names, under the folder's ``results/``.
With ``kernel``, a ``KernelSpec`` skeleton of that CUDA file's kernels
(``tuner.scaffold.spec_text``) and a config that sweeps and studies each; with
``lessons`` (or without a kernel) the lessons' sweeps and studies as well.

Nothing is written where a file would be replaced (unless ``force``) or the
skeleton does not load: the refusal is one line, before any file is written.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import yaml

from tuner.families import KernelSpec, Problem
from tuner.resources import kernels_dir, lessons_config, resource_missing
from tuner.scaffold.cuda_source import read_cuda_source
from tuner.scaffold.spec_text import DeclaredKernel, relative_source, skeleton

CONFIG = "config.yaml"
SNAKEFILE = "Snakefile"
STUDY_FRACTION = 0.5  # of each kernel's space: enough trials to see a study against the sweep beside it

SNAKEFILE_TEXT = '''\
# The tuner's workflow, installed with the package, run on this folder's config.yaml
# (written by `tuner init`): from this folder,
#   snakemake --cores 1        sweeps, studies, reports and exports on this machine's GPU
#   snakemake -n --cores 1     lists the jobs, without a GPU
# Results land under the config's results_dir. `--configfile other.yaml` runs that config
# instead (config.yaml is then not read). At the end, each stage's seconds are shown.
import time

import tuner.resources

STARTED = time.time()

if not workflow.overwrite_configfiles:

    configfile: "config.yaml"


module tuner_workflow:
    snakefile:
        tuner.resources.workflow_snakefile()
    config:
        config


use rule * from tuner_workflow


onsuccess:
    from tuner.data.stage_seconds import print_run_seconds

    print_run_seconds(config.get("results_dir", "results"), STARTED)
'''


class InitRefused(ValueError):
    """What ``init_folder`` will not do: the message is its one line."""


@dataclass(frozen=True)
class Written:
    """What ``init_folder`` wrote, and what a person does next."""

    files: tuple[Path, ...]
    kernels: tuple[DeclaredKernel, ...]
    notes: tuple[str, ...]


def init_folder(folder: str | Path = ".", *, kernel: str | Path | None = None, lessons: bool = False, force: bool = False,
                nvcc: str | None = "nvcc") -> Written:  # fmt: skip
    """Write ``config.yaml``, ``Snakefile`` and, with ``kernel``, ``<kernel's stem>.py`` into ``folder``.

    Args:
        kernel: a CUDA file whose kernels the folder tunes.
        lessons: also run the lessons' sweeps and studies (always, without ``kernel``).
        force: replace files of those names that exist.
        nvcc: the compiler asked which identifiers the CUDA file leaves undefined (None: not asked).

    Raises:
        InitRefused: a file exists, the CUDA file is unreadable or holds no
            kernel, or the skeleton does not load (one line; nothing written).
    """
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise InitRefused(f"FOLDER: must be a folder (or a path where one can be made), got {str(folder)!r}, a file")
    for path in (lessons_config(), kernels_dir()):
        missing = resource_missing(path)
        if missing:
            raise InitRefused(missing)
    cuda_file = None if kernel is None else Path(kernel)
    if cuda_file is not None and not cuda_file.is_file():
        raise InitRefused(f"--kernel: must name an existing CUDA file, got {str(cuda_file)!r}")
    names = ([_module_name(cuda_file)] if cuda_file else []) + [CONFIG, SNAKEFILE]
    if not force:  # before reading the CUDA file: nvcc takes seconds
        for name in names:
            if (folder / name).exists():
                raise InitRefused(f"{folder / name}: exists; init writes {', '.join(names)} and replaces none "
                                  f"(--force replaces them)")  # fmt: skip
    texts: dict[str, str] = {}
    declared: list[DeclaredKernel] = []
    notes: list[str] = []
    if cuda_file is not None:
        module = names[0]
        try:
            source = read_cuda_source(cuda_file, [kernels_dir()], nvcc=nvcc)
            text, declared = skeleton(source, relative_source(cuda_file, folder), module)
        except ValueError as error:
            raise InitRefused(str(error)) from None
        notes += list(source.notes) + [n for d in declared for n in d.notes]
        spaces = _load_skeleton(skeleton(source, cuda_file.resolve().as_posix(), module)[0], declared, module)
        texts[module] = text
        texts[CONFIG] = _kernel_config(declared, spaces, module, lessons)
    else:
        texts[CONFIG] = lessons_config().read_text()
    texts[SNAKEFILE] = SNAKEFILE_TEXT
    if importlib.util.find_spec("snakemake") is None:
        notes.append("Snakemake is not installed here (Snakemake 8 needs Python 3.11 or later): the Snakefile runs where "
                     "it is; tuner.tune and python -m tuner's stages run without it")  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in texts.items():
        _write_atomic(folder / name, text)
        written.append(folder / name)
    return Written(tuple(written), tuple(declared), tuple(notes))


def _module_name(cuda_file: Path) -> str:
    """The skeleton's file name: the CUDA file's stem as a Python module name."""
    stem = "".join(c if c.isalnum() or c == "_" else "_" for c in cuda_file.stem) or "kernel"
    if stem in (Path(CONFIG).stem, SNAKEFILE):
        stem = f"{stem}_kernel"
    return f"{stem}.py"


def _load_skeleton(text: str, declared: list[DeclaredKernel], module: str) -> dict[str, int]:
    """Load the skeleton (its source named absolutely) as the pipeline will, without
    registering it: each kernel's feasible configurations for its problem.

    Raises:
        InitRefused: it fails to load or a space is empty (a defect of this writer, said in one line).
    """
    with tempfile.TemporaryDirectory(prefix="tuner-init-") as scratch:
        path = Path(scratch, module)
        path.write_text(text)
        spec = importlib.util.spec_from_file_location(f"tuner_init_check_{os.getpid()}", path)
        loaded = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(loaded)
        except Exception as error:  # noqa: BLE001 - the written text's own failure, as one line
            raise InitRefused(f"{module}: the skeleton must load, got {type(error).__name__}: {' '.join(str(error).split())}") from None
    spaces = {}
    for kernel in declared:
        family = getattr(loaded, kernel.family, None)
        if not isinstance(family, KernelSpec):
            raise InitRefused(f"{module}: must define the KernelSpec {kernel.family!r}, got {type(family).__name__}")
        domains = {p.name: list(p.values) for p in family.params}
        spaces[kernel.family] = len(family.space(Problem(kernel.family, kernel.dtype, kernel.n), domains))
        if not spaces[kernel.family]:
            raise InitRefused(f"{module}: {kernel.family}'s space must hold a feasible configuration for n={kernel.n}, got none")
    return spaces


def _kernel_config(declared: list[DeclaredKernel], spaces: dict[str, int], module: str, lessons: bool) -> str:
    config: dict = {"results_dir": "results", "gpu": "auto", "arch": "auto", "seed": 0}
    if lessons:
        config = yaml.safe_load(lessons_config().read_text())
    config["family_paths"] = [module]
    sweeps, studies = dict(config.get("sweeps") or {}), dict(config.get("studies") or {})
    for kernel in declared:
        sweeps[f"{kernel.family}_space"] = {"family": kernel.family, "dtypes": [kernel.dtype], "sizes": [kernel.n],
                                            "params": "declared", "timing": {"max_time_s": 0.3}}  # fmt: skip
        if spaces[kernel.family] > 1:
            studies[f"{kernel.family}_search"] = {"family": kernel.family, "dtype": kernel.dtype, "n": kernel.n,
                                                  "budget_fraction": STUDY_FRACTION,
                                                  "compare_with_sweep": f"{kernel.family}_space",
                                                  "timing": {"max_time_s": 0.3}}  # fmt: skip
    config["sweeps"] = sweeps
    if studies:
        config["studies"] = studies
    names = ", ".join(k.family for k in declared)
    beside = ", beside the lessons' sweeps and studies" if lessons else ""
    header = (f"# What `snakemake --cores 1` measures in this folder (written by `tuner init`): every parameter value\n"
              f"# of {names} as {module} declares it (params: declared; values listed instead narrow them), and an Optuna study of\n"
              f"# {STUDY_FRACTION:.0%} of each space judged against that sweep{beside}. Every setting is checked\n"
              f"# before any GPU work; family_paths are relative to this file, results_dir to the folder snakemake runs in.\n")  # fmt: skip
    return header + yaml.safe_dump(config, sort_keys=False, default_flow_style=None, width=120)


def _write_atomic(path: Path, text: str) -> None:
    scratch = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    scratch.write_text(text)
    os.replace(scratch, path)


def say_written(written: Written, folder: str | Path, say: Callable[[str], None] = print) -> None:
    """What was written, each kernel's space, the notes, and the next commands."""
    for path in written.files:
        say(f"wrote {path}")
    for kernel in written.kernels:
        roles = ", ".join(f"{a.name} ({a.role})" for a in kernel.kernel.args)
        say(f"kernel {kernel.kernel.name}: family {kernel.family}, {kernel.dtype}, n={kernel.n}; arguments {roles}")
    for note in written.notes:
        say(f"note: {note}")
    folder = Path(folder)
    if written.kernels:
        module = next(p for p in written.files if p.suffix == ".py")
        say(f"next: check the lines marked CHECK in {module} and write its reference, then "
            f"python -m tuner check-family {module}")  # fmt: skip
    where = "" if folder.resolve() == Path.cwd().resolve() else f"cd {folder} && "
    say(f"then: {where}snakemake --cores 1   (snakemake -n --cores 1 lists the jobs without a GPU)")


__all__ = ["InitRefused", "Written", "init_folder", "say_written"]
