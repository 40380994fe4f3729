"""On the GPU: every variant of every family verifies on fresh random inputs at
two sizes, one not a multiple of any tile; unwritten outputs are caught."""

from __future__ import annotations

import pytest

from tuner.families import REGISTRY, Problem
from tuner.measure.compile import compile_all, compile_variant

pytestmark = pytest.mark.gpu

ODD_N = (1 << 20) + 37  # not a multiple of any block x unroll x vector width
EVEN_N = 1 << 22  # families state their own pair in Family.check_sizes


def variant_configs(family, problem):
    """Each variant at a few shapes: smallest and largest block, each unroll,
    vector widths and an odd offset where the variant takes them."""
    domains = {p.name: list(p.values) for p in family.params}
    if family.name == "reduce":
        domains |= {
            "block_size": [64, 1024],
            "unroll": [1, 2, 8],
            "offset": [0, 11],
            "grid_blocks_per_sm": [0, 2],
            "cache_hint": ["none", "ldg", "stream"],
            "min_blocks": [0],
        }
    elif family.name == "copy":
        domains |= {
            "block_size": [128, 1024],
            "unroll": [1, 4],
            "offset": [0, 3],
            "grid_blocks_per_sm": [0, 4],
            "cache_hint": ["none", "ldg", "stream"],
        }
    else:  # every value of every parameter at least once, for every variant
        return family.covering_configs(problem)
    configs = family.space(problem, domains)
    assert configs, f"no feasible configuration for {problem}"
    return configs


@pytest.mark.parametrize("size", ["odd", "even"])
@pytest.mark.parametrize("family_name", REGISTRY.names())
def test_every_variant_verifies(bench, family_name, size):
    family = REGISTRY[family_name]
    for dtype in family.dtypes:
        n = family.check_sizes[0 if size == "odd" else 1]
        problem = Problem(family.name, dtype, n)
        session = bench.problem(family, problem)
        configs = variant_configs(family, problem)
        compile_all(family, configs, problem, arch=bench.gpu.arch, cache_dir=bench.cache_dir)
        failures = []
        for cfg in configs:
            row = session.measure(cfg, "test", timed=False)
            if row["status"] != "ok":
                failures.append((cfg, row["status"], row["error"]))
        assert not failures, f"{len(failures)}/{len(configs)} failed, e.g. {failures[:3]}"
        variants = {c["variant"] for c in configs}
        assert variants == set(family.param("variant").values)


@pytest.mark.parametrize("finish", ["host", "second_pass", "last_block", "atomic"])
def test_unwritten_output_is_caught(bench, finish):
    """Binding poisons the outputs: fetching without running must fail verification."""
    family = REGISTRY["reduce"]
    problem = Problem("reduce", "int32", ODD_N)
    session = bench.problem(family, problem)
    cfg = {p.name: p.default for p in family.params} | {"finish": finish}
    compiled = compile_variant(family, cfg, problem, arch=bench.gpu.arch, cache_dir=bench.cache_dir)
    function = bench.gpu.function(compiled.cubin, compiled.kernel, family.arg_types)
    launch = family.bind(cfg, problem, session.buffers, function, bench.gpu)
    bench.gpu.synchronize()
    assert not family.verify(launch.fetch(), session.expected, session.inputs).ok
    launch.run()
    bench.gpu.synchronize()
    assert family.verify(launch.fetch(), session.expected, session.inputs).ok


def test_row_carries_timing_and_resources(bench):
    family = REGISTRY["reduce"]
    session = bench.problem(family, Problem("reduce", "float32", EVEN_N))
    cfg = {p.name: p.default for p in family.params} | {"vector_width": 4, "unroll": 4}
    row = session.measure(cfg, "test")
    assert row["status"] == "ok", row["error"]
    assert row["samples"] >= bench.timing.min_samples
    assert row["time_ms_min"] <= row["time_ms_median"] <= row["time_ms_max"]
    assert row["registers"] > 0 and row["spill_bytes"] == 0
    assert row["bandwidth_gbs"] == pytest.approx(row["bytes_moved"] / (row["time_ms_median"] / 1e3) / 1e9)
    assert row["l2_flushed"] is True


def test_peaks_are_consistent(bench):
    from tuner.measure.peaks import measure_peaks

    peaks, rows = measure_peaks(bench)
    assert all(r["status"] == "ok" for r in rows), [r["error"] for r in rows if r["status"] != "ok"]
    assert 0 < peaks["copy_gbs"] < peaks["theoretical_gbs"]
    assert 0 < peaks["read_gbs"] < peaks["theoretical_gbs"]


@pytest.mark.parametrize("dtype", ["int32", "float32"])
def test_reduce_finishes_on_the_device_every_launch(bench, dtype):
    """Each device finish returns the whole sum, again and again: the last_block
    counter is put back by the kernel, the atomic total zeroed by each run."""
    from tuner.families.reduce import COMPLETE

    family = REGISTRY["reduce"]
    defaults = {p.name: p.default for p in family.params}
    for n in family.check_sizes:
        problem = Problem("reduce", dtype, n)
        session = bench.problem(family, problem)
        shapes = [
            {"block_size": 64, "unroll": 1, "vector_width": 1, "offset": 11, "grid_blocks_per_sm": 2},
            {"block_size": 1024, "unroll": 8, "vector_width": 4, "offset": 0, "grid_blocks_per_sm": 0},
            {"block_size": 256, "unroll": 4, "vector_width": 4, "offset": 11, "grid_blocks_per_sm": 8},
        ]
        for shape in shapes:
            for finish in COMPLETE:
                cfg = defaults | shape | {"variant": "shuffle", "finish": finish}
                compiled = compile_variant(family, cfg, problem, arch=bench.gpu.arch, cache_dir=bench.cache_dir)
                function = bench.gpu.function(compiled.cubin, compiled.kernel, family.arg_types)
                launch = family.bind(cfg, problem, session.buffers, function, bench.gpu)
                for _ in range(3):
                    launch.run()
                    bench.gpu.synchronize()
                    output = launch.fetch()
                    assert output.shape == (1,), (cfg, output.shape)
                    verdict = family.verify(output, session.expected, session.inputs)
                    assert verdict.ok, (cfg, verdict.detail)


def test_complete_reduction_is_timed_whole(bench):
    """A complete reduction's row: verified, timed, judged on the same bytes as the partial pass."""
    family = REGISTRY["reduce"]
    session = bench.problem(family, Problem("reduce", "int32", EVEN_N))
    cfg = {p.name: p.default for p in family.params} | {"vector_width": 4, "unroll": 4}
    rows = {
        finish: session.measure(cfg | {"finish": finish}, "test") for finish in ("host", "second_pass", "last_block", "atomic")
    }
    for finish, row in rows.items():
        assert row["status"] == "ok", (finish, row["error"])
        assert row["bytes_moved"] == rows["host"]["bytes_moved"] == (EVEN_N + 1) * 4
    # Two launches cannot take less than the first of them alone (beyond timer noise).
    assert rows["second_pass"]["time_ms_median"] >= 0.97 * rows["host"]["time_ms_median"]
