"""Energy per launch from NVML's total-energy counter, with its uncertainty.

The counter (``NvmlClocks.energy_mj``: millijoules, no root needed) advances
only when the board's power sensor updates, about every 100 ms on an H100
(``benchmarks/results/energy-h100.txt``: the counter advanced every 100.0 ms;
windows shorter than that read zero or one update). A reading between two updates says nothing
about the work since the last one, so the measurement is built around the
counter's changes:

1. The configuration's launch runs back to back in batches of ``B`` launches
   (``B`` doubled until a batch lasts ``batch_s``, or ``READ_MARGIN`` counter
   reads where a read takes longer: NVML takes milliseconds on some GPUs),
   from before the first window until after the last, so the GPU is busy at
   every boundary and no idle energy enters a window. With ``marker`` (a CUDA
   event) the next batch is enqueued before the host waits for the one
   before: the GPU never waits for the host's counter reads.
2. After each batch the counter is read. A change is a boundary: the sensor
   updated while the batch last waited for was running, so the launches done
   at the boundary are counted as those before that batch plus half of it
   (the error: at most half a batch, uniform). A constant delay between the
   sensor's sample and its value reaching NVML shifts both ends of a window
   alike, which cancels at a steady launch rate.
3. The first boundary after ``warmup_s``, once the GPU's clock has settled
   (``settled``: its SM clock at the share of its maximum that timing keeps,
   ``TimingOptions.throttle_ratio``), is the aligned start. An idle GPU's
   first launches run at a low clock, longer and at another power: a window
   over them costs several times the joules per launch. Each window
   spans ``updates`` further boundaries (about ``updates`` x 100 ms), and
   ``windows`` windows follow back to back.
4. Joules per launch (``energy_j``) = the energy over all windows / the
   launches over all windows. Its uncertainty (``energy_j_err``) is one
   standard error: the standard deviation of the windows' joules per launch
   over sqrt(windows), in quadrature with the counting error of the two outer
   boundaries (each uniform over one batch: B / sqrt(12) launches). The
   windows' spread itself is ``energy_rel_spread`` (standard deviation / mean).
   With so few windows (``energy_windows``: 3, 2 degrees of freedom, by
   default) two standard errors are not a 95 % interval: where the report
   says whether two energies differ (``tuner.report.energy``) it takes
   Student's t for the windows' degrees of freedom instead (4.30 for one
   row of 3 windows, about 2.8 for the difference of two).
   Average power (``power_w_energy``) = that energy over the host's seconds
   between the first and the last boundary.

Cost: ``warmup_s`` plus up to one counter period to align plus
``windows`` x ``updates`` periods: about 0.7 s with the defaults (3 windows
of 2 updates) on an H100.

What the number means: launches back to back, hot (the L2 is not flushed
between them, as timing does before each sample); inputs a kernel overwrites
are not restored between launches (``restore`` runs once, after), so an
in-place kernel works on its own output after the first launch: the same
work on other data. A kernel shorter than the host's launch rate (a few µs)
leaves the GPU idle between launches, and its energy is that of launches at
the host's rate: ``energy_launch_ms`` (back-to-back seconds per launch) beside
``time_ms_median`` tells. Clocks and power limits are never set.

The GPU and the counter are reached only through callables, so the whole
procedure runs under test with a simulated device and counter.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

ENERGY_COLUMNS = ("energy_j", "energy_j_err", "energy_rel_spread", "energy_windows", "energy_launches",
                  "energy_launch_ms", "energy_wall_s", "power_w_energy", "energy_j_per_byte", "energy_j_per_flop")  # fmt: skip


HOST_CLOCK: Callable[[], float] = time.perf_counter
READ_MARGIN = 4  # a batch lasts at least this many counter reads: the host's read hides behind the GPU's batch


@dataclass(frozen=True)
class EnergyOptions:
    """Knobs of ``measure_energy``."""

    # windows measured back to back: their spread gives the uncertainty (the report
    # assumes this default for rows without energy_windows: tuner.report.energy.DEFAULT_WINDOWS)
    windows: int = 3
    updates: int = 2  # counter updates each window spans (about 100 ms each on an H100)
    batch_s: float = 0.002  # seconds a batch of launches lasts between two counter reads
    warmup_s: float = 0.02  # back-to-back launches before the aligned start (clocks and power settle)
    max_batch: int = 1 << 16
    max_time_s: float = 5.0  # give up (no energy) where the counter has not moved enough by then

    def __post_init__(self) -> None:
        checks = [
            ("windows", self.windows >= 2, "must be >= 2 (the spread of the windows is the uncertainty)"),
            ("updates", self.updates >= 1, "must be >= 1"),
            ("batch_s", self.batch_s > 0, "must be > 0"),
            ("warmup_s", self.warmup_s >= 0, "must be >= 0"),
            ("max_batch", self.max_batch >= 1, "must be >= 1"),
            ("max_time_s", self.max_time_s > 0, "must be > 0"),
        ]
        for name, ok, rule in checks:
            if not ok:
                raise ValueError(f"energy.{name} {rule}, got {getattr(self, name)!r}")


class EnergyUnavailable(RuntimeError):
    """No energy for this configuration: no counter, or it did not move in time."""


@dataclass(frozen=True)
class Boundary:
    """A change of the counter seen by the host."""

    launches: float  # launches done when the sensor updated (half a batch uncertain)
    energy_mj: int  # the counter's new value
    at_s: float  # host seconds (middle of the batch it changed in)


@dataclass
class EnergyResult:
    joules: float  # per launch, over all windows
    err: float  # one standard error of ``joules`` (see the module)
    window_joules: list[float]  # per launch, each window
    launches: int  # over all windows
    batch: int
    seconds: float  # host seconds from the first to the last boundary
    wall_s: float  # the whole measurement: batch sizing, warm-up, alignment, windows
    boundaries: list[Boundary] = field(default_factory=list)

    @property
    def windows(self) -> int:
        return len(self.window_joules)

    @property
    def rel_spread(self) -> float:
        """Standard deviation of the windows' joules per launch over their mean."""
        w = np.asarray(self.window_joules, dtype=np.float64)
        return float(w.std(ddof=1) / w.mean()) if w.size >= 2 and w.mean() > 0 else float("nan")

    @property
    def power_w(self) -> float:
        return self.joules * self.launches / self.seconds if self.seconds > 0 else float("nan")

    @property
    def launch_ms(self) -> float:
        """Back-to-back milliseconds per launch during the windows."""
        return self.seconds / self.launches * 1e3

    @property
    def update_s(self) -> float:
        """The counter's period as seen: median seconds between its changes."""
        at = [b.at_s for b in self.boundaries]
        return float(np.median(np.diff(at))) if len(at) >= 2 else float("nan")

    def as_row(self, bytes_moved: int | None = None, flops: float | None = None) -> dict:
        """The energy columns of a results row (``tuner.data.results``)."""
        return {
            "energy_j": self.joules,
            "energy_j_err": self.err,
            "energy_rel_spread": self.rel_spread,
            "energy_windows": self.windows,
            "energy_launches": self.launches,
            "energy_launch_ms": self.launch_ms,
            "energy_wall_s": self.wall_s,
            "power_w_energy": self.power_w,
            "energy_j_per_byte": self.joules / bytes_moved if bytes_moved else None,
            "energy_j_per_flop": self.joules / flops if flops else None,
        }


def measure_energy(
    run: Callable[[], None],
    *,
    synchronize: Callable[[], None],
    counter: Callable[[], int | None],
    options: EnergyOptions = EnergyOptions(),
    marker: Callable[[], Callable[[], None]] | None = None,
    restore: Callable[[], None] | None = None,
    wall_clock: Callable[[], float] | None = None,
    settled: Callable[[], bool] | None = None,
) -> EnergyResult:
    """Joules per launch of ``run`` (see the module for the procedure).

    Args:
        run: enqueues one launch; no synchronisation inside.
        synchronize: waits for everything enqueued.
        counter: the energy counter in millijoules (None: there is none).
        marker: records a point in the launch stream now and returns a
            callable that waits for it (a CUDA event); None: each batch is
            followed by ``synchronize`` and the GPU idles while the host reads
            the counter (a few tens of µs a batch).
        restore: run once after the last launch (inputs a kernel overwrites).
        wall_clock: host seconds (default: ``HOST_CLOCK``, which a test may
            replace with its simulated clock).
        settled: whether the GPU runs at its working clock now; the windows
            start at the first counter change after the warm-up at which it
            does (None: no clock to ask, the warm-up alone).

    Raises:
        EnergyUnavailable: no counter, or not enough changes of it within
            ``options.max_time_s`` (or the clock never settled by then).
    """
    wall_clock = wall_clock or HOST_CLOCK
    started = wall_clock()
    if counter() is None:
        raise EnergyUnavailable("the device has no energy counter (NVML's total energy consumption)")
    try:
        batch = _batch_size(run, synchronize, _batch_seconds(counter, options, wall_clock), options, wall_clock)
        boundaries = _boundaries(run, synchronize, counter, marker, batch, options, wall_clock, started, settled)
    finally:
        synchronize()
        if restore is not None:
            restore()
            synchronize()
    return _result(boundaries, batch, options, wall_s=wall_clock() - started)


def _batch_seconds(counter, options: EnergyOptions, wall_clock) -> float:
    """How long a batch must last: ``batch_s``, or ``READ_MARGIN`` counter
    reads where a read takes longer. The GPU runs one batch while the host
    reads the counter after the one before; a read longer than a batch (NVML
    takes milliseconds on some GPUs) would leave it idle after every batch,
    and that idle power would be counted per launch."""
    # The quickest: a process's first reads take longer than the ones that follow, and a longer
    # batch makes each boundary, placed within one batch, less sure.
    return max(options.batch_s, READ_MARGIN * min(counter_reads(counter, 3, wall_clock)))


def counter_reads(counter: Callable[[], int | None], count: int, wall_clock: Callable[[], float] | None = None) -> list[float]:
    """Host seconds of each of ``count`` reads of the counter, one after another."""
    wall_clock = wall_clock or HOST_CLOCK
    seconds = []
    for _ in range(count):
        begun = wall_clock()
        counter()
        seconds.append(wall_clock() - begun)
    return seconds


def _batch_size(run, synchronize, seconds: float, options: EnergyOptions, wall_clock) -> int:
    """Launches per batch: doubled (at least) until a batch lasts ``seconds``;
    the launches it takes are the first of the warm-up."""
    batch = 1
    synchronize()
    while batch < options.max_batch:
        begun = wall_clock()
        for _ in range(batch):
            run()
        synchronize()
        lasted = wall_clock() - begun
        if lasted >= seconds:
            break
        # Aim straight at the duration from what this batch took, but grow at
        # most 64-fold at a time: a first launch's time is mostly latency.
        wanted = math.ceil(batch * seconds / lasted) if lasted > 0 else batch * 64
        batch = min(options.max_batch, max(2 * batch, min(wanted, 64 * batch)))
    return batch


def _boundaries(
    run,
    synchronize,
    counter,
    marker,
    batch: int,
    options: EnergyOptions,
    wall_clock,
    started: float,
    settled: Callable[[], bool] | None = None,
) -> list[Boundary]:
    """Run batches back to back; the counter's changes after the warm-up (and
    once the clock has settled), as many as the windows need."""
    needed = 1 + options.windows * options.updates
    warm_until = wall_clock() + options.warmup_s
    warm = False  # the warm-up is over and the clock settled: every counter change from here is a boundary
    boundaries: list[Boundary] = []
    enqueued = 0  # launches enqueued so far
    returned = wall_clock()  # when the host last saw a batch finish: the next one started no earlier
    ahead = None  # with a marker: (wait, launches before it, host seconds it was enqueued) of the batch still running
    last = counter()
    while len(boundaries) < needed:
        if wall_clock() - started > options.max_time_s:
            if not warm and settled is not None and not settled():
                raise EnergyUnavailable(f"the GPU's clock did not settle within {options.max_time_s:g} s of launches")
            raise EnergyUnavailable(f"the energy counter changed {len(boundaries)} times after the warm-up in "
                                    f"{options.max_time_s:g} s, {needed} were needed")  # fmt: skip
        enqueued_at = wall_clock()
        for _ in range(batch):
            run()
        this = (marker() if marker else synchronize, enqueued, enqueued_at)
        enqueued += batch
        if marker is not None:
            if ahead is None:  # keep the GPU one batch ahead of the host from now on
                ahead = this
                continue
            this, ahead = ahead, this
        wait, before, enqueued_at = this
        wait()  # with a marker, the batch enqueued after this one runs while the counter is read
        began, returned = max(enqueued_at, returned), wall_clock()
        value = counter()
        if value is not None and last is not None and value < last:
            # a counter that went back (the driver reloaded) would make a window's energy negative
            raise EnergyUnavailable(f"the energy counter went back from {last} to {value} mJ")
        if value is not None and value != last:
            last = value
            warm = warm or (returned >= warm_until and (settled is None or settled()))
            if warm:
                # The sensor updated while the batch waited for ran: count half of it.
                boundaries.append(Boundary(before + batch / 2, int(value), (began + returned) / 2))
    return boundaries


def _result(boundaries: list[Boundary], batch: int, options: EnergyOptions, wall_s: float) -> EnergyResult:
    windows = []
    for w in range(options.windows):
        first, last = boundaries[w * options.updates], boundaries[(w + 1) * options.updates]
        windows.append((last.energy_mj - first.energy_mj) / 1e3 / (last.launches - first.launches))
    first, last = boundaries[0], boundaries[-1]
    launches = last.launches - first.launches
    joules = (last.energy_mj - first.energy_mj) / 1e3 / launches
    sem = float(np.std(windows, ddof=1) / math.sqrt(len(windows)))
    counting = joules * (batch / math.sqrt(6)) / launches  # two outer boundaries, each uniform over a batch
    return EnergyResult(joules=joules, err=math.hypot(sem, counting), window_joules=windows, launches=int(round(launches)),
                        batch=batch, seconds=last.at_s - first.at_s, wall_s=wall_s, boundaries=boundaries)  # fmt: skip
