"""A family whose configurations do different work (copy: a copy, or a
read-only pass) has an answer per operation: best.json, the header, the
report's answer tables and ``tuner compare`` name the best of each, and a
family of one operation is answered as before."""

from __future__ import annotations

import json
import shutil
import subprocess

import pandas as pd
import pytest

from tuner import cli
from tuner.data import compare, results
from tuner.data.export import best_entries, header_text
from tuner.families import REGISTRY
from tuner.families.base import Family, Param

DEVICE = {"name": "GPU", "compute_capability": "9.0"}


def row(family: str, n: int, params: dict, median: float, *, half: float = 0.0005, source: str = "sweep:s") -> dict:
    """A verified row of ``family`` whose median time (ms) has the interval median -+ half; 1 MB moved."""
    return {
        "status": "ok", "source": source, "family": family, "dtype": "float32", "n": n, **params,
        "config_key": json.dumps(params, sort_keys=True), "grid": "64,1,1", "block": f"{params.get('block_size', 256)},1,1",
        "time_ms_median": median, "time_ms_ci_low": median - half, "time_ms_ci_high": median + half, "samples": 10,
        "bandwidth_gbs": 1.0 / median, "gflops": None, "fraction_of_copy_peak": None,
        "fraction_of_theoretical_peak": None, "run_id": "r",
    }  # fmt: skip


def copy_rows(n: int = 1024, *, read_ahead: bool = True) -> list[dict]:
    """copy rows of one problem: two copies and two reads, a read the fastest of all (as on an H200 at 2^28)."""
    fast_read = 0.90 if read_ahead else 1.10
    return [
        row("copy", n, {"variant": "copy", "block_size": 256}, 1.00),
        row("copy", n, {"variant": "copy", "block_size": 512}, 1.05),
        row("copy", n, {"variant": "read", "block_size": 1024}, fast_read),
        row("copy", n, {"variant": "read", "block_size": 256}, 1.20),
    ]


def test_a_copy_dataset_exports_a_copy_winner_and_a_read_winner():
    entries = best_entries(pd.DataFrame(copy_rows()))
    assert [(e["operation"], e["params"]["variant"], e["params"]["block_size"]) for e in entries] == [
        ("copy", "copy", 256),  # the family's default operation first, though the read is faster
        ("read", "read", 1024),
    ]
    for entry in entries:  # each answer is chosen among the configurations of its own operation
        assert {m["params"]["variant"] for m in entry["tie_set"]} == {entry["operation"]} and entry["candidates"] == 2
        assert entry["exported"]["params"]["variant"] == entry["operation"]


def test_the_tie_sets_exported_member_is_chosen_over_the_sizes_of_its_own_operation():
    small, large = copy_rows(1024), copy_rows(4096)
    # At 4096 the 256-thread read ties with the winner; at 1024 it is the read's winner: the header exports it at both.
    large[3] |= {"time_ms_median": 0.901, "time_ms_ci_low": 0.9005, "time_ms_ci_high": 0.9015, "bandwidth_gbs": 1 / 0.901}
    small[2] |= {"time_ms_median": 0.95, "time_ms_ci_low": 0.9495, "time_ms_ci_high": 0.9505, "bandwidth_gbs": 1 / 0.95}
    small[3] |= {"time_ms_median": 0.90, "time_ms_ci_low": 0.8995, "time_ms_ci_high": 0.9005, "bandwidth_gbs": 1 / 0.90}
    read = next(e for e in best_entries(pd.DataFrame(small + large)) if (e["operation"], e["n"]) == ("read", 4096))
    assert read["params"]["block_size"] == 1024 and read["exported"]["params"]["block_size"] == 256
    assert "sizes of copy float32 (read)" in read["exported"]["rule"]


def test_best_json_and_the_header_give_each_operation_its_own_struct(tmp_path, capsys):
    folder = tmp_path / "gpu"
    results.write_atomic(results.to_frame(copy_rows()), folder / "measurements.parquet")
    (folder / "device.json").write_text(json.dumps(DEVICE))
    assert cli.main(["best", "--results", str(folder)]) == 0
    printed = capsys.readouterr().out
    assert "copy (copy)" in printed and "copy (read)" in printed and "2 answers ->" in printed
    best = json.loads((folder / "best.json").read_text())
    assert best["format"] == 2 and [e["operation"] for e in best["problems"]] == ["copy", "read"]
    header = (folder / "best_configs.h").read_text()
    assert "struct copy_float32_n1024 " not in header  # no struct names one kernel for two kinds of work
    for operation in ("copy", "read"):
        assert header.count(f"struct copy_{operation}_float32_n1024 {{") == 2  # tuned, and the defaults for another GPU
        assert f'// Operation "{operation}" of family "copy"' in header


@pytest.mark.skipif(shutil.which("g++") is None, reason="no C++ compiler")
@pytest.mark.parametrize("target", [None, "80"])
def test_the_operations_structs_hold_their_own_operation_for_any_gpu(tmp_path, target):
    """For another GPU each struct holds the family's defaults in its own operation: the read's still reads."""
    (tmp_path / "best_configs.h").write_text(header_text(best_entries(pd.DataFrame(copy_rows())), DEVICE))
    program = tmp_path / "use.cpp"
    program.write_text(
        '#include "best_configs.h"\n#include <cstdio>\nusing namespace tuner_best;\n'
        "int main() { std::printf(\"%s %d %s %d\\n\", copy_copy_float32_n1024::variant, copy_copy_float32_n1024::block_size,\n"
        "                         copy_read_float32_n1024::variant, copy_read_float32_n1024::block_size); }\n"
    )
    define = [f"-DTUNER_TARGET_SM={target}"] if target else []
    subprocess.run(["g++", "-std=c++17", f"-I{tmp_path}", *define, str(program), "-o", str(tmp_path / "use")], check=True)
    out = subprocess.run([str(tmp_path / "use")], capture_output=True, text=True, check=True).stdout.split()
    default = REGISTRY["copy"].param("block_size").default
    assert out == (["copy", "256", "read", "1024"] if target is None else ["copy", str(default), "read", str(default)])


def test_a_family_of_one_operation_is_answered_as_before():
    rows = [row("vector_add", 1024, {"variant": "add", "block_size": b}, m) for b, m in ((256, 1.0), (512, 1.2))]
    (entry,) = best_entries(pd.DataFrame(rows))
    assert entry["operation"] is None and entry["params"]["block_size"] == 256
    header = header_text([entry], DEVICE)
    assert "struct vector_add_float32_n1024 {" in header and "Operation" not in header
    # The header of a format-1 entry (no operation) is the same text.
    assert header == header_text([{k: v for k, v in entry.items() if k != "operation"}], DEVICE)


class _MapScan(Family):
    """A family of three kernels, two of which do one operation: its
    ``operation`` names the work, not the variant."""

    name = "map_scan"
    source = "map_scan.cu"
    dtypes = ("float32",)
    arg_types = "PPQ"
    params = (Param("variant", ("map_a", "map_b", "scan"), "two maps and a scan"), Param("block_size", (256, 512), "threads"))
    operation_param = "variant"

    def operation(self, cfg):
        return "scan" if cfg.get("variant") == "scan" else "map"

    def kernel_name(self, cfg):
        return cfg["variant"]

    def defines(self, cfg, problem):
        return {}

    def bytes_moved(self, cfg, problem):
        return problem.n * 4

    def make_inputs(self, problem, rng):
        return {}

    def reference(self, inputs, problem):
        return None

    def allocate(self, problem, inputs, gpu):
        return None

    def bind(self, cfg, problem, buffers, function, gpu):
        raise NotImplementedError


def test_any_family_that_names_its_operations_is_answered_per_operation(monkeypatch):
    """Nothing in the export knows copy: a family's own ``operation`` decides."""
    family = _MapScan()
    monkeypatch.setitem(REGISTRY.families, family.name, family)
    assert family.operations() == ("map", "scan")
    rows = [row("map_scan", 1024, {"variant": v, "block_size": 256}, m) for v, m in (("map_a", 1.1), ("map_b", 1.0), ("scan", 2.0))]
    entries = best_entries(pd.DataFrame(rows))
    assert [(e["operation"], e["params"]["variant"]) for e in entries] == [("map", "map_b"), ("scan", "scan")]
    assert "struct map_scan_map_float32_n1024 {" in header_text(entries, DEVICE)


def test_only_copy_of_the_built_in_families_does_different_work():
    assert REGISTRY["copy"].operations() == ("copy", "read")
    for family in REGISTRY:
        assert family.operation_param is None or family.operation_param in family.param_names, family.name
        if family.name != "copy":
            assert family.operations() == () and family.operation({}) is None, family.name


def test_the_reports_answer_tables_give_each_operation_a_row():
    from tuner.data.selection import best_per_family
    from tuner.report.document import bests_table
    from tuner.report.family_sections import best_table
    from tuner.report.ties import COLUMNS, ties_section

    rows = pd.DataFrame(copy_rows() + [row("vector_add", 1024, {"variant": "add", "block_size": 256}, 1.0)])
    ties = ties_section(rows)["table"]
    assert list(ties.columns) == [COLUMNS[0], "operation", *COLUMNS[1:]]
    assert [tuple(r) for r in ties[["family", "operation"]].to_numpy()] == [("copy", "copy"), ("copy", "read"), ("vector_add", "—")]
    assert ties.loc[0, "winner"].startswith("`variant=copy, block_size=256")
    bests = bests_table(best_per_family(rows, {}))
    assert [tuple(r) for r in bests[["family", "operation", "variant"]].to_numpy()] == [
        ("copy", "copy", "copy"), ("copy", "read", "read"), ("vector_add", "—", "add")]  # fmt: skip
    section = best_table("copy", rows[rows.family == "copy"], {})
    assert list(section["operation"]) == ["copy", "read"] and section.loc[0, "configuration"].startswith("variant=copy")
    # A dataset of families of one operation keeps its tables as they were: no operation column.
    single = rows[rows.family == "vector_add"]
    assert list(ties_section(single)["table"].columns) == list(COLUMNS)
    assert "operation" not in bests_table(best_per_family(single, {})).columns
    assert "operation" not in best_table("vector_add", single, {}).columns


def test_compare_judges_each_operations_winner_against_its_own_tie_set():
    a = pd.DataFrame(copy_rows())
    b = pd.DataFrame(copy_rows())
    assert compare.winners(a, b) == ["winners: the same in 2 of 2 problems; B's winner lies in A's tie set in 2 of 2"]
    # B's fastest copy is A's slower one: judged against A's copies, not against A's read.
    slower = a.assign(bandwidth_gbs=a["bandwidth_gbs"].where(a["block_size"] != 512, 2.0))
    lines = compare.winners(a, slower)
    assert lines[0] == "winners: the same in 1 of 2 problems; B's winner lies in A's tie set in 1 of 2"
    assert lines[1].startswith("  not in copy (copy) float32 n=1024: B's winner") and "5.00% behind" in lines[1]


def test_the_energy_table_gives_each_operation_its_own_front():
    """A read's joules are no answer for a copy: each operation has its own fastest and most frugal."""
    from tuner.report.energy import energy_table

    joules = {("copy", 256): 0.010, ("copy", 512): 0.008, ("read", 1024): 0.004, ("read", 256): 0.005}
    rows = [r | {"energy_j": joules[(r["variant"], r["block_size"])], "energy_j_err": 1e-5} for r in copy_rows()]
    table = energy_table(results.to_frame(rows)).set_index("problem")
    assert list(table.index) == ["copy (copy) float32 n=1024", "copy (read) float32 n=1024"]
    assert list(table["with energy"]) == [2, 2] and table.loc["copy (copy) float32 n=1024", "fastest: mJ per launch"].startswith("10 ")
