"""Kernel Tuner's own CUDA examples declared as ``KernelSpec``s with their
``.cu`` files unchanged (C++ kernels, found by name; sizes the kernels
``#define``, read as constants), checked on the CPU: the device's limits are
infeasibility with their reasons, and every kernel's parameters match the
declared arguments. The examples are read from ``../shared/`` (Apache-2.0
files of Kernel Tuner's repository, never copied here): absent, these skip."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from tuner import cli
from tuner.check_family import Space
from tuner.families import REGISTRY, Constant, In, KernelSpec, Out, Problem, Scalar
from tuner.measure.compile import CompileError, compile_variant, kernel_parameters

EXAMPLES = Path(__file__).resolve().parents[2] / "shared" / "kernel_tuner_examples"
if not EXAMPLES.is_dir():  # a worktree beside the main checkout, or the machine's shared folder
    EXAMPLES = Path("/work/shared/kernel_tuner_examples")

pytestmark = [
    pytest.mark.skipif(not EXAMPLES.is_dir(), reason="Kernel Tuner's examples are not in ../shared/kernel_tuner_examples"),
    pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed"),
]


@pytest.fixture(autouse=True)
def registry_as_before():
    before = dict(REGISTRY.families)
    yield
    REGISTRY.families.clear()
    REGISTRY.families.update(before)


def stencil_reference(x_new, x_old, domain_width, domain_height):
    """x_new keeps its border; its inside is the five-point mean of x_old."""
    out = x_new.reshape(domain_height, domain_width).astype(np.float64)
    x = x_old.reshape(domain_height, domain_width).astype(np.float64)
    out[1:-1, 1:-1] = (x[1:-1, 1:-1] + x[1:-1, :-2] + x[1:-1, 2:] + x[2:, 1:-1] + x[:-2, 1:-1]) / 5.0
    return out


STENCIL = f"""
import numpy as np
from tuner.families import In, InOut, KernelSpec
from test_kernel_tuner_examples import stencil_reference

stencil = KernelSpec(
    name="stencil", source={str(EXAMPLES / "stencil.cu")!r}, kernel="stencil_kernel",
    args=[InOut("x_new", "domain_width * domain_height"), In("x_old", "domain_width * domain_height")],
    tune_params={{"block_size_x": BLOCK_X, "block_size_y": BLOCK_Y, "domain_width": [4096], "domain_height": [2048]}},
    problem_size=["domain_width", "domain_height"],
    reference=stencil_reference,
)
"""


def stencil_file(folder: Path, block_x: list, block_y: list) -> Path:
    path = folder / "stencil_spec.py"
    path.write_text(STENCIL.replace("BLOCK_X", repr(block_x)).replace("BLOCK_Y", repr(block_y)))
    return path


def test_kernel_tuners_stencil_space_has_its_block_limits_as_infeasibility(tmp_path, monkeypatch):
    """Kernel Tuner's script as it is: 48 configurations, of which the 17 blocks
    over 1,024 threads are infeasible without a restriction."""
    from tuner.families import load_family_paths

    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    load_family_paths([stencil_file(tmp_path, [32 * i for i in range(1, 9)], [2**i for i in range(6)])])
    family = REGISTRY["stencil"]
    lines = []
    Space.of(family, Problem("stencil", "float32", family.check_sizes[0])).report(False, lines.append)
    assert lines == ["space: stencil-float32-n1048613: 48 configurations, 31 feasible; infeasible: 17 by threads per block must be "
                     "at most 1024 (CUDA's limit)"]  # fmt: skip


def test_check_family_runs_kernel_tuners_stencil_unchanged_on_the_cpu(tmp_path, monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    assert cli.main(["check-family", str(stencil_file(tmp_path, [32, 256], [1, 32]))]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == ["load", "space", "launch", "compile", "arguments", "reference", "pipeline"]
    assert lines[1] == ("space: stencil-float32-n1048613: 4 configurations, 3 feasible; infeasible: 1 by threads per block must be "
                        "at most 1024 (CUDA's limit)")  # fmt: skip
    assert lines[4] == "arguments: 2 match kernel 'stencil_kernel' (a 64-bit integer or pointer, a 64-bit integer or pointer)"


def convolution() -> KernelSpec:
    """Kernel Tuner's convolution space, its filter and image sizes constants
    (the reference would read them; the kernel's #ifndef defaults give way to them)."""
    return KernelSpec(
        name="convolution", source=EXAMPLES / "convolution.cu", kernel="convolution_kernel",
        args=[Out("output", "image_height * image_width"),
              In("input", "(image_height + filter_height // 2 * 2) * (image_width + filter_width // 2 * 2)"),
              In("filter", "33 * 33"), Constant("d_filter", "33 * 33")],
        tune_params={"block_size_x": [16 * i for i in range(1, 9)], "block_size_y": [2**i for i in range(6)],
                     "tile_size_x": list(range(1, 9)), "tile_size_y": list(range(1, 9)), "use_padding": [0, 1],
                     "read_only": [0, 1], "filter_height": [17], "filter_width": [17], "image_height": [4096],
                     "image_width": [4096]},
        restrictions=["use_padding == 0 or block_size_x % 32 != 0"],
        problem_size=["image_width", "image_height"],
        grid_div_x=["block_size_x", "tile_size_x"], grid_div_y=["block_size_y", "tile_size_y"],
        reference=lambda input, filter_height, filter_width: np.zeros(4096 * 4096),
    )  # fmt: skip


@pytest.mark.slow  # 40 s of nvcc on two cores; tests/test_device_limits.py covers ptxas's shared-memory refusal by default
def test_kernel_tuners_convolution_tile_over_the_shared_memory_is_infeasible(tmp_path):
    """The largest tiles need more than 48 KiB of static shared memory: ptxas
    refuses them, which makes them infeasible with the figures, not a failed compile."""
    family = convolution()
    problem = Problem("convolution", "float32", family.check_sizes[0])
    big = {"block_size_x": 128, "block_size_y": 8, "tile_size_x": 8, "tile_size_y": 8, "use_padding": 0, "read_only": 0,
           "filter_height": 17, "filter_width": 17, "image_height": 4096, "image_width": 4096}  # fmt: skip
    assert family.violations(big, problem) == []  # fits the block's threads: only ptxas knows
    with pytest.raises(CompileError) as refused:
        compile_variant(family, big, problem, arch="sm_90", cache_dir=tmp_path)
    assert refused.value.over_limit == "static shared memory per block must be at most 49152 bytes (ptxas), got 332800"


@pytest.mark.parametrize(
    "name, kernel, args, params",
    [("matmul", "matmul_kernel", [Out("C", "n * n"), In("A", "n * n"), In("B", "n * n")],
      {"block_size_x": [32], "block_size_y": [8], "tile_size_x": [2], "tile_size_y": [4]}),
     ("reduction", "sum_floats", [Out("sum_global", "num_blocks"), In("array"), Scalar("n", "n", "int32")],
      {"block_size_x": [256], "vector": [2], "num_blocks": [1024], "loop_unroll_factor_0": [8], "use_shuffle": [1]}),
     ("spmv", "spmv_kernel", [Out("y"), In("rows", "n + 1", "int32"), In("cols", "n * 4", "int32"), In("values", "n * 4"),
                              In("x", "n"), Scalar("nrows", "n", "int32")],
      {"block_size_x": [128], "threads_per_row": [32], "read_only": [1]})],
    ids=["matmul", "reduction", "spmv"],
)  # fmt: skip
def test_each_kernel_tuner_kernel_is_found_by_name_and_takes_the_declared_arguments(name, kernel, args, params):
    family = KernelSpec(name=name, source=EXAMPLES / f"{name}.cu", kernel=kernel, args=args, tune_params=params, grid=["1"],
                        reference=lambda n: np.zeros(1))  # fmt: skip
    cfg = {key: values[0] for key, values in params.items()}
    problem = Problem(name, "float32", 4096)
    laid_out = kernel_parameters(EXAMPLES / f"{name}.cu", family.kernel_name(cfg), defines=family.defines(cfg, problem), arch="sm_90")
    assert len(laid_out) == len(family.arg_types)
    assert [bits for _, bits in laid_out] == [64 if letter == "P" else 32 for letter in family.arg_types]
