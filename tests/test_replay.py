"""Replaying samplers against the shipped exhaustive table (tuner.search.tables.replay)."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

from tuner.search.tables.replay import (
    COLUMNS,
    format_table,
    main,
    replay,
    table_domains,
    table_measure,
)
from tuner.search.tables.replay import (
    _share as replay_share,
)

DATA = Path(__file__).parent / "data"
sys.path.insert(0, str(DATA))
from fake_family import OPTIMUM_CFG, OPTIMUM_GBS, PROBLEM, FakeFamily  # noqa: E402

FAMILY = FakeFamily()
TABLE_PATH = DATA / "replay_table.parquet"
FEASIBLE = 156  # 4 x 3 x 13 (unroll, vector_width) pairs with product <= 16


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return pd.read_parquet(TABLE_PATH)


def test_shipped_table_is_the_exhaustive_fake_sweep(table):
    assert len(table) == 192
    assert table["status"].value_counts().to_dict() == {"ok": 140, "infeasible": 36, "wrong_result": 16}
    assert len(FAMILY.space(PROBLEM, table_domains(table, FAMILY))) == FEASIBLE
    # Wrong results carry a bandwidth above the optimum, so ranking them would show.
    assert table["bandwidth_gbs"].max() > OPTIMUM_GBS


def test_replay_reports_one_row_per_sampler_and_budget(table):
    df = replay(table, FAMILY, PROBLEM, samplers=("tpe", "random"), budgets=(8, 4), seeds=range(3))
    assert list(df.columns) == list(COLUMNS)
    assert list(zip(df["sampler"], df["budget"])) == [("tpe", 4), ("tpe", 8), ("random", 4), ("random", 8)]
    assert df["budget_fraction"].tolist() == [4 / FEASIBLE, 8 / FEASIBLE] * 2
    assert (df["seeds"] == 3).all()
    # The table's wrong results run at 9999 GB/s, far above the optimum: a
    # replay that ranked them would report ratios above 1.
    assert ((df["median_ratio"] > 0) & (df["median_ratio"] <= 1)).all()
    assert ((df["min_ratio"] > 0) & (df["min_ratio"] <= df["median_ratio"])).all()
    assert df["within_2pct"].between(0, 1).all()
    assert (df["median_measured"] == df["budget"]).all()
    # More budget never finds less (the smaller budget is a prefix of the run).
    for _, group in df.groupby("sampler"):
        assert group["min_ratio"].is_monotonic_increasing


def test_brute_force_reaches_the_optimum_with_the_whole_table(table):
    df = replay(table, FAMILY, PROBLEM, samplers=("brute_force",), budgets=(FEASIBLE,), seeds=range(2))
    row = df.iloc[0]
    assert row["median_ratio"] == 1.0 and row["min_ratio"] == 1.0 and row["within_2pct"] == 1.0
    assert row["budget_fraction"] == 1.0
    assert row["median_measured"] == FEASIBLE


def test_table_measure_looks_rows_up_and_reports_gaps(table):
    without_optimum = table[
        ~((table["block_size"] == 256) & (table["unroll"] == 4) & (table["vector_width"] == 4) & (table["cache_hint"] == "cg"))
    ]
    measure = table_measure(without_optimum, FAMILY)
    assert measure(OPTIMUM_CFG) == {"status": "launch_error", "error": "not in table"}
    other = measure({**OPTIMUM_CFG, "cache_hint": "none"})
    assert other["status"] == "ok" and other["bandwidth_gbs"] == 885.0
    assert "trial" not in other and "source" not in other
    wrong = measure({**OPTIMUM_CFG, "unroll": 1, "cache_hint": "cs"})
    assert wrong["status"] == "wrong_result"

    # The optimum is now the table's second best, and brute force still gets it.
    df = replay(without_optimum, FAMILY, PROBLEM, samplers=("brute_force",), budgets=(FEASIBLE,), seeds=[0])
    assert df.iloc[0]["median_ratio"] == 1.0


def test_replay_rejects_bad_arguments(table):
    with pytest.raises(ValueError, match=r"sampler must be one of .* got 'annealing'"):
        replay(table, FAMILY, PROBLEM, samplers=("annealing",), budgets=(4,), seeds=[0])
    with pytest.raises(ValueError, match=r"budgets must be >= 1"):
        replay(table, FAMILY, PROBLEM, samplers=("random",), budgets=(0,), seeds=[0])
    with pytest.raises(ValueError, match=r"seeds must not be empty"):
        replay(table, FAMILY, PROBLEM, samplers=("random",), budgets=(4,), seeds=[])
    with pytest.raises(ValueError, match=r"table must hold rows for problem fake-float32-n1048576"):
        replay(table, FAMILY, PROBLEM.__class__("fake", "float32", PROBLEM.n), samplers=("random",), budgets=(4,), seeds=[0])
    failing = table.assign(status="wrong_result")
    with pytest.raises(ValueError, match=r"table must hold an ok row"):
        replay(failing, FAMILY, PROBLEM, samplers=("random",), budgets=(4,), seeds=[0])


def test_format_table_is_aligned_text(table):
    df = replay(table, FAMILY, PROBLEM, samplers=("random",), budgets=(4, 8), seeds=range(2))
    text = format_table(df)
    lines = text.splitlines()
    assert len(lines) == 2 + len(df)
    assert lines[0].split() == list(COLUMNS)
    assert len({len(line) for line in lines}) == 1
    assert lines[2].startswith("random") and "2.6%" in lines[2]


def test_cli_prints_the_table(monkeypatch, capsys):
    from tuner.families import REGISTRY

    monkeypatch.setitem(REGISTRY.families, "fake", FAMILY)
    argv = [str(TABLE_PATH), "--family", "fake", "--dtype", "int32", "--n", str(PROBLEM.n)]
    assert main(argv + ["--samplers", "random,brute_force", "--budgets", "4", "8", "--seeds", "2"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "fake-int32-n1048576: 192 table rows of sweep:fake_exhaustive, 2 seeds"
    assert out.count("random") == 2 and out.count("brute_force") == 2

    with pytest.raises(SystemExit):
        main(argv + ["--samplers", "annealing"])
    assert "sampler must be one of" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["no/such.parquet", *argv[1:]])
    assert "error: no/such.parquet: must be a Parquet file or a folder of them, got no such file or folder" in capsys.readouterr().err


def test_a_whole_dataset_replays_its_largest_source_unless_told(table):
    """A measurements.parquet mixes sources: other sweeps of the problem cover
    other grids, which mixed in would make the table a patchwork."""
    from tuner.search.tables.replay import problem_rows

    ladder = table.head(20).assign(source="sweep:ladder")
    mixed = pd.concat([table, ladder], ignore_index=True)
    assert set(problem_rows(mixed, PROBLEM)["source"]) == {"sweep:fake_exhaustive"}
    assert len(problem_rows(mixed, PROBLEM, "sweep:ladder")) == 20
    with pytest.raises(ValueError, match=r"--source must be one of \['sweep:fake_exhaustive', 'sweep:ladder'\]"):
        problem_rows(mixed, PROBLEM, "sweep:nothing")
    with pytest.raises(ValueError, match=r"table values of block_size must be one of \[64, 128, 256, 512\], got \[7\]"):
        table_domains(table.assign(block_size=7), FAMILY)


def test_the_shipped_reference_dataset_replays(monkeypatch):
    """The shipped H200 measurements: the reduction's ladder sweep runs with
    grid_blocks_per_sm 0 (one pass, outside the study's default domain but
    accepted by the parameter's rule)."""
    from tuner.data.results import read
    from tuner.families import REGISTRY, Problem
    from tuner.search.tables.replay import problem_rows

    dataset = read(Path(__file__).parents[1] / "results" / "reference" / "nvidia-h200" / "measurements.parquet")
    reduce, problem = REGISTRY["reduce"], Problem("reduce", "int32", 1 << 28)
    assert list(problem_rows(dataset, problem)["source"].unique()) == ["sweep:reduce_space"]
    assert table_domains(problem_rows(dataset, problem, "sweep:reduce_ladder"), reduce)["grid_blocks_per_sm"] == [0]
    df = replay(dataset, reduce, problem, samplers=("random",), budgets=(8,), seeds=[0], source="sweep:reduce_ladder")
    assert df.iloc[0]["median_measured"] == 8 and 0 < df.iloc[0]["median_ratio"] <= 1


def test_default_samplers_need_no_pytorch():
    from tuner.search.tables.replay import DEFAULT_SAMPLERS

    assert "gp" not in DEFAULT_SAMPLERS and {"tpe", "random"} <= set(DEFAULT_SAMPLERS)


def _community_table(tmp_path: Path) -> Path:
    """A Kernel Tuner cache of a 6 x 6 grid with a T1 restriction (a + b <= 8)
    beside it, the optimum at a = 4, b = 4 and one configuration that failed
    to compile."""
    import json

    cache = {}
    for a in range(6):
        for b in range(6):
            if a + b > 8:
                cache[f"{a},{b}"] = {"a": a, "b": b, "time": "InvalidConfig"}
            else:
                cache[f"{a},{b}"] = {"a": a, "b": b, "time": 1.0 + abs(a - 4) + abs(b - 4)}
    cache["5,3"]["time"] = "CompilationFailedConfig"
    path = tmp_path / "cache.json"
    path.write_text(json.dumps({"tune_params": {"a": list(range(6)), "b": list(range(6))}, "objective": "time", "cache": cache}))
    (tmp_path / "T1.json").write_text(json.dumps({"ConfigurationSpace": {
        "TuningParameters": [{"Name": "a", "Values": "[0, 1, 2, 3, 4, 5]"}, {"Name": "b", "Values": "[0, 1, 2, 3, 4, 5]"}],
        "Conditions": [{"Expression": "a + b <= 8"}]}}))  # fmt: skip
    return path


def test_a_budget_of_a_tiny_share_of_the_space_is_shown_with_its_digits():
    frame = pd.DataFrame([{c: 0 for c in COLUMNS} | {"sampler": "random", "budget_fraction": 50 / 116928},
                          {c: 0 for c in COLUMNS} | {"sampler": "random", "budget_fraction": 0.152}])  # fmt: skip
    text = format_table(frame)
    assert " 0.043%" in text and " 15.2%" in text
    assert replay_share(1 / 2_000_000) == "0.000050%" and replay_share(0.00042) == "0.042%"


def test_the_cli_reads_a_table_whose_suffix_is_upper_case(tmp_path, capsys):
    path = _community_table(tmp_path)
    upper = path.rename(tmp_path / "CACHE.JSON")
    assert main([str(upper), "--samplers", "random", "--budgets", "5", "--seeds", "1"]) == 0
    assert capsys.readouterr().out.startswith(f"{tmp_path.name}/CACHE: 33 configurations, 2 parameters, 1 restrictions")


def test_the_cli_replays_another_tuners_table_without_a_family(tmp_path, capsys):
    path = _community_table(tmp_path)
    assert main([str(path), "--samplers", "ordinal_global", "random", "--budgets", "5", "33", "--seeds", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"{tmp_path.name}/cache: 33 configurations, 2 parameters, 1 restrictions, ranked by time (lower is better), 3 seeds"
    rows = {(r.split()[0], int(r.split()[1])): r.split() for r in lines[3:]}
    assert set(rows) == {("ordinal_global", 5), ("ordinal_global", 33), ("random", 5), ("random", 33)}
    # The whole space (33 of 36: the restriction leaves out 3) is measured by 33 evaluations, the failed
    # configuration among them: every seed finds the optimum.
    for sampler in ("ordinal_global", "random"):
        fraction, median, low, within, measured = rows[(sampler, 33)][2:7]
        assert (fraction, median, low, within, measured) == ("100.0%", "1.000", "1.000", "100%", "33")
        assert rows[(sampler, 5)][2] == "15.2%" and rows[(sampler, 5)][6] == "5"  # 5 of the 33 feasible
        assert 0 < float(rows[(sampler, 5)][4]) <= float(rows[(sampler, 5)][3]) <= 1  # min <= median <= optimum


def test_a_budget_beyond_the_space_is_cut_to_its_size(tmp_path, capsys):
    path = _community_table(tmp_path)
    assert main([str(path), "--samplers", "random", "--budgets", "5", "100", "33", "--seeds", "2"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[3:]]
    assert [(r[1], r[2], r[6]) for r in rows] == [("5", "15.2%", "5"), ("33", "100.0%", "33")]


def test_the_cli_says_which_form_needs_which_arguments(tmp_path, capsys):
    path = _community_table(tmp_path)
    with pytest.raises(SystemExit):
        main([str(path), "--family", "reduce"])
    assert f"--family name a Parquet table's problem; {path} is its own space, got them" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([str(TABLE_PATH), "--family", "fake"])
    assert "a Parquet table needs --dtype --n (which problem of it to replay)" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([str(TABLE_PATH), "--t1", str(tmp_path / "T1.json")])
    assert f"--t1 describes a Kernel Tuner cache's or T4 file's space; {TABLE_PATH} is a Parquet table" in capsys.readouterr().err
    (tmp_path / "T1.json").write_text('{"ConfigurationSpace": {"TuningParameters": [{"Name": "a", "Values": "[0, 1]"}]}}')
    with pytest.raises(SystemExit):
        main([str(path)])
    assert f"{path}: parameters must be those of {tmp_path / 'T1.json'} ['a'], got ['a', 'b']" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([str(path), "--seeds", "100000000000"])  # one study a seed, listed before any runs: refused, not a MemoryError
    assert "--seeds must be from 1 to 10000, got 100000000000" in capsys.readouterr().err


def test_a_table_is_replayed_whatever_its_parameters_are_named_and_whichever_it_leaves_out(tmp_path, capsys):
    import json

    # Parameters named as results columns (n, status, trial) are the table's own: the replay keeps
    # them apart from the rows' columns, and every seed measures the whole space.
    clash = tmp_path / "clash.json"
    params = {"n": [1, 2, 3], "status": [0, 1], "trial": [5]}
    cache = {f"{n},{s},5": {"n": n, "status": s, "trial": 5, "time": 1.0 + abs(n - 2) + s} for n in (1, 2, 3) for s in (0, 1)}
    clash.write_text(json.dumps({"tune_params": params, "objective": "time", "cache": cache}))
    assert main([str(clash), "--samplers", "ordinal_global", "random", "--budgets", "1", "6", "--seeds", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"{tmp_path.name}/clash: 6 configurations, 3 parameters")
    rows = {(r.split()[0], int(r.split()[1])): r.split() for r in lines[3:]}
    for sampler in ("ordinal_global", "random"):
        assert rows[(sampler, 6)][2:7] == ["100.0%", "1.000", "1.000", "100%", "6"]
        assert 0 < float(rows[(sampler, 1)][4]) <= float(rows[(sampler, 1)][3]) <= 1  # min <= median <= optimum
    # A T4 result that leaves a parameter out (our writer leaves out empty ones) has no value there.
    result = {"invalidity": "correct", "correctness": 1, "objectives": ["time"]}
    gaps = tmp_path / "gaps.json"
    gaps.write_text(json.dumps({"results": [result | {"configuration": {"a": 1, "b": 1}, "measurements": [{"name": "time", "value": 2.0}]},
                                            result | {"configuration": {"a": 2}, "measurements": [{"name": "time", "value": 1.0}]}]}))  # fmt: skip
    assert main([str(gaps), "--samplers", "random", "--budgets", "2", "--seeds", "1"]) == 0
    assert capsys.readouterr().out.splitlines()[3].split()[2:7] == ["100.0%", "1.000", "1.000", "100%", "2"]


def test_a_table_with_nothing_to_search_is_refused_in_one_line(tmp_path, capsys):
    import json

    lone = tmp_path / "lone.json"
    lone.write_text(json.dumps({"tune_params": {"a": [1, 2]}, "objective": "time",
                                "cache": {"1": {"a": 1, "time": 2.0}, "2": {"a": 2, "time": "RuntimeFailedConfig"}}}))  # fmt: skip
    with pytest.raises(SystemExit):
        main([str(lone)])
    err = capsys.readouterr().err
    assert f"{lone}: a table must hold correct configurations of different time (something to search), got 1 correct" in err


def test_a_sampler_that_sees_its_budget_is_replayed_once_per_budget(table):
    # 2 trials are under 2 % of the 156 feasible configurations (ordinal_budget runs ordinal), 40 are not.
    df = replay(table, FAMILY, PROBLEM, samplers=("ordinal_budget", "ordinal", "ordinal_global"), budgets=(2, 40), seeds=range(4))
    figures = {(r.sampler, r.budget): r[2:] for r in df.itertuples(index=False)}
    assert figures[("ordinal", 2)] != figures[("ordinal_global", 2)]  # or the test could not tell which ran
    assert figures[("ordinal_budget", 2)] == figures[("ordinal", 2)]
    assert figures[("ordinal_budget", 40)] == figures[("ordinal_global", 40)]


def test_a_family_of_ones_own_replays_from_its_file_and_a_bad_file_is_one_line(capsys):
    """``--family-path`` registers a config's family_paths file, as the tuner's commands take it."""
    saxpy = Path(__file__).resolve().parents[1] / "examples" / "saxpy"
    table = str(saxpy / "reference" / "nvidia-h100-80gb-hbm3" / "measurements.parquet")
    problem = ["--family", "saxpy", "--dtype", "float32", "--n", str(1 << 26)]
    from tuner.families import REGISTRY

    if "saxpy" not in REGISTRY.names():  # unless another test of this process registered it already
        with pytest.raises(SystemExit):
            main([table, *problem])  # not a shipped family: refused without its file
        assert "--family must be one of" in capsys.readouterr().err
    assert main([table, *problem, "--family-path", str(saxpy / "saxpy.py"), "--samplers", "random", "--budgets", "5", "225",
                 "--seeds", "2"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "sweep:saxpy_space" in out and "random" in out
    with pytest.raises(SystemExit):
        main([table, *problem, "--family-path", str(saxpy / "saxpy.cu")])
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--family-path: family_paths: must name Python files" in err, err
