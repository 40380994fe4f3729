"""``tuner check-family``'s cost and reach: a space counted without being
listed, a covering subset compiled instead of every module, every feasible
point's launch evaluated, and the device's limits reported as infeasibility
with their reasons."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from tuner import cli
from tuner.check_family import LISTED, FamilyDefect, Space, _launch, covering_subset
from tuner.families import REGISTRY, In, KernelSpec, Out, Problem, Scalar
from tuner.families.limits import DeviceLimits

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")

TILED = """
extern "C" __global__ void tiled(float* __restrict__ y, const float* __restrict__ x, int n) {
    __shared__ float staged[block_size_x * TILE];
    extern __shared__ float spare[];
    int base = blockIdx.x * block_size_x * TILE;
    for (int k = 0; k < TILE; ++k) {
        int i = base + k * block_size_x + threadIdx.x;
        staged[k * block_size_x + threadIdx.x] = i < n ? x[i] : 0.0f;
    }
    __syncthreads();
    for (int k = 0; k < TILE; ++k) {
        int i = base + k * block_size_x + threadIdx.x;
        if (i < n) y[i] = 2.0f * staged[k * block_size_x + threadIdx.x];
    }
}
"""


@pytest.fixture(autouse=True)
def registry_as_before():
    before = dict(REGISTRY.families)
    yield
    REGISTRY.families.clear()
    REGISTRY.families.update(before)


@pytest.fixture
def source(tmp_path) -> Path:
    path = tmp_path / "tiled.cu"
    path.write_text(TILED)
    return path


def tiled(source: Path, **changes) -> KernelSpec:
    arguments = dict(
        name="tiled", source=source, kernel="tiled",
        args=[Out("y"), In("x"), Scalar("n", "n", "int32")],
        tune_params={"block_size_x": [64, 256], "TILE": [1, 2]},
        grid_div_x=["block_size_x", "TILE"],
        reference=lambda x: 2.0 * x.astype(np.float64),
    )  # fmt: skip
    return KernelSpec(**(arguments | changes))


def test_a_space_of_10_to_the_12_is_counted_covered_and_evaluated_in_under_a_second_of_cpu(source):
    """Twelve parameters of ten values: never listed. The covering subset holds
    every value of every parameter, and the launch of each of its points is
    evaluated, in well under a second of CPU (no nvcc runs)."""
    params = {"block_size_x": [32 * i for i in range(1, 11)], **{f"P{i}": list(range(10)) for i in range(11)}}
    family = tiled(source, tune_params=params, restrictions=["P0 + P1 < 15"], grid_div_x=["block_size_x"])
    problem = Problem("tiled", "float32", family.check_sizes[0])
    started = time.process_time()
    space = Space.of(family, problem)
    _launch(family, "float32", space.evaluated, 132, DeviceLimits(), lambda line: None)
    cpu_s = time.process_time() - started
    assert space.size == 10**12 and not space.listed
    assert cpu_s < 1.0, f"{cpu_s:.2f} s of CPU"
    assert space.compiled is space.evaluated and 10 <= len(space.compiled) <= 40
    for name, values in params.items():
        assert {cfg[name] for cfg in space.compiled} == set(values), name
    assert all(not family.violations(cfg, problem) for cfg in space.compiled)
    lines = []
    space.report(False, lines.append)
    assert lines[0].startswith("space: tiled-float32-n1048613: 1,000,000,000,000 configurations (over 20,000: not listed; 1,000 sampled, ")
    assert "infeasible: " in lines[0] and "restriction 'P0 + P1 < 15' does not hold" in lines[0]


def test_the_covering_subset_holds_every_value_and_the_corners_and_is_the_same_each_time(source):
    family = tiled(source, tune_params={"block_size_x": [32, 64, 128, 256, 512, 1024], "TILE": [1, 2, 4, 8], "U": [0, 1, 2]},
                   restrictions=["block_size_x * TILE <= 2048"])  # fmt: skip
    problem = Problem("tiled", "float32", 4096)
    feasible = family.space(problem)
    listed, _ = covering_subset(family, problem, feasible=feasible)
    made, missing = covering_subset(family, problem, is_feasible=lambda cfg: not family.violations(cfg, problem))
    for subset in (listed, made):
        assert all(cfg in feasible for cfg in subset)
        for param in family.params:
            assert {cfg[param.name] for cfg in subset} == set(param.values)
        assert {"block_size_x": 32, "TILE": 1, "U": 0} in subset  # the first corner; the last is infeasible,
        assert {"block_size_x": 256, "TILE": 8, "U": 2} in subset  # so the feasible point nearest it
        assert len(subset) < len(feasible) / 3
    assert not missing
    assert covering_subset(family, problem, feasible=feasible)[0] == listed
    assert covering_subset(family, problem, is_feasible=lambda cfg: not family.violations(cfg, problem))[0] == made


@pytest.mark.parametrize(
    "changes, message",
    [({"grid": ["n // (TILE - 1)"]}, r"2 of 4 did not, e\.g\. \{\"TILE\": 1, \"block_size_x\": 64\}: the launch raised ZeroDivisionError: "
      r"integer division or modulo by zero \(a restriction can exclude them\)"),
     ({"grid": ["n // 2**40"]}, r"grid must be one to three whole numbers of at least 1, got \[0\]"),
     ({"args": [Out("y"), In("x"), Scalar("n", "n * 2**31", "int32")]},
      r"scalar n must be a whole number from -2147483648 to 2147483647 \(int32\), got 2251879270580224"),
     ({"shared_bytes": "-TILE"}, r"shared_bytes must be a whole number of at least 0, got -1"),
     ({"bytes_moved": "n * (TILE - 1)"}, r"bytes_moved must be a whole number of at least 1, got 0"),
     ({"args": [Out("y", "n - 2**21"), In("x"), Scalar("n", "n", "int32")]}, r"the shape of y must be whole numbers of at least 1, got \[-1048539\]")],
    ids=["raises", "empty-grid", "scalar-overflow", "negative-shared", "no-bytes", "negative-shape"],
)  # fmt: skip
def test_a_launch_that_cannot_be_made_is_one_line_before_any_compile(tmp_path, source, capsys, changes, message):
    """The first the user hears of a grid dividing by zero is check-family, not the GPU."""
    family = tiled(source, **changes)
    problem = Problem("tiled", "float32", family.check_sizes[0])
    space = Space.of(family, problem)
    with pytest.raises(FamilyDefect, match=r"^family 'tiled': the launch, scalars, shapes and bytes of every feasible configuration "
                                           r"must evaluate to values a launch takes for tiled-float32-n1048613; .*" + message):  # fmt: skip
        _launch(family, "float32", space.evaluated, 132, DeviceLimits(), print)


def test_a_restriction_that_excludes_the_broken_points_passes_the_launch_step(source):
    family = tiled(source, grid=["n // (TILE - 1)"], restrictions=["TILE > 1"])
    lines = []
    _launch(family, "float32", Space.of(family, Problem("tiled", "float32", family.check_sizes[0])).evaluated, 132, DeviceLimits(), lines.append)
    assert lines[0].startswith("launch: 2 configurations at n=[1048613, 4194304] evaluate (grids up to 4,194,304 blocks, blocks up to 256 threads)")


def test_a_spec_file_with_a_broken_grid_stops_check_family_before_nvcc(tmp_path, capsys):
    (tmp_path / "tiled.cu").write_text(TILED)
    (tmp_path / "tiled.py").write_text(SPEC.replace('grid_div_x=["block_size_x", "TILE"]', 'grid=["n // (TILE - 1)"]'))
    with pytest.raises(SystemExit) as stop:
        cli.main(["check-family", str(tmp_path / "tiled.py")])
    out, err = capsys.readouterr()
    assert stop.value.code == 1 and [line.split(":")[0] for line in out.splitlines()] == ["load", "space"]
    assert err.startswith("check-family: family 'tiled': the launch") and "ZeroDivisionError" in err and err.count("\n") == 1


SPEC = """
import numpy as np
from tuner.families import In, KernelSpec, Out, Scalar

tiled = KernelSpec(
    name="tiled", source="tiled.cu", kernel="tiled",
    args=[Out("y"), In("x"), Scalar("n", "n", "int32")],
    tune_params={"block_size_x": [64, 256, 2048], "TILE": [1, 64]},
    grid_div_x=["block_size_x", "TILE"],
    reference=lambda x: 2.0 * x.astype(np.float64),
)
"""


@needs_nvcc
def test_the_devices_limits_are_infeasibility_with_their_reasons(tmp_path, capsys):
    """A block of 2048 threads is infeasible before compiling; a tile of 256 x 64
    floats (64 KiB of static shared memory) is refused by ptxas, and 48 KiB of
    dynamic shared memory beside a static tile is over the block's 48 KiB:
    each infeasible with its reason, none a failed compile."""
    (tmp_path / "tiled.cu").write_text(TILED)
    spec = SPEC.replace('"TILE": [1, 64]}', '"TILE": [1, 64], "SPARE": [0, 49152]}').replace("reference=", 'shared_bytes="SPARE", reference=')
    (tmp_path / "tiled.py").write_text(spec)
    assert cli.main(["check-family", str(tmp_path / "tiled.py"), "--all"]) == 0
    lines = capsys.readouterr().out.splitlines()
    steps = [line.split(":")[0] for line in lines]
    assert steps == ["load", "space", "launch", "compile", "arguments", "reference", "pipeline"], lines
    assert lines[1] == ("space: tiled-float32-n1048613: 12 configurations, 8 feasible; infeasible: 4 by threads per block must be at "
                        "most 1024 (CUDA's limit); no feasible configuration found with block_size_x=2048")  # fmt: skip
    compile_line = lines[3]
    assert "modules of every feasible configuration (--all)" in compile_line
    assert "infeasible on the device: " in compile_line
    assert "2 by static shared memory per block must be at most 49152 bytes (ptxas)" in compile_line
    assert "by shared memory per block must be at most 49152 bytes (CUDA's limit without opt-in)" in compile_line


def test_a_device_json_brings_its_own_limits(tmp_path, capsys):
    """--device's limits decide the space line (the broken grid then stops the check before nvcc)."""
    (tmp_path / "tiled.cu").write_text(TILED)
    (tmp_path / "tiled.py").write_text(SPEC.replace('grid_div_x=["block_size_x", "TILE"]', 'grid=["n // (TILE - 1)"]'))
    device = tmp_path / "device.json"
    device.write_text(json.dumps({"name": "Small GPU", "max_threads_per_block": 128, "sm_count": 4}))
    with pytest.raises(SystemExit):
        cli.main(["check-family", str(tmp_path / "tiled.py"), "--device", str(device)])
    space_line = capsys.readouterr().out.splitlines()[1]
    assert space_line.startswith("space: tiled-float32-n1048613: 6 configurations, 2 feasible; infeasible: ")
    assert "2 by threads per block must be at most 128 (the Small GPU's limit)" in space_line
    device.write_text("{not json")
    status = cli.main(["check-family", str(tmp_path / "tiled.py"), "--device", str(device)])
    assert status == 2 and capsys.readouterr().err.startswith(f"config error: --device {device}: must be a readable device.json")


def test_all_refuses_a_space_too_large_to_list(source):
    family = tiled(source, tune_params={"block_size_x": [32 * i for i in range(1, 11)], **{f"P{i}": list(range(10)) for i in range(6)}},
                   grid_div_x=["block_size_x"])
    with pytest.raises(FamilyDefect, match=r"^family 'tiled': --all lists the space, which must hold at most 1,000,000 configurations, "
                                           r"got 10,000,000; without --all a covering subset is checked$"):  # fmt: skip
        Space.of(family, Problem("tiled", "float32", 4096), every=True)
    assert LISTED < 10**6


@needs_nvcc
@pytest.mark.slow  # half a minute: the report of the made-up rows
def test_a_space_too_large_to_list_goes_through_every_step(tmp_path, capsys):
    """10^11 points of eleven launch parameters: one module, counted not listed,
    and the made-up landscape stays positive however many parameters there are
    (it gave negative times, which collect refuses)."""
    (tmp_path / "tiled.cu").write_text(TILED)
    many = ", ".join(f'"P{i}": list(range(10))' for i in range(11))
    spec = SPEC.replace('"block_size_x": [64, 256, 2048], "TILE": [1, 64]}', '"block_size_x": [64], "TILE": [2], ' + many + "}")
    spec = spec.replace("reference=", f'runtime_params=[{", ".join(repr(f"P{i}") for i in range(11))}], reference=')
    (tmp_path / "tiled.py").write_text(spec)
    assert cli.main(["check-family", str(tmp_path / "tiled.py")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("space: tiled-float32-n1048613: 100,000,000,000 configurations (over 20,000: not listed; 1,000 sampled, 100% feasible)")
    assert lines[3].startswith("compile: 1 modules of a covering subset of ") and lines[-1].startswith("pipeline: ")
