"""Progress of the long stages (compile, sweeps, studies; any later stage that
counts its work, e.g. profiling, opens a ``Progress`` the same way), and where
each stage's time went (``Phases``: the seconds of its named steps).

On a terminal it is a tqdm bar with the count, rate and ETA. Elsewhere (a
Snakemake log, a pipe) a bar's carriage returns would fill the file, so the
same figures are written as a plain line every ``PLAIN_EVERY_S`` seconds and
once at the end::

    sweep:reduce_space int32 n=268435456: 120/1536 (8%) 6.02config/s, 0:20 elapsed, 3:55 left

``TUNER_PROGRESS=bar``, ``lines`` or ``off`` overrides the choice.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from typing import Callable, Iterable, Iterator, TextIO, TypeVar

from tqdm import tqdm

PLAIN_EVERY_S = 20.0
# The plain line: what tqdm's bar says, without the bar.
PLAIN_FORMAT = "{desc}: {n_fmt}/{total_fmt} ({percentage:.0f}%) {rate_fmt}, {elapsed} elapsed, {remaining} left"
PLAIN_FORMAT_NO_TOTAL = "{desc}: {n_fmt} {rate_fmt}, {elapsed} elapsed"
MODES = ("bar", "lines", "off")

T = TypeVar("T")


class Phases(dict):
    """Seconds per named phase of a stage, summed over its entries: where a
    sweep's, a study's, a profile's or a report's time goes (``with phases("verify"): ...``)."""

    @contextlib.contextmanager
    def __call__(self, name: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            self[name] = self.get(name, 0.0) + time.perf_counter() - start

    def __str__(self) -> str:
        """Largest first: ``verify 1.2 s, inputs 0.3 s``."""
        return ", ".join(f"{name} {seconds:.1f} s" for name, seconds in sorted(self.items(), key=lambda item: -item[1]))


def choose_mode(stream: TextIO) -> str:
    """``TUNER_PROGRESS`` if set, else a bar on a terminal and lines elsewhere."""
    chosen = os.environ.get("TUNER_PROGRESS", "").strip().lower()
    if chosen in MODES:
        return chosen
    isatty = getattr(stream, "isatty", None)
    return "bar" if isatty is not None and isatty() else "lines"


class Progress:
    """Counts ``total`` units of work named ``what``; use as a context manager
    and call ``update()`` as each unit finishes (from any thread)."""

    def __init__(
        self,
        what: str,
        total: int | None,
        *,
        unit: str = "config",
        initial: int = 0,
        stream: TextIO | None = None,
        every_s: float = PLAIN_EVERY_S,
        mode: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.mode = mode or choose_mode(self.stream)
        self.every_s, self.clock = every_s, clock
        # tqdm keeps the count, rate and ETA in both modes; only the bar mode lets it draw.
        self.bar = tqdm(total=total, desc=what, unit=unit, initial=initial, file=self.stream, dynamic_ncols=True,
                        disable=self.mode != "bar", smoothing=0.1)  # fmt: skip
        self.what, self.total, self.unit, self.initial, self.n = what, total, unit, initial, initial
        self.started = self.last_line = clock()
        self.closed = False
        self.lock = threading.Lock()

    def update(self, count: int = 1) -> None:
        with self.lock:
            self.n += count
            if self.mode == "bar":
                self.bar.update(count)
            elif self.mode == "lines" and self.clock() - self.last_line >= self.every_s:
                self._line()

    def counting(self, func: Callable[..., T]) -> Callable[..., T]:
        """``func``, counting one unit each time a call of it returns or raises."""

        def counted(*args, **kwargs) -> T:
            try:
                return func(*args, **kwargs)
            finally:
                self.update()

        return counted

    def message(self, text: str, log: Callable[[str], None] = print) -> None:
        """Print ``text`` with ``log`` without breaking the bar."""
        if self.mode == "bar":
            with tqdm.external_write_mode(file=self.stream):
                log(text)
        else:
            log(text)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.mode == "bar":
            self.bar.close()
        elif self.mode == "lines":
            self._line()

    def line(self) -> str:
        """The plain progress line as of now."""
        elapsed = self.clock() - self.started
        text = tqdm.format_meter(
            self.n,
            self.total,
            elapsed,
            prefix=self.what,
            unit=self.unit,
            bar_format=PLAIN_FORMAT if self.total else PLAIN_FORMAT_NO_TOTAL,
            initial=self.initial,
        )
        return " ".join(text.split())  # tqdm pads the rate for its bar

    def _line(self) -> None:
        self.last_line = self.clock()
        print(self.line(), file=self.stream, flush=True)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def track(items: Iterable[T], what: str, total: int | None = None, **options) -> Iterator[T]:
    """``items``, counting each one as it is taken (the next one asked for)."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    with Progress(what, total, **options) as progress:
        for item in items:
            yield item
            progress.update()
