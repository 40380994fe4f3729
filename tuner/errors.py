"""Errors the stages share, kept free of heavy imports so any layer may raise them."""

from __future__ import annotations


class Refusal(Exception):
    """An expected error: input or state the user can put right (a config
    value, a damaged file, no GPU, a module nvcc rejects), never a bug. Every
    process reports one as its one line and exit status, never a traceback:
    a command's ``main``, a stage's measuring process and its search workers
    (which hand it to the stage that started them, ``Refused``).

    Subclasses set ``label`` (the line's first words) and ``exit_status``.
    """

    label = "error"
    exit_status = 1

    def line(self) -> str:
        """What the user reads: ``label: message``, on one line."""
        return f"{self.label}: {self}"


class Refused(Refusal):
    """A refusal met in another process, carried to the one that started it
    as that process reported it: its line and exit status."""

    def __init__(self, line: str, exit_status: int) -> None:
        super().__init__(line)
        self.exit_status = exit_status

    def line(self) -> str:
        return str(self)

    def __reduce__(self):  # picklable across processes with both fields
        return (type(self), (str(self), self.exit_status))


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


# Exit status of a stage stopped by a DamagedFile.
EXIT_DAMAGED_FILE = 1


class DamagedFile(Refusal, RuntimeError):
    """A file the pipeline wrote earlier cannot be read back, and the stage
    cannot go on without it. The message is one line: the file, what is wrong
    with it, and the command that recovers."""

    exit_status = EXIT_DAMAGED_FILE


def measure_raised(error: Exception) -> dict:
    """The row of a configuration whose measurement raised ``error``: data
    (``launch_error`` with the reason), not the end of the search."""
    return {"status": "launch_error", "error": f"measure raised {type(error).__name__}: {error}"}
