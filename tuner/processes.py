"""The command line's processes: the ``--gpus`` list, and the command and
environment of a stage's child run as ``python -m tuner ... --child`` (the
profiled harness, which ncu must start as a command of its own), and how such
a child hands a refusal (its one line and exit status) to the stage that
started it: through a file the stage names in its environment, since ncu
stands between them."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

# The environment variable naming the file where a child command writes its refusal.
REFUSAL_FILE = "TUNER_REFUSAL_FILE"


def write_refusal(line: str, exit_status: int) -> None:
    """Where this process is a stage's child (``REFUSAL_FILE`` is set), leave
    its refusal for the stage; its own stderr has the line too."""
    path = os.environ.get(REFUSAL_FILE)
    if path:
        Path(path).write_text(json.dumps({"line": line, "exit_status": exit_status}))


def read_refusal(path: str | os.PathLike) -> tuple[str, int] | None:
    """The refusal a child left in ``path`` (its line and exit status), or None."""
    try:
        left = json.loads(Path(path).read_text())
        return str(left["line"]), int(left["exit_status"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


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
