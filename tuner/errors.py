"""Errors the stages share, kept free of heavy imports so any layer may raise them."""

from __future__ import annotations


class FatalDeviceError(RuntimeError):
    """The CUDA context is unusable after a failed launch (an illegal address,
    say, poisons it for every later call). The process that measures must end;
    a fresh process gets a fresh context (``tuner.measure.remote``).

    Attributes:
        row: the results row of the configuration that caused the fault
            (status ``launch_error`` and the reason), or None when the fault
            cannot be attributed to one configuration.
    """

    def __init__(self, message: str, row: dict | None = None) -> None:
        super().__init__(message)
        self.row = row


class DamagedFile(RuntimeError):
    """A file the pipeline wrote earlier cannot be read back, and the stage
    cannot go on without it. The message is one line: the file, what is wrong
    with it, and the command that recovers."""


# Exit status of a stage stopped by a DamagedFile.
EXIT_DAMAGED_FILE = 1


def measure_raised(error: Exception) -> dict:
    """The row of a configuration whose measurement raised ``error``: data
    (``launch_error`` with the reason), not the end of the search."""
    return {"status": "launch_error", "error": f"measure raised {type(error).__name__}: {error}"}
