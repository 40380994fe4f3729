"""The profile schema: hardware counters of one profiled launch per configuration.

``results/<gpu>/profiles/<sweep>.parquet`` holds one row per profiled
configuration: the identity of its measurement (source, family, dtype, n,
parameters, ``config_key``) with the timed row's median time and GB/s beside
it, then one column per counter below, each named for what it means, in the
unit its name ends with. ``COUNTERS`` says which Nsight Compute metric(s) each
comes from and how; the profile stage (``tuner/profile``) asks ncu for exactly
``ncu_metrics()``. A profile that could not be taken (no ncu, counters not
permitted) is a file with no rows and the reason in its metadata
(``read_profiles`` returns it as a note).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

import pandas as pd

from tuner.data.results import PARAM_COLUMNS, param_columns, temporary_beside

NOTE_KEY = b"tuner.profile_note"


@dataclass(frozen=True)
class Counter:
    """One column: ``value(metrics)`` from the ncu metrics (SI base units:
    bytes, seconds, cycles) it names."""

    column: str
    unit: str
    meaning: str
    metrics: tuple[str, ...]
    value: Callable[[Mapping[str, float]], float]


def _one(metric: str, scale: float = 1.0):
    return lambda m: m[metric] * scale


def _ratio(top: str, bottom: str):
    return lambda m: m[top] / m[bottom] if m[bottom] else float("nan")


_LD = "mem_global_op_ld"
_ST = "mem_global_op_st"
_FP = ("smsp__sass_thread_inst_executed_op_fadd_pred_on.sum", "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum",
       "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum")  # fmt: skip
_SHARED = ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
           "smsp__sass_inst_executed_op_shared_ld.sum", "smsp__sass_inst_executed_op_shared_st.sum")  # fmt: skip

COUNTERS: tuple[Counter, ...] = (
    Counter("global_load_efficiency_pct", "%", "bytes a global load uses per sector it fetches (nvprof gld_efficiency)",
            (f"smsp__sass_average_data_bytes_per_sector_{_LD}.pct",), _one(f"smsp__sass_average_data_bytes_per_sector_{_LD}.pct")),
    Counter("global_store_efficiency_pct", "%", "bytes a global store uses per sector it writes (nvprof gst_efficiency)",
            (f"smsp__sass_average_data_bytes_per_sector_{_ST}.pct",), _one(f"smsp__sass_average_data_bytes_per_sector_{_ST}.pct")),
    Counter("global_load_sectors", "sectors", "32-byte sectors global loads fetched (nvprof gld_transactions)",
            (f"l1tex__t_sectors_pipe_lsu_{_LD}.sum",), _one(f"l1tex__t_sectors_pipe_lsu_{_LD}.sum")),
    Counter("global_load_requests", "requests", "global load instructions sent to L1 (one per warp)",
            (f"l1tex__t_requests_pipe_lsu_{_LD}.sum",), _one(f"l1tex__t_requests_pipe_lsu_{_LD}.sum")),
    Counter("global_load_sectors_per_request", "sectors/request", "sectors per global load request (4 for a coalesced 4-byte load)",
            (f"l1tex__t_sectors_pipe_lsu_{_LD}.sum", f"l1tex__t_requests_pipe_lsu_{_LD}.sum"),
            _ratio(f"l1tex__t_sectors_pipe_lsu_{_LD}.sum", f"l1tex__t_requests_pipe_lsu_{_LD}.sum")),
    Counter("global_store_sectors", "sectors", "32-byte sectors global stores wrote (nvprof gst_transactions)",
            (f"l1tex__t_sectors_pipe_lsu_{_ST}.sum",), _one(f"l1tex__t_sectors_pipe_lsu_{_ST}.sum")),
    Counter("global_store_requests", "requests", "global store instructions sent to L1",
            (f"l1tex__t_requests_pipe_lsu_{_ST}.sum",), _one(f"l1tex__t_requests_pipe_lsu_{_ST}.sum")),
    Counter("global_store_sectors_per_request", "sectors/request", "sectors per global store request",
            (f"l1tex__t_sectors_pipe_lsu_{_ST}.sum", f"l1tex__t_requests_pipe_lsu_{_ST}.sum"),
            _ratio(f"l1tex__t_sectors_pipe_lsu_{_ST}.sum", f"l1tex__t_requests_pipe_lsu_{_ST}.sum")),
    Counter("global_load_throughput_gbs", "GB/s", "bytes global loads asked of L1 per second (nvprof gld_throughput)",
            (f"l1tex__t_bytes_pipe_lsu_{_LD}.sum.per_second",), _one(f"l1tex__t_bytes_pipe_lsu_{_LD}.sum.per_second", 1e-9)),
    Counter("dram_read_bytes", "bytes", "bytes read from device memory", ("dram__bytes_read.sum",), _one("dram__bytes_read.sum")),
    Counter("dram_write_bytes", "bytes", "bytes written to device memory", ("dram__bytes_write.sum",), _one("dram__bytes_write.sum")),
    Counter("dram_read_throughput_gbs", "GB/s", "device-memory read bandwidth (nvprof dram_read_throughput)",
            ("dram__bytes_read.sum.per_second",), _one("dram__bytes_read.sum.per_second", 1e-9)),
    Counter("dram_throughput_pct", "% of peak", "device-memory throughput as a share of its peak",
            ("dram__throughput.avg.pct_of_peak_sustained_elapsed",), _one("dram__throughput.avg.pct_of_peak_sustained_elapsed")),
    Counter("l1_hit_rate_pct", "%", "sectors found in L1", ("l1tex__t_sector_hit_rate.pct",), _one("l1tex__t_sector_hit_rate.pct")),
    Counter("l2_hit_rate_pct", "%", "sectors found in L2", ("lts__t_sector_hit_rate.pct",), _one("lts__t_sector_hit_rate.pct")),
    Counter("achieved_occupancy_pct", "%", "active warps per SM cycle over the SM's maximum (nvprof achieved_occupancy)",
            ("sm__warps_active.avg.pct_of_peak_sustained_active",), _one("sm__warps_active.avg.pct_of_peak_sustained_active")),
    Counter("branch_efficiency_pct", "%", "branches all threads of a warp took the same way (nvprof branch_efficiency; empty without branches)",
            ("smsp__sass_average_branch_targets_threads_uniform.pct", "smsp__sass_inst_executed_op_branch.sum"),
            lambda m: m["smsp__sass_average_branch_targets_threads_uniform.pct"] if m["smsp__sass_inst_executed_op_branch.sum"] else float("nan")),
    Counter("branches", "instructions", "branch instructions executed, per warp (nvprof branch)",
            ("smsp__sass_inst_executed_op_branch.sum",), _one("smsp__sass_inst_executed_op_branch.sum")),
    Counter("divergent_branches", "branch targets", "branch targets taken by only some threads of a warp (nvprof divergent_branch)",
            ("smsp__sass_branch_targets_threads_divergent.sum",), _one("smsp__sass_branch_targets_threads_divergent.sum")),
    Counter("instructions_per_warp", "instructions", "warp instructions executed per launched warp (nvprof inst_per_warp)",
            ("smsp__inst_executed.sum", "smsp__warps_launched.sum"), _ratio("smsp__inst_executed.sum", "smsp__warps_launched.sum")),
    Counter("barrier_stall_pct", "% of warp cycles", "cycles of active warps spent waiting at a barrier (cf. nvprof stall_sync)",
            ("smsp__warp_issue_stalled_barrier_per_warp_active.pct",), _one("smsp__warp_issue_stalled_barrier_per_warp_active.pct")),
    Counter("long_scoreboard_stall_pct", "% of warp cycles", "cycles of active warps spent waiting for global/local memory",
            ("smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct",),
            _one("smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct")),
    Counter("shared_bank_conflicts", "conflicts", "extra shared-memory wavefronts caused by bank conflicts (loads + stores)",
            _SHARED[:2], lambda m: m[_SHARED[0]] + m[_SHARED[1]]),
    Counter("shared_conflicts_per_request", "conflicts/request", "bank conflicts per shared-memory load or store instruction",
            _SHARED, lambda m: (m[_SHARED[0]] + m[_SHARED[1]]) / (m[_SHARED[2]] + m[_SHARED[3]]) if m[_SHARED[2]] + m[_SHARED[3]] else 0.0),
    Counter("fp32_flops", "FLOP", "single-precision operations executed (add, multiply, 2 per fused multiply-add)",
            _FP, lambda m: m[_FP[0]] + m[_FP[1]] + 2 * m[_FP[2]]),
    Counter("fp32_peak_gflops", "GFLOP/s", "FP32 peak at the clock the kernel ran: FMA lanes per cycle x 2 x SM clock",
            ("sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained", "sm__cycles_elapsed.avg.per_second"),
            lambda m: m["sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained"] * 2 * m["sm__cycles_elapsed.avg.per_second"] / 1e9),
    Counter("dram_peak_gbs", "GB/s", "device-memory peak as ncu counts it: bytes per DRAM cycle x DRAM clock",
            ("dram__bytes.sum.peak_sustained", "dram__cycles_elapsed.avg.per_second"),
            lambda m: m["dram__bytes.sum.peak_sustained"] * m["dram__cycles_elapsed.avg.per_second"] / 1e9),
    Counter("sm_clock_mhz", "MHz", "SM clock while profiled", ("sm__cycles_elapsed.avg.per_second",),
            _one("sm__cycles_elapsed.avg.per_second", 1e-6)),
    Counter("profiled_duration_ms", "ms", "the profiled launch's duration (under the profiler: not a timing)",
            ("gpu__time_duration.sum",), _one("gpu__time_duration.sum", 1e3)),
)  # fmt: skip

# Identity of each profiled row (joined to the measurements by source, dtype, n, config_key).
IDENTITY_COLUMNS = {
    "source": "string", "gpu": "string", "family": "string", "dtype": "string", "n": "Int64", **PARAM_COLUMNS,
    "config_key": "string", "grid": "string", "block": "string", "kernel": "string",
    "registers": "Int64", "spill_bytes": "Int64",  # from ptxas, via the timed row
    "time_ms_median": "float64", "bandwidth_gbs": "float64", "gflops": "float64", "bytes_moved": "Int64",
}  # fmt: skip
PROFILE_COLUMNS = {**IDENTITY_COLUMNS, **{c.column: "float64" for c in COUNTERS}}


def ncu_metrics() -> list[str]:
    """Every metric the counters need, each once, in schema order."""
    return list(dict.fromkeys(m for c in COUNTERS for m in c.metrics))


def counter(column: str) -> Counter:
    return next(c for c in COUNTERS if c.column == column)


def counter_values(metrics: Mapping[str, float]) -> dict[str, float]:
    """Counter columns from one launch's metrics; a counter whose metrics are
    missing is NaN."""
    out = {}
    for c in COUNTERS:
        out[c.column] = float(c.value(metrics)) if all(m in metrics for m in c.metrics) else float("nan")
    return out


def to_profile_frame(rows) -> pd.DataFrame:
    """Rows in the profile schema; a plug-in family's own parameters (read
    from the rows' configuration keys) keep their columns, before ``config_key``."""
    frame = pd.DataFrame(list(rows)) if not isinstance(rows, pd.DataFrame) else rows.copy()
    names = list(PROFILE_COLUMNS)
    foreign = [c for c in param_columns(frame) if c not in PROFILE_COLUMNS]
    at = names.index("config_key")
    order = names[:at] + foreign + names[at:]
    for column, dtype in PROFILE_COLUMNS.items():
        if column not in frame:
            frame[column] = pd.Series([None] * len(frame), index=frame.index, dtype=dtype)
        else:
            values = frame[column].astype(object)
            frame[column] = values.where(values.notna(), None).astype(dtype)
    return frame[order]


def write_profile(rows, path: str | os.PathLike, note: str = "") -> Path:
    """Write a profile atomically; ``note`` (why it is empty or partial) goes into the file's metadata."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(to_profile_frame(rows), preserve_index=False)
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), NOTE_KEY: note.encode()})
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = temporary_beside(path)
    os.close(fd)
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def read_profile(path: str | os.PathLike) -> tuple[pd.DataFrame, str]:
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    note = (table.schema.metadata or {}).get(NOTE_KEY, b"").decode()
    return to_profile_frame(table.to_pandas()), note


def read_profiles(folder: str | os.PathLike, log=None) -> tuple[pd.DataFrame, list[str]]:
    """Every ``profiles/*.parquet`` of a results folder, and a note per file
    that says why it is empty or partial (``"<sweep>: <reason>"``). A file
    that does not read is left out with a note and, given ``log``, one
    warning line: the report does without its counters."""
    frames, notes = [], []
    for path in sorted((Path(folder) / "profiles").glob("*.parquet")):
        try:
            frame, note = read_profile(path)
        except Exception as error:  # noqa: BLE001 - pyarrow's errors and kin: the file is damaged
            reason = " ".join(str(error).split())[:160]
            notes.append(f"{path.stem}: unreadable ({type(error).__name__}: {reason}); profile the sweep again")
            if log is not None:
                log(f"warning: {path}: unreadable ({type(error).__name__}: {reason}); left out of the report, "
                    f"`snakemake --cores 1 --forcerun profile` makes it again")  # fmt: skip
            continue
        frames.append(frame)
        if note:
            notes.append(f"{path.stem}: {note}")
    if not frames:
        return to_profile_frame([]), notes
    return to_profile_frame(pd.concat(frames, ignore_index=True)), notes
