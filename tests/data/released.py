"""Start worker processes together: wait for each to write its ready file,
then release them all at once by creating the go file."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path


def run_released(processes: list[subprocess.Popen], ready: list[Path], go: Path, timeout_s: float) -> list[tuple[str, str]]:
    """(stdout, stderr) of every process once all have ended; any still
    running when this returns or raises is killed."""
    try:
        deadline = time.monotonic() + timeout_s
        while not all(path.exists() for path in ready):
            assert all(p.poll() is None for p in processes), [p.communicate() for p in processes if p.poll() is not None]
            assert time.monotonic() < deadline, "workers did not start"
            time.sleep(0.01)
        go.touch()
        return [p.communicate(timeout=timeout_s) for p in processes]
    finally:
        for p in processes:
            if p.poll() is None:
                p.kill()
                p.wait()
