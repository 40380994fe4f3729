"""Where each file of a results folder lies, in one place.

A results folder (``results_dir``) holds the compiled-kernel cache, shared by
every GPU of the machine, and one folder per GPU (``<results>/<gpu>``), which
holds everything measured there. Code that reads or writes one of these files
asks here for its path, and so do the workflow's rules: a folder named by a
Snakemake wildcard (``ResultsFolder(results).gpu("{gpu}")``) gives each file's
pattern. The names a pipeline's folders may hold (what ``results_dir`` is
checked against) follow from the same names.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

CUBIN_CACHE = ".cubin-cache"
REFERENCE = "reference"
# The stamps of the reports the report target rebuilt: the shipped references' and finished folders'.
REFERENCE_REPORT_STAMPS = ".reference-reports"
FINISHED_REPORT_STAMPS = ".finished-reports"
SEARCH_BENCHMARK = "search-benchmark"
# A report folder's documents; its figures are named by their stems.
REPORT_MARKDOWN = "report.md"
REPORT_HTML = "report.html"
# A GPU folder's logs: one per job, and Snakemake's ``benchmark:`` file of each job (its seconds).
LOGS = "logs"
STAGE_SECONDS = Path(LOGS) / "seconds"


def cubin_cache(results_dir: str | os.PathLike) -> Path:
    """The compiled-kernel cache of a results folder."""
    return Path(results_dir) / CUBIN_CACHE


@dataclass(frozen=True)
class GpuFolder:
    """The folder of one GPU's run (``<results>/<gpu>``) and its files."""

    path: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))

    @property
    def device_json(self) -> Path:
        return self.path / "device.json"

    @property
    def peaks_json(self) -> Path:
        return self.path / "peaks.json"

    @property
    def peaks_parquet(self) -> Path:
        return self.path / "peaks.parquet"

    @property
    def compile_parquet(self) -> Path:
        return self.path / "compile.parquet"

    @property
    def measurements(self) -> Path:
        """The collected dataset: every sweep's, study's and the peaks' rows."""
        return self.path / "measurements.parquet"

    @property
    def best_json(self) -> Path:
        return self.path / "best.json"

    @property
    def best_header(self) -> Path:
        return self.path / "best_configs.h"

    @property
    def optuna_journal(self) -> Path:
        """A study's default storage: the Optuna journal file."""
        return self.path / "optuna.log"

    @property
    def sweeps(self) -> Path:
        return self.path / "sweeps"

    @property
    def studies(self) -> Path:
        return self.path / "studies"

    @property
    def profiles(self) -> Path:
        return self.path / "profiles"

    @property
    def report(self) -> Path:
        return self.path / "report"

    def sweep(self, name: str) -> Path:
        return self.sweeps / f"{name}.parquet"

    def study(self, name: str) -> Path:
        return self.studies / f"{name}.parquet"

    def profile(self, name: str) -> Path:
        return self.profiles / f"{name}.parquet"

    @property
    def store(self) -> Path:
        """What a stage keeps between its runs: a sweep's row store, the last profiles."""
        return self.path / "store"

    def sweep_store(self, name: str) -> Path:
        return self.store / "sweeps" / name

    @property
    def profile_store(self) -> Path:
        return self.store / "profiles"

    @property
    def report_draft(self) -> Path:
        """The report drawn but for its counters and documents (``tuner/report/draft.py``)."""
        return self.store / "report-draft.pickle"

    @property
    def report_markdown(self) -> Path:
        return self.report / REPORT_MARKDOWN

    @property
    def report_html(self) -> Path:
        return self.report / REPORT_HTML

    def report_figure(self, stem: str, suffix: str = ".png") -> Path:
        return self.report / f"{stem}{suffix}"

    @property
    def logs(self) -> Path:
        return self.path / LOGS

    def log(self, job: str) -> Path:
        """The log of one job (a rule's name; a sweep's and a study's carry their name after a dash)."""
        return self.logs / f"{job}.log"

    @property
    def stage_seconds(self) -> Path:
        """Snakemake's ``benchmark:`` files of this folder's jobs."""
        return self.path / STAGE_SECONDS

    def seconds(self, job: str) -> Path:
        """The ``benchmark:`` file of one job: its wall seconds in column ``s``."""
        return self.stage_seconds / f"{job}.tsv"


@dataclass(frozen=True)
class ResultsFolder:
    """A results folder (``results_dir``): the cubin cache, a folder per GPU,
    the shipped reference runs and the report target's stamps."""

    path: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))

    @property
    def cubin_cache(self) -> Path:
        return cubin_cache(self.path)

    def gpu(self, name: str) -> GpuFolder:
        """The folder of one GPU's run (``name`` may be a wildcard, ``{gpu}``)."""
        return GpuFolder(self.path / name)

    @property
    def references(self) -> Path:
        """The shipped reference runs, a folder per GPU."""
        return self.path / REFERENCE

    def reference(self, gpu: str) -> GpuFolder:
        return GpuFolder(self.references / gpu)

    def reference_report_stamp(self, gpu: str) -> Path:
        """Stamped when a reference run's report was drawn (outside the tracked tree)."""
        return self.path / REFERENCE_REPORT_STAMPS / f"{gpu}.done"

    def reference_report_log(self, gpu: str) -> Path:
        return self.path / REFERENCE_REPORT_STAMPS / f"{gpu}.log"

    def finished_report_stamp(self, folder: str) -> Path:
        """Stamped when a finished folder's report was drawn by the report target."""
        return self.path / FINISHED_REPORT_STAMPS / f"{folder}.done"

    def finished_report_log(self, folder: str) -> Path:
        return self.path / FINISHED_REPORT_STAMPS / f"{folder}.log"

    @property
    def search_benchmark(self) -> Path:
        """The search benchmark's output folder."""
        return self.path / SEARCH_BENCHMARK


def _gpu_folder_names() -> frozenset[str]:
    folder = GpuFolder(Path())
    held = (folder.device_json, folder.peaks_json, folder.peaks_parquet, folder.compile_parquet, folder.measurements,
            folder.best_json, folder.best_header, folder.optuna_journal, folder.sweeps, folder.studies, folder.profiles,
            folder.store, folder.report, folder.logs)  # fmt: skip
    return frozenset(path.name for path in held)


# What a GPU's folder may hold once this pipeline has written to it.
GPU_FOLDER_NAMES = _gpu_folder_names()
# What a results folder holds besides a folder per GPU: the compiled-kernel
# cache, the shipped reference results and the stamps of their rebuilt reports
# (and of finished folders' reports), the search benchmark's folder, a README
# saying how the runs were made, and files version control leaves.
RESULTS_FOLDER_NAMES = frozenset({REFERENCE, REFERENCE_REPORT_STAMPS, FINISHED_REPORT_STAMPS, CUBIN_CACHE, SEARCH_BENCHMARK,
                                  "README.md", ".gitkeep", ".gitignore", ".DS_Store"})  # fmt: skip
