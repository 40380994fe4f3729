"""A simulated GPU and NVML energy counter for the energy tests: host and
device on one simulated clock, the counter advancing only every ``period_s``."""

from __future__ import annotations

import numpy as np


class SimulatedGpu:
    """``run`` enqueues a launch of ``launch_s`` (the device starts it when
    it is free and the host has enqueued it); ``synchronize`` and a marker's
    wait move the host's clock to the device's; every host call costs
    ``host_s``. The device draws ``busy_w`` while it runs and ``idle_w``
    otherwise. The counter (mJ) holds the energy at its last update:
    updates every ``period_s`` from ``phase_s``, each off by Gaussian noise of
    ``noise_mj`` (a sensor's error, not accumulated). A GPU that starts idle
    (``cold_s`` > 0) runs the launches it starts before ``cold_s`` at a low
    clock, each ``cold_launch_s`` long; ``settled`` says whether its clock is
    up."""

    def __init__(self, *, launch_s=1e-4, busy_w=400.0, idle_w=80.0, period_s=0.1, phase_s=0.037, host_s=5e-6,
                 read_s=3e-5, noise_mj=0.0, seed=0, counter=True, cold_s=0.0, cold_launch_s=None) -> None:  # fmt: skip
        self.cold_s, self.cold_launch_s = cold_s, cold_launch_s
        self.launch_s, self.busy_w, self.idle_w = launch_s, busy_w, idle_w
        self.period_s, self.phase_s, self.host_s, self.read_s = period_s, phase_s, host_s, read_s
        self.noise_mj, self.rng, self.has_counter = noise_mj, np.random.default_rng(seed), counter
        self.host = 0.0
        self.free_at = 0.0  # when the device has run everything enqueued
        self.busy: list[list[float]] = []  # merged [start, end] intervals the device ran
        self.launches = 0
        self.ends: list[float] = []  # when each launch finished on the device
        self.reads: list[float] = []  # host seconds of each counter read
        self.restored = 0
        self._noise: dict[int, float] = {}

    # ---- the launch stream ----
    def run(self) -> None:
        self.host += self.host_s
        start = max(self.free_at, self.host)
        end = start + (self.cold_launch_s if self.cold_launch_s and start < self.cold_s else self.launch_s)
        if self.busy and self.busy[-1][1] >= start:
            self.busy[-1][1] = end
        else:
            self.busy.append([start, end])
        self.free_at = end
        self.launches += 1
        self.ends.append(end)

    def synchronize(self) -> None:
        self.host = max(self.host, self.free_at) + self.host_s

    def marker(self):
        at = self.free_at

        def wait() -> None:
            self.host = max(self.host, at) + self.host_s

        return wait

    def restore(self) -> None:
        self.restored += 1

    def wall_clock(self) -> float:
        return self.host

    def settled(self) -> bool:
        return self.host >= self.cold_s

    # ---- the counter ----
    def energy_until(self, t: float) -> float:
        """Joules drawn from 0 to ``t``."""
        busy = sum(max(0.0, min(end, t) - start) for start, end in self.busy if start < t)
        return self.idle_w * t + (self.busy_w - self.idle_w) * busy

    def counter(self) -> int | None:
        if not self.has_counter:
            return None
        self.host += self.read_s
        self.reads.append(self.host)
        k = int(np.floor((self.host - self.phase_s) / self.period_s))
        if k < 0:
            return 0
        if k not in self._noise:
            self._noise[k] = self.rng.normal(0.0, self.noise_mj) if self.noise_mj else 0.0
        return int(round(self.energy_until(self.phase_s + k * self.period_s) * 1e3 + self._noise[k]))

    def update_times(self, until: float) -> list[float]:
        return list(np.arange(self.phase_s, until, self.period_s))
