"""The one timing function every stage uses.

Per sample: restore the inputs a kernel overwrites, flush the L2 cache (both
untimed), then time one launch between two CUDA events. Samples taken while the
SM clock ran under 75 % of its maximum are discarded and counted (nvbench's
rule). Sampling stops when the relative standard deviation of the kept samples
reaches the target after a minimum count and measured time, or at a sample or
wall-time cap. Warm-up launches (module load, first launch) are never timed.

The GPU is reached only through callables, so the statistics and the stopping
rule run under test with a fake timer, a fake clock and a fake wall clock.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Protocol

import numpy as np

from tuner.data.intervals import median_interval

# JSON Schema's bounds, each with the test a value must pass.
BOUNDS: dict[str, tuple[str, Callable[[Any, Any], bool]]] = {
    "minimum": (">=", lambda value, bound: value >= bound),
    "exclusiveMinimum": (">", lambda value, bound: value > bound),
    "maximum": ("<=", lambda value, bound: value <= bound),
    "exclusiveMaximum": ("<", lambda value, bound: value < bound),
}
SCHEMA_TYPES = {"int": "integer", "float": "number", "bool": "boolean"}
KINDS = {"int": "an integer", "float": "a number", "bool": "true or false"}  # a field's type in refusals


def option(default: Any, description: str, **bounds: float) -> Any:
    """A field of ``TimingOptions``: its default, what it is and its bounds
    (JSON Schema's names: ``minimum``, ``exclusiveMaximum``...), from which
    both its check and the config schema's entry are made."""
    unknown = set(bounds) - set(BOUNDS)
    if unknown:
        raise TypeError(f"bounds must be among {sorted(BOUNDS)}, got {sorted(unknown)}")
    return field(default=default, metadata={"description": description, "bounds": bounds})


def rule_text(bounds: dict[str, float], kind: str) -> str:
    """``must be an integer >= 0``, or for two bounds ``must be a number in [0, 1)`` (``kind``: the value's type in words),
    so that one line fits both a value out of bounds and one of the wrong type."""
    low = {k: v for k, v in bounds.items() if k in ("minimum", "exclusiveMinimum")}
    high = {k: v for k, v in bounds.items() if k in ("maximum", "exclusiveMaximum")}
    if low and high:
        (lk, lv), (hk, hv) = next(iter(low.items())), next(iter(high.items()))
        return f"must be {kind} in {'[' if lk == 'minimum' else '('}{lv}, {hv}{']' if hk == 'maximum' else ')'}"
    return f"must be {kind} " + " and ".join(f"{BOUNDS[k][0]} {v}" for k, v in bounds.items())


@dataclass(frozen=True)
class TimingOptions:
    """Knobs of ``time_kernel``; every stage reads them from the config's
    ``timing``. Each field's bounds are its check here and its entry in the
    config schema (``json_schema``): one source for both."""

    warmup: int = option(2, "untimed launches before the samples", minimum=0)
    min_samples: int = option(10, "kept samples before the spread may stop sampling", minimum=2)
    max_samples: int = option(2000, "samples at most (and at least min_samples)", minimum=2)
    min_time_s: float = option(0.002, "kernel time summed over the kept samples before stopping may happen", minimum=0)
    max_time_s: float = option(1.0, "wall time for one configuration, samples and their set-up included", exclusiveMinimum=0)
    target_rel_spread: float = option(0.005, "sampling stops once the kept samples' std / mean is this low", exclusiveMinimum=0)
    flush_l2: bool = option(True, "flush the L2 cache before each sample")
    hold_us: float = option(20.0, "microseconds of spin before each sample's start event; 0: none", minimum=0, maximum=10_000)
    throttle_ratio: float = option(0.75, "samples under this share of the maximum SM clock are discarded",
                                   minimum=0, exclusiveMaximum=1)  # fmt: skip

    def __post_init__(self) -> None:
        for f in fields(self):
            bounds = f.metadata.get("bounds", {})
            value = getattr(self, f.name)
            if not all(BOUNDS[kind][1](value, bound) for kind, bound in bounds.items()):
                raise ValueError(f"timing.{f.name} {rule_text(bounds, KINDS[str(f.type)])}, got {value!r}")
        if self.max_samples < self.min_samples:
            raise ValueError(f"timing.max_samples must be >= min_samples ({self.min_samples}), got {self.max_samples!r}")

    @classmethod
    def json_schema(cls) -> dict:
        """The config schema's ``timing`` entry: each field with its type,
        default, bounds and description (``x-rule``: the check's own words)."""
        properties = {}
        for f in fields(cls):
            bounds = dict(f.metadata.get("bounds", {}))
            entry = {"type": SCHEMA_TYPES[str(f.type)], **bounds, "default": f.default, "description": f.metadata["description"]}
            if bounds:
                entry["x-rule"] = rule_text(bounds, KINDS[str(f.type)]).removeprefix("must be ")
            properties[f.name] = entry
        return {"type": "object", "additionalProperties": False, "properties": properties}


class ClockMonitor(Protocol):
    """What ``time_kernel`` needs to know about clocks (NVML in production)."""

    def sm_clock_mhz(self) -> float: ...
    def max_sm_clock_mhz(self) -> float: ...
    def snapshot(self) -> dict[str, float]: ...  # mem clock, temperature, power


class NoClocks:
    """For machines without NVML: nothing is discarded, nothing is read."""

    def sm_clock_mhz(self) -> float:
        return float("nan")

    def max_sm_clock_mhz(self) -> float:
        return float("nan")

    def snapshot(self) -> dict[str, float]:
        return {}

    def energy_mj(self) -> int | None:
        """No energy counter: rows carry no energy columns."""
        return None


@dataclass
class TimingResult:
    samples_ms: np.ndarray  # kept samples, in order
    throttled: int  # samples discarded for a low SM clock
    converged: bool  # the spread target was met (not stopped by a cap)
    wall_s: float  # wall time spent on this configuration, warm-up included
    flushed: bool
    sm_clocks_mhz: list[float] = field(default_factory=list)
    conditions: dict[str, float] = field(default_factory=dict)  # NVML readings around the samples

    @property
    def count(self) -> int:
        return int(self.samples_ms.size)

    def stat(self, name: str) -> float:
        s = self.samples_ms
        if s.size == 0:
            return float("nan")
        return {
            "median": float(np.median(s)),
            "min": float(s.min()),
            "max": float(s.max()),
            "p10": float(np.percentile(s, 10)),
            "p90": float(np.percentile(s, 90)),
        }[name]

    @property
    def median_ms(self) -> float:
        return self.stat("median")

    @property
    def rel_spread(self) -> float:
        return relative_spread(self.samples_ms)

    def as_row(self) -> dict:
        """The timing columns of a results row."""
        clocks = [c for c in self.sm_clocks_mhz if np.isfinite(c)]
        # The samples are not kept; the 95 % interval of their median is
        # (two numbers), so winners and runs can be told apart from noise later.
        ci_low, ci_high = median_interval(self.samples_ms)
        return {
            "time_ms_median": self.stat("median"),
            "time_ms_min": self.stat("min"),
            "time_ms_max": self.stat("max"),
            "time_ms_p10": self.stat("p10"),
            "time_ms_p90": self.stat("p90"),
            "time_ms_ci_low": ci_low,
            "time_ms_ci_high": ci_high,
            "rel_spread": self.rel_spread,
            "samples": self.count,
            "throttled_samples": self.throttled,
            "converged": self.converged,
            "measure_wall_s": self.wall_s,
            "l2_flushed": self.flushed,
            "sm_clock_mhz": float(np.median(clocks)) if clocks else None,
            "mem_clock_mhz": self.conditions.get("mem_clock_mhz"),
            "temperature_c": self.conditions.get("temperature_c"),
            "power_w": self.conditions.get("power_w"),
        }


def relative_spread(samples_ms: np.ndarray) -> float:
    """Sample standard deviation over mean (nan with fewer than two samples)."""
    s = np.asarray(samples_ms, dtype=np.float64)
    if s.size < 2 or s.mean() <= 0:
        return float("nan")
    return float(s.std(ddof=1) / s.mean())


def is_throttled(sm_clock_mhz: float, max_sm_clock_mhz: float, ratio: float) -> bool:
    """A sample counts as throttled when the SM clock ran under ``ratio`` of its
    maximum; unknown clocks (nan) never discard a sample."""
    if not (np.isfinite(sm_clock_mhz) and np.isfinite(max_sm_clock_mhz)):
        return False
    return sm_clock_mhz < ratio * max_sm_clock_mhz


def median_half_width(samples_ms: np.ndarray) -> float:
    """Relative half-width of the distribution-free 95 % confidence interval of
    the median: the order statistics n/2 -+ 1.96 sqrt(n)/2 (clamped to the
    sample), half their distance, over the median. Rank-based, so a few
    outliers (a preempted sample) do not keep it wide the way they inflate the
    standard deviation."""
    s = np.sort(np.asarray(samples_ms, dtype=np.float64))
    n = s.size
    if n < 2:
        return float("nan")
    reach = 1.96 * np.sqrt(n) / 2
    low = max(int(np.floor(n / 2 - reach)), 0)
    high = min(int(np.ceil(n / 2 + reach)), n - 1)
    return float((s[high] - s[low]) / 2 / np.median(s))


def should_stop(samples_ms: list[float], taken: int, wall_s: float, options: TimingOptions) -> tuple[bool, bool]:
    """(stop, converged) after ``taken`` samples, ``samples_ms`` of them kept.

    Converged: at least ``min_samples`` kept, at least ``min_time_s`` of kernel
    time, and either the relative spread or the confidence half-width of the
    median at most the target (short kernels have a few % of event-timer jitter:
    their median still pins down to 0.5 % after some tens of samples). Caps:
    ``max_samples`` taken or ``max_time_s`` of wall time (stops unconverged)."""
    kept = len(samples_ms)
    if kept >= options.min_samples and sum(samples_ms) / 1e3 >= options.min_time_s:
        s = np.asarray(samples_ms)
        if min(relative_spread(s), median_half_width(s)) <= options.target_rel_spread:
            return True, True
    if taken >= options.max_samples or wall_s >= options.max_time_s:
        return True, False
    return False, False


def time_kernel(
    run: Callable[[], None],
    *,
    timer: Callable[[Callable[[], None]], float],
    options: TimingOptions = TimingOptions(),
    restore: Callable[[], None] | None = None,
    flush: Callable[[], None] | None = None,
    hold: Callable[[], None] | None = None,
    synchronize: Callable[[], None] = lambda: None,
    clocks: ClockMonitor = NoClocks(),
    wall_clock: Callable[[], float] = time.perf_counter,
) -> TimingResult:
    """Time ``run`` (which enqueues one launch) until the stopping rule says so.

    Args:
        run: enqueues the work to time; no synchronisation inside.
        timer: times one call of ``run`` with device events, in milliseconds.
        restore: untimed, before every launch (warm-up too): resets inputs.
        flush: untimed, before every sample unless ``options.flush_l2`` is off.
        hold: untimed, right before the start event: keeps the device busy
            (a short spin kernel) while the host enqueues the start event and
            the launch, so the host's launch latency never lands between the
            two events. Without it an idle GPU times the launch overhead too.
        synchronize: waits for the device (after warm-up).
        clocks: SM-clock readings for throttle filtering, and NVML snapshots.
        wall_clock: seconds, for the time cap.
    """
    started = wall_clock()
    for _ in range(options.warmup):
        if restore:
            restore()
        run()
    synchronize()
    max_clock = clocks.max_sm_clock_mhz()
    before = clocks.snapshot()
    kept: list[float] = []
    sm_clocks: list[float] = []
    throttled = taken = 0
    flushing = options.flush_l2 and flush is not None
    while True:
        if restore:
            restore()
        if flushing:
            flush()
        if hold:
            hold()
        elapsed_ms = timer(run)
        clock = clocks.sm_clock_mhz()
        taken += 1
        if is_throttled(clock, max_clock, options.throttle_ratio):
            throttled += 1
        else:
            kept.append(elapsed_ms)
            sm_clocks.append(clock)
        stop, converged = should_stop(kept, taken, wall_clock() - started, options)
        if stop:
            break
    after = clocks.snapshot()
    conditions = {k: float(np.nanmean([before.get(k, np.nan), after.get(k, np.nan)])) for k in set(before) | set(after)}
    return TimingResult(
        samples_ms=np.asarray(kept, dtype=np.float64),
        throttled=throttled,
        converged=converged,
        wall_s=wall_clock() - started,
        flushed=flushing,
        sm_clocks_mhz=sm_clocks,
        conditions=conditions,
    )
