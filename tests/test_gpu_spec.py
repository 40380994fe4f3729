"""On the GPU: the examples declared as ``KernelSpec``s verify every module at
both check sizes; a wrong reference, an unwritten output and a kernel that
overwrites its in-out input are caught or restored as the roles say; and
``tuner.tune`` sweeps and studies a spec in-process into the results folder
the CLI exports."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tuner.families import REGISTRY, KernelSpec, Problem, load_family_paths
from tuner.measure.compile import compile_all

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = {name: ROOT / "examples" / name / f"{name}.py" for name in ("saxpy", "transpose", "fir")}


@pytest.fixture(autouse=True)
def registry_as_before():
    before = dict(REGISTRY.families)
    yield
    REGISTRY.families.clear()
    REGISTRY.families.update(before)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_every_module_of_each_example_verifies_at_both_check_sizes(bench, name):
    load_family_paths([EXAMPLES[name]])
    family = REGISTRY[name]
    for n in family.check_sizes:
        problem = Problem(name, family.dtypes[0], n)
        configs = family.space(problem)
        compile_all(family, configs, problem, arch=bench.gpu.arch, cache_dir=bench.cache_dir)
        session = bench.problem(family, problem)
        rows = [session.measure(cfg, "test", timed=False) for cfg in configs]
        failures = [(r["config_key"], r["status"], r["error"]) for r in rows if r["status"] != "ok"]
        assert not failures, f"{len(failures)}/{len(rows)} failed, e.g. {failures[:3]}"


def test_a_wrong_reference_or_an_unwritten_element_is_a_wrong_result(bench):
    load_family_paths([EXAMPLES["saxpy"]])
    saxpy = REGISTRY["saxpy"]
    wrong = KernelSpec(name="saxpy_wrong", source=saxpy.source, kernel="saxpy", args=saxpy.args,
                       tune_params={p.name: list(p.values) for p in saxpy.params}, runtime_params=saxpy.runtime_params,
                       grid=["1"], reference=lambda a, x, y: 2.0 * x.astype("float64") + y)  # fmt: skip
    problem = Problem("saxpy_wrong", "float32", 1 << 20)
    session = bench.problem(wrong, problem)
    cfg = {"block_size_x": 256, "VEC": 4, "CACHE_HINT": 0, "blocks_per_sm": 0}
    assert session.measure(cfg, "test", timed=False)["status"] == "wrong_result"  # a*x+y is not 2x+y


def test_in_out_data_is_restored_before_every_timed_sample(bench):
    """saxpy overwrites y; were y not restored, each sample would add a*x
    again and the verified output would drift from the reference."""
    load_family_paths([EXAMPLES["saxpy"]])
    family = REGISTRY["saxpy"]
    problem = Problem("saxpy", "float32", 1 << 22)
    session = bench.problem(family, problem)
    cfg = {"block_size_x": 256, "VEC": 4, "CACHE_HINT": 2, "blocks_per_sm": 0}
    row = session.measure(cfg, "test")
    assert row["status"] == "ok" and row["samples"] >= 10
    after = bench.gpu.download(session.buffers["y"], problem.n, np.float32)  # y as the last timed launch left it
    np.testing.assert_allclose(after, session.expected, rtol=1e-6)


def test_tune_sweeps_and_studies_a_spec_in_process_into_a_results_folder(gpu, tmp_path):
    import tuner
    from tuner import cli
    from tuner.measure.timing import TimingOptions

    load_family_paths([EXAMPLES["saxpy"]])
    saxpy = REGISTRY["saxpy"]
    space = {"block_size_x": [128, 256], "VEC": [2, 4], "CACHE_HINT": [0], "blocks_per_sm": [0]}
    swept = tuner.tune(saxpy, space, n=1 << 22, results=tmp_path, timing=TimingOptions(max_time_s=0.1))
    assert len(swept.rows) == 4 and (swept.rows.status == "ok").all()
    assert swept.best == {**swept.best, "CACHE_HINT": 0} and set(swept.best) == set(saxpy.param_names)
    again = tuner.tune(saxpy, space, n=1 << 22, results=tmp_path)  # resumed from the row store: nothing measured twice
    assert list(again.rows.config_key) == list(swept.rows.config_key) and list(again.rows.run_id) == list(swept.rows.run_id)
    studied = tuner.tune(saxpy, n=1 << 22, budget=6, results=tmp_path, timing=TimingOptions(max_time_s=0.1))
    assert len(studied.rows) == 6 and studied.rows.config_key.is_unique
    assert cli.main(["best", "--results", str(swept.folder)]) == 0
    (entry,) = json.loads((swept.folder / "best.json").read_text())["problems"]
    assert set(entry["params"]) == set(saxpy.param_names) and entry["fraction_of_copy_peak"] > 0.3


TEMPLATED = """
template <typename T, int BLOCK, int PER_THREAD>
__global__ void scaled_copy(T* __restrict__ y, const T* __restrict__ x, T a, int n) {
    extern __shared__ char spare[];  // asked for by shared_bytes, unused
    int base = blockIdx.x * BLOCK * PER_THREAD + threadIdx.x;
#pragma unroll
    for (int k = 0; k < PER_THREAD; ++k) {
        int i = base + k * BLOCK;
        if (i < n) y[i] = a * x[i];
    }
}
"""


def test_a_templated_kernel_runs_end_to_end_from_its_template_arguments(gpu, tmp_path):
    """No extern "C", no wrapper: the template instantiated per configuration,
    verified and timed; a configuration over the device's shared memory is
    infeasible with its reason, never launched."""
    import tuner
    from tuner.families import In, Out, Scalar
    from tuner.measure.timing import TimingOptions

    (tmp_path / "templated.cu").write_text(TEMPLATED)
    spec = KernelSpec(
        name="templated", source=tmp_path / "templated.cu", kernel="scaled_copy<real, block_size_x, ITEMS>", type_macro="real",
        args=[Out("y"), In("x"), Scalar("a", 2.5, "float32"), Scalar("n", "n", "int32")],
        tune_params={"block_size_x": [128, 256, 2048], "ITEMS": [1, 4], "SPARE": [0, 65536]}, runtime_params=["SPARE"],
        shared_bytes="SPARE", grid_div_x=["block_size_x", "ITEMS"], reference=lambda x, a: a * x.astype(np.float64),
    )  # fmt: skip
    problem = Problem("templated", "float32", (1 << 20) + 37)
    assert len(spec.space(problem)) == 8  # the blocks of 2048 threads are infeasible before any compile
    swept = tuner.tune(spec, n=(1 << 20) + 37, results=tmp_path / "results", timing=TimingOptions(max_time_s=0.1))
    rows = swept.rows.set_index("config_key")
    ok = rows[rows.status == "ok"]
    assert len(ok) == 4 and (ok.SPARE == 0).all() and (ok.bandwidth_gbs > 0).all(), rows[["status", "error"]]
    over = rows[rows.SPARE == 65536]
    assert (over.status == "infeasible").all() and over.error.str.startswith("shared memory per block must be at most").all()
    assert swept.best["SPARE"] == 0 and swept.best["block_size_x"] in (128, 256)
