"""tuner compare A B on synthetic runs whose truth is known: rows made by the
timer's own statistics from drawn samples, so a true change, no change and a
change hidden in noise each get the verdict they must."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tuner import cli
from tuner.data import compare, results
from tuner.measure.timing import TimingResult


def timed_row(samples, *, block: int = 256, n: int = 1 << 20, source: str = "sweep:s", clock: float = 1980.0) -> dict:
    """A verified copy row whose timing columns the timer computed from ``samples`` (ms)."""
    timing = TimingResult(samples_ms=np.asarray(samples), throttled=0, converged=True, wall_s=0.1, flushed=True,
                          sm_clocks_mhz=[clock])  # fmt: skip
    key = json.dumps({"block_size": block, "variant": "copy"}, sort_keys=True)
    return {"status": "ok", "source": source, "family": "copy", "dtype": "float32", "n": n, "variant": "copy",
            "block_size": block, "config_key": key, "gpu": "GPU", "git_commit": "abc"} | timing.as_row()  # fmt: skip


def draw(rng, median: float, noise: float, count: int) -> np.ndarray:
    return median * (1 + noise * rng.standard_normal(count))


def one(a_samples, b_samples, **kwargs) -> pd.Series:
    table = compare.compare(pd.DataFrame([timed_row(a_samples, **kwargs)]), pd.DataFrame([timed_row(b_samples, **kwargs)]))
    (row,) = table.itertuples(index=False)
    return pd.Series(row._asdict())


def test_a_true_one_percent_regression_at_low_noise_is_slower():
    rng = np.random.default_rng(1)
    row = one(draw(rng, 1.0, 0.001, 50), draw(rng, 1.01, 0.001, 50))
    assert row.verdict == "SLOWER" and row.ratio == pytest.approx(1.01, abs=0.001)
    assert 1.005 < row.ratio_low < row.ratio < row.ratio_high < 1.015


def test_a_three_percent_gain_is_faster():
    rng = np.random.default_rng(2)
    assert one(draw(rng, 1.0, 0.002, 10), draw(rng, 0.97, 0.002, 10)).verdict == "FASTER"


def test_identical_runs_and_two_draws_of_the_same_kernel_are_same():
    rng = np.random.default_rng(3)
    samples = draw(rng, 1.0, 0.002, 10)
    row = one(samples, samples)
    assert row.verdict == "SAME" and row.ratio == 1.0 and row.ratio_low < 1.0 < row.ratio_high
    assert one(draw(rng, 1.0, 0.001, 30), draw(rng, 1.0, 0.001, 30)).verdict == "SAME"


def test_a_change_hidden_in_noise_is_ambiguous():
    rng = np.random.default_rng(4)
    # 0.8 % slower, 2 % noise, 10 samples: the interval spans both 1 and the margin.
    row = one(draw(rng, 1.0, 0.02, 10), draw(rng, 1.008, 0.02, 10))
    assert row.verdict == "AMBIGUOUS" and row.ratio_low < 1.0 < 1.005 < row.ratio_high
    # No change at all, but too noisy to show that it is within the margin.
    assert one(draw(rng, 1.0, 0.02, 10), draw(rng, 1.0, 0.02, 10)).verdict == "AMBIGUOUS"


def test_unchanged_kernels_are_rarely_called_faster_or_slower():
    from tuner.data.intervals import median_interval, ratio_interval

    rng = np.random.default_rng(5)
    verdicts = []
    for _ in range(2000):  # the statistics compare() applies per row, without its frames
        a, b = draw(rng, 1.0, 0.004, 10), draw(rng, 1.0, 0.004, 10)
        verdicts.append(compare.verdict(*ratio_interval(np.median(a), *median_interval(a), np.median(b), *median_interval(b))))
    assert pd.Series(verdicts).isin(["FASTER", "SLOWER"]).mean() < 0.01


@pytest.mark.parametrize("ratio, low, high, expected", [
    (1.010, 1.006, 1.014, "SLOWER"), (1.007, 1.004, 1.010, "AMBIGUOUS"), (1.004, 1.001, 1.007, "SAME"),
    (1.004, 0.99, 1.02, "AMBIGUOUS"), (0.99, 0.985, 0.994, "FASTER"), (float("nan"), 1, 1, "AMBIGUOUS"),
])  # fmt: skip
def test_the_verdict_rule(ratio, low, high, expected):
    assert compare.verdict(ratio, low, high, margin=0.005) == expected


def test_a_configuration_measured_twice_pairs_with_the_same_source():
    rng = np.random.default_rng(6)
    a = pd.DataFrame(
        [timed_row(draw(rng, 1.0, 0.001, 10), source="sweep:s"), timed_row(draw(rng, 1.2, 0.001, 30), source="study:t")]
    )
    b = pd.DataFrame([timed_row(draw(rng, 1.0, 0.001, 10), source="sweep:s")])
    (row,) = compare.compare(a, b).itertuples()
    assert row.source_a == row.source_b == "sweep:s" and row.verdict == "SAME"
    # Without a common source, the row of the most samples stands for the configuration.
    (row,) = compare.compare(a, b.assign(source="study:u")).itertuples()
    assert row.source_a == "study:t" and row.verdict == "FASTER"


def test_rows_whose_keys_name_other_parameters_do_not_pair_and_the_summary_says_why():
    rng = np.random.default_rng(7)
    a = pd.DataFrame([timed_row(draw(rng, 1.0, 0.001, 10)), timed_row(draw(rng, 1.0, 0.001, 10), block=512)])
    b = a.copy()
    b.loc[1, "config_key"] = json.dumps({"block_size": 512, "finish": "host", "variant": "copy"}, sort_keys=True)
    table = compare.compare(a, b)
    assert len(table) == 1
    lines = compare.summary_lines(table, a, b, names=("a", "b"))
    assert "1 configurations in both (A only 1, B only 1)" in lines[2]
    assert "  unpaired: copy: B's keys name finish (the other side's do not)" in lines


def test_the_summary_says_whether_each_winner_of_b_lies_in_as_tie_set():
    rng = np.random.default_rng(9)
    base = {"bytes_moved": 1 << 22, "grid": "1,1,1", "block": "256,1,1", "run_id": "r"}

    def run(medians: dict[int, float], n: int = 1 << 20) -> list[dict]:
        return [timed_row(draw(rng, m, 0.001, 30), block=b, n=n) | base | {"bandwidth_gbs": 4.0 / m} for b, m in medians.items()]

    a = pd.DataFrame(run({128: 1.0, 256: 1.0002, 512: 1.05}) + run({128: 1.0, 256: 1.05}, n=1 << 24))
    b = pd.DataFrame(run({128: 1.0003, 256: 1.0, 512: 1.05}) + run({128: 1.05, 256: 1.0}, n=1 << 24))
    first, second = compare.winners(a, b)[:2]
    assert first == "winners: the same in 0 of 2 problems; B's winner lies in A's tie set in 1 of 2"
    assert second.startswith("  not in copy (copy) float32 n=16777216: B's winner") and second.endswith("(A's tie set: 1; it was 5.00% behind A's winner in A)")
    b = pd.DataFrame(run({128: 1.0003, 256: 1.0, 512: 1.05}) + run({128: 1.05, 1024: 1.0}, n=1 << 24))  # A never ran 1024
    lines = compare.winners(a, b)
    assert lines[0] == "winners: the same in 0 of 2 problems; B's winner lies in A's tie set in 1 of 1 (1 more where A never measured B's winner)"
    assert lines[1].startswith("  not measured in A: copy (copy) float32 n=16777216: B's winner") and len(lines) == 2


def test_a_winner_that_a_measured_only_as_a_yardstick_is_not_measured_there():
    """B's winner appears in A only among its peaks rows (the yardsticks, no candidates): A never measured it
    as a candidate, which the summary says, where it stopped with a KeyError."""
    rng = np.random.default_rng(11)
    base = {"bytes_moved": 1 << 22, "grid": "1,1,1", "block": "256,1,1", "run_id": "r"}

    def run(medians: dict[int, float], source: str) -> list[dict]:
        return [timed_row(draw(rng, m, 0.001, 30), block=b) | base | {"bandwidth_gbs": 4.0 / m, "source": source}
                for b, m in medians.items()]  # fmt: skip

    a = pd.DataFrame(run({1024: 0.9}, "peaks") + run({128: 1.0, 256: 1.05}, "sweep:x"))
    b = pd.DataFrame(run({1024: 0.9, 128: 1.0}, "sweep:x"))
    lines = compare.winners(a, b)
    assert lines[0] == "winners: the same in 0 of 1 problems; B's winner lies in A's tie set in 0 of 0 (1 more where A never measured B's winner)"
    assert lines[1].startswith("  not measured in A: copy (copy) float32 n=1048576: B's winner") and '"block_size": 1024' in lines[1]

def write_run(folder: Path, rows: list[dict]) -> Path:
    results.write_atomic(results.to_frame(rows), folder / "measurements.parquet")
    return folder


@pytest.fixture
def runs(tmp_path):
    """Run A; run B with one configuration 1 % slower and one 5 % slower, both at low noise."""
    rng = np.random.default_rng(8)
    a = [timed_row(draw(rng, 1.0, 0.001, 30), block=b) for b in (128, 256, 512)]
    b = [timed_row(draw(rng, 1.0, 0.001, 30), block=128), timed_row(draw(rng, 1.01, 0.001, 30), block=256),
         timed_row(draw(rng, 1.05, 0.001, 30), block=512)]  # fmt: skip
    return write_run(tmp_path / "a", a), write_run(tmp_path / "b", b)


def test_the_command_fails_on_a_regression_beyond_the_threshold_only(runs, tmp_path, capsys):
    a, b = runs
    assert cli.main(["compare", str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert "verdicts: FASTER 0, SAME 1, SLOWER 2, AMBIGUOUS 0" in out
    assert "regressions (SLOWER by 2.00% or more): 1" in out and '"block_size": 512' in out.split("regressions")[1]
    assert cli.main(["compare", str(a), str(b), "--threshold", "0.1"]) == 0
    assert cli.main(["compare", str(a / "measurements.parquet"), str(a)]) == 0  # a run against itself
    figure, table = tmp_path / "cmp.png", tmp_path / "cmp.csv"
    assert cli.main(["compare", str(a), str(b), "--threshold", "0.1", "--figure", str(figure), "--table", str(table)]) == 0
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert list(pd.read_csv(table)["verdict"]) == ["SAME", "SLOWER", "SLOWER"]


@pytest.mark.parametrize("argv, message", [
    (["--margin", "0"], "config error: --margin: must be a fraction above 0 and below 0.5, got 0.0"),
    (["--threshold", "1.5"], "config error: --threshold: must be a fraction above 0 and below 1, got 1.5"),
    (["--figure", "x.jpg"], "config error: --figure: must name a .png, .svg or .pdf file, got 'x.jpg'"),
    (["--table", "x.json"], "config error: --table: must name a .csv or .parquet file, got 'x.json'"),
])  # fmt: skip
def test_bad_arguments_stop_with_one_line(runs, capsys, argv, message):
    a, b = runs
    assert cli.main(["compare", str(a), str(b), *argv]) == 2
    assert capsys.readouterr().err.strip() == message


def test_a_missing_side_or_nothing_in_common_stops_with_one_line(runs, tmp_path, capsys):
    a, _ = runs
    assert cli.main(["compare", str(a), str(tmp_path / "none")]) == 2
    assert capsys.readouterr().err.startswith(
        "config error: B: must be a results folder with measurements.parquet or a Parquet file"
    )
    other = write_run(tmp_path / "other", [timed_row([1.0] * 10, n=1 << 10)])
    assert cli.main(["compare", str(a), str(other)]) == 2
    assert "config error: A, B: must share a verified configuration" in capsys.readouterr().err


def test_a_verified_row_with_a_negative_time_stops_in_one_line(runs, tmp_path, capsys):
    a, _ = runs
    rows = results.read(a / "measurements.parquet")
    rows.loc[1, "time_ms_median"] = -1.0  # a ratio of times of opposite signs means nothing
    damaged = write_run(tmp_path / "damaged", rows)
    table = tmp_path / "cmp.csv"
    for argv in (["compare", str(a), str(damaged)], ["compare", str(damaged / "measurements.parquet"), str(a)]):
        assert cli.main([*argv, "--table", str(table)]) == 1
        out, err = capsys.readouterr()
        assert out == "" and err.splitlines() == [
            f"error: {damaged / 'measurements.parquet'}: time_ms_median is -1.0 in row 2 (status ok), but a time is never "
            "negative; remove it and make it again with `snakemake --cores 1 --forcerun collect`"
        ]  # fmt: skip
    assert not table.exists()


REFERENCE = Path(__file__).resolve().parents[1] / "results" / "reference"


def test_the_readme_numbers_of_the_shipped_runs():
    h100, h200 = compare.load(REFERENCE / "nvidia-h100-80gb-hbm3"), compare.load(REFERENCE / "nvidia-h200")
    table = compare.compare(h100, h200)
    assert len(table) == 2060 and table["verdict"].value_counts().to_dict() == {
        "FASTER": 1906,
        "SAME": 68,
        "AMBIGUOUS": 44,
        "SLOWER": 42,
    }
    assert compare.key_differences(h100, h200) == [] and compare.regressions(table).empty
    assert compare.winners(h100, h200)[0] == "winners: the same in 13 of 22 problems; B's winner lies in A's tie set in 20 of 22"
    hard = (
        REFERENCE.parents[1] / "benchmarks/tables/reduce_hard_2e24_h100.parquet",
        REFERENCE.parents[1] / "benchmarks/tables/reduce_hard_2e24_h100_rerun.parquet",
    )
    table = compare.compare(*(compare.load(path) for path in hard))
    counts = table["verdict"].value_counts().to_dict()
    assert counts == {"SAME": 5370, "AMBIGUOUS": 1722, "SLOWER": 90, "FASTER": 18}
    assert len(compare.regressions(table)) == 1


def test_two_fresh_h100_runs_name_winners_in_each_others_tie_sets():
    """The shipped claim: rerun on the same GPU, every problem's winner is one the first run could not tell from its own."""
    fresh = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "fresh-h100"
    one, two = compare.load(fresh / "run1"), compare.load(fresh / "run2")
    assert compare.winners(one, two)[0] == "winners: the same in 18 of 22 problems; B's winner lies in A's tie set in 22 of 22"
    assert compare.winners(two, one)[0].endswith("B's winner lies in A's tie set in 22 of 22")
    verdicts = compare.compare(one, two)["verdict"].value_counts().to_dict()
    assert verdicts == {"SAME": 1829, "AMBIGUOUS": 209, "FASTER": 14, "SLOWER": 8}



def _refused(capsys, argv: list[str]) -> str:
    """The one line `tuner compare` stops with (exit status 2, nothing printed)."""
    assert cli.main(["compare", *argv]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1, err
    return err.strip()


def test_the_table_and_figure_never_write_over_measurements(runs, tmp_path, capsys):
    """Before, `compare A B --table A/measurements.parquet` exited 0 with A's measurements replaced by the comparison."""
    a, b = runs
    measured = (a / "measurements.parquet").read_bytes()
    (tmp_path / "link.parquet").symlink_to(a / "measurements.parquet")
    os.link(a / "measurements.parquet", tmp_path / "hard.csv")
    (tmp_path / "rows.parquet").write_bytes(measured)  # a results table that is no input
    pd.DataFrame({"dram_read_bytes": [1.0]}).to_parquet(tmp_path / "counters.parquet")  # measured, with no status column
    (b / "sweeps").mkdir()
    (b / "sweeps" / "s.parquet").write_bytes(measured)
    (b / "profiles").mkdir()
    untouched = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    before = sorted(tmp_path.rglob("*"))
    lost = "(its measurements would be lost)"
    refused = [
        (["--table", str(a / "measurements.parquet")], f"--table: must not be an input of A or B {lost}, got "
                                                       f"'{a / 'measurements.parquet'}', A's '{a / 'measurements.parquet'}'"),
        (["--table", str(tmp_path / "link.parquet")], f"--table: must not be an input of A or B {lost}, got '{tmp_path / 'link.parquet'}'"),
        (["--table", str(tmp_path / "hard.csv")], f"--table: must not be an input of A or B {lost}, got '{tmp_path / 'hard.csv'}'"),
        (["--table", str(tmp_path / "rows.parquet")], "--table: must not be a Parquet file other than a comparison table "
                                                      "(measurements would be lost), got "),
        (["--table", str(tmp_path / "counters.parquet")], "a Parquet file with no ratio and verdict columns"),
        (["--table", str(tmp_path / "new" / "measurements.parquet")], "--table: must not be a results folder's measurements.parquet"),
        (["--table", str(b / "sweeps" / "s.parquet")], "--table: must not be in a results folder's sweeps/, studies/, profiles/"),
        (["--table", str(b / "sweeps" / "cmp.csv")], "--table: must not be in a results folder's sweeps/, studies/, profiles/"),
        (["--figure", str(b / "profiles" / "cmp.png")], "--figure: must not be in a results folder's sweeps/, studies/, profiles/"),
    ]  # fmt: skip
    for argv, message in refused:
        line = _refused(capsys, [str(a), str(b), *argv])
        assert line.startswith("config error: ") and message in line, (argv, line)
    # B given as a Parquet file: its file is an input too
    assert "must not be an input of A or B" in _refused(capsys, [str(a), str(tmp_path / "rows.parquet"), "--table",
                                                                  str(tmp_path / "rows.parquet")])  # fmt: skip
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == untouched
    assert sorted(tmp_path.rglob("*")) == before  # nothing written, nothing half-written
    # A comparison table is written, and written again over itself.
    for _ in range(2):
        assert cli.main(["compare", str(a), str(b), "--table", str(tmp_path / "cmp.parquet")]) == 1
        assert f"table -> {tmp_path / 'cmp.parquet'}" in capsys.readouterr().out
    assert list(pd.read_parquet(tmp_path / "cmp.parquet")["verdict"]) == ["SAME", "SLOWER", "SLOWER"]


def test_both_outputs_are_checked_before_either_is_written(runs, tmp_path, capsys):
    """Before, a --figure that was a folder, under a file or a pipe failed after the table was written
    (the pipe with an io.UnsupportedOperation traceback)."""
    a, b = runs
    (tmp_path / "folder.png").mkdir()
    (tmp_path / "file").write_text("a file\n")
    os.mkfifo(tmp_path / "pipe.png")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")  # no folder can be made in a link's place
    table = tmp_path / "cmp.csv"
    before = sorted(tmp_path.rglob("*"))
    for figure, message in [
        ("folder.png", f"config error: --figure: must name a file to write, got '{tmp_path / 'folder.png'}', a folder"),
        ("file/x.png", f"config error: --figure: must be in a folder, got '{tmp_path / 'file' / 'x.png'}', under "
                       f"'{tmp_path / 'file'}', a file"),
        ("file/y/x.svg", f"config error: --figure: must be in a folder, got '{tmp_path / 'file' / 'y' / 'x.svg'}', under "
                         f"'{tmp_path / 'file'}', a file"),
        ("pipe.png", f"config error: --figure: must name a file to write (or none yet), got '{tmp_path / 'pipe.png'}', a pipe"),
        ("dangling/x.png", f"config error: --figure: must be in a folder, got '{tmp_path / 'dangling' / 'x.png'}', under "
                           f"'{tmp_path / 'dangling'}', a link to nothing ({tmp_path / 'nowhere'})"),
    ]:  # fmt: skip
        assert _refused(capsys, [str(a), str(b), "--table", str(table), "--figure", str(tmp_path / figure)]) == message
        assert not table.exists()
    os.mkfifo(tmp_path / "pipe.csv")
    assert _refused(capsys, [str(a), str(b), "--table", str(tmp_path / "pipe.csv"), "--figure", str(tmp_path / "f.png")]) == (
        f"config error: --table: must name a file to write (or none yet), got '{tmp_path / 'pipe.csv'}', a pipe"
    )
    assert sorted(tmp_path.rglob("*")) == sorted([*before, tmp_path / "pipe.csv"])
    assert (tmp_path / "pipe.png").is_fifo() and (tmp_path / "folder.png").is_dir()
    # The table and the figure by one name (a link): one would replace the other.
    (tmp_path / "same.png").symlink_to(tmp_path / "same.csv")
    assert "--figure: must not be the --table file" in _refused(
        capsys, [str(a), str(b), "--table", str(tmp_path / "same.csv"), "--figure", str(tmp_path / "same.png")]
    )
    assert not (tmp_path / "same.csv").exists()


def test_a_figure_that_fails_to_draw_leaves_no_table(runs, tmp_path, capsys, monkeypatch):
    """Both or neither: the table is put in place only once the figure is drawn."""
    from tuner.report import compare_figure

    def fail(*args, **kwargs):
        raise OSError(28, "No space left on device", str(tmp_path / "f.png"))

    monkeypatch.setattr(compare_figure, "draw", fail)
    a, b = runs
    assert cli.main(["compare", str(a), str(b), "--table", str(tmp_path / "cmp.csv"), "--figure", str(tmp_path / "f.png")]) == 1
    assert capsys.readouterr().err.strip() == f"error: {tmp_path / 'f.png'}: No space left on device"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]  # no table, no temporary file left


def test_rows_without_a_95_percent_interval_are_ambiguous_however_far_apart():
    # One sample each (a slow kernel the timer's wall-time cap stopped), three samples (a min-to-max
    # range, 75 % sure), and rows that lost their interval columns: none may be called SLOWER.
    assert one([1.00], [1.01])["verdict"] == "AMBIGUOUS"
    assert one([1.00, 1.001, 0.999], [1.05, 1.051, 1.049])["verdict"] == "AMBIGUOUS"
    unknown = dict.fromkeys(["time_ms_ci_low", "time_ms_ci_high", "samples"], np.nan)
    a = pd.DataFrame([timed_row([1.0] * 10) | unknown])
    b = pd.DataFrame([timed_row([1.01] * 10) | unknown])
    (row,) = compare.compare(a, b).itertuples(index=False)
    assert row.verdict == "AMBIGUOUS" and np.isnan(row.ratio_low) and row.ratio == pytest.approx(1.01)
    # Six samples suffice for a 95 % interval: the same gap is then called.
    assert one([1.0, 1.0, 1.0, 1.0, 1.0, 1.0], [1.05] * 6)["verdict"] == "SLOWER"


def test_the_summary_counts_the_configurations_without_a_95_percent_interval():
    a = pd.DataFrame([timed_row([1.0]), timed_row([1.0] * 10, block=512)])
    b = pd.DataFrame([timed_row([1.2]), timed_row([1.0] * 10, block=512)])
    table = compare.compare(a, b)
    lines = compare.summary_lines(table, a, b, names=("A", "B"))
    assert any("fewer than 6 samples): 1" in line for line in lines)
    assert compare.regressions(table).empty  # 20 % apart on one sample each: not a regression
