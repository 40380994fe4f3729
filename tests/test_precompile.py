"""Compiling a study's modules ahead (``tuner.measure.precompile.Precompiler``):
the pool builds the space, a thread that needs a module the pool is building
waits for it instead of running nvcc again, one the pool has not reached is
built at once by the thread that needs it, compile errors stay results, and
closing leaves no nvcc running and no partial cubin. Real nvcc, counted by
wrapping ``nvcc_command`` (optionally slowed by a ``sleep`` before it)."""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from tuner.data import results
from tuner.families import REGISTRY
from tuner.families.base import Problem
from tuner.measure import compile as compiling
from tuner.measure.compile import CompiledKernel, CompileError, compile_variant, module_key
from tuner.measure.precompile import Precompiler, study_modules
from tuner.progress import Phases

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")

REDUCE = REGISTRY["reduce"]
PROBLEM = Problem("reduce", "int32", 1 << 20)
# 8 modules (block size, unroll and vector width are compiled in), 16 configurations.
DOMAINS = {p.name: [p.default] for p in REDUCE.params} | {
    "variant": ["shuffle"], "block_size": [128, 256], "unroll": [1, 2], "vector_width": [1, 2],
    "offset": [0], "grid_blocks_per_sm": [1, 2], "cache_hint": ["none"], "min_blocks": [0], "finish": ["host"],
}  # fmt: skip
ARCH = "sm_90"


def space() -> list[dict]:
    return REDUCE.space(PROBLEM, DOMAINS)


def one_per_module() -> list[dict]:
    """A configuration of each of the space's modules, in the space's order."""
    return list(compiling.unique_modules(REDUCE, space(), PROBLEM).values())


class NvccLog:
    """Every nvcc run: (cubin name, thread name, start), and each is slowed by ``delay_s``."""

    def __init__(self, monkeypatch, delay_s: float = 0.0) -> None:
        self.runs: list[tuple[str, str, float]] = []
        self.started = threading.Condition()
        real = compiling.nvcc_command

        def command(source, defines, flags, arch, output):
            with self.started:
                self.runs.append((Path(output).name, threading.current_thread().name, time.perf_counter()))
                self.started.notify_all()
            nvcc = real(source, defines, flags, arch, output)
            return ["sh", "-c", f'sleep {delay_s}; exec "$@"', "sh", *nvcc] if delay_s else nvcc

        monkeypatch.setattr(compiling, "nvcc_command", command)

    def wait_for(self, count: int, timeout: float = 60.0) -> None:
        with self.started:
            assert self.started.wait_for(lambda: len(self.runs) >= count, timeout), self.runs

    def per_cubin(self) -> dict[str, list[str]]:
        threads: dict[str, list[str]] = {}
        for cubin, thread, _ in self.runs:
            threads.setdefault(cubin, []).append(thread)
        return threads


def break_modules(monkeypatch, broken) -> None:
    """Modules of configurations where ``broken(cfg)`` holds fail in nvcc (an unknown element type)."""
    defines = type(REDUCE).defines
    monkeypatch.setattr(type(REDUCE), "defines", lambda self, cfg, problem: defines(self, cfg, problem) | (
        {"ELEM": "no_such_type"} if broken(cfg) else {}))  # fmt: skip


@pytest.fixture
def children():
    """This test's child processes (nvcc, or the shell before it): those of
    this process that were not there when the test began (earlier tests leave
    some, such as multiprocessing's resource tracker, which are not ours)."""
    before = set(_children())
    return lambda: [pid for pid in _children() if pid not in before]


def _children() -> list[int]:
    """Processes whose parent is this one."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        if int(fields[1]) == os.getpid() and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found


def assert_cache_whole(cache: Path) -> None:
    """Every cubin is an ELF file with its report; no temporary folder is left."""
    assert not [p for p in cache.iterdir() if p.is_dir()], list(cache.iterdir())
    for cubin in cache.glob("*.cubin"):
        assert cubin.read_bytes()[:4] == b"\x7fELF", cubin
        assert json.loads(cubin.with_suffix(".json").read_text())["cubin"] == str(cubin)


def test_a_study_compiles_its_enqueued_configurations_first_then_its_whole_space_shuffled_by_its_seed():
    configs = space()
    enqueued = [configs[9], configs[2]]
    partial = {"variant": "shuffle", "block_size": 128}  # an enqueued point that is not a whole configuration
    infeasible = configs[0] | {"block_size": 2048}
    order = study_modules(REDUCE, PROBLEM, DOMAINS, [*enqueued, partial, infeasible], seed=3)
    assert order[:2] == enqueued
    rest = order[2:]
    assert sorted(map(results.config_key, rest)) == sorted(map(results.config_key, configs))
    assert rest != configs  # shuffled
    assert study_modules(REDUCE, PROBLEM, DOMAINS, enqueued, seed=3) == order[:2] + rest
    assert study_modules(REDUCE, PROBLEM, DOMAINS, enqueued, seed=4)[2:] != rest  # another worker, another order


@needs_nvcc
def test_the_pool_compiles_every_module_of_the_space_once(tmp_path, monkeypatch):
    nvcc = NvccLog(monkeypatch)
    configs = space()
    keys = {module_key(REDUCE, cfg, PROBLEM) for cfg in configs}
    with Precompiler(REDUCE, PROBLEM, configs, arch=ARCH, cache_dir=tmp_path, jobs=2) as pool:
        built = pool.wait()
    assert set(built) == keys and len(keys) == 8
    assert all(isinstance(compiled, CompiledKernel) and Path(compiled.cubin).is_file() for compiled in built.values())
    assert sorted(nvcc.per_cubin()) == sorted(Path(c.cubin).name for c in built.values())
    assert all(len(threads) == 1 and threads[0].startswith("compile-ahead") for threads in nvcc.per_cubin().values())
    assert "compile ahead: 8/8 modules (0 failed) by 2 threads, all ready after" in pool.summary()
    # The measuring thread now finds every module in the cache, and so does another pool.
    for cfg in configs:
        assert compile_variant(REDUCE, cfg, PROBLEM, arch=ARCH, cache_dir=tmp_path) == built[module_key(REDUCE, cfg, PROBLEM)]
    with Precompiler(REDUCE, PROBLEM, configs, arch=ARCH, cache_dir=tmp_path, jobs=2) as again:
        again.wait()
    assert len(nvcc.runs) == 8
    assert_cache_whole(tmp_path)


@needs_nvcc
def test_a_module_the_pool_builds_is_waited_for_and_one_it_has_not_reached_is_built_at_once(tmp_path, monkeypatch):
    nvcc = NvccLog(monkeypatch, delay_s=1.0)
    first, second, third = one_per_module()[:3]
    with Precompiler(REDUCE, PROBLEM, [first, second, third], arch=ARCH, cache_dir=tmp_path, jobs=1) as pool:
        nvcc.wait_for(1)  # the pool's one thread runs nvcc for the first module
        waited = compile_variant(REDUCE, first, PROBLEM, arch=ARCH, cache_dir=tmp_path)
        assert time.perf_counter() >= nvcc.runs[0][2] + 1.0  # returned once the pool's nvcc (1 s of delay) ended
        nvcc.wait_for(2)  # and goes on to the second: the third is queued behind it
        own = compile_variant(REDUCE, third, PROBLEM, arch=ARCH, cache_dir=tmp_path)
        built = pool.wait()
    by_cubin = nvcc.per_cubin()
    assert by_cubin[Path(waited.cubin).name] == ["compile-ahead_0"]  # one nvcc, the pool's
    assert by_cubin[Path(own.cubin).name] == ["MainThread"]  # built here while the pool was busy
    assert len(nvcc.runs) == 3  # the pool found the third in the cache
    assert built[module_key(REDUCE, first, PROBLEM)] == waited and built[module_key(REDUCE, third, PROBLEM)] == own


@needs_nvcc
def test_a_hurried_module_is_built_at_once_beside_the_pool(tmp_path, monkeypatch):
    nvcc = NvccLog(monkeypatch, delay_s=1.0)
    first, second, third = one_per_module()[:3]
    with Precompiler(REDUCE, PROBLEM, [first, second, third], arch=ARCH, cache_dir=tmp_path, jobs=1) as pool:
        nvcc.wait_for(1)  # the pool's one thread is busy with the first module
        pool.hurry(third)  # as a study does with the configuration it has asked ahead
        nvcc.wait_for(2)
        assert nvcc.runs[1][1] == "compile-next_0"
        hurried = compile_variant(REDUCE, third, PROBLEM, arch=ARCH, cache_dir=tmp_path)  # waits for it, or finds it built
        pool.wait()
    assert nvcc.per_cubin()[Path(hurried.cubin).name] == ["compile-next_0"]
    assert len(nvcc.runs) == 3  # the pool found the third in the cache


def test_a_study_hands_each_configuration_it_claims_to_claimed_before_measuring_it():
    from tuner.search.study.run import StudyOptions, run_study

    events = []  # (what, config key, thread, time)

    def measure(cfg):
        events.append(("measure", results.config_key(cfg), threading.current_thread().name, time.perf_counter()))
        time.sleep(0.3)
        events.append(("measured", results.config_key(cfg), threading.current_thread().name, time.perf_counter()))
        return {"status": "ok", "bandwidth_gbs": float(cfg["block_size"] + cfg["unroll"])}

    def claimed(cfg):
        events.append(("claimed", results.config_key(cfg), threading.current_thread().name, time.perf_counter()))

    outcome = run_study(StudyOptions.for_strategy("random", family=REDUCE, problem=PROBLEM, domains=DOMAINS, storage=None,
                                                  study_name="ahead", measure=measure, budget_trials=6, timeout_s=None,
                                                  claimed=claimed))  # fmt: skip
    assert outcome.measured == 6
    order = [(what, key) for what, key, _, _ in events]
    measured = [key for what, key in order if what == "measure"]
    assert sorted(key for what, key in order if what == "claimed") == sorted(measured)  # each claimed one, once
    assert all(order.index(("claimed", key)) < order.index(("measure", key)) for key in measured)
    # The trials asked ahead were handed over from the asking thread while the one before was measured.
    ahead = [when for what, _, thread, when in events if what == "claimed" and thread.startswith("ask")]
    starts, ends = ([when for what, _, _, when in events if what == kind] for kind in ("measure", "measured"))
    assert any(start < when < end for when in ahead for start, end in zip(starts, ends))


@needs_nvcc
def test_threads_that_need_one_module_at_once_run_one_nvcc(tmp_path, monkeypatch):
    nvcc = NvccLog(monkeypatch, delay_s=0.3)
    cfg = space()[0]
    with Precompiler(REDUCE, PROBLEM, [cfg], arch=ARCH, cache_dir=tmp_path, jobs=1):
        got = []
        threads = [threading.Thread(target=lambda: got.append(compile_variant(REDUCE, cfg, PROBLEM, arch=ARCH, cache_dir=tmp_path)))
                   for _ in range(4)]  # fmt: skip
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert len(nvcc.runs) == 1 and len(got) == 4 and len(set(got)) == 1


@needs_nvcc
def test_compile_errors_are_results_for_the_pool_and_for_the_thread_that_waits(tmp_path, monkeypatch):
    nvcc = NvccLog(monkeypatch, delay_s=0.6)
    break_modules(monkeypatch, lambda cfg: cfg["unroll"] == 2)
    modules = one_per_module()
    configs = [cfg for cfg in modules if cfg["unroll"] == 2][:2] + [cfg for cfg in modules if cfg["unroll"] == 1][:2]
    with Precompiler(REDUCE, PROBLEM, configs, arch=ARCH, cache_dir=tmp_path, jobs=2) as pool:
        nvcc.wait_for(1)
        with pytest.raises(CompileError, match="nvcc failed"):  # the pool's error, raised in the thread that waited
            compile_variant(REDUCE, configs[0], PROBLEM, arch=ARCH, cache_dir=tmp_path)
        built = pool.wait()
    with pytest.raises(CompileError, match="nvcc failed"):  # asked for again: nvcc is not
        compile_variant(REDUCE, configs[1] | {"grid_blocks_per_sm": 2}, PROBLEM, arch=ARCH, cache_dir=tmp_path)
    assert len(nvcc.runs) == 4  # one nvcc per module: the broken ones were not built again
    failed = {key for key, result in built.items() if isinstance(result, CompileError)}
    assert failed == {module_key(REDUCE, cfg, PROBLEM) for cfg in configs[:2]}
    assert sum(isinstance(result, CompiledKernel) for result in built.values()) == 2
    assert "4/4 modules (2 failed)" in pool.summary()
    assert len(list(tmp_path.glob("*.cubin"))) == 2
    assert_cache_whole(tmp_path)


@needs_nvcc
def test_closing_cancels_the_queue_and_leaves_no_nvcc_running_and_no_partial_cubin(tmp_path, monkeypatch, children):
    nvcc = NvccLog(monkeypatch, delay_s=0.5)
    pool = Precompiler(REDUCE, PROBLEM, space(), arch=ARCH, cache_dir=tmp_path, jobs=2)
    nvcc.wait_for(2)
    started = time.perf_counter()
    pool.close()
    closed_s = time.perf_counter() - started
    assert closed_s < 10, closed_s  # the two nvcc under way finish; nothing more starts
    assert len(nvcc.runs) <= 4 and len(nvcc.runs) < len(pool.modules)
    assert all(future.done() for future in pool.results.values())
    assert sum(future.cancelled() for future in pool.results.values()) >= 4
    assert children() == []
    time.sleep(0.6)
    assert len(nvcc.runs) <= 4  # and none starts later
    assert_cache_whole(tmp_path)


def test_a_compiler_killed_mid_write_leaves_no_cubin(tmp_path, monkeypatch, children):
    # A stand-in for nvcc that writes half a cubin where nvcc writes it, then hangs.
    monkeypatch.setattr(compiling, "nvcc_command", lambda source, defines, flags, arch, output: [
        "sh", "-c", f"printf '\\177ELF half' > '{output}'; exec sleep 60"])  # fmt: skip
    with Precompiler(REDUCE, PROBLEM, space()[:1], arch=ARCH, cache_dir=tmp_path, jobs=1) as pool:
        deadline = time.monotonic() + 30
        while not list(tmp_path.glob("*/*.cubin")) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert list(tmp_path.glob("*/*.cubin")) and not list(tmp_path.glob("*.cubin"))  # written beside, not in place
        for pid in children():
            os.kill(pid, 9)
        (result,) = pool.wait().values()
    assert isinstance(result, CompileError)
    assert list(tmp_path.iterdir()) == []
    assert children() == []


# ---- in the tune command ---------------------------------------------------------


class CompilingBench:
    """The harness of the tune stage with real nvcc and a table look-up for the
    GPU: it compiles each configuration's module as ``ProblemBench.measure``
    does (under the compile phase; a compile error is a ``compile_error``
    row), then looks the measurement up."""

    from tuner.measure.bench import Bench

    phase = Bench.phase
    phase_summary = Bench.phase_summary

    def __init__(self, cache_dir: Path) -> None:
        from types import SimpleNamespace

        self.gpu, self.cache_dir, self.phases = SimpleNamespace(arch=ARCH), cache_dir, Phases()

    def problem(self, family, problem):
        bench = self

        class Session:
            def measure(self, cfg, source):
                row = {"source": source, "family": family.name, "dtype": problem.dtype, "n": problem.n,
                       "config_key": results.config_key(cfg), **cfg}  # fmt: skip
                try:
                    with bench.phase("compile"):
                        compile_variant(family, cfg, problem, arch=ARCH, cache_dir=bench.cache_dir)
                except CompileError as error:
                    return row | {"status": "compile_error", "error": str(error)[-200:]}
                gbs = 1000.0 - 40 * abs(cfg["block_size"] - 256) / 128 - 20 * cfg["unroll"] - 10 * cfg["grid_blocks_per_sm"]
                return row | {"status": "ok", "bandwidth_gbs": gbs, "time_ms_median": problem.n * 4 / gbs / 1e6}

        return Session()


@needs_nvcc
@pytest.mark.parametrize("ahead", [True, False])
def test_the_tune_command_compiles_ahead_and_its_rows_count_the_waits(
    tmp_path, monkeypatch, capsys, ahead, children, measure_in_thread
):
    from tuner import cli
    from tuner.settings import parse

    monkeypatch.setenv("TUNER_PROGRESS", "off")
    nvcc = NvccLog(monkeypatch, delay_s=0.2)
    break_modules(monkeypatch, lambda cfg: cfg["block_size"] == 256 and cfg["unroll"] == 2)
    study = {"family": "reduce", "dtype": "int32", "n": PROBLEM.n, "budget_trials": 10, "sampler": "random",
             "storage": str(tmp_path / "study.log"), "params": DOMAINS, "compile_ahead": ahead}  # fmt: skip
    settings = parse(
        {
            "results_dir": str(tmp_path / "results"),
            "gpu": "test-gpu",
            "compile_jobs": 2,
            "sweeps": {},
            "studies": {"search": study},
        }
    )
    bench = CompilingBench(tmp_path / "cubins")
    measure_in_thread(bench)
    settings.run.gpu_dir.mkdir(parents=True)
    (settings.run.gpu_dir / "device.json").write_text("{}")

    assert cli.main(["tune", "search", "--settings", settings.stage_json("study", "search")]) == 0
    rows = results.read(settings.run.gpu_dir / "studies" / "search.parquet")
    out = capsys.readouterr().out

    assert len(rows) == 10 and set(rows.status) <= {"ok", "compile_error"}
    broken_rows = rows[(rows.block_size == 256) & (rows.unroll == 2)]
    assert (broken_rows.status == "compile_error").all() and (rows.drop(broken_rows.index).status == "ok").all()
    # The measuring thread's waits, on the pool or on its own nvcc, are the rows' compile seconds.
    assert rows["compile_s"].sum() == pytest.approx(bench.phases["compile"])
    by_cubin = nvcc.per_cubin()
    assert all(len(threads) == 1 for threads in by_cubin.values()), by_cubin  # one nvcc per module, a broken one too
    pool_runs = [thread for threads in by_cubin.values() for thread in threads if thread.startswith("compile-")]
    if ahead:
        assert pool_runs and "compile ahead: " in out and "compile ahead: no modules" not in out
    else:
        assert not pool_runs and "compile ahead: no modules" in out
        assert rows["compile_s"].sum() >= 0.2 * len(nvcc.runs)  # each nvcc run waited for, its delay included
    assert children() == []
    assert_cache_whole(tmp_path / "cubins")


# ---- what a study compiles grows with its budget ------------------------------------


def test_a_study_compiles_its_whole_space_ahead_only_where_it_is_small_beside_its_budget():
    configs = space()  # 16 configurations, 8 modules
    enqueued = [configs[9]]
    assert study_modules(REDUCE, PROBLEM, DOMAINS, enqueued, seed=3, budget_trials=2)[1:] == study_modules(
        REDUCE, PROBLEM, DOMAINS, enqueued, seed=3)[1:]  # 8 modules <= 4 a trial of 2 trials: all of them  # fmt: skip
    assert study_modules(REDUCE, PROBLEM, DOMAINS, enqueued, seed=3, budget_trials=1) == enqueued  # 8 > 4: as it searches
    full = {p.name: list(p.values) for p in REDUCE.params}  # 576 modules
    assert compiling.study_compiled_whole(REDUCE, PROBLEM, full, 144) is not None
    assert compiling.study_compiled_whole(REDUCE, PROBLEM, full, 143) is None


class StubCompiles:
    """``compile_variant`` in the precompiler, counted: each module's first
    define set, the thread that built it; ``hold`` keeps a module's compile
    waiting until it is released."""

    def __init__(self, monkeypatch) -> None:
        from tuner.measure import precompile

        self.built: list[tuple[str, str]] = []
        self.held: dict[str, threading.Event] = {}
        self.started = threading.Condition()
        monkeypatch.setattr(precompile, "compile_variant", self)

    def __call__(self, family, cfg, problem, *, arch, cache_dir):
        key = module_key(family, cfg, problem)
        with self.started:
            self.built.append((key, threading.current_thread().name))
            self.started.notify_all()
        if key in self.held:
            assert self.held[key].wait(30)
        return key

    def hold(self, cfg) -> threading.Event:
        return self.held.setdefault(module_key(REDUCE, cfg, PROBLEM), threading.Event())

    def wait_for(self, count: int) -> None:
        with self.started:
            assert self.started.wait_for(lambda: len(self.built) >= count, 30), self.built


def test_likely_modules_are_built_when_a_thread_is_free_and_dropped_once_newer_ones_come(monkeypatch):
    stub = StubCompiles(monkeypatch)
    a, b, c, d, e = one_per_module()[:5]
    release = stub.hold(a)
    with Precompiler(REDUCE, PROBLEM, arch=ARCH, cache_dir="unused", jobs=1) as pool:
        assert pool.summary() == "compile ahead: no modules"
        pool.expect([a, b, c])
        stub.wait_for(1)  # the pool's one thread builds a; b and c wait
        pool.expect([d])  # the sampler moved on: b and c are dropped unless started
        pool.hurry(e)  # claimed: built at once beside the pool
        stub.wait_for(2)
        release.set()
        stub.wait_for(3)
        pool.hurry(d)  # a likely one claimed afterwards
        built = pool.wait()
    keys = [key for key, _ in stub.built]
    assert keys == [module_key(REDUCE, cfg, PROBLEM) for cfg in (a, e, d)]
    assert [thread for _, thread in stub.built] == ["compile-ahead_0", "compile-next_0", "compile-ahead_0"]
    assert set(built) == set(keys)  # b and c were never handed to nvcc
    assert pool.summary().endswith("; 2 claimed, 2 likely next (1 of them claimed)")


def test_a_disabled_precompiler_builds_nothing(monkeypatch):
    stub = StubCompiles(monkeypatch)
    with Precompiler(REDUCE, PROBLEM, space(), arch=ARCH, cache_dir="unused", enabled=False) as pool:
        pool.hurry(space()[0])
        pool.expect(space()[1:3])
    assert stub.built == [] and pool.summary() == "compile ahead: no modules"


def fake_nvcc(monkeypatch, delay_s: float = 0.02) -> None:
    """nvcc replaced by a shell that writes an ELF stub where nvcc writes the cubin."""
    monkeypatch.setattr(compiling, "nvcc_command", lambda source, defines, flags, arch, output: [
        "sh", "-c", f"sleep {delay_s}; printf '\\177ELF' > '{output}'"])  # fmt: skip


def test_a_study_on_a_large_space_compiles_what_it_claims_and_what_its_sampler_expects_not_the_space(
    tmp_path, monkeypatch, capsys, measure_in_thread
):
    from tuner import cli
    from tuner.measure import precompile
    from tuner.search.samplers.ordinal import RUNNERS_UP
    from tuner.settings import parse

    monkeypatch.setenv("TUNER_PROGRESS", "off")
    fake_nvcc(monkeypatch)
    expected: list[str] = []
    expect = precompile.Precompiler.expect
    monkeypatch.setattr(precompile.Precompiler, "expect", lambda self, cfgs: (
        expected.extend(module_key(REDUCE, cfg, PROBLEM) for cfg in cfgs), expect(self, cfgs))[1])  # fmt: skip
    budget = 12
    study = {"family": "reduce", "dtype": "int32", "n": PROBLEM.n, "budget_trials": budget, "storage": str(tmp_path / "study.log"),
             "params": {p.name: list(p.values) for p in REDUCE.params}}  # the default sampler on reduce's 576 modules  # fmt: skip
    settings = parse({"results_dir": str(tmp_path / "results"), "gpu": "test-gpu", "compile_jobs": 2, "sweeps": {},
                      "studies": {"search": study}})  # fmt: skip
    bench = CompilingBench(tmp_path / "cubins")
    measure_in_thread(bench)
    settings.run.gpu_dir.mkdir(parents=True)
    (settings.run.gpu_dir / "device.json").write_text("{}")

    assert cli.main(["tune", "search", "--settings", settings.stage_json("study", "search")]) == 0
    rows = results.read(settings.run.gpu_dir / "studies" / "search.parquet")
    measured = {module_key(REDUCE, {p.name: row[p.name] for p in REDUCE.params}, PROBLEM) for _, row in rows.iterrows()}
    compiled = {json.loads(path.read_text())["key"] for path in (tmp_path / "cubins").glob("*.json")}
    space_modules = len(compiling.unique_modules(REDUCE, REDUCE.space(PROBLEM), PROBLEM))
    assert len(rows) == budget and (rows.status == "ok").all()
    # Every measured module, and besides them only modules the sampler said it would likely propose next.
    assert len(compiled) >= len(measured) and space_modules == 576
    assert len(compiled) <= len(measured) + RUNNERS_UP * budget
    cubin_keys = {compile_variant(REDUCE, cfg, PROBLEM, arch=ARCH, cache_dir=tmp_path / "cubins").key: key
                  for key, cfg in compiling.unique_modules(REDUCE, REDUCE.space(PROBLEM), PROBLEM).items()
                  if key in measured or key in expected}  # fmt: skip
    assert compiled <= set(cubin_keys)
    out = capsys.readouterr().out
    assert "; compile ahead: " in out, out
    print(out)


def test_the_compile_stage_compiles_a_study_whole_only_where_its_space_is_small_beside_its_budget(tmp_path, monkeypatch, capsys):
    from tuner import cli
    from tuner.settings import Settings, parse

    fake_nvcc(monkeypatch, delay_s=0.0)
    monkeypatch.setenv("TUNER_PROGRESS", "off")
    large = {p.name: list(p.values) for p in REDUCE.params}  # 576 modules
    studies = {name: {"family": "reduce", "dtype": "int32", "n": PROBLEM.n, "budget_trials": budget, "params": params,
                      "storage": str(tmp_path / f"{name}.log")}
               for name, budget, params in (("small", 2, DOMAINS), ("large", 100, large))}  # fmt: skip
    settings = parse({"results_dir": str(tmp_path / "results"), "gpu": "test-gpu", "sweeps": {}, "studies": studies})
    stage = settings.stage_json("compile")
    # What the stage reads of a study: its grid and its budget, not its sampler.
    again = parse({"results_dir": str(tmp_path / "results"), "gpu": "test-gpu", "sweeps": {},
                   "studies": {**studies, "small": {**studies["small"], "sampler": "random", "seed": 7}}})  # fmt: skip
    assert again.stage_json("compile") == stage
    assert Settings.from_stage_json(stage).studies["large"].budget_trials == 100
    out = tmp_path / "compile.parquet"
    assert cli.main(["compile", "--settings", stage, "--arch", ARCH, "--out", str(out)]) == 0
    assert len(list((tmp_path / "results" / ".cubin-cache").glob("*.cubin"))) == 8  # the small study's 8 modules only
    assert len(pd.read_parquet(out)) == 8
    printed = capsys.readouterr().out
    assert "study large: its space has more than 4 modules per trial of its budget" in printed
    assert "compiled 8 modules for sm_90" in printed
