"""Compile a study's space ahead, in background threads, while the GPU
measures: the study's sampler reaches modules no sweep compiled, and nvcc
takes tenths of a second each where a trial takes milliseconds."""

from __future__ import annotations

import os
import random
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Iterable, Mapping, Sequence

from tuner.families.base import Config, Family, Problem
from tuner.host import usable_cpus
from tuner.measure.compile import CompiledKernel, compile_variant, unique_modules


def background_jobs() -> int:
    """nvcc processes a study compiles ahead with by default: one per CPU it
    may use but one, which the measuring thread keeps (launches, its own compiles)."""
    return max(1, usable_cpus() - 1)


class Precompiler:
    """Compiles the modules of ``configs``, in their order, in background
    threads while the measuring thread measures (nvcc runs in subprocesses, so
    threads suffice).

    The measuring thread compiles as before (``compile_variant``): it finds
    a module the pool has built in the cache, waits for one the pool is
    building (one nvcc per cubin), and builds one the pool has not reached
    at once itself, never waiting behind the queue. ``hurry`` starts a
    module ahead of the queue: a study hands it each configuration it has
    claimed, the next one while this one is measured. A compile error is the
    measuring thread's to report (its own compile raises it). ``close`` (or
    leaving the ``with``) cancels what is queued and waits for the nvcc
    processes under way (tenths of a second each); no cubin is ever partial.
    With no ``configs`` it does nothing, ``hurry`` included.
    """

    def __init__(self, family: Family, problem: Problem, configs: Iterable[Config], *, arch: str,
                 cache_dir: str | os.PathLike, jobs: int | None = None) -> None:  # fmt: skip
        self.family, self.problem, self.arch, self.cache_dir = family, problem, arch, cache_dir
        self.modules = unique_modules(family, configs, problem)
        self.jobs = jobs or background_jobs()
        self._started = time.perf_counter()
        self._ready_s: float | None = None  # seconds until every module was built
        self._left = len(self.modules)
        self._lock = threading.Lock()
        self._pool = self._next = None
        if self.modules:
            self._pool = ThreadPoolExecutor(self.jobs, thread_name_prefix="compile-ahead")
            self._next = ThreadPoolExecutor(1, thread_name_prefix="compile-next")  # hurried modules: one more nvcc
        self.results: dict[str, Future] = {key: self._pool.submit(self._build, cfg) for key, cfg in self.modules.items()}

    def _compile(self, cfg: Config) -> CompiledKernel | Exception:
        try:
            return compile_variant(self.family, cfg, self.problem, arch=self.arch, cache_dir=self.cache_dir)
        except Exception as error:  # nvcc's error, or no nvcc: the measuring thread meets it too and reports it
            return error

    def _build(self, cfg: Config) -> CompiledKernel | Exception:
        try:
            return self._compile(cfg)
        finally:
            with self._lock:
                self._left -= 1
                if self._left == 0:
                    self._ready_s = time.perf_counter() - self._started

    def hurry(self, cfg: Config) -> None:
        """Start compiling ``cfg``'s module now, ahead of the queue (in a thread of its own)."""
        if self._next is not None:
            self._next.submit(self._compile, dict(cfg))

    def wait(self) -> dict[str, CompiledKernel | Exception]:
        """Module key -> result, once every module is built."""
        return {key: future.result() for key, future in self.results.items()}

    def close(self) -> None:
        for pool in (self._next, self._pool):
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)
        for pool in (self._next, self._pool):
            if pool is not None:
                pool.shutdown(wait=True)

    def __enter__(self) -> "Precompiler":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def summary(self) -> str:
        """One line: how far the pool got."""
        if not self.modules:
            return "compile ahead: no modules"
        done = [f.result() for f in self.results.values() if f.done() and not f.cancelled()]
        failed = sum(isinstance(r, Exception) for r in done)
        when = f", all ready after {self._ready_s:.1f} s" if self._ready_s is not None else ""
        return f"compile ahead: {len(done)}/{len(self.modules)} modules ({failed} failed) by {self.jobs} threads{when}"


def study_modules(family: Family, problem: Problem, domains: Mapping[str, Sequence], first: Sequence[Mapping],
                  seed: int) -> list[Config]:  # fmt: skip
    """The configurations a study compiles ahead, in order: ``first`` (its
    enqueued and warm-start ones, where whole and feasible), then the rest of
    its feasible space shuffled by ``seed``: spread over the space as the
    sampler's start is, and in another order for each worker (its own seed)
    when several share one cubin cache."""
    head = [dict(cfg) for cfg in first if set(cfg) == set(family.param_names) and not family.violations(dict(cfg), problem)]
    rest = family.listed_space(problem, domains) or []  # a space too large to list is not compiled ahead
    random.Random(seed).shuffle(rest)
    return head + rest
