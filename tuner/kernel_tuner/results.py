"""The rows ``tuner.tune`` measured, in Kernel Tuner's shape: ``(results, env)``.

``results`` holds one dict per configuration measured, in the order Kernel
Tuner lists them (the space's order for a sweep, the trials' for a study):
the parameters, ``time`` (the median in ms, the L2 cache flushed before each
sample), ``timestamp`` and what the row has at no cost (the median's 95 %
interval, the samples, GB/s, registers, shared memory, ``compile_time`` in ms
where the row has it), then the user's metrics. A configuration that failed
has ``__error__`` (Kernel Tuner's marker: ``CompilationFailedConfig``,
``RuntimeFailedConfig``, or ``WrongResultConfig`` where Kernel Tuner would have
stopped) and ``error``, the reason, instead of ``time``. The per-launch
``times`` are not kept by the pipeline, so they are not here.

``env`` has the device (``device_name``, ``compute_capability``,
``pci_bus_id``, driver and CUDA versions), ``iterations``,
``compiler_options``, ``best_config``, the winner's ``tie_set`` (the
configurations not shown slower by more than 0.5 %, ``tuner.data.ties``), the
family, the strategy, the space's size and where the rows lie.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from tuner.data.results import config_params, plain_value
from tuner.data.ties import rank
from tuner.kernel_tuner.util import CompilationFailedConfig, ErrorConfig, RuntimeFailedConfig, WrongResultConfig

ERRORS = {"compile_error": CompilationFailedConfig, "launch_error": RuntimeFailedConfig, "wrong_result": WrongResultConfig}
# Row columns each result carries, under their own names (cheap: the row has them).
EXTRAS = ("time_ms_ci_low", "time_ms_ci_high", "samples", "bandwidth_gbs", "registers", "shared_bytes")


class Results(list):
    """Kernel Tuner's list of result dicts; ``rows`` is the table they came
    from (``tuner.data.results`` schema), for ``store_output_file``."""

    rows: pd.DataFrame


def kernel_tuner_results(frame: pd.DataFrame, plan: Any, folder: Any, wall_s: float) -> tuple[Results, dict]:
    """``(results, env)`` of the rows ``frame`` measured for ``plan`` (``tuner.kernel_tuner.translate.Plan``)."""
    names = list(plan.tune_params)
    measured = frame[frame["status"] != "infeasible"]
    if plan.sampler is None:  # a sweep: the space's order, as Kernel Tuner's brute force runs it
        measured = measured.assign(_order=measured["config_key"].map(lambda key: _position(plan.spec.params, key)))
        measured = measured.sort_values("_order", kind="stable")
    elif "trial" in measured:
        measured = measured.sort_values("trial", kind="stable")
    results = Results()
    for _, row in measured.iterrows():
        results.append(_result(row, names, plan.metrics))
    results.rows = frame
    ok = [r for r in results if "__error__" not in r]
    best = min(ok, key=lambda r: r["time"]) if ok else None
    env = _device(folder)
    env |= {
        "iterations": plan.iterations,
        "compiler_options": plan.compiler_options,
        "best_config": best,
        "tie_set": _tie_set(frame, names),
        "family": plan.spec.name,
        "strategy": plan.strategy,
        "searchspace_size": plan.space_size,
        "configurations_measured": len(results),
        "results_folder": str(folder),
        "tuning_time_s": wall_s,
    }
    return results, env


def _position(params, key: str) -> int:
    """A configuration's place in the product of its parameters' values (the last parameter varying fastest)."""
    cfg = config_params(key)
    position = 0
    for param in params:
        values = list(param.values)
        position = position * len(values) + (values.index(cfg[param.name]) if cfg.get(param.name) in values else 0)
    return position


def _result(row: pd.Series, names: list[str], metrics: dict) -> dict:
    params = config_params(row["config_key"])
    result: dict[str, Any] = {name: params.get(name) for name in names}
    if row["status"] == "ok":
        result["time"] = plain_value(row["time_ms_median"])
        for column in EXTRAS:
            if column in row:
                result[column] = plain_value(row[column])
        if "compile_s" in row and plain_value(row["compile_s"]) is not None:
            result["compile_time"] = 1e3 * plain_value(row["compile_s"])
        for name, metric in metrics.items():  # in order: a metric may read the ones before it
            result[name] = plain_value(metric(result))
    else:
        kind = ERRORS.get(row["status"], ErrorConfig)
        result["__error__"] = kind(kind.__name__)
        result["error"] = plain_value(row.get("error"))
    result["timestamp"] = str(row["timestamp"]) if pd.notna(row.get("timestamp")) else None
    return result


def _tie_set(frame: pd.DataFrame, names: list[str]) -> list[dict]:
    ok = frame[(frame["status"] == "ok") & frame["bandwidth_gbs"].notna()]
    if ok.empty:
        return []
    table = rank(ok, "bandwidth_gbs")
    return [{name: config_params(key).get(name) for name in names} for key in table.loc[table["tie"], "config_key"]]


def _device(folder: Any) -> dict:
    """Kernel Tuner's device keys, from the run's ``device.json``."""
    try:
        device = json.loads((folder / "device.json").read_text())
    except (OSError, ValueError):
        return {}
    keys = {"name": "device_name", "pci_bus_id": "pci_bus_id", "cuda_version": "cuda_version",
            "compute_capability": "compute_capability", "driver_version": "driver_version"}  # fmt: skip
    return {ours: device.get(theirs) for theirs, ours in keys.items()}
