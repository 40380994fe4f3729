"""What Kernel Tuner scripts import from ``kernel_tuner.file_utils``: the
results as a T4 file (``store_output_file``, through ``tuner.data.t4``) and
the device they were measured on (``store_metadata_file``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

from tuner.data.results import write_text_atomic
from tuner.data.t4 import to_t4, write_t4
from tuner.kernel_tuner.family import KernelTunerArgumentError


def store_output_file(output_filename: str | Path, results: Any, tune_params: Iterable[str], objective: str = "time") -> Path:
    """Write ``results`` (what ``tune_kernel`` returned) as a T4 document to
    ``output_filename`` (``.json`` added where it has no such suffix).

    Raises:
        KernelTunerArgumentError: ``results`` is not ``tune_kernel``'s, or the objective is not ``time``.
    """
    rows = getattr(results, "rows", None)
    if rows is None:
        raise KernelTunerArgumentError(
            "results: must be what tuner.kernel_tuner.tune_kernel returned (it carries its rows), got a plain list"
        )
    if objective != "time":
        raise KernelTunerArgumentError(f"objective: the rows are ranked by time; must be 'time', got {objective!r}")
    measured = rows[rows["status"] != "infeasible"]
    return write_t4(to_t4(measured, list(tune_params)), _json_path(output_filename))


def store_metadata_file(metadata_filename: str | Path) -> Path:
    """Write the device of the last ``tune_kernel`` call (its ``device.json``) to ``metadata_filename`` (``.json`` added).

    Raises:
        KernelTunerArgumentError: no ``tune_kernel`` call has run in this process.
    """
    from tuner.kernel_tuner.interface import last_results_folder

    folder = last_results_folder()
    if folder is None:
        raise KernelTunerArgumentError("store_metadata_file: needs a tune_kernel call before it in this process, got none")
    device = json.loads((folder / "device.json").read_text())
    return write_text_atomic(
        json.dumps({"device": device, "results_folder": str(folder)}, indent=1) + "\n", _json_path(metadata_filename)
    )


def _json_path(name: str | Path) -> Path:
    path = Path(name)
    return path if path.suffix.lower() in (".json", ".gz") else path.with_name(path.name + ".json")
