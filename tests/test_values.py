"""Values no run can use, refused in one line naming the setting and the
value: a tolerance, a size, the bytes and FLOPs of a family that are not
finite and positive (at registration, and per configuration before any GPU
work); an architecture checked by one rule for the config and the command
line; modules counted once; and check-family's count of the infeasible points
whose reasons it does not list."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from tuner import cli
from tuner.families import REGISTRY, In, KernelSpec, Out, Problem, Scalar, load_family_paths
from tuner.families.spec import SpecError
from tuner.measure.bench import ProblemBench
from tuner.measure.compile import CompileError
from tuner.settings import ConfigError, parse

ROOT = Path(__file__).resolve().parents[1]
KERNEL = 'extern "C" __global__ void scale(float* y, const float* x, int n) {}\n'


@pytest.fixture(autouse=True)
def registry_as_before(monkeypatch):
    monkeypatch.setattr(REGISTRY, "families", dict(REGISTRY.families))  # what a test registers is its own


@pytest.fixture
def source(tmp_path) -> Path:
    (tmp_path / "scale.cu").write_text(KERNEL)
    return tmp_path / "scale.cu"


def spec(source: Path, **changes) -> KernelSpec:
    arguments = dict(name="scale", source=source, kernel="scale", args=[Out("y"), In("x"), Scalar("n", "n", "int32")],
                     tune_params={"block_size_x": [128, 256], "ITEMS": [1, 2, 4]}, reference=lambda x: x)  # fmt: skip
    return KernelSpec(**(arguments | changes))


@pytest.mark.parametrize("tolerance", [float("nan"), float("inf"), 0.0, -1e-5, "1e-5", True, None])
def test_a_tolerance_that_is_not_a_finite_number_above_0_is_refused_in_one_line(source, tolerance):
    """NaN compared false with every error: every float output passed, or failed, in silence."""
    with pytest.raises(SpecError) as refused:
        spec(source, tolerance=tolerance)
    assert str(refused.value) == f"family 'scale': tolerance must be a finite number > 0, got {tolerance!r}"


SPEC_ARGUMENTS = {"name": "'scale'", "source": "'scale.cu'", "kernel": "'scale'", "args": "[Out('y'), In('x'), Scalar('n', 'n', 'int32')]",
                  "tune_params": "{'block_size_x': [128, 256], 'ITEMS': [1, 2, 4]}", "reference": "lambda x: x"}  # fmt: skip


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"args": "[Out('y', shape='n - n'), In('x', shape='n - n'), Scalar('n', 'n', 'int32')]"},
         "family 'scale': device bytes of scale-float32-n1048613 must be a finite number > 0, got 0"),
        ({"bytes_moved": "'-n'"},
         "family 'scale': bytes_moved of scale-float32-n1048613 for its default configuration must be a finite number > 0, got -1048613"),
        ({"bytes_moved": "'n / (ITEMS - 1)'"},
         "family 'scale': bytes_moved of scale-float32-n1048613 must be a number, got ZeroDivisionError: division by zero"),
        ({"flops": "'-1'"},
         "family 'scale': flops of scale-float32-n1048613 for its default configuration must be a finite number >= 0, got -1"),
        ({"check_sizes": "(0, 4096)"}, "family 'scale': check_sizes must be two integers >= 1, got (0, 4096)"),
    ],
    ids=["device-bytes-0", "bytes-negative", "bytes-raise", "flops-negative", "check-size-0"],
)  # fmt: skip
def test_sizes_bytes_and_flops_that_are_not_finite_and_positive_are_refused_at_registration(tmp_path, source, changes, message):
    arguments = ", ".join(f"{key}={text}" for key, text in (SPEC_ARGUMENTS | changes).items())
    (tmp_path / "scale.py").write_text(f"from tuner.families import In, KernelSpec, Out, Scalar\nscale = KernelSpec({arguments})\n")
    with pytest.raises(ValueError) as refused:
        load_family_paths([tmp_path / "scale.py"])
    assert str(refused.value) == f"family_paths: {tmp_path / 'scale.py'}: {message}"


@pytest.mark.parametrize("bytes_moved, error", [("n * (ITEMS - 2)", "bytes_moved must be a finite number > 0, got 0"),
                                                ("n / (ITEMS - 2)", "bytes_moved raised ZeroDivisionError: division by zero")])  # fmt: skip
def test_a_configuration_whose_bytes_are_unusable_is_its_launch_error_before_any_gpu_work(source, monkeypatch, bytes_moved, error):
    """Its default configuration (ITEMS 1) registers; ITEMS 2 gives no bytes
    to rate: its row says why, and nothing is compiled or launched."""
    family = spec(source, bytes_moved=bytes_moved)

    def compile_variant(*args, **kwargs):
        raise AssertionError("compiled")

    monkeypatch.setattr("tuner.measure.bench.compile_variant", compile_variant)
    session = ProblemBench.__new__(ProblemBench)  # no inputs, no GPU: nothing may reach the device
    session.bench = SimpleNamespace(environment={})
    session.family, session.problem = family, Problem("scale", "float32", 1 << 20)
    row = session.measure({"block_size_x": 128, "ITEMS": 2}, "test")
    assert (row["status"], row["error"]) == ("launch_error", error)
    assert "bandwidth_gbs" not in row


@pytest.mark.parametrize("arch", ["sm_1", "sm_9x", "compute_90", "90", ""])
def test_an_architecture_is_held_to_one_rule_in_the_config_and_on_the_command_line(tmp_path, capsys, arch):
    config = {"results_dir": str(tmp_path / "results"), "gpu": "test-gpu", "arch": arch, "sweeps": {}}
    with pytest.raises(ConfigError) as refused:
        parse(config)
    rule = str(refused.value).removeprefix("arch: ")
    assert rule == f"must be auto or an nvcc architecture such as sm_90, got {arch!r}"
    (tmp_path / "mine.yaml").write_text(json.dumps(config | {"arch": "auto"}))
    for argv in (["compile", "--config", str(tmp_path / "mine.yaml"), "--arch", arch],
                 ["check-family", str(ROOT / "examples" / "saxpy" / "saxpy.py"), "--arch", arch]):  # fmt: skip
        assert cli.main(argv) == 2
        assert capsys.readouterr().err.splitlines() == [f"config error: --arch: {rule}"]
    assert not (tmp_path / "results").exists()


def test_the_compile_stage_counts_a_module_a_sweep_and_a_study_share_once(tmp_path, monkeypatch, capsys):
    """A sweep of two sizes and a study of one grid need the same four
    modules: four failed of four, not twelve of four."""
    reduce = REGISTRY["reduce"]
    params = {p.name: [p.default] for p in reduce.params} | {"variant": ["shuffle"], "block_size": [128, 256], "unroll": [1, 2]}
    settings = parse({"results_dir": str(tmp_path / "results"), "gpu": "test-gpu",
                      "sweeps": {"ladder": {"family": "reduce", "dtypes": ["int32"], "sizes": [1 << 20, 1 << 21], "params": params}},
                      "studies": {"search": {"family": "reduce", "dtype": "int32", "n": 1 << 20, "budget_trials": 2, "params": params,
                                             "storage": str(tmp_path / "study.log")}}})  # fmt: skip

    def rejected(family, cfg, problem, **kwargs):
        raise CompileError(f"{family.name} {dict(cfg)}: nvcc failed for reduce.cu:\nnvcc fatal   : Unsupported gpu architecture")

    monkeypatch.setattr("tuner.measure.compile.compile_variant", rejected)
    monkeypatch.setenv("TUNER_PROGRESS", "off")
    with pytest.raises(SystemExit) as stopped:
        cli.main(["compile", "--settings", settings.stage_json("compile"), "--arch", "sm_90"])
    assert stopped.value.code == "error: 4 of 4 modules failed to compile for sm_90; nothing written"
    assert len(capsys.readouterr().err.splitlines()) == 4  # a compile error line each
    assert not (settings.run.gpu_dir / "compile.parquet").exists()


class SpaceSeen(Exception):
    """Raised by ``say`` once check-family has said its space line."""


def test_check_family_says_how_many_points_reasons_it_does_not_list_left_out(tmp_path):
    """Five restrictions, each the first to fail for some points: the three
    most common are named, and the points of the other two counted."""
    from tuner.check_family import check

    (tmp_path / "scale.cu").write_text(KERNEL)
    (tmp_path / "scale.py").write_text(
        "from tuner.families import In, KernelSpec, Out, Scalar\n"
        "scale = KernelSpec(name='scale', source='scale.cu', kernel='scale', args=[Out('y'), In('x'), Scalar('n', 'n', 'int32')],"
        " tune_params={'block_size_x': [128], 'A': list(range(10))}, reference=lambda x: x,"
        " restrictions=['A != 1', 'A not in (2, 3)', 'A not in (4, 5, 6)', 'A != 7', 'A != 8'])\n"
    )
    said: list[str] = []

    def say(line: str) -> None:
        said.append(line)
        if line.startswith("space:"):
            raise SpaceSeen

    with pytest.raises(SpaceSeen):
        check(tmp_path / "scale.py", say=say)
    restriction = "restriction {!r} does not hold".format
    assert said[-1] == (f"space: scale-float32-n1048613: 10 configurations, 2 feasible; infeasible: 3 by {restriction('A not in (4, 5, 6)')}; "
                        f"2 by {restriction('A not in (2, 3)')}; 1 by {restriction('A != 1')}; and 2 by 2 other reasons (--list); "
                        "no feasible configuration found with A=1, A=2, A=3, A=4, A=5")  # fmt: skip


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_an_architecture_this_nvcc_does_not_build_is_refused_like_the_configs(tmp_path, capsys):
    from tuner.measure.compile import nvcc_architectures

    built = nvcc_architectures()
    missing = next(f"sm_{n}" for n in range(10, 1000) if f"sm_{n}" not in built)
    assert cli.main(["check-family", str(ROOT / "examples" / "saxpy" / "saxpy.py"), "--arch", missing]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"config error: --arch: must be auto or an architecture this nvcc builds ({', '.join(built)}), got {missing!r}"
    ]


def test_an_amount_of_a_numpy_type_is_a_number(source):
    assert spec(source, tolerance=np.float32(1e-3)).tolerance == pytest.approx(1e-3)
