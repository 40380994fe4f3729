"""Kernel Tuner scripts through ``tuner.kernel_tuner``: each argument's
translation (against Kernel Tuner's own functions where it is installed), the
one line for each argument without a counterpart (before any GPU work), the
results' shape, ``check-family`` on a translated spec, and Kernel Tuner's
CUDA examples with only their import changed, translated without a GPU."""

from __future__ import annotations

import importlib.util
import inspect
import itertools
import json
import os
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import tuner.api
from tuner.api import Tuned
from tuner.families import REGISTRY, register
from tuner.families.base import config_key
from tuner.kernel_tuner import KernelTunerArgumentError, configure, translate, tune_kernel
from tuner.kernel_tuner.script import with_our_import
from tuner.measure.compile import _constants_text, _macros

# Kernel Tuner's CUDA examples, test data beside the checkout (never copied into it).
EXAMPLES = Path(
    os.environ.get("KERNEL_TUNER_EXAMPLES", Path(__file__).resolve().parents[1].parent / "shared" / "kernel_tuner_examples")
)

VECTOR_ADD = """
__global__ void vector_add(float *c, float *a, float *b, int n) {
    int i = blockIdx.x * block_size_x + threadIdx.x;
    if (i<n) {
        c[i] = a[i] + b[i];
    }
}
"""

UNROLLED_SUM = """
__global__ void partial_sums(float *sums, const float *x, int n) {
    float sum = 0.0f;
    #pragma unroll loop_unroll_factor_0
    for (int i = blockIdx.x * block_size_x + threadIdx.x; i < n; i += gridDim.x * block_size_x)
        sum += x[i];
    atomicAdd(&sums[blockIdx.x], sum);
}
"""


@pytest.fixture(autouse=True)
def registry_and_results_as_before(tmp_path):
    before = dict(REGISTRY.families)
    configure(results=tmp_path / "results")
    yield
    configure(results="results")
    REGISTRY.families.clear()
    REGISTRY.families.update(before)


def vector_add_call(size: int = 1000, **changes) -> dict:
    a, b = np.arange(size, dtype=np.float32), np.ones(size, dtype=np.float32)
    call = dict(kernel_name="vector_add", kernel_source=VECTOR_ADD, problem_size=size,
                arguments=[np.zeros_like(a), a, b, np.int32(size)], tune_params={"block_size_x": [128, 256, 512]})  # fmt: skip
    return call | changes


def plan_of(tmp_path: Path, **call):
    return translate(**call, sources_dir=tmp_path / "sources")


# ---- the arguments, translated --------------------------------------------------


def test_arrays_are_the_users_scalars_are_scalars_and_answers_pick_the_outputs(tmp_path):
    call = vector_add_call()
    c, a, b, _ = call["arguments"]
    plan = plan_of(tmp_path, **call, answer=[a + b, None, None, None])
    spec = plan.spec
    assert [(arg.name, arg.role) for arg in spec.args] == [("arg0", "inout"), ("arg1", "in"), ("arg2", "in"), ("arg3", "scalar")]
    assert spec.arg_types == "PPPi" and spec.args[3].value == 1000
    inputs = spec.make_inputs(plan.problem, np.random.default_rng(0))
    assert np.array_equal(inputs["arg1"], a) and np.array_equal(inputs["arg2"], b) and np.array_equal(inputs["arg0"], c)
    assert inputs["arg1"] is not a  # a copy: the pipeline never writes the user's arrays
    assert plan.problem.n == 1000 and plan.sampler is None and plan.space_size == 3
    # no answer: nothing is compared, and the first array is the spec's output
    plain = plan_of(tmp_path, **call).spec
    assert [arg.role for arg in plain.args] == ["inout", "in", "in", "scalar"] and plain.compared == ()
    assert plain.verify([None] * 4, np.zeros(0), {}).ok


def test_the_defines_are_kernel_tuners_and_a_string_source_is_compiled_as_pycuda_does(tmp_path):
    plan = plan_of(tmp_path, **vector_add_call())
    defines = plan.spec.defines({"block_size_x": 256}, plan.problem)
    assert defines == {"grid_size_x": "4", "grid_size_y": "1", "grid_size_z": "1", "block_size_x": "256", "block_size_y": "1",
                       "block_size_z": "1", "kernel_tuner": "1"}  # fmt: skip
    text = Path(plan.spec.source).read_text()
    assert 'extern "C" {' in text and VECTOR_ADD in text  # found by its plain name, as PyCUDA wraps a source
    own = plan_of(tmp_path, **vector_add_call(kernel_source='extern "C"' + VECTOR_ADD)).spec
    assert 'extern "C" {' not in Path(own.source).read_text()


def test_a_loop_unroll_factor_is_a_cpp_constant_as_kernel_tuner_makes_it(tmp_path):
    (tmp_path / "sums.cu").write_text(UNROLLED_SUM)
    x = np.ones(4096, dtype=np.float32)
    plan = plan_of(tmp_path, kernel_name="partial_sums", kernel_source=str(tmp_path / "sums.cu"), problem_size=4096,
                   arguments=[np.zeros(64, np.float32), x, np.int32(x.size)],
                   tune_params={"block_size_x": [64], "loop_unroll_factor_0": [0, 4]})  # fmt: skip
    defines = plan.spec.defines({"block_size_x": 64, "loop_unroll_factor_0": 4}, plan.problem)
    assert defines["loop_unroll_factor_0"] == "4"
    # The compile declares it a C++ constant before the source, as for a KernelSpec, not a -D macro.
    assert _constants_text(defines) == "constexpr int loop_unroll_factor_0 = 4;\n"
    assert "loop_unroll_factor_0" not in _macros(defines)
    assert f'#include "{tmp_path / "sums.cu"}"' in Path(plan.spec.source).read_text()


GRIDS = [
    dict(problem_size=(1000, 300), grid_div_x=None, grid_div_y=None),
    dict(problem_size=(1000, 300), grid_div_x=["block_size_x", "tile"], grid_div_y=["block_size_y"]),
    dict(problem_size=(1000, 300), grid_div_x=["block_size_x*tile/2"], grid_div_y=[]),
    dict(problem_size=(1000, 300), grid_div_x=lambda p: p["block_size_x"] / 32, grid_div_y=[2, "tile"]),
    dict(problem_size="tile * 100", grid_div_x=[]),
    dict(problem_size=("tile * 100", 77), grid_div_x=["block_size_x"], grid_div_y=["block_size_y"]),
    dict(problem_size=lambda p: (p["tile"] * 50, 9), grid_div_x=[[["block_size_x"]]]),
    dict(problem_size=np.int64(4097), grid_div_x=["block_size_x/tile"]),
]


@pytest.mark.parametrize("geometry", GRIDS, ids=[f"grid{i}" for i in range(len(GRIDS))])
def test_problem_size_and_grid_divisors_give_kernel_tuners_grid(tmp_path, geometry):
    util = pytest.importorskip("kernel_tuner.util")
    params = {"block_size_x": [32, 64, 96], "block_size_y": [1, 4], "tile": [1, 3]}
    plan = plan_of(tmp_path, **vector_add_call(tune_params=params, **{k: v for k, v in geometry.items() if k == "problem_size"}),
                   **{k: v for k, v in geometry.items() if k != "problem_size"})  # fmt: skip
    divisors = [geometry.get(f"grid_div_{axis}") for axis in "xyz"]
    for cfg in plan.spec.configs({name: values for name, values in params.items()}):
        threads, grid = util.setup_block_and_grid(
            geometry["problem_size"], divisors, cfg, ["block_size_x", "block_size_y", "block_size_z"]
        )
        assert plan.spec.geometry.threads(cfg) == tuple(threads) and plan.spec.geometry.grid(cfg) == tuple(grid), cfg


def test_block_size_names_name_the_block_and_its_defines(tmp_path):
    util = pytest.importorskip("kernel_tuner.util")
    params = {"BX": [32, 64], "by": [2, 4]}
    plan = plan_of(
        tmp_path, **vector_add_call(tune_params=params), block_size_names=["BX", "by"], grid_div_x=["BX"], grid_div_y=["by"]
    )
    cfg = {"BX": 64, "by": 4}
    threads, grid = util.setup_block_and_grid(1000, [["BX"], ["by"], None], cfg, ["BX", "by", "block_size_z"])
    assert plan.spec.geometry.threads(cfg) == tuple(threads) == (64, 4, 1) and plan.spec.geometry.grid(cfg) == tuple(grid)
    assert {"BX": "64", "by": "4", "block_size_z": "1"}.items() <= plan.spec.defines(cfg, plan.problem).items()
    upper = plan_of(tmp_path, **vector_add_call(tune_params={"BLOCK_SIZE_X": [32, 64]}))  # Kernel Tuner reads any case
    assert upper.spec.geometry.threads({"BLOCK_SIZE_X": 64}) == (64, 1, 1)


def alternating(block_size_x, tile):
    return (block_size_x // 32 + tile) % 2 == 0


@pytest.mark.parametrize(
    "restrictions",
    [
        ["block_size_x * tile <= 256", "tile != 2 or block_size_y == 1"],
        [lambda p: p["block_size_x"] * p["tile"] <= 256],
        lambda p: p["block_size_x"] > 32 and p["tile"] < 4,
        ["block_size_x * block_size_y >= 64", lambda p: p["tile"] in (1, 4)],
        ["max(block_size_x, 64 * tile) < 200"],
    ],
    ids=["strings", "lambda-list", "function", "mixed", "builtin"],
)
def test_restrictions_in_each_form_leave_kernel_tuners_search_space(tmp_path, restrictions):
    searchspace = pytest.importorskip("kernel_tuner.searchspace")
    params = {"block_size_x": [32, 64, 128, 1024], "block_size_y": [1, 2, 4], "tile": [1, 2, 4]}
    plan = plan_of(tmp_path, **vector_add_call(tune_params=params), restrictions=restrictions)
    ours = {tuple(cfg.values()) for cfg in plan.spec.space(plan.problem)}
    theirs = set(searchspace.Searchspace(params, restrictions, 1024).list)  # with Kernel Tuner's own threads limit
    assert ours == theirs and plan.space_size == len(theirs)


def test_a_function_of_parameters_by_name_or_a_function_and_its_names_is_a_restriction(tmp_path):
    """Kernel Tuner's ``check_restriction`` forms that its search space builder no longer takes."""

    def fits(block_size_x, tile):
        return block_size_x * tile <= 128

    call = vector_add_call(tune_params={"block_size_x": [32, 64, 128], "tile": [1, 2]})
    plan = plan_of(tmp_path, **call, restrictions=[fits])
    assert {tuple(c.values()) for c in plan.spec.space(plan.problem)} == {(32, 1), (32, 2), (64, 1), (64, 2), (128, 1)}
    assert plan.spec.violations({"block_size_x": 128, "tile": 2}, plan.problem) == ["restriction 'fits' does not hold"]
    pair = plan_of(tmp_path, **call, restrictions=[(alternating, ["block_size_x", "tile"])])
    assert {tuple(c.values()) for c in pair.spec.space(pair.problem)} == {(32, 1), (64, 2), (128, 2)}


def test_answers_are_compared_by_allclose_with_atol_and_a_users_verify_is_honoured(tmp_path):
    call = vector_add_call(size=4)
    c, a, b, _ = call["arguments"]
    expected = a + b
    spec = plan_of(tmp_path, **call, answer=[expected, None, None, None], atol=1e-3).spec
    assert spec.compared == (0,)
    assert spec.verify([expected + 5e-4, None, None, None], spec.reference({}, None), {}).ok
    wrong = spec.verify([expected + 1e-2, None, None, None], spec.reference({}, None), {})
    assert not wrong.ok and wrong.detail == "argument 0: 4 of 4 elements differ (numpy.allclose, atol=0.001)"
    nan = np.array([np.nan, 1, 2, 3], np.float32)
    spec_nan = plan_of(tmp_path, **call, answer=[nan, None, None, None]).spec
    assert spec_nan.verify([nan.copy(), None, None, None], spec_nan.reference({}, None), {}).ok  # NaN equals NaN where expected

    seen = []

    def close_sums(cpu_result, gpu_result, atol=None):
        seen.append((cpu_result, gpu_result, atol))
        return np.isclose(cpu_result[0], np.sum(gpu_result[0]), atol=atol)

    verified = plan_of(tmp_path, **call, answer=[np.float32(expected.sum()), None, None, None], verify=close_sums, atol=0.5).spec
    assert verified.verify([expected, None, None, None], verified.reference({}, None), {}).ok
    assert not verified.verify([expected * 2, None, None, None], verified.reference({}, None), {}).ok
    assert seen[0][2] == 0.5 and seen[0][0][1] is None and seen[0][0][0].shape == ()  # Kernel Tuner's lists, answers as numpy

    without_atol = plan_of(tmp_path, **call, verify=lambda answer, result: answer is None and len(result) == 4).spec
    assert without_atol.compared == (0, 1, 2)  # a verify without an answer sees every array
    assert without_atol.verify([c, a, b, None], np.zeros(0), {}).ok


def test_fetching_for_verification_gives_each_compared_argument_in_its_shape(tmp_path):
    from tests.test_kernel_spec import StandInGpu

    call = vector_add_call(size=6)
    c, a, b, _ = call["arguments"]
    spec = plan_of(tmp_path, **call, answer=[(a + b).reshape(2, 3), None, None, None]).spec
    plan_problem = spec.check_sizes[0]
    gpu = StandInGpu()
    gpu.download = lambda buffer, count, dtype: np.full(count, 7, dtype=dtype)
    from tuner.families.base import Problem

    problem = Problem(spec.name, "float32", plan_problem)
    buffers = spec.allocate(problem, spec.make_inputs(problem, np.random.default_rng(0)), gpu)
    launch = spec.bind({"block_size_x": 128}, problem, buffers, object(), gpu)
    assert launch.output is None and launch.restore is not None  # verified on the host, the output restored before each launch
    fetched = launch.fetch()
    assert fetched[1:] == [None, None, None] and fetched[0].shape == (6,) and (fetched[0] == 7).all()


def test_constant_memory_arguments_are_constants_uploaded_by_their_symbol(tmp_path):
    from tests.test_kernel_spec import StandInGpu

    weights = np.arange(9, dtype=np.float32)
    spec = plan_of(tmp_path, **vector_add_call(), cmem_args={"d_filter": weights}).spec
    constant = next(arg for arg in spec.args if arg.role == "constant")
    assert (constant.name, constant.shape, constant.dtype) == ("d_filter", (9,), "float32")
    from tuner.families.base import Problem

    problem = Problem(spec.name, "float32", 1000)
    gpu = StandInGpu()
    buffers = spec.allocate(problem, spec.make_inputs(problem, np.random.default_rng(0)), gpu)
    spec.bind({"block_size_x": 128}, problem, buffers, object(), gpu)
    assert ("constant", "d_filter", 9) in gpu.calls and spec.arg_types == "PPPi"


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"texmem_args": {"tex": np.zeros(4)}}, r"texmem_args: texture memory arguments have no counterpart here; remove it"),
        ({"cache": "vector_add.json"}, r"cache: Kernel Tuner's cache file has no counterpart here: the rows under results/ resume"),
        ({"observers": [object()]}, r"observers: observers have no counterpart here"),
        ({"lang": "OpenCL"}, r"lang: this tuner compiles CUDA with nvcc; must be None, 'CUDA', 'CuPy' or 'NVCUDA', got 'OpenCL'"),
        ({"objective": "GFLOP/s"}, r"objective: this tuner ranks by time \(bandwidth\); must be None or 'time', got 'GFLOP/s'"),
        ({"strategy": "nsga2"}, r"strategy: 'nsga2' searches several objectives, which have no counterpart here"),
        ({"strategy": "annealing"}, r"strategy: must be one of Kernel Tuner's \(.*\) or of this project's \(.*\), got 'annealing'"),
        ({"strategy": "genetic_algorithm", "strategy_options": {"max_fevals": 5, "popsize": 8}},
         r"strategy_options\['popsize'\]: has no counterpart in this project's ordinal_adaptive search"),
        ({"strategy_options": {"max_fevals": 5}}, r"strategy_options: brute_force measures every configuration and takes none, got \['max_fevals'\]"),
        ({"arguments": [np.zeros(4, np.float32), 5]}, r"arguments\[1\]: must be a numpy array or a numpy scalar .*got int 5"),
        ({"arguments": [np.zeros(4, np.complex64)]}, r"arguments\[0\]: dtype must be one of \[.*\], got complex64"),
        ({"answer": [None, None]}, r"answer: must have one entry per kernel argument \(4\), got 2"),
        ({"answer": [np.zeros(5), None, None, None]}, r"answer\[0\]: must have the size of arguments\[0\] \(1000\), got 5"),
        ({"answer": [None, None, None, np.int32(1)]}, r"answer\[3\]: arguments\[3\] is a scalar; answers compare arrays"),
        ({"restrictions": ["block_size_x < tile"]}, r"restrictions\[0\]: 'block_size_x < tile' names 'tile', which is not a tune parameter"),
        ({"grid_div_x": ["block_size_x * ITEMS"]}, r"grid_div_x\[0\]: 'block_size_x \* ITEMS' names 'ITEMS', which is not a tune parameter"),
        ({"problem_size": 2.5}, r"problem_size: must be an int, a string, a function or a tuple of 1 to 3 of them, got 2.5"),
        ({"kernel_source": "missing.cu"}, r"kernel_source: must be an existing file or a string of code, got '.*missing.cu'"),
        ({"kernel_source": lambda params: VECTOR_ADD}, r"kernel_source: must be a file name or a string of CUDA code \(a code generator has no counterpart"),
        ({"smem_args": {"size": 64, "carveout": 1}}, r"smem_args: only \{'size': \.\.\.\} .* has a counterpart here"),
        ({"tune_params": {"block_size_x": [128], "time": [1]}}, r"tune_params: 'time' is a name Kernel Tuner reserves"),
        ({"restrictions": ["block_size_x > 4096"]}, r"restrictions: must leave at least one configuration of the 3 of tune_params, left none"),
        ({"iterations": 0}, r"iterations: must be a whole number of at least 1, got 0"),
    ],
    ids=["texmem", "cache", "observers", "lang", "objective", "multi-objective", "unknown-strategy", "strategy-option",
         "brute-force-budget", "python-int", "complex", "answer-length", "answer-size", "answer-scalar", "restriction-name",
         "grid-name", "problem-size", "missing-source", "generator", "smem", "reserved", "nothing-left", "iterations"],
)  # fmt: skip
def test_an_argument_without_a_counterpart_is_one_line_naming_it_before_any_gpu_work(tmp_path, monkeypatch, changes, message):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tuner.api, "tune", lambda *a, **k: pytest.fail("tuner.tune ran for a refused call"))
    call = vector_add_call()
    with pytest.raises(KernelTunerArgumentError) as refused:
        tune_kernel(**(call | changes))
    text = str(refused.value)
    assert "\n" not in text and re.search(message, text), text
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").rglob("*.parquet"))


def test_strategies_map_to_their_counterparts_or_to_the_default_search(tmp_path):
    call = vector_add_call(tune_params={"block_size_x": [32 * i for i in range(1, 21)]})
    random = plan_of(tmp_path, **call, strategy="random_sample")
    assert (random.sampler, random.budget) == ("random", 2)  # a tenth of the space, as Kernel Tuner's default fraction
    bayes = plan_of(tmp_path, **call, strategy="bayes_opt", strategy_options={"max_fevals": 7, "time_limit": 30})
    assert (bayes.sampler, bayes.budget, bayes.timeout_s) == ("gp", 7, 30.0)
    genetic = plan_of(tmp_path, **call, strategy="genetic_algorithm", strategy_options={"max_fevals": 50})
    assert genetic.sampler == "ordinal_adaptive" and genetic.budget == 20 and "no counterpart" in genetic.notes[0]
    timed = plan_of(tmp_path, **call, strategy="ordinal_global", strategy_options={"time_limit": 5})
    assert (timed.budget, timed.timeout_s) == (20, 5.0)
    assert plan_of(tmp_path, **call, iterations=32).timing.min_samples == 32


# ---- the returned shape ----------------------------------------------------------


def fake_tune(tmp_path: Path, statuses=None, seen=None, most: int | None = None):
    """A stand-in for ``tuner.tune``: rows for the feasible configurations (the first ``most``; times 1 ms, 2 ms, ...
    from the last), as the pipeline writes them."""

    def tune(family, space=None, *, n, dtype=None, budget=None, timeout_s=None, sampler=None, seed=0, name=None, results=None,
             device_index=0, timing=None):  # fmt: skip
        register(family)  # as tuner.tune does
        if seen is not None:
            seen.append(dict(family=family, n=n, budget=budget, sampler=sampler, timing=timing, timeout_s=timeout_s))
        from tuner.families.base import Problem

        problem = Problem(family.name, dtype, n)
        feasible = (
            cfg for cfg in family.configs({p.name: list(p.values) for p in family.params}) if not family.violations(cfg, problem)
        )
        configs = list(itertools.islice(feasible, budget or most))
        rows = []
        for i, cfg in enumerate(reversed(configs)):
            status = (statuses or {}).get(i, "ok")
            time_ms = 1.0 + i
            rows.append({"family": family.name, "dtype": dtype, "n": n, "status": status, "config_key": config_key(cfg), **cfg,
                         "timestamp": pd.Timestamp("2026-01-01", tz="UTC"), "trial": i,
                         **({"time_ms_median": time_ms, "time_ms_ci_low": time_ms * 0.99, "time_ms_ci_high": time_ms * 1.01,
                             "samples": 10, "bandwidth_gbs": 1e3 / time_ms} if status == "ok" else {"error": "nvcc said no"})})  # fmt: skip
        folder = Path(results) / "fake-gpu"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "device.json").write_text(json.dumps({"name": "Fake GPU", "compute_capability": "9.0", "pci_bus_id": "0:1"}))
        return Tuned(rows=pd.DataFrame(rows), best=None, best_row=None, folder=folder)

    return tune


def test_results_and_env_come_back_in_kernel_tuners_shape(tmp_path, monkeypatch, capsys):
    seen = []
    monkeypatch.setattr(tuner.api, "tune", fake_tune(tmp_path, statuses={1: "compile_error"}, seen=seen))
    metrics = {"GB/s": lambda p: 12.0 / p["time"], "twice": "2 * time"}
    results, env = tune_kernel(**vector_add_call(), metrics=metrics, iterations=11, verbose=True)
    assert [r["block_size_x"] for r in results] == [128, 256, 512]  # the space's order, as brute force lists it
    failed = results[1]
    assert str(failed["__error__"]) == "CompilationFailedConfig" and "time" not in failed and failed["error"] == "nvcc said no"
    best = results[0]
    assert best["time"] == 3.0 and best["GB/s"] == 4.0 and best["twice"] == 6.0 and best["samples"] == 10
    assert env["best_config"]["block_size_x"] == 512 and env["best_config"]["time"] == 1.0
    assert env["device_name"] == "Fake GPU" and env["iterations"] == 11 and env["tie_set"] == [{"block_size_x": 512}]
    assert seen[0]["timing"].min_samples == 11 and seen[0]["sampler"] == "ordinal_adaptive" and seen[0]["budget"] is None
    json.dumps(results), json.dumps(env)  # a script json.dumps them
    out = capsys.readouterr().out
    assert "block_size_x=512, time=1.000, GB/s=12.000, twice=2.000" in out
    assert "best performing configuration: block_size_x=512, time=1.000" in out

    from tuner.kernel_tuner.file_utils import store_metadata_file, store_output_file
    from tuner.kernel_tuner.util import get_config_string

    written = store_output_file(tmp_path / "vector_add", results, ["block_size_x"])
    document = json.loads(written.read_text())
    assert written.name == "vector_add.json" and len(document["results"]) == 3
    assert json.loads(store_metadata_file(tmp_path / "meta").read_text())["device"]["name"] == "Fake GPU"
    assert get_config_string({"a": 1, "t": 2.34567}) == "a=1, t=2.346"


def test_the_same_call_again_is_the_same_family_holding_the_new_calls_arrays(tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr(tuner.api, "tune", fake_tune(tmp_path, seen=seen))
    call = vector_add_call()
    tune_kernel(**call, quiet=True)
    tune_kernel(**vector_add_call(), quiet=True)  # equal arrays, other objects
    first, second = seen[0]["family"], seen[1]["family"]
    assert first is second and first.name in REGISTRY.names()
    assert all(arg.init.array is None for arg in first.args if arg.init is not None)  # let go once measured
    changed = vector_add_call()
    changed["arguments"][1][0] = 7.0
    tune_kernel(**changed, quiet=True)
    assert seen[2]["family"].name != first.name  # other data: another family, its own rows


def test_a_study_budget_reaches_tuner_tune(tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr(tuner.api, "tune", fake_tune(tmp_path, seen=seen))
    results, env = tune_kernel(**vector_add_call(), strategy="random_sample", strategy_options={"max_fevals": 2}, quiet=True)
    assert seen[0]["budget"] == 2 and seen[0]["sampler"] == "random" and len(results) == 2
    assert env["strategy"] == "an Optuna study of 2 configurations (random)"


# ---- check-family on a translated spec -----------------------------------------

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")

FAMILY_FILE = """
import numpy as np
from pathlib import Path
from tuner.kernel_tuner import translate

here = Path(__file__).parent
x = np.arange(3000, dtype=np.float32)
{name} = translate({call}, sources_dir=here / "sources").spec
"""


@needs_nvcc
def test_check_family_passes_a_translated_spec_of_a_cpp_kernel(tmp_path):
    """Every step of check-family: the kernel found by its plain name, its arguments matching the kernel's parameters."""
    from tuner.check_family import check

    (tmp_path / "vector_add.cu").write_text(VECTOR_ADD)
    call = ('kernel_name="vector_add", kernel_source=(here / "vector_add.cu").read_text(), problem_size=3000, '
            'arguments=[np.zeros_like(x), x, x, np.int32(3000)], tune_params={"block_size_x": [128, 256]}, answer=[2 * x, None, None, None]')  # fmt: skip
    path = tmp_path / "family.py"
    path.write_text(FAMILY_FILE.format(name="spec", call=call))
    lines = []
    assert len(check(path, say=lines.append)) == 1
    steps = [line.split(":")[0] for line in lines if not line.startswith(" ")]
    required = ["load", "space", "compile", "arguments", "reference", "pipeline"]
    assert [step for step in steps if step in required] == required, lines
    assert any("2 configurations, 2 feasible" in line for line in lines) and any(
        "arguments: 4 match kernel 'vector_add'" in line for line in lines
    )


@needs_nvcc
def test_loop_unroll_factors_compile_as_constants_zero_included(tmp_path):
    from tuner.measure.compile import compile_variant, kernel_parameters

    (tmp_path / "sums.cu").write_text(UNROLLED_SUM)
    x = np.ones(3000, dtype=np.float32)
    plan = plan_of(tmp_path, kernel_name="partial_sums", kernel_source=str(tmp_path / "sums.cu"), problem_size=3000,
                   arguments=[np.zeros(8, np.float32), x, np.int32(3000)], grid_div_x=["block_size_x * 4"],
                   tune_params={"block_size_x": [128], "loop_unroll_factor_0": [0, 4]})  # fmt: skip
    spec, problem = plan.spec, plan.problem
    for cfg in spec.space(problem):
        compiled = compile_variant(spec, cfg, problem, arch="sm_90", cache_dir=tmp_path / "cubins")
        assert Path(compiled.cubin).is_file() and compiled.kernel == "partial_sums"
    cfg = spec.space(problem)[1]
    assert len(kernel_parameters(Path(spec.source), "partial_sums", defines=spec.defines(cfg, problem), arch="sm_90")) == 3


TEMPLATED = """
template <typename T, int block_size>
__global__ void scale(T *y, const T *x, int n) {
    int i = blockIdx.x * block_size + threadIdx.x;
    if (i < n) y[i] = 2 * x[i];
}
"""


@needs_nvcc
def test_a_template_kernel_is_instantiated_from_the_parameters_as_kernel_tuner_names_it(tmp_path):
    from tuner.measure.compile import compile_variant

    x = np.ones(1000, dtype=np.float32)
    plan = plan_of(tmp_path, kernel_name="scale<float, block_size_x>", kernel_source=TEMPLATED, problem_size=1000,
                   arguments=[np.zeros_like(x), x, np.int32(1000)], tune_params={"block_size_x": [128]})  # fmt: skip
    assert 'extern "C" {' not in Path(plan.spec.source).read_text()  # a template is no C function: PyCUDA's rule
    cfg = plan.spec.space(plan.problem)[0]
    assert plan.spec.kernel_name(cfg) == "scale<float, 128>"
    compiled = compile_variant(plan.spec, cfg, plan.problem, arch="sm_90", cache_dir=tmp_path / "cubins")
    assert Path(compiled.cubin).is_file() and "scale" in compiled.kernel


# ---- Kernel Tuner's examples, with only their import changed ----------------------------

# The reduction script draws 800 million floats, the matmul one multiplies two 4096 x 4096 matrices and
# the repaired spmv one lists 8.6 million row indices on the host: their specs are of the kinds the
# others test at a fraction of the time.
SLOW_EXAMPLES = {"reduction", "matmul", "spmv-repaired"}
# spmv.py computes nnz = int(nrows*ncols*0.001) in int32 (nrows is a numpy.int32): 2^17 * 2^16 wraps to 0,
# and its sparse matrix has no element. As it is, it is refused in one line; repaired (the product in
# Python's integers), it translates.
REPAIRS = {"spmv": ("nnz = int(nrows*ncols*0.001)", "nnz = int(int(nrows)*ncols*0.001)")}


@pytest.mark.skipif(not EXAMPLES.is_dir(), reason=f"{EXAMPLES} is absent (Kernel Tuner's examples beside the checkout)")
@pytest.mark.parametrize(
    "case",
    [pytest.param(name, marks=pytest.mark.slow) if name in SLOW_EXAMPLES else name
     for name in ("vector_add", "reduction", "stencil", "spmv", "spmv-repaired", "convolution", "matmul")],
)  # fmt: skip
def test_each_example_translates_with_only_its_import_changed(tmp_path, monkeypatch, case):
    example, repaired = case.removesuffix("-repaired"), case.endswith("-repaired")
    original = (EXAMPLES / f"{example}.py").read_text()
    script = with_our_import(original)
    changed = [(a, b) for a, b in zip(original.splitlines(), script.splitlines()) if a != b]
    assert changed and all("kernel_tuner" in a and "tuner.kernel_tuner" in b.replace("tuner import kernel_tuner", "tuner.kernel_tuner")
                           for a, b in changed), changed  # fmt: skip
    for source in EXAMPLES.glob("*.cu"):  # the scripts open their kernels from the working directory
        (tmp_path / source.name).symlink_to(source)
    monkeypatch.chdir(tmp_path)
    plans = []

    def translated_only(family, space=None, **run):
        """Instead of measuring: made-up rows of the spec's first feasible configurations."""
        plans.append(family)
        return fake_tune(tmp_path, most=20)(family, **(run | {"results": tmp_path / "results"}))

    monkeypatch.setattr(tuner.api, "tune", translated_only)
    namespace = {"__name__": f"kernel_tuner_example_{example}"}
    if repaired:
        script = script.replace(*REPAIRS[example])
    exec(compile(script, str(EXAMPLES / f"{example}.py"), "exec"), namespace)
    np.random.seed(0)
    if example in REPAIRS and not repaired:
        with pytest.raises(
            KernelTunerArgumentError, match=r"^arguments\[2\]: an array must hold at least one element, got shape \(0,\)$"
        ):
            namespace["tune"]()
        return
    namespace["tune"]()
    assert plans, "the script made no tune_kernel call"
    for family in plans:
        assert family.kernel in original and Path(family.source).is_file()


# ---- the GPU benchmark's script, without a GPU ------------------------------------------

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "kernel_tuner_examples.py"


def load_benchmark():
    spec = importlib.util.spec_from_file_location("kernel_tuner_examples", BENCHMARK)
    module = importlib.util.module_from_spec(spec)
    sys.modules["kernel_tuner_examples"] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def test_the_benchmark_refuses_what_it_cannot_run_in_one_line(tmp_path, capsys):
    benchmark = load_benchmark()
    with pytest.raises(SystemExit):
        benchmark.main(["--examples-dir", str(tmp_path), "--out", str(tmp_path / "out"), "--examples", "saxpy"])
    assert "--examples: must name some of" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        benchmark.main(["--examples-dir", str(tmp_path), "--out", str(tmp_path / "out")])
    assert f"--examples-dir: must hold Kernel Tuner's example scripts, {tmp_path} lacks vector_add.py" in capsys.readouterr().err


@pytest.mark.skipif(not EXAMPLES.is_dir(), reason=f"{EXAMPLES} is absent (Kernel Tuner's examples beside the checkout)")
def test_the_benchmarks_cuts_find_their_text_and_both_tools_get_the_same_spaces(tmp_path, capsys):
    pytest.importorskip("kernel_tuner")
    benchmark = load_benchmark()
    for example in benchmark.EXAMPLES:  # every cut finds its text exactly once
        original, cut = benchmark.cut_script(example, EXAMPLES)
        assert (original == cut) == (not benchmark.CUTS[example])
    assert benchmark.main(["--examples-dir", str(EXAMPLES), "--out", str(tmp_path), "--examples", "stencil",
                           "--study-trials", "0", "--dry-run"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "-import kernel_tuner\n+from tuner import kernel_tuner" in out
    assert (
        "call 1: ours 31 configurations" in out and "Kernel Tuner's search space 31" in out
    )  # stencil: the blocks of at most 1024 threads
    assert "dry run: 0 calls whose spaces differ between the tools" in out
    assert (tmp_path / "summary.txt").read_text().strip().endswith("0 calls whose spaces differ between the tools")


@pytest.mark.skipif(not EXAMPLES.is_dir(), reason=f"{EXAMPLES} is absent (Kernel Tuner's examples beside the checkout)")
def test_the_benchmarks_gpu_run_reports_both_tools_and_the_study_on_stand_ins(tmp_path, monkeypatch, capsys):
    """The GPU run's own code (running each script twice, the comparison, the study) with both tools' measuring stood in for."""
    kernel_tuner = pytest.importorskip("kernel_tuner")
    benchmark = load_benchmark()
    monkeypatch.setattr(benchmark, "warm_up", lambda results: 0.0)
    monkeypatch.setattr(tuner.api, "tune", benchmark.made_up_rows(tmp_path / "results"))
    monkeypatch.setattr(kernel_tuner, "tune_kernel", benchmark.SpaceOnly().tune_kernel)
    assert (
        benchmark.main(["--examples-dir", str(EXAMPLES), "--out", str(tmp_path), "--examples", "stencil", "--study-trials", "3"])
        == 0
    )
    out = capsys.readouterr().out
    assert (
        "call 1 (stencil_kernel): ours 31 configurations (31 valid)" in out and "Kernel Tuner 31 configurations (31 valid)" in out
    )
    assert "our winner: block_size_x=32, block_size_y=1: 1.0000 ms (median, L2 flushed); tie set of 1" in out
    assert re.search(r"Kernel Tuner's winner: block_size_x=\d+, block_size_y=\d+: 1.0000 ms .*in our tie set: (yes|no); "
                     r"Kernel Tuner's time of our winner: [\d.]+ x its best", out)  # fmt: skip
    assert "study: 3 configurations measured {'ok': 3}" in out and "space: 3,145,728 combinations" in out


# ---- on the GPU ----------------------------------------------------------------------

WEIGHTED_SUMS = """
__constant__ float weights[4];

__global__ void weighted_sums(float *sums, const float *x, int n) {
    float sum = 0.0f;
    #pragma unroll loop_unroll_factor_0
    for (int i = blockIdx.x * block_size_x + threadIdx.x; i < n; i += grid_size_x * block_size_x)
        sum += weights[i % 4] * x[i];
    atomicAdd(&sums[blockIdx.x % 8], sum);
}
"""


@pytest.mark.gpu
def test_on_the_gpu_kernel_tuners_call_is_verified_timed_and_resumed(gpu, tmp_path):
    call = vector_add_call(size=1 << 20)
    c, a, b, n = call["arguments"]
    results, env = tune_kernel(**call, answer=[a + b, None, None, None], iterations=11)
    assert [str(r.get("__error__")) for r in results] == ["None"] * 3, results
    assert all(r["time"] > 0 and r["samples"] >= 11 for r in results)
    assert env["best_config"]["time"] == min(r["time"] for r in results) and env["tie_set"] and env["device_name"]
    again, _ = tune_kernel(
        **call, answer=[a + b, None, None, None], iterations=11
    )  # the rows are durable: nothing measured twice
    assert [r["timestamp"] for r in again] == [r["timestamp"] for r in results]
    wrong, env = tune_kernel(**call, answer=[a - b, None, None, None])
    assert [str(r["__error__"]) for r in wrong] == ["WrongResultConfig"] * 3 and env["best_config"] is None


@pytest.mark.gpu
def test_on_the_gpu_constants_unroll_factors_and_a_users_verify_work_together(gpu, tmp_path):
    x = np.arange(1 << 16, dtype=np.float32) % 7
    weights = np.array([1, 2, 3, 4], dtype=np.float32)
    expected = np.float32((weights[np.arange(x.size) % 4] * x).sum())

    def sums_match(answer, result, atol):
        return np.isclose(answer[0], result[0].sum(), rtol=1e-5, atol=atol)

    results, env = tune_kernel("weighted_sums", WEIGHTED_SUMS, "8 * block_size_x", [np.zeros(8, np.float32), x, np.int32(x.size)],
                               {"block_size_x": [64, 128], "loop_unroll_factor_0": [0, 4]}, grid_div_x=["block_size_x"],
                               cmem_args={"weights": weights}, answer=[expected, None, None], verify=sums_match, atol=1e-2)  # fmt: skip
    assert len(results) == 4 and all("__error__" not in r for r in results), results


def test_tune_kernel_takes_kernel_tuners_arguments_in_its_order_with_its_defaults():
    kernel_tuner = pytest.importorskip("kernel_tuner")
    from tuner.kernel_tuner import tune_kernel

    theirs = inspect.signature(kernel_tuner.tune_kernel).parameters
    ours = inspect.signature(tune_kernel).parameters
    assert list(ours) == list(theirs)
    assert {name: p.default for name, p in ours.items()} == {name: p.default for name, p in theirs.items()}
    with pytest.raises(TypeError, match="^tune_kernel: got an unexpected keyword argument 'bogus'"):
        tune_kernel("k", "k.cu", 10, [], {}, bogus=1)
