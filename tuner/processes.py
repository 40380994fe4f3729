"""Measuring in child processes. A kernel that poisons the CUDA context (an
illegal address) leaves its process unable to measure anything more; so each
measuring stage runs its GPU work in a child and starts a fresh one (a fresh
context) when the child exits with ``EXIT_DEVICE_FAULT``. The child resumes
from what is stored (the sweep's rows, the study's claims)."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import subprocess
import sys
import threading

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


def child_command(args, *extra: str) -> list[str]:
    """The measuring child of the stage ``args`` names, with the same inputs."""
    names = getattr(args, "names", None) or [args.name]
    command = [sys.executable, "-m", "tuner", args.command, *names, "--child"]
    for flag in ("settings", "config", "device", "out"):
        value = getattr(args, flag, None)
        if value:
            command += [f"--{flag}", str(value)]
    return command + list(extra)


def gpu_list(text: str) -> list[str]:
    """``--gpus``: CUDA device indices separated by commas."""
    gpus = [g.strip() for g in text.split(",") if g.strip()]
    if not gpus or not all(g.isdigit() for g in gpus):
        raise argparse.ArgumentTypeError(f"must be CUDA device indices separated by commas (e.g. 0,1), got {text!r}")
    if len({int(g) for g in gpus}) < len(gpus):
        raise argparse.ArgumentTypeError(f"must name each CUDA device once (two workers on one GPU share nothing but its time), got {text!r}")
    return gpus


def worker_commands(args, settings) -> list[tuple[list[str], dict, str]]:
    """(command, environment, GPU) of each study worker: one per GPU of
    ``--gpus`` (or ``study_gpus``), each seeing only its own GPU."""
    gpus = args.gpus or [str(g) for g in settings.run.study_gpus]
    if len(gpus) <= 1:
        gpu = gpus[0] if gpus else str(settings.run.device_index)
        return [(child_command(args, "--device-index", gpu), child_env(), gpu)]
    return [(child_command(args, "--worker", str(i), "--device-index", "0"), child_env(CUDA_VISIBLE_DEVICES=gpu), gpu)
            for i, gpu in enumerate(gpus)]  # fmt: skip


@contextlib.contextmanager
def importing(*modules: str):
    """Import ``modules`` in a background thread while the block runs (a parent
    waiting on its measuring child); the block's end waits for them."""
    thread = threading.Thread(target=lambda: [importlib.import_module(m) for m in modules], daemon=True)
    thread.start()
    try:
        yield
    finally:
        thread.join()
