"""The answer of a run as files: best.json and a C++ header per GPU, from the
shipped reference results."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from tuner import cli
from tuner.families import REGISTRY

REFERENCE = Path(__file__).resolve().parents[1] / "results" / "reference" / "nvidia-h200"


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    out = tmp_path_factory.mktemp("best")
    assert cli.main(["best", "--results", str(REFERENCE), "--out-dir", str(out)]) == 0
    return out


def test_best_json_holds_the_best_verified_row_of_each_problem(exported):
    best = json.loads((exported / "best.json").read_text())
    assert best["gpu"] == "NVIDIA H200" and best["compute_capability"] == "9.0"
    data = pd.read_parquet(REFERENCE / "measurements.parquet")
    ok = data[(data.status == "ok") & (data.source != "peaks")]
    assert len(best["problems"]) == ok.groupby(["family", "dtype", "n"]).ngroups == 20
    for entry in best["problems"]:
        rows = ok[(ok.family == entry["family"]) & (ok.dtype == entry["dtype"]) & (ok.n == entry["n"])]
        if entry["family"] == "matmul":  # compute-bound: ranked by GFLOP/s
            assert entry["ranked_by"] == "gflops" and entry["gflops"] == pytest.approx(rows.gflops.max())
        else:
            assert entry["bandwidth_gbs"] == pytest.approx(rows.bandwidth_gbs.max())
        winner = rows[rows.config_key == entry["config_key"]].iloc[0]
        assert all(winner[k] == v for k, v in entry["params"].items())
        assert entry["block"] == [int(x) for x in winner.block.split(",")] and entry["run_id"] == winner.run_id
    reduce = next(e for e in best["problems"] if (e["family"], e["dtype"], e["n"]) == ("reduce", "int32", 1 << 28))
    assert reduce["params"]["variant"] == "shuffle" and reduce["bandwidth_gbs"] > 4000


def test_each_problem_carries_its_interval_its_tie_set_and_the_exported_member(exported):
    """Shipped rows predate the kept interval: it comes from their quantiles."""
    for entry in json.loads((exported / "best.json").read_text())["problems"]:
        low, high = entry["time_ms_interval"]
        assert low <= entry["time_ms_median"] <= high and entry["interval"] == "from quantiles"
        members = [m["config_key"] for m in entry["tie_set"]]
        assert members[0] == entry["config_key"] and len(members) == entry["tie_count"] == len(set(members))
        assert entry["exported"]["config_key"] in members and entry["exported"]["rule"]
    header = (exported / "best_configs.h").read_text()
    assert "// 18 configurations tie" in header  # reduce int32 at 2^28 on the H200


@pytest.mark.skipif(shutil.which("g++") is None, reason="no C++ compiler")
@pytest.mark.parametrize("target, expected", [(None, 1024), ("90", 1024), ("80", 256)])
def test_the_header_compiles_and_gives_tuned_values_or_defaults(exported, tmp_path, target, expected):
    """Tuned constants for this GPU's compute capability, the family's defaults for another."""
    program = tmp_path / "use.cpp"
    program.write_text(
        '#include "best_configs.h"\n#include <cstdio>\n'
        'int main() { std::printf("%d %d\\n", tuner_best::reduce_int32_n268435456::block_size, int(tuner_best::tuned)); }\n'
    )
    define = [f"-DTUNER_TARGET_SM={target}"] if target else []
    subprocess.run(["g++", "-std=c++17", f"-I{exported}", *define, str(program), "-o", str(tmp_path / "use")], check=True)
    block, tuned = subprocess.run([str(tmp_path / "use")], capture_output=True, text=True, check=True).stdout.split()
    assert int(block) == expected and tuned == ("0" if target == "80" else "1")


def test_a_reduction_is_exported_by_its_best_complete_configuration():
    from tuner.data.export import best_entries

    def row(finish, gbs):
        return {"status": "ok", "source": "sweep:x", "family": "reduce", "dtype": "int32", "n": 1024,
                "variant": "shuffle", "finish": finish, "bandwidth_gbs": gbs, "gflops": None, "grid": "8,1,1",
                "block": "256,1,1", "fraction_of_copy_peak": None, "fraction_of_theoretical_peak": None,
                "time_ms_median": 1.0, "run_id": "r", "config_key": json.dumps({"finish": finish, "variant": "shuffle"})}  # fmt: skip

    partial_wins = pd.DataFrame([row("host", 3000.0), row("atomic", 2950.0), row("last_block", 2900.0)])
    (entry,) = best_entries(partial_wins)
    assert entry["params"]["finish"] == "atomic" and entry["bandwidth_gbs"] == 2950.0 and entry["candidates"] == 2
    only_partial = pd.DataFrame([row("host", 3000.0), row(None, 3100.0)])
    (entry,) = best_entries(only_partial)
    assert entry["bandwidth_gbs"] == 3100.0


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize("target", [[], ["-arch=sm_80", "-DTUNER_TARGET_SM=80"]], ids=["its-gpu", "another-gpu"])
def test_the_header_example_compiles_against_a_shipped_header(tmp_path, target):
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        ["nvcc", "-arch=sm_90", *target, "-I", str(root / "results/reference/nvidia-h200"), "-o", str(tmp_path / "add"),
         str(root / "examples/use_header/vector_add.cu")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


@pytest.mark.skipif(shutil.which("g++") is None, reason="no C++ compiler")
@pytest.mark.parametrize("target", [None, "80"])
def test_every_member_of_the_tuned_struct_is_there_for_another_gpu(tmp_path, target):
    """A program that reads the launch geometry, the bandwidth and the
    energy-optimal configuration builds for any GPU: the defaults' struct
    has the same members (zero geometry, no bandwidth measured)."""
    from tuner.data.export import header_text

    tuned = {"variant": "shuffle", "block_size": 512, "unroll": 2}
    entry = {"family": "reduce", "dtype": "int32", "n": 1024, "params": tuned, "ranked_by": "bandwidth_gbs",
             "exported": {"params": tuned, "grid": [264, 1, 1], "block": [512, 1, 1], "bandwidth_gbs": 3000.04,
                          "config_key": "k", "rule": "the winner"},
             "config_key": "k", "tie_set": [], "energy_optimal": {"params": tuned | {"block_size": 256}, "energy_j": 0.1}}  # fmt: skip
    (tmp_path / "best_configs.h").write_text(header_text([entry], {"name": "GPU", "compute_capability": "9.0"}))
    program = tmp_path / "use.cpp"
    program.write_text(
        '#include "best_configs.h"\n#include <cstdio>\nusing B = tuner_best::reduce_int32_n1024;\n'
        'int main() { std::printf("%d %u %u %.1f %d\\n", B::block_size, B::grid[0], B::block[0], B::bandwidth_gbs, '
        "B::energy_optimal::block_size); }\n"
    )
    define = [f"-DTUNER_TARGET_SM={target}"] if target else []
    subprocess.run(["g++", "-std=c++17", f"-I{tmp_path}", *define, str(program), "-o", str(tmp_path / "use")], check=True)
    out = subprocess.run([str(tmp_path / "use")], capture_output=True, text=True, check=True).stdout.split()
    default_block = REGISTRY["reduce"].param("block_size").default
    assert out == (["512", "264", "512", "3000.0", "256"] if target is None else [str(default_block), "0", "0", "0.0", str(default_block)])


def _results_with_device(tmp_path: Path, **device) -> Path:
    folder = tmp_path / "results"
    folder.mkdir()
    shutil.copy(REFERENCE / "measurements.parquet", folder)
    (folder / "device.json").write_text(json.dumps(json.loads((REFERENCE / "device.json").read_text()) | device))
    return folder


@pytest.mark.skipif(shutil.which("g++") is None, reason="no C++ compiler")
def test_text_of_the_device_json_stays_inside_the_headers_comments(tmp_path):
    folder = _results_with_device(tmp_path, name="GPU\n*/ #include </etc/passwd>\r\u2028x")
    assert cli.main(["best", "--results", str(folder), "--out-dir", str(tmp_path / "out")]) == 0
    header = (tmp_path / "out" / "best_configs.h").read_text()
    assert "\n#include" not in header and header.splitlines()[0].startswith("// Tuned launch configurations measured on GPU ")
    done = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", "-x", "c++", str(tmp_path / "out" / "best_configs.h")],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("capability", ["9.0\n#include <x>", "90", 9.0, None])
def test_a_compute_capability_not_major_dot_minor_stops_in_one_line_and_writes_nothing(tmp_path, capsys, capability):
    folder = _results_with_device(tmp_path, compute_capability=capability)
    assert cli.main(["best", "--results", str(folder), "--out-dir", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and f"{folder / 'device.json'}: compute_capability is " in err, err
    assert "not <major>.<minor>" in err and not (tmp_path / "out").exists()


@pytest.mark.parametrize("column", ["time_ms_median", "time_ms_ci_low"])
def test_a_verified_row_with_a_negative_time_stops_in_one_line_and_writes_nothing(tmp_path, capsys, column):
    folder = _results_with_device(tmp_path)
    rows = pd.read_parquet(folder / "measurements.parquet")
    fastest = rows[rows["status"] == "ok"]["time_ms_median"].idxmin()
    rows.loc[fastest, column] = -0.25  # it would win its problem
    rows.to_parquet(folder / "measurements.parquet")
    assert cli.main(["best", "--results", str(folder), "--out-dir", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"error: {folder / 'measurements.parquet'}: {column} is -0.25 in row {rows.index.get_loc(fastest) + 1} "
                          "(status ok), but a time is never negative; remove it and make it again with `"), err  # fmt: skip
    assert not (tmp_path / "out").exists()


def test_a_verified_row_whose_median_is_zero_stops_in_one_line_and_writes_nothing(tmp_path, capsys):
    folder = _results_with_device(tmp_path)
    rows = pd.read_parquet(folder / "measurements.parquet")
    slowest = rows[rows["status"] == "ok"]["time_ms_median"].idxmax()
    rows.loc[slowest, "time_ms_median"] = 0.0  # a rate of bytes over no time would win its problem
    rows.to_parquet(folder / "measurements.parquet")
    assert cli.main(["best", "--results", str(folder), "--out-dir", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"error: {folder / 'measurements.parquet'}: time_ms_median is 0.0 in row "
                          f"{rows.index.get_loc(slowest) + 1} (status ok), but a verified launch takes time"), err
    assert not (tmp_path / "out").exists()


def test_a_string_parameter_with_a_line_break_is_an_escaped_literal():
    from tuner.data.export import _literal

    assert _literal('a\n"b"\\') == ("const char*", '"a\\012\\"b\\"\\\\"')
