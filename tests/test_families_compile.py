"""Without a GPU: every family's kernels compile for sm_90 with no
spills, its constraints say why a configuration cannot run, and its numpy
reference passes its own verification while wrong outputs fail.

The default compile test builds every variant for every dtype (38 modules);
the slow one (``-m slow``) a covering set, not the whole space: within each
variant every value of every parameter at least once (with the other
parameters as close to their defaults as the constraints allow), 258 modules.
Configurations that differ only in run-time arguments share a module, which
is compiled once.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from tuner.families import REGISTRY, Problem
from tuner.families.base import DTYPES
from tuner.measure.compile import CompileError, compile_all, module_key

# The GPUs the project measures on (H100, H200) are sm_90; a second architecture
# doubled the time of the slowest test in the suite.
ARCHS = ("sm_90",)
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")


def problem_for(family, dtype: str, n: int | None = None) -> Problem:
    """A size that is a multiple of no block, tile or vector width."""
    return Problem(family.name, dtype, n or (1000 if family.name == "matmul" else (1 << 20) + 37))


def defaults(family) -> dict:
    return {p.name: p.default for p in family.params}


def covering_set(family) -> dict[str, list[dict]]:
    """dtype -> covering configurations."""
    return {dtype: family.covering_configs(problem_for(family, dtype)) for dtype in family.dtypes}


@pytest.mark.parametrize("family_name", REGISTRY.names())
def test_covering_set_covers_every_variant_dtype_and_value(family_name):
    family = REGISTRY[family_name]
    configs = covering_set(family)
    assert set(configs) == set(family.dtypes)
    seen = {p.name: set() for p in family.params}
    for dtype, cfgs in configs.items():
        assert cfgs, f"no feasible configuration for {family_name} {dtype}"
        if "variant" in family.param_names:
            assert {c["variant"] for c in cfgs} == set(family.param("variant").values), dtype
        for cfg in cfgs:
            assert not family.violations(cfg, problem_for(family, dtype))
            for name, value in cfg.items():
                seen[name].add(value)
    for param in family.params:
        assert seen[param.name] >= set(param.values), (
            f"{family_name}.{param.name}: {seen[param.name]} lacks some of {param.values}"
        )


def one_per_variant(family) -> dict[str, list[dict]]:
    """dtype -> the covering configuration nearest the defaults of each variant:
    every kernel body and every dtype's instantiation, a tenth of the modules."""
    chosen = {}
    for dtype, configs in covering_set(family).items():
        first = {}
        for cfg in configs:
            first.setdefault(cfg.get("variant"), cfg)
        chosen[dtype] = list(first.values())
    return chosen


@needs_nvcc
@pytest.mark.parametrize("family_name", REGISTRY.names())
def test_every_variant_compiles_for_every_dtype_without_spills(family_name, tmp_path, capsys):
    compile_without_spills(family_name, one_per_variant(REGISTRY[family_name]), tmp_path, capsys)


@pytest.mark.slow
@needs_nvcc
@pytest.mark.parametrize("family_name", REGISTRY.names())
def test_every_module_of_the_covering_set_compiles_without_spills(family_name, tmp_path, capsys):
    """Every value of every parameter too (unroll 16 spilling, say): ten times the modules."""
    compile_without_spills(family_name, covering_set(REGISTRY[family_name]), tmp_path, capsys)


def compile_without_spills(family_name: str, configs_by_dtype: dict[str, list[dict]], tmp_path, capsys) -> None:
    family = REGISTRY[family_name]
    modules = variants = 0
    failures, spills = [], []
    for dtype, configs in configs_by_dtype.items():
        problem = problem_for(family, dtype)
        variants = max(variants, len({c.get("variant") for c in configs}))
        keys = {module_key(family, c, problem) for c in configs}
        for arch in ARCHS:
            results = compile_all(family, configs, problem, arch=arch, cache_dir=tmp_path, jobs=2)
            assert set(results) == keys
            modules += len(results)
            for key, result in results.items():
                if isinstance(result, CompileError):
                    failures.append(f"{arch} {dtype} {key}:\n{str(result)[-1500:]}")
                elif result.spill_bytes or result.local_bytes:
                    spills.append(f"{arch} {dtype} {key}: {result.spill_bytes} spill bytes, {result.local_bytes} stack bytes")
                else:
                    assert result.registers > 0
    with capsys.disabled():
        print(
            f"\n[{family_name}] {variants} variants, {len(family.dtypes)} dtypes: {modules} modules compiled for {'+'.join(ARCHS)}"
        )
    assert not failures, "\n".join(failures[:3])
    assert not spills, "\n".join(spills)


# ---- constraints ----------------------------------------------------------


def check(family_name: str, dtype: str, n: int | None = None, **changes) -> list[str]:
    family = REGISTRY[family_name]
    return family.violations(defaults(family) | changes, problem_for(family, dtype, n))


def test_defaults_are_feasible_for_every_dtype():
    for family in REGISTRY:
        for dtype in family.dtypes:
            assert check(family.name, dtype) == [], f"{family.name} {dtype}"


def test_vector_add_widths_fit_sixteen_bytes():
    (reason,) = check("vector_add", "float32", vector_width=8)
    assert reason.startswith("vector_width x element size must be at most 16 bytes, got 8 x 4 = 32 bytes")
    assert check("vector_add", "float16", vector_width=8) == []
    assert check("vector_add", "int8", vector_width=16) == []
    assert check("vector_add", "int32", vector_width=4) == []
    assert check("vector_add", "float16", vector_width=16)
    assert check("vector_add", "float32", vector_width=3) == ["vector_width must be one of [1, 2, 4, 8, 16], got 3"]
    assert check("vector_add", "float32", block_size=100) == ["block_size must be a multiple of 32 from 32 to 1024, got 100"]
    assert check("vector_add", "float32", offset=129) == ["offset must be an integer from 0 to 128, got 129"]
    assert check("vector_add", "float64") == ["dtype 'float64' is not one of ['int8', 'float16', 'float32', 'int32']"]


def test_vector_add_space_sizes():
    family = REGISTRY["vector_add"]
    sizes = {d: len(family.space(problem_for(family, d))) for d in family.dtypes}
    assert sizes["int8"] == sizes["float16"] == 4 * 3 * 4 * 4 * 2
    assert sizes["float32"] == sizes["int32"] == 3 * 3 * 4 * 4 * 2


def test_offset_constraints_and_l1_flags():
    family = REGISTRY["offset"]
    assert check("offset", "float32", variant="read_offset", unroll=4) == [
        "unroll must be 1 for read_offset (use read_offset_unrolled), got 4"]  # fmt: skip
    assert check("offset", "float32", variant="write_offset", unroll=2)
    assert check("offset", "float32", variant="read_offset_unrolled", unroll=4) == []
    assert check("offset", "float32", offset=11) == check("offset", "float32", offset=128) == []
    assert check("offset", "float32", offset=200) == ["offset must be an integer from 0 to 128, got 200"]
    assert check("offset", "float32", l1_cache="cs") == ["l1_cache must be one of ['ca', 'cg'], got 'cs'"]
    problem = problem_for(family, "float32")
    cfg = defaults(family)
    assert family.compile_flags(cfg | {"l1_cache": "ca"}) == ("-Xptxas", "-dlcm=ca")
    assert family.compile_flags(cfg | {"l1_cache": "cg"}) == ("-Xptxas", "-dlcm=cg")
    # The offset is a run-time argument; the L1 policy and the read-only path are not.
    assert module_key(family, cfg | {"offset": 0}, problem) == module_key(family, cfg | {"offset": 11}, problem)
    assert module_key(family, cfg | {"l1_cache": "ca"}, problem) != module_key(family, cfg | {"l1_cache": "cg"}, problem)
    assert module_key(family, cfg | {"read_only": 0}, problem) != module_key(family, cfg | {"read_only": 1}, problem)
    assert len(family.space(problem)) == 2 * 3 * 4 * 2 * 2 + 4 * 3 * 4 * 2 * 2


def test_layout_and_matmul_constraints():
    assert check("layout", "float32", variant="soa", block_size=1024) == []
    assert check("layout", "float32", block_size=2048) == ["block_size must be a multiple of 32 from 32 to 1024, got 2048"]
    matmul = REGISTRY["matmul"]
    for variant in ("naive", "shared_a", "shared_ab"):
        for n in (1000, 1024, 1):
            assert check("matmul", "float32", n, variant=variant, pitched=1, tile=32) == []
    assert check("matmul", "float32", tile=64) == ["tile must be one of [8, 16, 32], got 64"]
    problem = problem_for(matmul, "float32")
    cfg = defaults(matmul)
    # The storage is a run-time choice (the leading dimension is an argument).
    assert module_key(matmul, cfg | {"pitched": 0}, problem) == module_key(matmul, cfg | {"pitched": 1}, problem)
    assert matmul.grid_size(cfg | {"tile": 16}, problem) == (63, 63, 1)
    assert matmul.flops(cfg, problem) == 2 * 1000**3
    assert matmul.bytes_moved(cfg, problem) == 3 * 1000 * 1000 * 4


def test_bytes_moved():
    n = (1 << 20) + 37
    assert REGISTRY["vector_add"].bytes_moved({}, Problem("vector_add", "int8", n)) == 3 * n
    assert REGISTRY["vector_add"].bytes_moved({}, Problem("vector_add", "float16", n)) == 6 * n
    assert REGISTRY["offset"].bytes_moved({}, Problem("offset", "float32", n)) == 12 * n
    assert REGISTRY["layout"].bytes_moved({}, Problem("layout", "float32", n)) == 16 * n


def test_one_pass_grids_cover_every_element():
    family = REGISTRY["vector_add"]
    problem = problem_for(family, "int8")
    for cfg in family.space(problem):
        grid = family.grid_size(cfg, problem, sm_count=132)
        threads = grid * cfg["block_size"]
        assert threads * cfg["vector_width"] * cfg["unroll"] >= problem.n or cfg["grid_blocks_per_sm"] > 0
        assert grid <= 2**31 - 1
    offset = REGISTRY["offset"]
    problem = problem_for(offset, "float32")
    for cfg in offset.space(problem):
        assert offset.grid_size(cfg, problem) * cfg["block_size"] * cfg["unroll"] >= problem.n


# ---- references and verification -------------------------------------------


def small_problem(family, dtype: str) -> Problem:
    return problem_for(family, dtype, 67 if family.name == "matmul" else 4099)


def perturb(output: np.ndarray) -> np.ndarray:
    wrong = output.copy()
    flat = wrong.reshape(-1)
    if wrong.dtype.kind in "iu":
        flat[len(flat) // 2] += 1
    else:
        flat[len(flat) // 2] = flat[len(flat) // 2] * 1.5 + 1  # far outside any tolerance
    return wrong


def as_device_output(expected: np.ndarray, dtype: str) -> np.ndarray:
    """What a correct kernel returns: the reference rounded to the problem's dtype
    (reduce's fetch returns per-block partial sums; one partial is the total)."""
    return np.asarray(expected).astype(DTYPES[dtype])


@pytest.mark.parametrize("family_name", REGISTRY.names())
def test_reference_passes_and_wrong_outputs_fail(family_name):
    family = REGISTRY[family_name]
    for dtype in family.dtypes:
        problem = small_problem(family, dtype)
        inputs = family.make_inputs(problem, np.random.default_rng(1))
        assert all(np.any(np.asarray(v) != 0) for v in inputs.values()), "inputs must not be all zeros"
        expected = family.reference(inputs, problem)
        output = as_device_output(expected, dtype)
        if family.name == "copy":
            output = output.view(inputs["src"].dtype)
        verdict = family.verify(output, expected, inputs)
        assert verdict.ok, f"{family_name} {dtype}: {verdict.detail}"
        bad = family.verify(perturb(output), expected, inputs)
        assert not bad.ok, f"{family_name} {dtype}: a perturbed output passed"
        if output.dtype.kind == "f":
            nan = output.copy()
            nan.reshape(-1)[0] = np.nan
            assert not family.verify(nan, expected, inputs).ok, f"{family_name} {dtype}: NaN passed"


@pytest.mark.parametrize("dtype", ["int8", "int32"])
def test_vector_add_integer_inputs_never_overflow_or_sum_to_poison(dtype):
    family = REGISTRY["vector_add"]
    problem = Problem("vector_add", dtype, 1 << 16)
    inputs = family.make_inputs(problem, np.random.default_rng(0))
    wide = inputs["a"].astype(np.int64) + inputs["b"].astype(np.int64)
    info = np.iinfo(inputs["a"].dtype)
    assert wide.min() >= info.min and wide.max() <= info.max
    assert not np.any(wide == -1)  # -1 is the poison pattern 0xFF..
    assert np.array_equal(family.reference(inputs, problem), wide.astype(inputs["a"].dtype))
    poisoned = np.full(problem.n, -1, dtype=inputs["a"].dtype)
    assert not family.verify(poisoned, family.reference(inputs, problem), inputs).ok


def test_float16_is_checked_against_a_float32_reference():
    family = REGISTRY["vector_add"]
    problem = Problem("vector_add", "float16", 1 << 16)
    inputs = family.make_inputs(problem, np.random.default_rng(0))
    expected = family.reference(inputs, problem)
    assert expected.dtype == np.float32
    device = inputs["a"] + inputs["b"]  # numpy float16 add: rounds like the hardware's
    assert family.verify(device, expected, inputs).ok
    assert not family.verify(np.zeros_like(device), expected, inputs).ok


def test_relative_error_verdict_is_chunked_and_remembers_the_reference_norm(monkeypatch):
    from tuner.families import base

    monkeypatch.setattr(base, "VERIFY_CHUNK", 7)  # many chunks, a ragged last one
    rng = np.random.default_rng(1)
    expected = rng.uniform(-1, 1, size=100)
    output = expected.astype(np.float32)
    verdict = base.relative_error_verdict(output, expected, 1e-6)
    whole = np.linalg.norm(output.astype(np.float64) - expected) / np.linalg.norm(expected)
    assert verdict.ok and verdict.error == pytest.approx(whole, rel=1e-9)
    broken = output.copy()
    broken[99] += 1.0
    bad = base.relative_error_verdict(broken, expected, 1e-6)
    assert not bad.ok and bad.error == pytest.approx(1.0 / np.linalg.norm(expected), rel=1e-6)
    broken[50] = np.nan
    assert base.relative_error_verdict(broken, expected, 1e-6).detail.startswith("non-finite")
    # A view of the same reference with other bounds has its own norm.
    half = base.relative_error_verdict(output[:50], expected[:50], 1e-6)
    assert half.error == pytest.approx(
        np.linalg.norm(output[:50].astype(np.float64) - expected[:50]) / np.linalg.norm(expected[:50]), rel=1e-9
    )


def test_parallel_inputs_depend_on_the_seed_alone(monkeypatch):
    from tuner.families import inputs

    monkeypatch.setattr(inputs, "CHUNK", 1000)
    first = inputs.uniform(np.random.default_rng(7), -1.0, 1.0, 10_500)
    monkeypatch.setattr(inputs, "usable_cpus", lambda: 1)
    again = inputs.uniform(np.random.default_rng(7), -1.0, 1.0, 10_500)
    assert first.dtype == np.float32 and np.array_equal(first, again)
    assert -1.0 <= first.min() and first.max() < 1.0 and len(np.unique(first)) > 10_000
    ints = inputs.integers(np.random.default_rng(7), -4, 4, 10_500, np.int32)
    assert ints.dtype == np.int32 and set(np.unique(ints)) == set(range(-4, 4))
    assert not np.array_equal(ints, inputs.integers(np.random.default_rng(8), -4, 4, 10_500, np.int32))
