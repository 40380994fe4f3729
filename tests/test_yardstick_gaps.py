"""benchmarks/yardstick_gaps.py without a GPU: the plan of each experiment,
the table's arithmetic (each row over the baseline, the reference over each
row, where each row lands) on synthetic medians, the files it writes, and its
refusals; on a GPU, the nvbench experiment at a small size writes a table whose
baseline is its own unit."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPT = BENCHMARKS / "yardstick_gaps.py"


def load():
    spec = importlib.util.spec_from_file_location("yardstick_gaps", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["yardstick_gaps"] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


gaps = load()


def synthetic(experiment, medians: dict[str, list[float | None]]):
    """A table of ``experiment`` whose rows hold ``medians`` (one per work, in order)."""
    works = list(experiment.works)
    cells = {row: {w: gaps.Cell(median_ms=m, samples=10 if m else 0) for w, m in zip(works, values)}
             for row, values in medians.items()}  # fmt: skip
    return gaps.Table(experiment, works, cells, {"device": "a stand-in"})


def nvbench_table(rows: dict[str, list[float | None]]):
    """The nvbench experiment with the baseline at 1.0 ms and nvbench batch at 0.95 for the two CUB
    sums (the gap), both at 2.0 for the copy, and ``rows``; the others left out."""
    return synthetic(gaps.NVBENCH, {"ours hot": [1.0, 1.0, 2.0], "nvbench batch": [0.95, 0.95, 2.0]} | rows)


def test_each_experiment_names_its_baseline_first_and_its_reference_among_its_rows():
    for experiment in gaps.EXPERIMENTS.values():
        names = [row.name for row in experiment.rows]
        assert names[0] == experiment.baseline and experiment.reference in names
        assert names[-1].startswith(experiment.baseline) and names[-1] != experiment.baseline  # the drift row, last
        assert all(row.factor for row in experiment.rows)
    with pytest.raises(ValueError, match="the reference must be one of the rows"):
        gaps.Experiment("x", "?", ("w",), (gaps.Variant("a", "f"),), baseline="a", reference="b")
    with pytest.raises(ValueError, match="unique"):
        gaps.Experiment("x", "?", ("w",), (gaps.Variant("a", "f"), gaps.Variant("a", "g")), baseline="a", reference="a")


def test_ratios_are_taken_against_the_baseline_and_from_the_reference():
    table = nvbench_table({"hold 500 us": [0.95, 0.96, 2.0], "hold 0": [1.10, 1.10, 2.02]})
    cub = table.works[0]
    assert table.over_baseline("hold 500 us", cub) == pytest.approx(0.95)
    assert table.reference_over("hold 500 us", cub) == pytest.approx(1.0)
    assert table.reference_over("ours hot", cub) == pytest.approx(0.95)  # the gap
    assert table.over_baseline("hold 0", table.works[2]) == pytest.approx(1.01)
    assert table.over_baseline("CUDA graph", cub) is None  # not measured: no ratio, no error
    assert gaps.ratio(gaps.Cell(median_ms=0.0), gaps.Cell(median_ms=1.0)) is None  # a zero median is no time


def test_each_row_lands_at_the_baseline_at_the_reference_elsewhere_or_mixed():
    table = nvbench_table({
        "hold 500 us": [0.951, 0.949, 2.01],  # the sums at the reference, the copy at the baseline and the reference
        "cold, read flush": [1.004, 0.996, 1.999],  # every work at the baseline
        "hold 0": [1.2, 1.2, 2.4],  # neither
        "batch of 10": [0.95, 1.0, 2.0],  # one at the reference, the others at the baseline
    })  # fmt: skip
    table.cells["CUDA graph"] = {w: gaps.Cell(note="error: no capture") for w in table.works}
    assert table.verdict("hold 500 us") == "ref"  # the copy, with no gap, is at both and tells nothing
    assert table.verdict("cold, read flush") == "base"
    assert table.verdict("hold 0") == "other"
    assert table.verdict("batch of 10") == "mixed"
    assert table.verdict("CUDA graph") == "n/a"
    no_gap = synthetic(gaps.NVBENCH, {"ours hot": [1.0, 1.0, 2.0], "nvbench batch": [1.0, 1.0, 2.0], "hold 0": [1.0, 1.0, 2.0]})
    assert no_gap.verdict("hold 0") == "base"  # every work at both: the baseline's figure stands
    only_sums = synthetic(gaps.NVBENCH, {"ours hot": [1.0, 1.0, None], "nvbench batch": [0.95, 0.95, None],
                                         "hold until released": [0.951, 0.949, None]})  # fmt: skip
    assert only_sums.verdict("hold until released") == "ref"


def test_the_summary_says_which_rows_reach_the_reference_and_the_drift():
    medians = {"ours hot": [1.0, 1.0, 2.0], "nvbench batch": [0.95, 0.95, 1.9], "hold until released": [0.951, 0.949, 1.9],
               "hold 0": [1.2, 1.21, 2.3], "cold, read flush": [1.0, 1.002, 2.001], "ours hot again": [1.003, 0.999, 2.0]}  # fmt: skip
    summary = synthetic(gaps.NVBENCH, medians).summary()
    assert summary[0].startswith("the gap here (nvbench batch / ours hot): CUB sum int32 0.9500")
    assert "at the reference within 1%: hold until released" in summary
    assert "at the baseline within 1%: cold, read flush" in summary
    assert any(line.startswith("elsewhere: hold 0 (other: CUB sum int32 1.2000") for line in summary)
    assert any("no figure: " in line and "CUDA graph" in line for line in summary)
    assert summary[-1] == "drift (ours hot again / ours hot): CUB sum int32 1.0030, CUB sum float32 0.9990, device copy 1.0000"
    flat = synthetic(gaps.NVBENCH, {"ours hot": [1.0, 1.0, 2.0], "nvbench batch": [1.001, 0.999, 2.0]}).summary()
    assert "the gap did not show within 1%" in flat[1]


def test_the_text_and_json_carry_every_row_in_the_plans_order(tmp_path):
    table = nvbench_table({"hold 0": [1.1, 1.1, 2.0]})
    table.cells["CUB from C++"] = {w: gaps.Cell(median_ms=0.94, note="host 3.1 us per call") for w in table.works[:2]}
    table.notes.append("a note of the run")
    text = table.text()
    body = text.split("\nrows:\n")[0]
    positions = [body.index(f"\n{row.name[:30]:30s} |") for row in gaps.NVBENCH.rows]
    assert positions == sorted(positions)
    hold_0 = next(line for line in body.splitlines() if line.startswith("hold 0 "))
    assert "1.10000   1.1000   0.8636" in hold_0 and hold_0.endswith("other")  # ms, x base, ref/row; the copy tells nothing
    assert "CUB from C++ / CUB sum int32: host 3.1 us per call" in text and "a note of the run" in text
    summary = text.rstrip().split("\nsummary:\n")[1].splitlines()
    assert summary == [f"  {line}" for line in table.summary()]  # the summary last
    paths = gaps.write_table(table, tmp_path / "out")
    assert sorted(p.name for p in paths) == ["nvbench.json", "nvbench.txt"]
    assert (tmp_path / "out" / "nvbench.txt").read_text() == text
    data = json.loads((tmp_path / "out" / "nvbench.json").read_text())
    assert [row["name"] for row in data["rows"]] == [row.name for row in gaps.NVBENCH.rows]
    hold = next(row for row in data["rows"] if row["name"] == "hold 0")
    assert hold["cells"]["CUB sum int32"]["over_baseline"] == pytest.approx(1.1)
    assert hold["cells"]["CUB sum int32"]["reference_over_row"] == pytest.approx(0.95 / 1.1)
    assert data["rows"][0]["cells"]["device copy"]["over_baseline"] == pytest.approx(1.0)
    graph = next(row for row in data["rows"] if row["name"] == "CUDA graph")
    assert graph["verdict"] == "n/a" and graph["cells"]["device copy"]["median_ms"] is None
    assert data["summary"] == table.summary() and data["baseline"] == "ours hot"


def test_a_failing_row_keeps_its_error_and_the_others_run():
    works = list(gaps.KERNEL_TUNER.works)

    def fails():
        raise RuntimeError("nvcc said no\nsecond line")

    functions = {row.name: (lambda: {w: gaps.Cell(median_ms=1.0) for w in works}) for row in gaps.KERNEL_TUNER.rows}
    functions["KT module"] = fails
    functions["Kernel Tuner (CuPy)"] = lambda: {works[0]: gaps.Cell(median_ms=1.1)}
    logged = []
    cells = gaps.measure_rows(gaps.KERNEL_TUNER, works, functions, log=logged.append)
    assert [c.note for c in cells["KT module"].values()] == ["error: RuntimeError: nvcc said no"] * 2
    assert cells["Kernel Tuner (CuPy)"][works[1]].note == "n/a for this work"
    assert cells["ours hot again"][works[0]].median_ms == 1.0 and len(logged) == len(gaps.KERNEL_TUNER.rows)


def test_cell_of_takes_the_median_and_the_finite_clocks():
    cell = gaps.cell_of([1.0, 3.0, 2.0, 10.0], [1980.0, float("nan"), 1755.0])
    assert (cell.median_ms, cell.samples, cell.sm_clock_mhz) == (2.5, 4, pytest.approx(1867.5))
    assert not gaps.cell_of([]).ok and gaps.cell_of([], []).sm_clock_mhz is None


@pytest.mark.parametrize("experiment", sorted(gaps.EXPERIMENTS))
def test_dry_run_prints_the_plan_and_touches_nothing(experiment, tmp_path):
    out = tmp_path / "gaps"
    proc = subprocess.run([sys.executable, str(SCRIPT), experiment, "--dry-run", "--out", str(out)],
                          capture_output=True, text=True, check=True)  # fmt: skip
    assert f"experiment {experiment}:" in proc.stdout and f"{out / experiment}.json" in proc.stdout
    assert all(row.name in proc.stdout for row in gaps.EXPERIMENTS[experiment].rows)
    assert not out.exists()


@pytest.mark.parametrize(
    "argv, line",
    [
        (["nvbench", "--n", "5"], "--n: must be at least 1024, got 5"),
        (["nvbench", "--n", str(1 << 31)], "--n: must fit CUB's int count"),
        (["kernel-tuner", "--min-samples", "1"], "--min-samples: must be at least 2, got 1"),
        (["nvbench", "--out", "FILE"], "--out: must be a folder (or none yet), got the file"),
        (["cub"], "invalid choice: 'cub'"),
    ],
)
def test_bad_input_is_refused_in_one_line_before_any_gpu_work(argv, line, tmp_path):
    file = tmp_path / "a-file"
    file.write_text("")
    argv = [str(file) if a == "FILE" else a for a in argv]
    proc = subprocess.run([sys.executable, str(SCRIPT), *argv], capture_output=True, text=True)
    assert proc.returncode == 2 and line in proc.stderr.splitlines()[-1], proc.stderr
    assert file.read_text() == ""


@pytest.mark.gpu
def test_the_nvbench_experiment_runs_at_a_small_size(tmp_path):
    """Every row measured or its reason kept; the baseline over itself is 1."""
    proc = subprocess.run([sys.executable, str(SCRIPT), "nvbench", "--n", str(1 << 20), "--min-samples", "10", "--out",
                           str(tmp_path), "--cache", str(tmp_path / "cache")], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads((tmp_path / "nvbench.json").read_text())
    baseline = data["rows"][0]
    assert all(cell["over_baseline"] == pytest.approx(1.0) for cell in baseline["cells"].values())
    for row in data["rows"]:
        for cell in row["cells"].values():
            assert (cell["median_ms"] or 0) > 0 or cell["note"], row["name"]
    assert proc.stdout.rstrip().splitlines()[-1].startswith("  drift (ours hot again / ours hot)")
