"""The wall clock of a study, recorded in its rows.

A study's time to target counts from the start of its ``tune`` command (before
any worker starts, compiles or loads anything), so its rows carry that start
(``stage_started_at``), the seconds from it to the end of each row's
measurement (``stage_elapsed_s``) and the nvcc seconds spent since the
measuring process's previous row (``compile_s``). The stage hands its start
to every measuring process it starts, restarted after device faults too, so
the rows of every GPU of one run share it. The rows are durable in the
study's storage as they are measured: a killed and resumed study keeps each
run's start with its rows.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Callable

from tuner.errors import FatalDeviceError


class Stopwatch:
    """Stamps results rows with the stage's start, the seconds since it and
    the compile seconds since the previous row.

    Args:
        started: the stage's start (epoch seconds).
        compile_seconds: the measuring process's nvcc seconds so far
            (e.g. ``lambda: bench.phases.get("compile", 0.0)``).
    """

    def __init__(self, started: float, compile_seconds: Callable[[], float]) -> None:
        self.started = started
        self.started_at = dt.datetime.fromtimestamp(started, dt.timezone.utc).isoformat(timespec="microseconds")
        self._compile_seconds = compile_seconds
        self._compiled = 0.0  # compile seconds already attributed to earlier rows

    def stamp(self, row: dict) -> dict:
        compiled = self._compile_seconds()
        since, self._compiled = compiled - self._compiled, compiled
        return row | {"stage_started_at": self.started_at, "stage_elapsed_s": time.time() - self.started,
                      "compile_s": since}  # fmt: skip

    def measuring(self, measure: Callable[[dict], dict]) -> Callable[[dict], dict]:
        """``measure`` whose rows are stamped, the row of a device fault too."""

        def stamped(cfg: dict) -> dict:
            try:
                return self.stamp(measure(cfg))
            except FatalDeviceError as error:
                if error.row is not None:
                    error.row = self.stamp(error.row)
                raise

        return stamped
