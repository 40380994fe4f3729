"""Where each file of a results folder lies, in one place.

A results folder (``results_dir``) holds the compiled-kernel cache, shared by
every GPU of the machine, and one folder per GPU (``<results>/<gpu>``), which
holds everything measured there. Code that reads or writes one of these files
asks here for its path; the names a pipeline's folders may hold (what
``results_dir`` is checked against) follow from the same names.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

CUBIN_CACHE = ".cubin-cache"


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


# What a GPU's folder may hold once this pipeline has written to it (its logs
# and a study's default journal besides the files above).
GPU_FOLDER_NAMES = frozenset({"device.json", "logs", "sweeps", "studies", "profiles", "store", "compile.parquet", "peaks.json", "peaks.parquet",
                              "measurements.parquet", "best.json", "best_configs.h", "report", "optuna.log"})  # fmt: skip
# What a results folder holds besides a folder per GPU: the compiled-kernel
# cache, the shipped reference results and the stamps of their rebuilt reports
# (and of finished folders' reports), the search benchmark's folder, a README
# saying how the runs were made, and files version control leaves.
RESULTS_FOLDER_NAMES = frozenset({"reference", ".reference-reports", ".finished-reports", CUBIN_CACHE, "search-benchmark",
                                  "README.md", ".gitkeep", ".gitignore", ".DS_Store"})  # fmt: skip
