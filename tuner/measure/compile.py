"""Compile kernel variants to cubins with nvcc, cached, and keep ptxas's report.

A cubin is cached under a hash of everything that changes it: the source and
the headers it includes, the defines, the extra flags, the architecture and the
nvcc version. The ptxas report (registers, shared memory, spills, stack) is
stored beside each cubin, so a cached variant still reports its resources.
Both are written whole or not at all (renamed into place from a temporary
folder), and one process never runs nvcc twice for one cubin: a thread that
needs a cubin another thread is building waits for it, and a cubin nvcc
rejected is not asked for again (``compile_source``). A study compiles its
space ahead in background threads while the GPU measures (``Precompiler``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import random
import re
import subprocess
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from tuner.families.base import KERNELS_DIR, Config, Family, Problem
from tuner.progress import Progress


class CompileError(RuntimeError):
    """nvcc rejected a variant; the message carries nvcc's output. ``lasting``:
    nvcc said no (and would again), rather than being killed."""

    def __init__(self, message: str, *, lasting: bool = True) -> None:
        super().__init__(message)
        self.lasting = lasting


@dataclass(frozen=True)
class CompiledKernel:
    cubin: str
    kernel: str
    arch: str
    key: str
    registers: int
    shared_bytes: int
    spill_bytes: int  # spill stores + spill loads
    local_bytes: int  # stack frame
    ptxas_log: str


@functools.lru_cache(maxsize=None)
def nvcc_version(nvcc: str = "nvcc") -> str:
    """The release line of ``nvcc --version`` (e.g. ``13.0.48``), or 'missing'."""
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "missing"
    match = re.search(r"release [\d.]+, V([\d.]+)", out)
    return match.group(1) if match else out.strip().splitlines()[-1]


@functools.lru_cache(maxsize=None)
def nvcc_architectures(nvcc: str = "nvcc") -> tuple[str, ...] | None:
    """The ``sm_XX`` targets this nvcc builds (``--list-gpu-code``), or None
    where nvcc is missing."""
    try:
        out = subprocess.run([nvcc, "--list-gpu-code"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return tuple(out.split())


_PROPS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(?:.*?(\d+) bytes smem)?")


def parse_ptxas_report(log: str) -> dict[str, int]:
    """Registers, static shared memory, spill and stack bytes from ``-Xptxas -v``.

    With several entry points the largest of each figure is kept (our modules
    hold one kernel each, selected by a define)."""
    report = {"registers": 0, "shared_bytes": 0, "spill_bytes": 0, "local_bytes": 0}
    for stack, stores, loads in _PROPS.findall(log):
        report["local_bytes"] = max(report["local_bytes"], int(stack))
        report["spill_bytes"] = max(report["spill_bytes"], int(stores) + int(loads))
    for registers, smem in _USED.findall(log):
        report["registers"] = max(report["registers"], int(registers))
        report["shared_bytes"] = max(report["shared_bytes"], int(smem or 0))
    return report


def _sources_digest(source: Path) -> str:
    """Hash of the kernel source and every header beside it (they may be included)."""
    digest = hashlib.sha256(source.read_bytes())
    for header in sorted({*source.parent.glob("*.cuh"), *KERNELS_DIR.glob("*.cuh")}):
        digest.update(header.name.encode() + header.read_bytes())
    return digest.hexdigest()


def nvcc_command(source: Path, defines: dict[str, str], flags: Sequence[str], arch: str, output: Path) -> list[str]:
    return [
        "nvcc", "-cubin", f"-arch={arch}", "-O3", "-std=c++17", "-Xptxas", "-v",
        f"-I{source.parent}", f"-I{KERNELS_DIR}",  # a plug-in family's source may include common.cuh
        *(f"-D{k}={v}" if v != "" else f"-D{k}" for k, v in sorted(defines.items())),
        *flags, "-o", str(output), str(source),
    ]  # fmt: skip


def compile_variant(family: Family, cfg: Config, problem: Problem, *, arch: str, cache_dir: str | os.PathLike) -> CompiledKernel:
    """Compile (or fetch from the cache) the module that runs ``cfg``.

    Raises:
        CompileError: nvcc failed; the cache keeps nothing for this key.
    """
    try:
        return compile_source(KERNELS_DIR / family.source, family.kernel_name(cfg), defines=family.defines(cfg, problem),
                              flags=tuple(family.compile_flags(cfg)), arch=arch, cache_dir=cache_dir, prefix=family.name)  # fmt: skip
    except CompileError as error:
        raise CompileError(f"{family.name} {dict(cfg)}: {error}") from None


def compile_source(
    source: Path,
    kernel: str,
    *,
    defines: dict[str, str],
    flags: Sequence[str] = (),
    arch: str,
    cache_dir: str | os.PathLike,
    prefix: str,
) -> CompiledKernel:
    """Compile ``source`` with ``defines`` to a cubin in ``cache_dir`` (or fetch it)."""
    flags = tuple(flags)
    identity = json.dumps(
        {"src": _sources_digest(source), "defines": sorted(defines.items()), "flags": flags,
         "arch": arch, "nvcc": nvcc_version()}, sort_keys=True)  # fmt: skip
    key = hashlib.sha256(identity.encode()).hexdigest()[:20]
    cubin = Path(cache_dir) / f"{prefix}-{key}.cubin"
    cached = _cached(cubin, kernel)
    if cached:
        return cached
    with _compiles_lock:
        compiling = _compiles.get(cubin)
        mine = compiling is None
        if mine:
            compiling = _compiles[cubin] = Future()
    if not mine:  # another thread runs nvcc for this cubin (or nvcc rejected it): its result
        try:
            return replace(compiling.result(), kernel=kernel)
        except CompileError as error:
            raise CompileError(str(error)) from None
    forget = True
    try:
        # Checked again: another thread may have finished it since the first look.
        compiled = _cached(cubin, kernel) or _run_nvcc(source, kernel, defines, flags, arch, cubin, key)
    except BaseException as error:
        compiling.set_exception(error)
        forget = not (isinstance(error, CompileError) and error.lasting)
        raise
    else:
        compiling.set_result(compiled)
    finally:
        if forget:
            with _compiles_lock:
                del _compiles[cubin]
    return compiled


# The cubins this process is compiling, each by one thread, and those nvcc
# rejected (it would again: this process does not ask twice).
_compiles: dict[Path, Future] = {}
_compiles_lock = threading.Lock()


def _cached(cubin: Path, kernel: str) -> CompiledKernel | None:
    meta = cubin.with_suffix(".json")
    if cubin.exists() and meta.exists():
        return CompiledKernel(**{**json.loads(meta.read_text()), "kernel": kernel})
    return None


def _run_nvcc(
    source: Path, kernel: str, defines: dict[str, str], flags: tuple[str, ...], arch: str, cubin: Path, key: str
) -> CompiledKernel:
    cubin.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cubin.parent) as tmp:
        out = Path(tmp) / cubin.name
        proc = subprocess.run(nvcc_command(source, defines, flags, arch, out), capture_output=True, text=True)
        log = proc.stdout + proc.stderr
        if proc.returncode != 0:  # a negative code: killed by that signal (out of memory, say), worth asking again
            raise CompileError(f"nvcc failed for {source.name}:\n{log.strip()}", lasting=proc.returncode > 0)
        compiled = CompiledKernel(cubin=str(cubin), kernel=kernel, arch=arch, key=key, ptxas_log=log, **parse_ptxas_report(log))
        # Each file renamed into place whole (another process may read the
        # cache meanwhile); the report first, the cubin last: a cubin on disk
        # always has its report.
        meta = Path(tmp) / cubin.with_suffix(".json").name
        meta.write_text(json.dumps(asdict(compiled), indent=1))
        os.replace(meta, cubin.with_suffix(".json"))
        os.replace(out, cubin)
    return compiled


def compile_all(
    family: Family,
    configs: Iterable[Config],
    problem: Problem,
    *,
    arch: str,
    cache_dir: str | os.PathLike,
    jobs: int | None = None,
    progress: Progress | None = None,
) -> dict[str, CompiledKernel | CompileError]:
    """Compile the distinct modules behind ``configs`` in parallel (nvcc runs in
    subprocesses, so threads suffice). Returns module key -> result, where the
    key is ``module_key(family, cfg, problem)``. ``progress`` counts each
    module as it is done (default: a progress of its own)."""
    unique = unique_modules(family, configs, problem)
    own = progress is None
    progress = Progress(f"compile {problem.key}", len(unique), unit="module") if own else progress

    def build(cfg: Config) -> CompiledKernel | CompileError:
        try:
            return compile_variant(family, cfg, problem, arch=arch, cache_dir=cache_dir)
        except CompileError as error:
            return error
        finally:
            progress.update()

    try:
        with ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 1) as pool:
            return dict(zip(unique, pool.map(build, unique.values())))
    finally:
        if own:
            progress.close()


def unique_modules(family: Family, configs: Iterable[Config], problem: Problem) -> dict[str, Config]:
    """Module key -> the first of ``configs`` that needs that module."""
    unique: dict[str, Config] = {}
    for cfg in configs:
        unique.setdefault(module_key(family, cfg, problem), cfg)
    return unique


def module_key(family: Family, cfg: Config, problem: Problem) -> str:
    """Configurations with the same key share one compiled module."""
    return json.dumps([family.kernel_name(cfg), sorted(family.defines(cfg, problem).items()), list(family.compile_flags(cfg))])


def compile_table(settings, arch: str):
    """Compile every variant the sweeps and studies of ``settings`` need, in
    parallel, into the run's cubin cache. Returns the table (one row per
    module: ptxas's registers, shared memory, spills) and a line per failure."""
    import pandas as pd

    cache = Path(settings.run.results_dir) / ".cubin-cache"
    rows, failed = [], []
    variants = [(family, problem, list(configs)) for family, problem, configs in settings.variants()]
    total = sum(len(unique_modules(family, configs, problem)) for family, problem, configs in variants)
    jobs = settings.run.compile_jobs or None
    with Progress(f"compile for {arch}", total, unit="module") as progress:
        built = [(family, problem, compile_all(family, configs, problem, arch=arch, cache_dir=cache, jobs=jobs, progress=progress))
                 for family, problem, configs in variants]  # fmt: skip
    for family, problem, compiled_modules in built:
        for key, compiled in compiled_modules.items():
            row = {"family": family.name, "dtype": problem.dtype, "module": key, "arch": arch}
            if isinstance(compiled, CompileError):
                failed.append(f"{family.name} {problem.dtype} {key}: {str(compiled).strip().splitlines()[-1][:300]}")
                rows.append(row | {"status": "compile_error", "error": str(compiled)[-2000:]})
            else:
                rows.append(row | {"status": "ok", "kernel": compiled.kernel, "cubin_key": compiled.key, "registers": compiled.registers,
                                   "shared_bytes": compiled.shared_bytes, "spill_bytes": compiled.spill_bytes,
                                   "local_bytes": compiled.local_bytes})  # fmt: skip
    return pd.DataFrame(rows).drop_duplicates(["family", "dtype", "module"]), failed


def compile_ahead(arch: str, cache_dir: Path, jobs: int | None):
    """A sweep's ``prepare`` hook: compile a problem's configurations in
    parallel before they are measured one by one."""

    def prepare(family, problem, configs) -> None:
        compile_all(family, configs, problem, arch=arch, cache_dir=cache_dir, jobs=jobs or None)

    return prepare


def background_jobs() -> int:
    """nvcc processes a study compiles ahead with by default: one per CPU but
    one, which the measuring thread keeps (launches, its own compiles)."""
    return max(1, (os.cpu_count() or 2) - 1)


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


ENUMERATED_AT_MOST = 1_000_000  # a larger space is not compiled ahead (as the samplers do not list it)


def study_modules(family: Family, problem: Problem, domains: Mapping[str, Sequence], first: Sequence[Mapping],
                  seed: int) -> list[Config]:  # fmt: skip
    """The configurations a study compiles ahead, in order: ``first`` (its
    enqueued and warm-start ones, where whole and feasible), then the rest of
    its feasible space shuffled by ``seed``: spread over the space as the
    sampler's start is, and in another order for each worker (its own seed)
    when several share one cubin cache."""
    head = [dict(cfg) for cfg in first if set(cfg) == set(family.param_names) and not family.violations(dict(cfg), problem)]
    rest = family.space(problem, domains) if math.prod(len(v) for v in domains.values()) <= ENUMERATED_AT_MOST else []
    random.Random(seed).shuffle(rest)
    return head + rest
