"""Compile a study's modules ahead, in background threads, while the GPU
measures: nvcc takes tenths of a second to seconds a module where a trial
takes milliseconds, so a module compiled when its trial comes is a wait.

What a study compiles grows with its budget, not with its space: the
configurations it claims (each one asked ahead while the one before is
measured), the ones its sampler would likely propose next (``expect``), its
enqueued ones, and its whole space only where that space is small beside the
budget (``study_modules``). A 50-trial study of a space of thousands of
modules compiles about a hundred, not thousands.
"""

from __future__ import annotations

import itertools
import os
import queue
import random
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Iterable, Mapping, Sequence

from tuner.families.base import Config, Family, Problem
from tuner.host import usable_cpus_but_one
from tuner.measure.compile import CompiledKernel, compile_variant, module_key, study_compiled_whole, unique_modules

# Claimed configurations compiled at once, each in a thread of its own: the
# one measured next and the one asked ahead of it (a study asks one ahead).
CLAIMED_AT_ONCE = 2

# The background pool's order: the sampler's likely next proposals first,
# then the listed configurations in their order.
_LIKELY, _LISTED = 0, 1


def background_jobs() -> int:
    """nvcc processes a study compiles ahead with by default: one per CPU it
    may use but one, which the measuring thread keeps (launches, its own compiles)."""
    return usable_cpus_but_one()


class Precompiler:
    """Compiles a study's modules in background threads while the measuring
    thread measures (nvcc runs in subprocesses, so threads suffice).

    * ``hurry(cfg)``: a configuration the study has claimed; its module is
      started at once, in a thread of its own (``CLAIMED_AT_ONCE`` of them).
    * ``expect(cfgs)``: the configurations the sampler would likely propose
      next, best first; compiled by the pool when a thread of it is free and
      fewer than ``jobs`` + 1 nvcc processes run (a guess never slows a
      claimed module on a small host), and dropped, where not yet started,
      once newer ones come.
    * ``configs`` (given here): compiled by the pool in their order, after
      the likely ones (``study_modules``: the enqueued configurations, and
      the whole space where it is small beside the budget).

    The measuring thread compiles as before (``compile_variant``): it finds a
    module built in the cache, waits for one being built (one nvcc per
    cubin), and builds one nobody has started at once itself, never waiting
    behind a queue. A compile error is the measuring thread's to report (its
    own compile raises it). ``close`` (or leaving the ``with``) cancels what
    is queued and waits for the nvcc processes under way; no cubin is ever
    partial. With ``enabled`` false it compiles nothing, ``hurry`` and
    ``expect`` included.
    """

    def __init__(self, family: Family, problem: Problem, configs: Iterable[Config] = (), *, arch: str,
                 cache_dir: str | os.PathLike, jobs: int | None = None, enabled: bool = True) -> None:  # fmt: skip
        self.family, self.problem, self.arch, self.cache_dir = family, problem, arch, cache_dir
        self.enabled = enabled
        self.modules = unique_modules(family, configs, problem) if enabled else {}
        self.jobs = jobs or background_jobs()
        self.results: dict[str, Future] = {}  # module key -> its compile, for every module handed to a thread
        self._started = time.perf_counter()
        self._ready_s: float | None = None  # seconds until every listed module was built
        self._left = len(self.modules)
        self._lock = threading.Lock()
        self._closed = False
        self._queue: queue.PriorityQueue = queue.PriorityQueue()  # (rank, order, generation, key, cfg)
        self._order = itertools.count()
        self._generation = 0  # of the latest expect(): older likely ones not yet started are dropped
        self._workers: list[threading.Thread] = []
        self._claimed = ThreadPoolExecutor(CLAIMED_AT_ONCE, thread_name_prefix="compile-next") if enabled else None
        self._hurried: set[str] = set()
        self._running = 0  # compiles under way, claimed ones included
        self._likely: set[str] = set()  # likely modules handed to the pool (started or not)
        self._likely_claimed = 0  # of those, claimed afterwards
        for key, cfg in self.modules.items():
            self.results[key] = Future()
            self._put(_LISTED, 0, key, cfg)

    def _put(self, rank: int, generation: int, key: str, cfg: Config) -> None:
        self._queue.put((rank, next(self._order), generation, key, dict(cfg)))
        if len(self._workers) < self.jobs:  # the pool grows to ``jobs`` threads as work comes
            worker = threading.Thread(target=self._work, name=f"compile-ahead_{len(self._workers)}", daemon=True)
            self._workers.append(worker)
            worker.start()

    def _work(self) -> None:
        while True:
            rank, _, generation, key, cfg = self._queue.get()
            if key is None:  # closing
                return
            with self._lock:
                future = self.results.get(key)
                if future is None or future.done() or future.running():
                    continue  # claimed and started meanwhile, built, or cancelled
                if rank == _LIKELY and key not in self.modules and (
                        generation != self._generation or self._running > self.jobs):  # fmt: skip
                    # Superseded before it started (the sampler has moved on), or no CPU to spare.
                    del self.results[key]
                    self._likely.discard(key)
                    future.cancel()
                    continue
                future.set_running_or_notify_cancel()
                self._running += 1
            self._build(key, cfg, future)

    def _build(self, key: str, cfg: Config, future: Future) -> None:
        """Compile ``cfg`` into ``future`` (set running, and counted in ``_running``, by the caller)."""
        try:
            future.set_result(self._compile(cfg))
        finally:
            with self._lock:
                self._running -= 1
        if key in self.modules:
            with self._lock:
                self._left -= 1
                if self._left == 0:
                    self._ready_s = time.perf_counter() - self._started

    def _compile(self, cfg: Config) -> CompiledKernel | Exception:
        try:
            return compile_variant(self.family, cfg, self.problem, arch=self.arch, cache_dir=self.cache_dir)
        except Exception as error:  # nvcc's error, or no nvcc: the measuring thread meets it too and reports it
            return error

    def hurry(self, cfg: Config) -> None:
        """Start compiling ``cfg``'s module now, ahead of the queue (in a thread of its own)."""
        if not self.enabled:
            return
        key = module_key(self.family, cfg, self.problem)
        with self._lock:
            if self._closed or key in self._hurried:
                return
            self._hurried.add(key)
            self._likely_claimed += key in self._likely
            future = self.results.setdefault(key, Future())
            if future.done() or future.running():
                return  # built, or being built by the pool
            future.set_running_or_notify_cancel()  # the pool passes it over from now on
            self._running += 1
            self._claimed.submit(self._build, key, dict(cfg), future)  # under the lock: never after ``close``'s shutdown

    def expect(self, cfgs: Sequence[Config]) -> None:
        """The configurations the sampler would likely propose next, best
        first: compiled when a thread of the pool is free, unless newer ones
        come first."""
        if not self.enabled or not cfgs:
            return
        with self._lock:
            if self._closed:
                return
            self._generation += 1
            for cfg in cfgs:
                key = module_key(self.family, cfg, self.problem)
                if key in self._hurried:
                    continue  # claimed already
                if key not in self.results:
                    self.results[key] = Future()
                    self._likely.add(key)
                self._put(_LIKELY, self._generation, key, cfg)  # a listed one too: ahead of the rest of the list

    def wait(self) -> dict[str, CompiledKernel | Exception]:
        """Module key -> result, once every module handed to the pool is built."""
        return {key: future.result() for key, future in list(self.results.items())}

    def close(self) -> None:
        with self._lock:
            self._closed = True
            for future in self.results.values():
                future.cancel()  # those not started
        for _ in self._workers:
            self._queue.put((-1, -1, 0, None, None))  # before anything queued
        for worker in self._workers:
            worker.join()
        if self._claimed is not None:
            self._claimed.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> "Precompiler":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def summary(self) -> str:
        """One line: how far the pool got, and what it was given."""
        futures = list(self.results.values())
        if not futures and not self._hurried:
            return "compile ahead: no modules"
        done = [f.result() for f in futures if f.done() and not f.cancelled()]
        failed = sum(isinstance(r, Exception) for r in done)
        when = f", all ready after {self._ready_s:.1f} s" if self._ready_s is not None else ""
        line = f"compile ahead: {len(done)}/{len(futures)} modules ({failed} failed) by {self.jobs} threads{when}"
        if self._hurried or self._likely:
            line += (f"; {len(self._hurried)} claimed, {len(self._likely)} likely next "
                     f"({self._likely_claimed} of them claimed)")  # fmt: skip
        return line


def study_modules(family: Family, problem: Problem, domains: Mapping[str, Sequence], first: Sequence[Mapping],
                  seed: int, budget_trials: int | None = None) -> list[Config]:  # fmt: skip
    """The configurations a study compiles ahead before it claims any, in
    order: ``first`` (its enqueued and warm-start ones, where whole and
    feasible), then, where its space is listed and has at most
    ``WHOLE_SPACE_PER_TRIAL`` modules per trial of ``budget_trials`` (or no
    budget bounds it), the rest of its feasible space shuffled by ``seed``:
    spread over the space as the sampler's start is, and in another order for
    each worker (its own seed) when several share one cubin cache. A larger
    space is compiled as it is searched (``Precompiler.hurry``, ``expect``)."""
    head = [dict(cfg) for cfg in first if set(cfg) == set(family.param_names) and not family.violations(dict(cfg), problem)]
    rest = study_compiled_whole(family, problem, domains, budget_trials) or []
    random.Random(seed).shuffle(rest)
    return head + rest
