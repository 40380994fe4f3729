"""Compile kernel variants to cubins with nvcc, cached, and keep ptxas's report.

A cubin is cached under a hash of everything that changes it: the source and
the headers it includes, the defines, the extra flags, the architecture, the
nvcc version and, for a template kernel, the line that instantiates it
(``tuner.measure.symbols``: kernels are found by their C++ name, templates
instantiated from their arguments). A define whose name holds ``loop_unroll_factor``
is a ``constexpr`` before the source instead (Kernel Tuner's convention: it
is the argument of a ``#pragma unroll``, which the preprocessor leaves be). The ptxas report (registers, shared memory, spills, stack) is
stored beside each cubin, so a cached variant still reports its resources.
Both are written whole or not at all (renamed into place from a temporary
folder), and one process never runs nvcc twice for one cubin: a thread that
needs a cubin another thread is building waits for it, and a cubin nvcc
rejected is not asked for again (``compile_source``). A study compiles what
it is about to measure in background threads while the GPU measures
(``tuner.measure.precompile``).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import re
import subprocess
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Iterable, Iterator, Mapping, Sequence

from tuner.errors import Refusal
from tuner.families.base import KERNELS_DIR, Config, Family, Problem, nvcc_text_unfit
from tuner.host import usable_cpus, usable_cpus_but_one
from tuner.measure import symbols
from tuner.progress import Progress


class CompileError(Refusal, RuntimeError):
    """nvcc rejected a variant; the message carries nvcc's output. ``lasting``:
    nvcc said no (and would again), rather than being killed. ``over_limit``:
    the one-line reason where ptxas refused a kernel for a device limit (more
    static shared or local memory than a block or thread may hold): the
    configuration is infeasible, not broken."""

    label = "compile error"

    def __init__(self, message: str, *, lasting: bool = True, over_limit: str | None = None) -> None:
        super().__init__(message)
        self.lasting = lasting
        self.over_limit = over_limit

    def line(self) -> str:
        """The variant and nvcc's first error, on one line (nvcc's whole output is the message)."""
        lines = [line.strip() for line in str(self).splitlines() if line.strip()]
        first = next((line for line in lines[1:] if "error" in line), lines[-1] if len(lines) > 1 else "")
        return f"{self.label}: {' '.join(lines[0].split())}{' ' + ' '.join(first.split()) if first else ''}"[:MAX_LINE]


MAX_LINE = 500  # characters of a compile error's one line (nvcc's output can run to pages)


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


def parse_ptxas_report(log: str, entry: str | None = None) -> dict[str, int]:
    """Registers, static shared memory, spill and stack bytes from ``-Xptxas -v``.

    ``entry``: that kernel's figures (its part of the report). Otherwise, with
    several entry points, the largest of each figure is kept."""
    if entry is not None:
        marker = f"Compiling entry function '{entry}'"
        if marker in log:
            log = log.split(marker, 1)[1].split("Compiling entry function '", 1)[0]
    report = {"registers": 0, "shared_bytes": 0, "spill_bytes": 0, "local_bytes": 0}
    for stack, stores, loads in _PROPS.findall(log):
        report["local_bytes"] = max(report["local_bytes"], int(stack))
        report["spill_bytes"] = max(report["spill_bytes"], int(stores) + int(loads))
    for registers, smem in _USED.findall(log):
        report["registers"] = max(report["registers"], int(registers))
        report["shared_bytes"] = max(report["shared_bytes"], int(smem or 0))
    return report


@functools.lru_cache(maxsize=None)
def _sources_digest(source: Path) -> str:
    """Hash of the kernel source and every header beside it (they may be included).

    Read once per process (every trial of a study asks for it): a kernel edited
    while a process runs is seen by the next process, and each stage is one."""
    digest = hashlib.sha256(source.read_bytes())
    for header in sorted({*source.parent.glob("*.cuh"), *KERNELS_DIR.glob("*.cuh")}):
        digest.update(header.name.encode() + header.read_bytes())
    return digest.hexdigest()


def nvcc_command(source: Path, defines: dict[str, str], flags: Sequence[str], arch: str, output: Path, *,
                 main: Path | None = None) -> list[str]:  # fmt: skip
    """nvcc's arguments. A define, flag or path that its shell would read (``$(...)``,
    a quote) or that would split into more defines (a comma) is refused here
    whatever let it through: the families and settings refuse them earlier.
    ``main``: the file nvcc compiles where it is not ``source`` itself (one
    that includes it and instantiates a template kernel); includes are still
    looked up beside ``source``.

    Raises:
        CompileError: an argument nvcc cannot be given safely (one line).
    """
    for name, value in defines.items():
        why = nvcc_text_unfit(name) or (None if name.isidentifier() else f"must be a C identifier, got {name!r}")
        why = why or nvcc_text_unfit(str(value), define=True)
        if why:
            raise CompileError(f"-D{name}: a define {why}")
    for text in (*flags, str(source), str(main or source), str(output), str(KERNELS_DIR)):
        why = nvcc_text_unfit(text)
        if why:
            raise CompileError(f"nvcc's command line: an argument {why}")
    for folder in (source.parent, KERNELS_DIR):
        # nvcc splits an -I value at commas, and its shell takes a single quote for one of its own
        unfit = sorted({c for c in str(folder) if c in "',"})
        if unfit:
            raise CompileError(f"nvcc's include folder {str(folder)!r}: must hold none of ' or , (nvcc splits -I values "
                               f"at commas and its shell reads quotes), holds {' and '.join(unfit)}; move it")  # fmt: skip
    return [
        "nvcc", "-cubin", f"-arch={arch}", "-O3", "-std=c++17", "-Xptxas", "-v",
        f"-I{source.parent}", f"-I{KERNELS_DIR}",  # a plug-in family's source may include common.cuh
        *(f"-D{k}={v}" if v != "" else f"-D{k}" for k, v in sorted(defines.items())),
        *flags, "-o", str(output), str(main or source),
    ]  # fmt: skip


def _nvcc_env(tmp: str) -> dict[str, str]:
    """nvcc's environment: its intermediate files in ``tmp`` (a fresh folder of
    this compile's). nvcc writes them to ``TMPDIR`` as given, where Python falls
    back to /tmp: a cluster's missing or full ``TMPDIR`` failed every compile,
    and each failure was stored as the configuration's ``compile_error``."""
    return {**os.environ, "TMPDIR": tmp}


def compile_variant(family: Family, cfg: Config, problem: Problem, *, arch: str, cache_dir: str | os.PathLike) -> CompiledKernel:
    """Compile (or fetch from the cache) the module that runs ``cfg``.

    Raises:
        CompileError: nvcc failed; the cache keeps nothing for this key.
    """
    try:
        return compile_source(KERNELS_DIR / family.source, family.kernel_name(cfg), defines=family.defines(cfg, problem),
                              flags=tuple(family.compile_flags(cfg)), arch=arch, cache_dir=cache_dir, prefix=family.name)  # fmt: skip
    except CompileError as error:
        raise CompileError(f"{family.name} {dict(cfg)}: {error}", lasting=error.lasting, over_limit=error.over_limit) from None


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
    """Compile ``source`` with ``defines`` to a cubin in ``cache_dir`` (or fetch it).

    ``kernel`` is the kernel as the source names it (``tuner.measure.symbols``):
    an ``extern "C"`` name, a C++ name, or a template instance
    (``reduce<float, 256>``), instantiated by a line appended to the source.
    The answer's ``kernel`` is its symbol in the cubin, and its resources are
    that kernel's.

    Raises:
        CompileError: nvcc failed (``over_limit`` says where ptxas refused a
            device limit), or no kernel (or several) answer to ``kernel``.
    """
    flags = tuple(flags)
    instance = symbols.instantiation(kernel)
    made_of = {"src": _sources_digest(source), "defines": sorted(defines.items()), "flags": flags, "arch": arch,
               "nvcc": nvcc_version()}  # fmt: skip
    # Only where there are some: the cubins of plain kernels and defines keep the keys they had.
    if instance is not None:
        made_of["instance"] = instance
    if _constants_text(defines):
        made_of["constants"] = _constants_text(defines)
    key = hashlib.sha256(json.dumps(made_of, sort_keys=True).encode()).hexdigest()[:20]
    cubin = Path(cache_dir) / f"{prefix}-{key}.cubin"
    cached = _cached(cubin)
    if cached:
        return _kernel_of(cached, kernel, source, defines)
    with _compiles_lock:
        compiling = _compiles.get(cubin)
        mine = compiling is None
        if mine:
            compiling = _compiles[cubin] = Future()
    if not mine:  # another thread runs nvcc for this cubin (or nvcc rejected it): its result
        try:
            return _kernel_of(compiling.result(), kernel, source, defines)
        except CompileError as error:
            raise CompileError(str(error), over_limit=error.over_limit) from None
    forget = True
    try:
        # Checked again: another thread may have finished it since the first look.
        compiled = _cached(cubin) or _run_nvcc(source, kernel, instance, defines, flags, arch, cubin, key)
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
    return _kernel_of(compiled, kernel, source, defines)


# The cubins this process is compiling, each by one thread, and those nvcc
# rejected (it would again: this process does not ask twice).
_compiles: dict[Path, Future] = {}
_compiles_lock = threading.Lock()


def _cached(cubin: Path) -> CompiledKernel | None:
    meta = cubin.with_suffix(".json")
    if not (cubin.exists() and meta.exists()):
        return None
    # A cubin's name is the hash of what made it, so its report never changes:
    # read once per process (the existence check above still sees a cleared cache).
    report = _reports.get(cubin)
    if report is None:
        report = _reports[cubin] = json.loads(meta.read_text())
    return CompiledKernel(**report)


_reports: dict[Path, dict] = {}


def _kernel_of(module: CompiledKernel, kernel: str, source: Path, defines: dict[str, str]) -> CompiledKernel:
    """``module`` as the kernel ``kernel`` names in it: its symbol and its
    own resources. A report that lists no entry functions keeps the name as given.

    Raises:
        CompileError: no kernel of the module, or several, answer to ``kernel``.
    """
    found = _lookups.get((module.cubin, kernel))
    if found is None:
        entries = symbols.ptxas_entries(module.ptxas_log)
        if not entries:
            return replace(module, kernel=kernel)
        try:
            symbol = symbols.resolve(kernel, entries, source=Path(source).name, defines=defines)
        except symbols.KernelLookupError as error:
            raise CompileError(str(error)) from None
        found = _lookups[(module.cubin, kernel)] = replace(module, kernel=symbol, **parse_ptxas_report(module.ptxas_log, symbol))
    return found


_lookups: dict[tuple[str, str], CompiledKernel] = {}


# Kernel Tuner's convention: a parameter whose name holds this is the argument of a ``#pragma unroll``,
# which the preprocessor does not expand: it is a constexpr before the source, not a -D define.
CONSTEXPR_MARK = "loop_unroll_factor"


def is_constexpr(name: str) -> bool:
    """Whether the define ``name`` is declared as a C++ constant before the source (Kernel Tuner's rule)."""
    return CONSTEXPR_MARK in name


def _constants_text(defines: dict[str, str]) -> str:
    """The constexpr declarations of the defines ``is_constexpr`` names
    (0 leaves the unrolling to the compiler, which ignores an unroll of 0)."""
    lines = []
    for name, value in sorted(defines.items()):
        if is_constexpr(name):
            why = (None if name.isidentifier() else f"must be a C identifier, got {name!r}") or nvcc_text_unfit(str(value), define=True)
            if why:
                raise CompileError(f"{name}: a constexpr value {why}")
            kind = "int" if re.fullmatch(r"-?\d+", str(value)) else "auto"
            lines.append(f"constexpr {kind} {name} = {value};\n")
    return "".join(lines)


def _macros(defines: dict[str, str]) -> dict[str, str]:
    return {name: value for name, value in defines.items() if not is_constexpr(name)}


@contextlib.contextmanager
def _main_file(source: Path, defines: dict[str, str], instance: str | None, folder: str) -> Iterator[Path | None]:
    """The file nvcc compiles instead of ``source`` where constexpr values
    come before it or a template must be instantiated after it: those lines
    around an ``#include`` of ``source``; None where there are none."""
    constants = _constants_text(defines)
    if instance is None and not constants:
        yield None
        return
    main = Path(folder) / "instance.cu"
    main.write_text(f'{constants}#include "{Path(source).resolve()}"\n{instance or ""}')
    yield main


_OVER_LIMIT = re.compile(r"uses too much (shared|local) data \((0x[0-9a-fA-F]+) bytes, (0x[0-9a-fA-F]+) max\)")


def over_limit_reason(log: str) -> str | None:
    """The device limit a ptxas error reports (``uses too much shared data``), as one line, or None."""
    match = _OVER_LIMIT.search(log)
    if match is None:
        return None
    kind, used, most = match.group(1), int(match.group(2), 16), int(match.group(3), 16)
    what = "static shared memory per block" if kind == "shared" else "local memory per thread"
    return f"{what} must be at most {most} bytes (ptxas), got {used}"


def _run_nvcc(
    source: Path, kernel: str, instance: str | None, defines: dict[str, str], flags: tuple[str, ...], arch: str, cubin: Path, key: str
) -> CompiledKernel:
    cubin.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cubin.parent) as tmp, _main_file(source, defines, instance, tmp) as main:
        out = Path(tmp) / cubin.name
        command = nvcc_command(source, _macros(defines), flags, arch, out, **({"main": main} if main else {}))
        proc = subprocess.run(command, capture_output=True, text=True, encoding="utf-8", errors="replace",
                              env=_nvcc_env(tmp))  # a source's own bytes may be echoed
        log = proc.stdout + proc.stderr
        if proc.returncode != 0:  # a negative code: killed by that signal (out of memory, say), worth asking again
            raise CompileError(f"nvcc failed for {source.name}:\n{log.strip()}", lasting=proc.returncode > 0,
                               over_limit=over_limit_reason(log))  # fmt: skip
        compiled = CompiledKernel(cubin=str(cubin), kernel=kernel, arch=arch, key=key, ptxas_log=log, **parse_ptxas_report(log))
        # Each file renamed into place whole (another process may read the
        # cache meanwhile); the report first, the cubin last: a cubin on disk
        # always has its report.
        meta = Path(tmp) / cubin.with_suffix(".json").name
        meta.write_text(json.dumps(asdict(compiled), indent=1))
        os.replace(meta, cubin.with_suffix(".json"))
        os.replace(out, cubin)
    return compiled


_PTX_PARAM = re.compile(r"\.param\s+(?:\.align\s+\d+\s+)?\.([a-z]+)(\d+)")


def kernel_parameters(source: Path, kernel: str, *, defines: dict[str, str], flags: Sequence[str] = (), arch: str) -> list[tuple[str, int]]:
    """The kernel's parameters as the compiler laid them out: (kind, bits) per
    parameter from its PTX entry (``("f", 32)`` a float, ``("u", 64)`` a
    pointer or a 64-bit integer, ``("b", 8)`` bytes of a struct). ``kernel``
    is named as ``compile_source`` takes it.

    Raises:
        CompileError: nvcc failed, or no kernel (or several) answer to ``kernel``.
    """
    with tempfile.TemporaryDirectory() as tmp, _main_file(Path(source), defines, symbols.instantiation(kernel), tmp) as main:
        out = Path(tmp) / "module.ptx"
        command = nvcc_command(Path(source), _macros(defines), tuple(flags), arch, out, main=main)
        command[1] = "-ptx"
        proc = subprocess.run(command, capture_output=True, text=True, encoding="utf-8", errors="replace", env=_nvcc_env(tmp))
        if proc.returncode != 0:
            raise CompileError(f"nvcc failed for {Path(source).name}:\n{(proc.stdout + proc.stderr).strip()}")
        ptx = out.read_text()
    try:
        symbol = symbols.resolve(kernel, symbols.ptx_entries(ptx), source=Path(source).name, defines=defines)
    except symbols.KernelLookupError as error:
        raise CompileError(str(error)) from None
    match = re.search(rf"\.entry\s+{re.escape(symbol)}\s*\((.*?)\)", ptx, re.S)
    return [(kind, int(bits)) for kind, bits in _PTX_PARAM.findall(match.group(1))]


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
    try:
        with _nvcc_pool(jobs) as pool:
            futures = _submit_modules(pool, family, unique, problem, arch, cache_dir, progress)
            return {key: future.result() for key, future in futures.items()}
    finally:
        if own:
            progress.close()


@contextlib.contextmanager
def _nvcc_pool(jobs: int | None) -> Iterator[ThreadPoolExecutor]:
    """Threads that run nvcc (one per CPU by default); on an error or Ctrl-C
    the queued modules are dropped and only the nvcc runs under way finish."""
    with ThreadPoolExecutor(jobs or usable_cpus()) as pool:
        try:
            yield pool
        except BaseException:
            pool.shutdown(cancel_futures=True)
            raise


def _submit_modules(pool, family: Family, unique: dict[str, Config], problem: Problem, arch: str, cache_dir,
                    progress: Progress) -> dict[str, Future]:  # fmt: skip
    """Module key -> the future of its compile (``unique``: ``unique_modules``'s
    answer; a ``CompileError`` is the future's result, not raised)."""

    def build(cfg: Config) -> CompiledKernel | CompileError:
        try:
            return compile_variant(family, cfg, problem, arch=arch, cache_dir=cache_dir)
        except CompileError as error:
            return error
        finally:
            progress.update()

    return {key: pool.submit(build, cfg) for key, cfg in unique.items()}


def unique_modules(family: Family, configs: Iterable[Config], problem: Problem) -> dict[str, Config]:
    """Module key -> the first of ``configs`` that needs that module."""
    unique: dict[str, Config] = {}
    for cfg in configs:
        unique.setdefault(module_key(family, cfg, problem), cfg)
    return unique


def module_key(family: Family, cfg: Config, problem: Problem) -> str:
    """Configurations with the same key share one compiled module."""
    return json.dumps([family.kernel_name(cfg), sorted(family.defines(cfg, problem).items()), list(family.compile_flags(cfg))])


# A study's whole space is compiled ahead (by the compile stage, and by the
# study itself) where it has at most this many modules per trial of its
# budget; a larger one is compiled as it is searched (``tuner.measure.precompile``).
WHOLE_SPACE_PER_TRIAL = 4


def study_compiled_whole(family: Family, problem: Problem, domains: Mapping[str, Sequence],
                         budget_trials: int | None) -> list[Config] | None:  # fmt: skip
    """The feasible configurations of a study's space, where it is compiled
    whole ahead of the search: listed (``Family.listed_space``) and, under a
    budget, of at most ``WHOLE_SPACE_PER_TRIAL`` modules per trial of it; else None."""
    listed = family.listed_space(problem, domains)
    if listed is None or not budget_trials:
        return listed
    bound = WHOLE_SPACE_PER_TRIAL * budget_trials
    if len(listed) > bound:  # modules counted up to the bound: a large space is not keyed whole
        modules: set[str] = set()
        for cfg in listed:
            modules.add(module_key(family, cfg, problem))
            if len(modules) > bound:
                return None
    return listed


# Held (an exclusive flock) by the compile stage while its nvcc processes run.
COMPILE_STAGE_LOCK = "compile-stage.lock"


@contextlib.contextmanager
def compile_stage_running(cache_dir: str | os.PathLike) -> Iterator[None]:
    """The compile stage's hold on the cubin cache: the pipeline runs it beside
    the peaks (workflow/rules/compile.smk), and a sweep or study that starts
    meanwhile waits for it (``wait_for_compile_stage``)."""
    Path(cache_dir).mkdir(parents=True, exist_ok=True)
    with open(Path(cache_dir) / COMPILE_STAGE_LOCK, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def wait_for_compile_stage(cache_dir: str | os.PathLike) -> float:
    """Block while a compile stage holds the cubin cache, so that no
    configuration is measured while its nvcc processes take the CPUs (and none
    is compiled twice). Returns the seconds waited (0 where none ran, or the
    file system has no locks: then the stage's modules are compiled as needed)."""
    path = Path(cache_dir) / COMPILE_STAGE_LOCK
    if not path.exists():
        return 0.0
    started = time.perf_counter()
    try:
        with open(path) as handle:
            fcntl.flock(handle, fcntl.LOCK_SH)
            fcntl.flock(handle, fcntl.LOCK_UN)
    except OSError:
        return 0.0
    return time.perf_counter() - started


def compile_table(settings, arch: str):
    """Compile every variant the sweeps of ``settings`` need, and the whole
    space of each study where it is small beside its budget
    (``study_compiled_whole``), in parallel, into the run's cubin cache.
    Returns the table (one row per module: ptxas's registers, shared
    memory, spills; ``infeasible`` where ptxas refused a device limit), a
    line per failure, and the studies left to compile their modules as they
    search."""
    import pandas as pd

    from tuner.families import REGISTRY

    cache = settings.run.cubin_cache
    rows, failed = [], []
    # Each module once: a sweep and a study (or two sizes) of one family and dtype share most of theirs.
    variants, seen, searched = [], set(), []

    def add(family, problem, configs) -> None:
        unique = {key: cfg for key, cfg in unique_modules(family, configs, problem).items() if (family.name, problem.dtype, key) not in seen}
        seen.update((family.name, problem.dtype, key) for key in unique)
        variants.append((family, problem, unique))

    for family, problem, configs in settings.variants():
        add(family, problem, configs)
    for study in settings.studies.values():
        family = REGISTRY[study.family]
        whole = study_compiled_whole(family, study.problem, study.domains(), study.budget_trials)
        if whole is None:
            searched.append(study.name)
        else:
            add(family, study.problem, whole)
    total = sum(len(unique) for _, _, unique in variants)
    # One CPU is left to the peaks, measured meanwhile (compile_stage_running).
    jobs = settings.run.compile_jobs or usable_cpus_but_one()
    # One pool for every problem's modules, so no core idles while a problem's last nvcc finishes.
    with compile_stage_running(cache), Progress(f"compile for {arch}", total, unit="module") as progress, _nvcc_pool(jobs) as pool:
        pending = [(family, problem, _submit_modules(pool, family, unique, problem, arch, cache, progress))
                   for family, problem, unique in variants]  # fmt: skip
        built = [(family, problem, {key: f.result() for key, f in futures.items()}) for family, problem, futures in pending]
    for family, problem, compiled_modules in built:
        for key, compiled in compiled_modules.items():
            row = {"family": family.name, "dtype": problem.dtype, "module": key, "arch": arch}
            if isinstance(compiled, CompileError) and compiled.over_limit:  # a device limit: infeasible, no failure
                rows.append(row | {"status": "infeasible", "error": compiled.over_limit})
            elif isinstance(compiled, CompileError):
                failed.append(f"{family.name} {problem.dtype} {key}: {str(compiled).strip().splitlines()[-1][:300]}")
                rows.append(row | {"status": "compile_error", "error": str(compiled)[-2000:]})
            else:
                rows.append(row | {"status": "ok", "kernel": compiled.kernel, "cubin_key": compiled.key, "registers": compiled.registers,
                                   "shared_bytes": compiled.shared_bytes, "spill_bytes": compiled.spill_bytes,
                                   "local_bytes": compiled.local_bytes})  # fmt: skip
    frame = pd.DataFrame(rows, columns=None if rows else ["family", "dtype", "module", "arch", "status"])
    return frame.drop_duplicates(["family", "dtype", "module"]), failed, searched


def compile_ahead(arch: str, cache_dir: Path, jobs: int | None):
    """A sweep's ``prepare`` hook: compile a problem's configurations in
    parallel before they are measured one by one."""

    def prepare(family, problem, configs) -> None:
        compile_all(family, configs, problem, arch=arch, cache_dir=cache_dir, jobs=jobs or None)

    return prepare
