"""Measuring in child processes. A kernel that poisons the CUDA context (an
illegal address) leaves its process unable to measure anything more; so each
measuring stage runs its GPU work in a child and starts a fresh one (a fresh
context) when the child exits with ``EXIT_DEVICE_FAULT``. The child resumes
from what is stored (the sweep's rows, the study's claims)."""

from __future__ import annotations

import os
import subprocess
import sys

from tuner.errors import EXIT_DEVICE_FAULT

# Fresh measuring processes started after device faults, per stage run.
MAX_RESTARTS = 20


def supervise(command: list[str], env: dict | None = None, what: str = "measuring process") -> None:
    """Run ``command`` until it ends; start it again after a device fault.

    Raises:
        SystemExit: the child failed otherwise (its exit status), or faulted
            more than ``MAX_RESTARTS`` times in a row.
    """
    for restart in range(MAX_RESTARTS + 1):
        code = subprocess.call(command, env=env)
        if code == 0:
            return
        if code != EXIT_DEVICE_FAULT:
            raise SystemExit(code)
        if restart < MAX_RESTARTS:
            print(f"{what}: device fault recorded; starting a fresh process (fresh CUDA context), restart {restart + 1}",
                  file=sys.stderr, flush=True)  # fmt: skip
    raise SystemExit(f"error: {what} hit {MAX_RESTARTS + 1} device faults in a row; stopped (what was measured is kept)")


def child_env(**changes: str) -> dict:
    """The environment of a measuring child: CUDA devices in PCI bus order (as
    NVML and nvidia-smi number them), unbuffered output for the logs."""
    return {**os.environ, "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "PYTHONUNBUFFERED": "1", **changes}
