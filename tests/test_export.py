"""The answer of a run as files: best.json and a C++ header per GPU, from the
shipped reference results."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from tuner import cli
from tuner.families import REGISTRY

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "results" / "reference" / "nvidia-h200"


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    out = tmp_path_factory.mktemp("best")
    assert cli.main(["best", "--results", str(REFERENCE), "--out-dir", str(out)]) == 0
    return out


def test_best_json_holds_the_best_verified_row_of_each_problem_and_operation(exported):
    best = json.loads((exported / "best.json").read_text())
    assert best["gpu"] == "NVIDIA H200" and best["compute_capability"] == "9.0" and best["format"] == 2
    data = pd.read_parquet(REFERENCE / "measurements.parquet")
    ok = data[(data.status == "ok") & (data.source != "peaks")]
    # copy's variant names its operation (a copy, or a read-only pass); every other family has one.
    ok = ok.assign(operation=ok.variant.where(ok.family == "copy", None))
    assert len(best["problems"]) == ok.groupby(["family", "dtype", "n", "operation"], dropna=False).ngroups == 22
    for entry in best["problems"]:
        rows = ok[(ok.family == entry["family"]) & (ok.dtype == entry["dtype"]) & (ok.n == entry["n"])]
        rows = rows[rows.operation.isna()] if entry["operation"] is None else rows[rows.operation == entry["operation"]]
        complete = rows[rows.finish.notna() & (rows.finish != "host")]
        rows = complete if len(complete) else rows  # a reduction's answer finishes on the device where one was measured
        if entry["family"] == "matmul":  # compute-bound: ranked by GFLOP/s
            assert entry["ranked_by"] == "gflops" and entry["gflops"] == pytest.approx(rows.gflops.max())
        else:
            assert entry["bandwidth_gbs"] == pytest.approx(rows.bandwidth_gbs.max())
        winner = rows[rows.config_key == entry["config_key"]].iloc[0]
        assert all(winner[k] == v for k, v in entry["params"].items())
        assert entry["block"] == [int(x) for x in winner.block.split(",")] and entry["run_id"] == winner.run_id
    reduce = next(e for e in best["problems"] if (e["family"], e["dtype"], e["n"]) == ("reduce", "int32", 1 << 28))
    assert reduce["params"]["variant"] == "shuffle" and reduce["params"]["finish"] != "host" and reduce["bandwidth_gbs"] > 4000


def test_each_problem_carries_its_interval_its_tie_set_and_the_exported_member(exported):
    """The shipped rows keep the interval their timing computed (order statistics of the samples)."""
    problems = json.loads((exported / "best.json").read_text())["problems"]
    for entry in problems:
        low, high = entry["time_ms_interval"]
        assert low <= entry["time_ms_median"] <= high and entry["interval"] == "order statistics"
        members = [m["config_key"] for m in entry["tie_set"]]
        assert members[0] == entry["config_key"] and len(members) == entry["tie_count"] == len(set(members))
        assert entry["exported"]["config_key"] in members and entry["exported"]["rule"]
    header = (exported / "best_configs.h").read_text()
    reduce = next(e for e in problems if (e["family"], e["dtype"], e["n"]) == ("reduce", "int32", 1 << 28))
    assert reduce["tie_count"] > 1 and f"// {reduce['tie_count']} configurations tie" in header


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


def _results_with_rows(tmp_path: Path, change) -> Path:
    """A copy of the shipped results whose measurements are ``change(rows)``."""
    folder = _results_with_device(tmp_path)
    rows = change(pd.read_parquet(folder / "measurements.parquet"))
    rows.to_parquet(folder / "measurements.parquet")
    return folder


def _with_params(**extra):
    """Every row's configuration key with ``extra`` parameters added."""

    def change(rows):
        rows["config_key"] = [json.dumps(json.loads(key) | extra) for key in rows["config_key"]]
        return rows

    return change


def _build(tmp_path: Path, include: Path, code: str, std: str, *define: str) -> subprocess.CompletedProcess:
    """Compile and link ``code`` against the header in ``include``, and run it where it built."""
    program, binary = tmp_path / "use.cpp", tmp_path / "use"
    program.write_text(f'#include "best_configs.h"\n#include <cstdio>\n{code}\n')
    done = subprocess.run(["g++", f"-std={std}", f"-I{include}", *define, str(program), "-o", str(binary)],
                          capture_output=True, text=True)  # fmt: skip
    return done if done.returncode else subprocess.run([str(binary)], capture_output=True, text=True, check=True)


@pytest.mark.skipif(shutil.which("g++") is None, reason="no C++ compiler")
@pytest.mark.parametrize("std", ["c++14", "c++17"])
def test_a_trigraph_in_a_string_parameter_cannot_end_its_literal(tmp_path, std):
    """Under C++14 ??/ is a backslash: ??/" would end the literal and put the rest into the struct."""
    note = '??/" ; int injected = 1; //'
    folder = _results_with_rows(tmp_path, _with_params(note=note))
    assert cli.main(["best", "--results", str(folder), "--out-dir", str(tmp_path / "out")]) == 0
    struct = "tuner_best::reduce_int32_n268435456"
    injected = _build(tmp_path, tmp_path / "out", f"int main() {{ return {struct}::injected; }}", std)
    assert injected.returncode != 0 and "injected" in injected.stderr, "the text became a member"
    printed = _build(tmp_path, tmp_path / "out", f"int main() {{ std::fputs({struct}::note, stdout); }}", std)
    assert printed.stdout == note


@pytest.mark.skipif(shutil.which("g++") is None, reason="no C++ compiler")
@pytest.mark.parametrize("std", ["c++14", "c++17"])
def test_parameter_names_that_are_no_cpp_member_are_spelled_as_one_and_the_comment_says_how(tmp_path, std):
    """A keyword, a leading digit, the struct's own grid, two names with one
    identifier: each its own member, the comment maps them, best.json keeps the names."""
    extra = {"class": 1, "9lives": 2, "grid": 3, "a-b": 4, "a_b": 5}
    folder = _results_with_rows(tmp_path, _with_params(**extra))
    out = tmp_path / "out"
    assert cli.main(["best", "--results", str(folder), "--out-dir", str(out)]) == 0
    header = (out / "best_configs.h").read_text()
    assert ('// Parameters spelled otherwise in C++ (a keyword, a leading digit, a clash): "class" as class_, '
            '"9lives" as p_9lives, "grid" as grid_2, "a-b" as a_b_2') in header.splitlines()  # fmt: skip
    code = ("using S = tuner_best::reduce_int32_n268435456;\n"
            'int main() { std::printf("%d %d %d %d %d %u", S::class_, S::p_9lives, S::grid_2, S::a_b_2, S::a_b, S::grid[0]); }')  # fmt: skip
    done = _build(tmp_path, out, code, std)
    assert done.returncode == 0, done.stderr
    problems = json.loads((out / "best.json").read_text())["problems"]
    entry = next(e for e in problems if (e["family"], e["dtype"], e["n"]) == ("reduce", "int32", 1 << 28))
    assert done.stdout == f"1 2 3 4 5 {entry['grid'][0]}"
    assert {k: entry["params"][k] for k in extra} == extra  # the original names
    other_gpu = subprocess.run(["g++", f"-std={std}", "-fsyntax-only", "-DTUNER_TARGET_SM=80", "-x", "c++", str(out / "best_configs.h")],
                               capture_output=True, text=True)  # fmt: skip
    assert other_gpu.returncode == 0, other_gpu.stderr


@pytest.mark.skipif(shutil.which("g++") is None, reason="no C++ compiler")
@pytest.mark.parametrize("target", [None, "80"])
def test_families_whose_struct_names_coincide_get_distinct_structs(tmp_path, target):
    """``a-b`` and ``a_b`` (plug-ins this process does not know) both spell
    a_b_int32_n1024; a name starting with a digit or clashing with the
    energy_optimal struct is spelled as a member too."""
    from tuner.data.export import header_text

    def entry(family, value):
        params = {"x": value, "energy_optimal": value, "1st": value}
        return {"family": family, "dtype": "int32", "n": 1024, "params": params, "ranked_by": "bandwidth_gbs",
                "exported": {"params": params, "grid": [1, 1, 1], "block": [value, 1, 1], "bandwidth_gbs": 1.0,
                             "config_key": "k", "rule": "the winner"},
                "config_key": "k", "tie_set": [], "energy_optimal": {"params": params, "energy_j": 0.1}}  # fmt: skip

    header = header_text([entry("a-b", 64), entry("a_b", 128), entry("9", 256)], {"name": "GPU", "compute_capability": "9.0"})
    (tmp_path / "best_configs.h").write_text(header)
    for line in ('// a_b_int32_n1024_2: family "a-b", dtype "int32", n=1024',
                 '// p_9_int32_n1024: family "9", dtype "int32", n=1024',
                 '// Parameters spelled otherwise in C++ (a keyword, a leading digit, a clash): "energy_optimal" as '
                 'energy_optimal_2, "1st" as p_1st'):  # fmt: skip
        assert line in header.splitlines()
    code = ("using namespace tuner_best;\n"
            'int main() { std::printf("%d %d %d %d %d", a_b_int32_n1024::x, a_b_int32_n1024_2::x, p_9_int32_n1024::x, '
            "a_b_int32_n1024_2::energy_optimal::energy_optimal_2, a_b_int32_n1024::p_1st); }")  # fmt: skip
    done = _build(tmp_path, tmp_path, code, "c++14", *([f"-DTUNER_TARGET_SM={target}"] if target else []))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "128 64 256 64 128"


def _set_geometry(column: str, value: str):
    def change(rows):
        rows.loc[rows["status"] == "ok", column] = value
        return rows

    return change


def test_a_launch_geometry_past_32_bits_stops_naming_the_file_the_configuration_and_the_value(tmp_path, capsys):
    folder = _results_with_rows(tmp_path, _set_geometry("block", "4294967296,1,1"))
    assert cli.main(["best", "--results", str(folder), "--out-dir", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    first = pd.read_parquet(folder / "measurements.parquet").query("status == 'ok'").iloc[0]
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"error: {folder / 'measurements.parquet'}: block is '4294967296,1,1' in row "), err
    assert first["config_key"][:60] in err and "below 2^32" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "column, value", [("grid", "a,b,c"), ("block", "99999999999999999999999,1,1"), ("grid", "1,2"), ("block", "-1,1,1")]
)
def test_a_launch_geometry_not_three_whole_numbers_stops_in_one_line_and_writes_nothing(tmp_path, capsys, column, value):
    folder = _results_with_rows(tmp_path, _set_geometry(column, value))
    assert cli.main(["best", "--results", str(folder), "--out-dir", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"error: {folder / 'measurements.parquet'}: {column} is {value!r} in row "), err
    assert not (tmp_path / "out").exists()


def test_the_geometry_check_names_the_rows_configuration():
    from tuner.data.export import _check_geometry
    from tuner.errors import DamagedFile

    rows = pd.DataFrame({"status": ["ok", "ok", "ok"], "source": ["sweep:x", "peaks", "sweep:x"], "grid": ["1,1,1", "x", "1,1,a"],
                         "block": ["4294967295,1,1", "x", "1,1,1"], "config_key": ['{"u": 1}', "{}", '{"u": 2}']})  # fmt: skip
    with pytest.raises(DamagedFile, match=r"^m.parquet: grid is '1,1,a' in row 3 \(configuration '\{\"u\": 2\}'\)"):
        _check_geometry(Path("m.parquet"), rows)  # the yardstick's row 2 is no candidate; 2^32 - 1 fits


def test_measurements_without_a_config_key_column_stop_in_one_line(tmp_path, capsys):
    folder = _results_with_rows(tmp_path, lambda rows: rows.drop(columns=["config_key"]))
    assert cli.main(["best", "--results", str(folder), "--out-dir", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"error: {folder / 'measurements.parquet'}: must have the columns ['config_key', 'family', 'dtype', "
                          "'n', 'status'], lacks ['config_key']; "), err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("dropped", [["status"], ["family", "n"]])
def test_measurements_without_a_status_or_problem_column_stop_before_best_json_is_written_empty(tmp_path, capsys, dropped):
    folder = _results_with_rows(tmp_path, lambda rows: rows.drop(columns=dropped))
    out = tmp_path / "out"
    assert cli.main(["best", "--results", str(folder), "--out-dir", str(out)]) == 1
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and f"lacks {dropped}; " in err, err
    assert not out.exists() or not any(out.iterdir())


def test_rows_without_a_source_are_candidates_not_left_out_unsaid(tmp_path):
    """A table that keeps no source for its rows (None throughout): its verified rows still win their problems."""
    folder = _results_with_rows(tmp_path, lambda rows: rows[rows["source"] != "peaks"].assign(source=None))
    out = tmp_path / "out"
    assert cli.main(["best", "--results", str(folder), "--out-dir", str(out)]) == 0
    shipped = json.loads((REFERENCE / "best.json").read_text())
    assert len(json.loads((out / "best.json").read_text())["problems"]) == len(shipped["problems"]) > 0


@pytest.mark.parametrize("name", ["best_configs.h", "best.json"])
@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_an_output_that_is_no_regular_file_stops_before_either_is_written(tmp_path, capsys, name, kind):
    out = tmp_path / "out"
    out.mkdir()
    {"fifo": os.mkfifo, "directory": os.mkdir}[kind](out / name)
    assert cli.main(["best", "--results", str(REFERENCE), "--out-dir", str(out)]) == 1
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"error: {out / name}: must be a regular file to replace, or absent"), err
    assert [p.name for p in out.iterdir()] == [name]  # neither written, no temporary left


def test_outputs_that_are_regular_files_are_replaced(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    for name in ("best.json", "best_configs.h"):
        (out / name).write_text("old")
    assert cli.main(["best", "--results", str(REFERENCE), "--out-dir", str(out)]) == 0
    assert (out / "best_configs.h").read_text() == (REFERENCE / "best_configs.h").read_text()
    assert json.loads((out / "best.json").read_text()) == json.loads((REFERENCE / "best.json").read_text())


def _struct_members(header: str) -> tuple[dict, dict]:
    """struct name -> its member names, for the tuned section (#if) and the other GPUs' (#else)."""
    tuned, other = header.split("#else", 1)

    def members(section: str) -> dict:
        found = {}
        for name, body in re.findall(r"^struct (\w+) \{\n(.*?)^\};", section, flags=re.M | re.S):
            found[name] = re.findall(r"static constexpr [^=]*?(\w+)(?:\[3\])? =", body)
        return found

    return members(tuned), members(other)


def test_each_struct_has_the_same_members_for_every_gpu(tmp_path):
    """Code using a tuned struct's member builds for another GPU too: the H200's reductions at 2^24 were
    measured before the family had `finish`, and its defaults' struct had it where the tuned one had not."""
    out = tmp_path / "out"
    assert cli.main(["best", "--results", str(REFERENCE), "--out-dir", str(out)]) == 0
    tuned, other = _struct_members((out / "best_configs.h").read_text())
    assert tuned and tuned == other
    assert any("finish" not in members for members in tuned.values())  # the case this is about is in the data


@pytest.fixture
def registry_kept():
    """The family registry as it was, after a test that loads a plug-in family (its parameters become
    results columns, which other tests in the same process would see)."""
    from tuner.families import REGISTRY

    before = dict(REGISTRY.families)
    yield REGISTRY
    REGISTRY.families.clear()
    REGISTRY.families.update(before)


def test_a_plug_in_familys_defaults_come_from_its_config_and_are_not_claimed_without_it(tmp_path, registry_kept):
    results = ROOT / "examples" / "saxpy" / "reference" / "nvidia-h100-80gb-hbm3"
    registry_kept.families.pop("saxpy", None)  # as in a process that never loaded it
    for args, block, vec in (([], 128, 2), (["--config", str(ROOT / "examples" / "saxpy" / "config.yaml")], 64, 1)):
        out = tmp_path / f"out{len(args)}"
        assert cli.main(["best", "--results", str(results), "--out-dir", str(out), *args]) == 0
        other = (out / "best_configs.h").read_text().split("#else", 1)[1]
        assert f"block_size_x = {block};" in other and f"VEC = {vec};" in other
        assert ('Family "saxpy" was not loaded for this export' in other) == (not args)


@pytest.mark.skipif(shutil.which("g++") is None, reason="no C++ compiler")
def test_two_problems_whose_names_join_into_one_text_get_two_structs(tmp_path):
    """Family k with dtype x_float32 beside family k_x with dtype float32, at one size: both spell
    k_x_float32_n16777216; they were written as one struct name twice, a redefinition."""

    def relabel(rows):
        rows = rows[(rows["family"] == "vector_add") & (rows["n"] == 16777216)].copy()
        rows.loc[rows["dtype"] == "float32", ["family", "dtype"]] = ["k", "x_float32"]
        rows.loc[rows["dtype"] == "int8", ["family", "dtype"]] = ["k_x", "float32"]
        return rows[rows["family"].isin(["k", "k_x"])]

    folder = _results_with_rows(tmp_path, relabel)
    out = tmp_path / "out"
    assert cli.main(["best", "--results", str(folder), "--out-dir", str(out)]) == 0
    tuned, other = _struct_members((out / "best_configs.h").read_text())
    assert sorted(tuned) == sorted(other) == ["k_x_float32_n16777216", "k_x_float32_n16777216_2"]
    done = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", "-x", "c++", str(out / "best_configs.h")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
