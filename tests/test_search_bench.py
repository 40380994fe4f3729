"""The search benchmark (benchmarks/search.py) on a small subset: the shipped
H200 offset = 11 subspace, a few seeds."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import sys
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import search  # noqa: E402
from search_rivals import Case, kt_cache, run_auto, run_kt, run_ours, run_random  # noqa: E402

from tuner.families import REGISTRY  # noqa: E402
from tuner.families.base import Problem  # noqa: E402


@pytest.fixture(scope="module")
def case() -> Case:
    return search.load_case("reduce_space_offset11")


def test_the_offset11_subspace_is_the_shipped_hard_half(case):
    assert case.size == 768
    assert sum(v >= 0.99 * case.optimum for v in case.lookup.values()) == 8
    assert [case.budget(f) for f in search.DEFAULT_FRACTIONS] == [19, 38, 77]
    assert case.ordered_domains("descending")["block_size"] == [1024, 512, 256, 128]


def test_an_incomplete_table_is_refused(case):
    with pytest.raises(ValueError, match="must hold every feasible configuration, 1 missing"):
        Case.from_table("cut", case.rows.iloc[1:], REGISTRY["reduce"], Problem("reduce", "int32", 268435456))


def test_runs_count_distinct_configurations(case):
    values = run_random(case, 3, 38)
    assert len(values) == 38 and set(values) <= set(case.lookup.values())
    ours = run_ours(case, "ordinal", "descending", 0, 38)
    assert len(ours) == 38
    assert max(ours) >= 0.99 * case.optimum


def test_random_expectation_and_summary_on_a_known_table():
    tiny = Case("tiny", REGISTRY["reduce"], Problem("reduce", "int32", 1), pd.DataFrame(), {}, {"a": 1.0, "b": 2.0, "c": 4.0})
    curve = search.random_expected_best(tiny, 3)
    assert curve == pytest.approx([7 / 3, (2 + 4 + 4) / 3, 4.0])
    runs = [[1.0, 4.0, 2.0], [2.0, 1.0, 4.0], [1.0, 2.0, 4.0]]
    row = search.summarise(tiny, runs, 2, curve)
    assert row["within_1pct"] == pytest.approx(1 / 3)
    assert row["median_first_1pct"] == math.inf  # two of three seeds miss within 2 evaluations
    assert search.summarise(tiny, runs, 3, curve)["median_first_1pct"] == 3
    # The best strategy possible (the optimum first) scores 1, random's expectation 0.
    assert search.summarise(tiny, [[4.0, 1.0, 2.0]], 3, curve)["score"] == pytest.approx(1.0)


def test_kernel_tuner_strategies_replay_the_table(case, tmp_path):
    pytest.importorskip("kernel_tuner")
    cache = kt_cache(case, "ascending", tmp_path)
    stored = json.loads(cache[0].read_text())
    assert len(stored["cache"]) == case.size and "offset" not in stored["tune_params"]  # fixed parameters left out
    values = run_kt(case, "basinhopping", cache, 0, 19)
    assert 0 < len(values) <= 19 and set(values) <= set(case.lookup.values())
    assert values == run_kt(case, "basinhopping", cache, 0, 19)  # seeded


def test_kernel_tuner_replays_a_table_that_leaves_out_what_its_restrictions_allow(tmp_path):
    """A hub cache's InvalidConfig entries are left out of a replay table, but Kernel
    Tuner's simulation needs every configuration its restrictions allow: they go
    back into its cache as InvalidConfig, and none is a result of its run."""
    pytest.importorskip("kernel_tuner")
    from tuner.search.tables.community import load_table

    params = {"x": [1, 2, 3, 4, 5, 6], "y": [1, 2, 4, 8]}
    (tmp_path / "T1.json").write_text(json.dumps({"ConfigurationSpace": {
        "TuningParameters": [{"Name": n, "Values": str(v)} for n, v in params.items()],
        "Conditions": [{"Expression": "x * y <= 24"}]}}))  # fmt: skip
    cache = {}
    for x in params["x"]:
        for y in params["y"]:
            if x * y <= 24:
                time = "InvalidConfig" if (x + y) % 3 == 0 else "RuntimeFailedConfig" if x == y else 1.0 + abs(x * y - 12)
                cache[f"{x},{y}"] = {"x": x, "y": y, "time": time}
    (tmp_path / "gpu.json").write_text(json.dumps({"tune_params": params, "objective": "time", "cache": cache}))
    case = Case.from_space_table(load_table(tmp_path / "gpu.json"))
    invalid = sum(entry["time"] == "InvalidConfig" for entry in cache.values())
    assert invalid and case.size == len(cache) - invalid
    path, kt_params = kt_cache(case, "ascending", tmp_path)
    assert len(json.loads(path.read_text())["cache"]) == len(cache)
    for strategy in ("greedy_ils", "genetic_algorithm"):
        values = run_kt(case, strategy, (path, kt_params), 0, case.size)
        assert 0 < len(values) <= case.size and set(values) <= set(case.lookup.values())


def test_kernel_tuners_cache_keys_are_its_own_where_a_parameter_mixes_whole_and_fractional_values(tmp_path):
    """Read through pandas, a column of 0, 0.5 and 1 is floats; Kernel Tuner's keys say "0"
    and "1": a key written "0.0" would leave the configuration out of its cache, and the
    completion above would take it for an InvalidConfig."""
    pytest.importorskip("kernel_tuner")
    from tuner.search.tables.community import load_table

    params = {"x": [0, 0.5, 1], "y": [1, 2]}
    (tmp_path / "T1.json").write_text(json.dumps({"ConfigurationSpace": {
        "TuningParameters": [{"Name": n, "Values": str(v)} for n, v in params.items()],
        "Conditions": [{"Expression": "x * y <= 2"}]}}))  # fmt: skip
    cache = {f"{x},{y}": {"x": x, "y": y, "time": 1.0 + x + y} for x in params["x"] for y in params["y"]}
    (tmp_path / "gpu.json").write_text(json.dumps({"tune_params": params, "objective": "time", "cache": cache}))
    case = Case.from_space_table(load_table(tmp_path / "gpu.json"))
    path, kt_params = kt_cache(case, "ascending", tmp_path)
    stored = json.loads(path.read_text())["cache"]
    assert sorted(stored) == sorted(cache) and all(entry["time"] != "InvalidConfig" for entry in stored.values())
    assert sorted(run_kt(case, "greedy_ils", (path, kt_params), 0, 6)) == sorted(case.lookup.values())


def test_kernel_tuners_cache_holds_a_table_without_restrictions_and_its_exact_values(tmp_path):
    """Without a T1 the product is Kernel Tuner's space: the configurations a cache leaves out
    (its InvalidConfig entries) come back as InvalidConfig; a whole number past a float's
    precision keeps its digits; values whose text is alike cannot be told apart in its keys."""
    pytest.importorskip("kernel_tuner")
    from tuner.search.tables.community import load_table

    big = 2**60 + 1
    params = {"x": [1, 0.5, big], "y": [1, 2]}
    cache = {f"{x},{y}": {"x": x, "y": y, "time": "InvalidConfig" if (x, y) == (1, 2) else 1.0 + y} for x in params["x"] for y in params["y"]}
    (tmp_path / "gpu.json").write_text(json.dumps({"tune_params": params, "objective": "time", "cache": cache}))
    case = Case.from_space_table(load_table(tmp_path / "gpu.json"))
    path, kt_params = kt_cache(case, "ascending", tmp_path)
    stored = json.loads(path.read_text())["cache"]
    assert sorted(stored) == sorted(cache) and stored["1,2"]["time"] == "InvalidConfig" and stored[f"{big},1"]["time"] == 2.0
    # The InvalidConfig costs Kernel Tuner one of its 6 evaluations, as on the hub's own cache.
    assert sorted(run_kt(case, "greedy_ils", (path, kt_params), 0, 6)) == sorted(case.lookup.values())
    (tmp_path / "gpu.json").write_text(json.dumps({"tune_params": {"x": [1, "1"]}, "objective": "time",
                                                   "cache": {"a": {"x": 1, "time": 1.0}, "b": {"x": "1", "time": 2.0}}}))  # fmt: skip
    with pytest.raises(ValueError, match=r"the values of x must read apart without commas, got \[1, '1'\]"):
        kt_cache(Case.from_space_table(load_table(tmp_path / "gpu.json")), "ascending", tmp_path)


def test_benchmark_rows_and_files(case, tmp_path):
    strategies = ["random", "ordinal_global"]  # the default
    try:
        import kernel_tuner  # noqa: F401

        strategies.append("greedy_ils")  # a Kernel Tuner strategy; basinhopping (tested alone above) costs 5 s more here
    except ImportError:
        pass
    assert search.main(["--tables", "reduce_space_offset11", "--seeds", "2", "--jobs", "1", "--strategies", *strategies,
                        "--out", str(tmp_path)]) == 0  # fmt: skip
    rows = json.loads((tmp_path / "search-benchmark.json").read_text())["rows"]
    assert {(r["order"], r["strategy"], r["budget"]) for r in rows} == {
        (o, s, b) for o in ("ascending", "descending") for s in strategies for b in (19, 38, 77)
    }
    ordinal = {(r["order"], r["budget"]): r for r in rows if r["strategy"] == "ordinal_global"}
    random = {(r["order"], r["budget"]): r for r in rows if r["strategy"] == "random"}
    for key, row in ordinal.items():
        assert row["within_1pct"] >= random[key]["within_1pct"]
        assert row["median_ratio"] <= 1.0
    assert all(ordinal[(o, 38)]["within_1pct"] == 1.0 for o in ("ascending", "descending"))
    if "greedy_ils" in strategies:
        assert all("behind_p" in r and 0 <= r["behind_p"] <= 1 for r in rows)
    text = (tmp_path / "search-benchmark.txt").read_text()
    assert "reduce_space_offset11 (ascending values): 768 configurations" in text


def test_a_capped_sampler_has_rows_only_for_budgets_within_its_cap(case, tmp_path, capsys):
    argv = ["--tables", "reduce_space_offset11", "--seeds", "1", "--jobs", "1", "--orders", "ascending", "--no-warm",
            "--strategies", "tpe", "random", "--out", str(tmp_path)]  # fmt: skip
    assert search.main([*argv, "--cap", "tpe=20"]) == 0
    rows = json.loads((tmp_path / "search-benchmark.json").read_text())["rows"]
    assert sorted((r["strategy"], r["budget"]) for r in rows) == [("random", 19), ("random", 38), ("random", 77), ("tpe", 19)]
    with pytest.raises(SystemExit):
        search.main([*argv, "--cap", "tpe=many"])
    assert "--cap must be STRATEGY=TRIALS (an integer), got ['tpe=many']" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--jobs", "0"], "--jobs must be >= 1, got 0"),
        (["--seeds", "100000000000"], "--seeds must be from 1 to 10000, got 100000000000"),
        (["--strategies", "ordinal_global", "nosuch"], "--strategies must be of ['random', 'ordinal_global', "),
        (["--cap", "tpe=-1"], "--cap must be STRATEGY=TRIALS, a strategy of --strategies' choices and trials >= 0, got {'tpe': -1}"),
        (["--cap", "nosuch=5"], "got {'nosuch': 5}"),
        (["--hub", "{tmp}/absent"], "--hub {tmp}/absent: must be a table file or a folder of them, and does not exist"),
        (["--hub", "{tmp}/bad.json"], "{tmp}/bad.json: cache entry '1' must be an object, got int"),
        (["--merge", "{tmp}/absent.json"], "--merge {tmp}/absent.json: must be a search benchmark's NAME.json, got FileNotFoundError"),
        (["--merge", "{tmp}/rows.json"], "--merge {tmp}/rows.json: every row must have ['table', 'order', 'strategy', 'budget', "),
        (["--merge", "{tmp}/null.json"], "--merge {tmp}/null.json: rows must be a list, got NoneType"),
    ],
)  # fmt: skip
def test_bad_arguments_and_damaged_inputs_stop_in_one_line_before_any_run(tmp_path, capsys, monkeypatch, extra, message):
    (tmp_path / "bad.json").write_text(json.dumps({"tune_params": {"x": [1]}, "cache": {"1": 5}}))
    (tmp_path / "rows.json").write_text(json.dumps({"rows": [{"table": 1, "order": "ascending", "strategy": "random", "budget": 5}]}))
    (tmp_path / "null.json").write_text(json.dumps({"rows": None}))
    monkeypatch.setattr(search, "benchmark", lambda *a, **k: pytest.fail("ran before its arguments were checked"))
    argv = ["--tables", "reduce_space_offset11", "--seeds", "1", "--strategies", "random", "--out", str(tmp_path / "out")]
    with pytest.raises(SystemExit):
        search.main([*argv, *(a.replace("{tmp}", str(tmp_path)) for a in extra)])
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert ": error: " in error and message.replace("{tmp}", str(tmp_path)) in error
    assert not (tmp_path / "out").exists()


HUB = REPO.parent / "shared" / "benchmark_hub" / "convolution_milo"
needs_hub = pytest.mark.skipif(not (HUB / "A100.json.gz").exists(), reason="the benchmark hub's files are not here")


@needs_hub
def test_the_benchmark_runs_on_a_community_table(tmp_path):
    """One space of the benchmark hub of the Auto-Tuning Association (MIT
    licence): 4,362 configurations, 161 failed, one within 1 % of the optimum."""
    pytest.importorskip("kernel_tuner")
    pytest.importorskip("autotuning_methodology")
    assert search.main(["--tables", "--hub", str(HUB / "A100.json.gz"), "--seeds", "2", "--jobs", "1", "--fractions", "--fixed", "40",
                        "--strategies", "ordinal_global", "genetic_algorithm", "--orders", "ascending",
                        "--out", str(tmp_path), "--name", "hub"]) == 0  # fmt: skip
    result = json.loads((tmp_path / "hub.json").read_text())
    rows = result["rows"]
    assert {(r["table"], r["strategy"], r["budget"]) for r in rows} == {
        ("convolution_milo/A100", s, 40) for s in ("ordinal_global", "genetic_algorithm")
    }
    assert all(r["space"] == 4362 and r["near_1pct"] == 1 and -1 <= r["score_m"] <= 1 for r in rows)
    assert [e["strategy"] for e in result["aggregate"]] and all(e["all"] is not None for e in result["aggregate"])
    text = (tmp_path / "hub.txt").read_text()
    assert text.startswith("python benchmarks/search.py --tables --hub") and " s wall" in text.splitlines()[1]
    assert "convolution_milo/A100 (ascending values): 4362 configurations, optimum 0.5536 ms, 1 within 1 %" in text
    assert "Aggregate over the community tables" in text


@needs_hub
def test_our_score_is_the_methodologys_on_the_hubs_t4_file(tmp_path):
    """The baseline our benchmark hands the methodology's code is the one its
    own loader makes of the hub's T4 file of the same space, so the scores are
    equal; and our exact expectation of random search is close to its curve."""
    statistics_module = pytest.importorskip("autotuning_methodology.searchspace_statistics")
    from tuner.search.tables.community import load_table

    case = Case.from_space_table(load_table(HUB / "A100.json.gz"))
    import gzip

    plain = tmp_path / "A100_T4.json"  # their loader reads plain JSON only
    plain.write_bytes(gzip.decompress((HUB / "A100_T4.json.gz").read_bytes()))
    theirs = statistics_module.SearchspaceStatistics("convolution", "A100", True, ["compilation"], ["time"], plain)
    ours = search._SearchspaceStats(case)
    assert ours.objective_performances_total_sorted == pytest.approx(theirs.objective_performances_total_sorted)
    runs = [run_random(case, seed, 60) for seed in range(5)] + [run_ours(case, "ordinal", "ascending", 0, 60)]
    assert search.methodology_score(case, runs, 60) == pytest.approx(search.methodology_score(case, runs, 60, theirs))
    # The strategy that finds the optimum at once scores 1 on their scale too.
    assert search.methodology_score(case, [[case.optimum] * 60], 60) == pytest.approx(1.0)
    from autotuning_methodology.baseline import RandomSearchCalculatedBaseline

    fevals = np.arange(1, 61)
    their_random = RandomSearchCalculatedBaseline(theirs).get_curve(fevals, "fevals")
    our_random = 1000.0 / np.array(search.random_expected_best(case, 60))
    # Theirs is an order statistic's expected position among valid times; ours the exact
    # expectation with the failed configurations drawn too: within 15 % over the curve.
    assert np.all(np.abs(our_random / their_random - 1) < 0.15)


@needs_hub
def test_a_hub_folder_gives_each_gpus_table_once():
    # T1.json describes the space; A100_T4 is the A100 cache's space again.
    assert search.hub_files([str(HUB)]) == {f"convolution_milo/{g}": str(HUB / f"{g}.json.gz") for g in ("A100", "A4000", "A6000")}
    assert search.hub_files([str(HUB / "A100_T4.json.gz")]) == {"convolution_milo/A100_T4": str(HUB / "A100_T4.json.gz")}


def test_a_hub_folder_leaves_out_metadata_and_a_gpus_results_beside_its_cache(tmp_path):
    """The hub's folders also hold Kernel Tuner's split T4 output (GPU-metadata and
    GPU-results, the GPU's name in either case) beside the GPU's cache."""
    names = ["T1.json", "W7800.json.gz", "W7800-metadata.json.gz", "W7800-results.json.gz", "W7800_T4.json.gz",
             "A6000.json.gz", "a6000-metadata.json.gz", "a6000-results.json.gz", "MI250X_T4.json.gz", "MI250X-results.json.gz",
             "W6600-results.json"]
    for name in names:
        (tmp_path / name).write_text("{}")
    folder = tmp_path.name
    assert search.hub_files([str(tmp_path)]) == {
        f"{folder}/{stem}": str(tmp_path / name) for stem, name in
        [("A6000", "A6000.json.gz"), ("MI250X_T4", "MI250X_T4.json.gz"), ("W6600-results", "W6600-results.json"),
         ("W7800", "W7800.json.gz")]}  # fmt: skip
    # A file named directly is read, whatever its name says.
    assert search.hub_files([str(tmp_path / "W7800-results.json.gz")]) == {f"{folder}/W7800-results": str(tmp_path / "W7800-results.json.gz")}


def test_a_hub_folders_table_names_keep_their_dots_and_never_collide(tmp_path):
    (tmp_path / "old.json").mkdir()  # a folder, not a table
    for name in ["t1.json", "v1.2.json", "v1.2_T4.json", "X-results.json", "X-results_T4.json", "notes.txt", "a.json.bak"]:
        (tmp_path / name).write_text("{}")
    folder = tmp_path.name
    # One suffix is a GPU's T4 or results file: X-results_T4 is X-results's T4; X-results has no X beside it.
    assert search.hub_files([str(tmp_path)]) == {f"{folder}/v1.2": str(tmp_path / "v1.2.json"),
                                                 f"{folder}/X-results": str(tmp_path / "X-results.json")}  # fmt: skip
    # A folder and a file of it name one table once; a hidden file (macOS's ._ files) is none.
    (tmp_path / "._v1.2.json").write_bytes(b"\x00\x05")
    assert search.hub_files([str(tmp_path), str(tmp_path / "v1.2.json")])[f"{folder}/v1.2"] == str(tmp_path / "v1.2.json")
    (tmp_path / "v1.2.json.gz").write_text("{}")
    with pytest.raises(ValueError, match=rf"two tables would be named {folder}/v1.2: .*v1.2.json and .*v1.2.json.gz"):
        search.hub_files([str(tmp_path)])


def test_a_hub_table_named_from_its_folder_is_labelled_by_the_folders_name(tmp_path, monkeypatch):
    (tmp_path / "conv").mkdir()
    (tmp_path / "conv" / "A100.json").write_text("{}")
    monkeypatch.chdir(tmp_path / "conv")
    assert search.hub_files(["."]) == {"conv/A100": "A100.json"}


def test_the_default_strategies_are_those_whose_packages_are_installed(monkeypatch, tmp_path):
    """Without ``--strategies`` the benchmark runs every strategy it can: the GP sampler only
    where PyTorch imports, so a machine without it runs the rest instead of failing."""
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    assert "gp" not in search.installed(search.OURS) and "ordinal_global" in search.installed(search.OURS)
    planned = []
    monkeypatch.setattr(search, "benchmark", lambda names, seeds, strategies, *a, **k: planned.append(strategies) or ([], []))
    assert search.main(["--tables", "reduce_space_offset11", "--seeds", "1", "--out", str(tmp_path)]) == 0
    assert planned == [["random", *[s for s in search.OURS if s != "gp"], *search.KT_STRATEGIES]]
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object())
    assert search.installed(search.OURS) == list(search.OURS)


def test_long_runs_are_not_chunked_onto_one_worker():
    assert search.chunk_size(50, 64) == 1  # 50 GP runs on 64 cores: one each
    assert search.chunk_size(4000, 2) == 500  # thousands of short runs: few round trips
    assert search.chunk_size(3, None) == 1


def test_budgets_are_fractions_and_evaluations_within_the_space(case):
    both = search.Budgets((0.05,), (50, 1000))
    assert both.of(case) == [38, 50]  # 1000 evaluations exceed the 768 configurations
    assert both.labels(case, 38) == ["5.0%"] and both.labels(case, 50) == ["50 evaluations"]
    assert search.Budgets().of(case) == [19, 38, 77]


def test_the_default_strategies_leave_out_kernel_tuners_where_it_is_not_installed(tmp_path, monkeypatch):
    ran = {}
    monkeypatch.setattr(search, "_imports", lambda module: module != "kernel_tuner")
    monkeypatch.setattr(search, "benchmark", lambda names, seeds, strategies, *a, **k: ran.setdefault("strategies", strategies) and ([], []))
    assert search.main(["--tables", "reduce_space_offset11", "--seeds", "1", "--out", str(tmp_path)]) == 0
    assert "random" in ran["strategies"] and "ordinal_global" in ran["strategies"]
    assert not set(ran["strategies"]) & set(search.KT_STRATEGIES)


def _stand_in_registry(tmp_path: Path) -> tuple[Path, Path]:
    """A local checkout of OptunaHub's registry whose samplers/auto_sampler is a
    RandomSampler that notes every seed it is built with (in the worker processes
    too), and that file of seeds."""
    seeds = tmp_path / "seeds.txt"
    package = tmp_path / "registry" / "package" / "samplers" / "auto_sampler"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(f"""
import optuna


class AutoSampler(optuna.samplers.RandomSampler):
    def __init__(self, *, seed=None):
        with open({str(seeds)!r}, "a") as noted:
            noted.write(f"{{seed}}\\n")
        super().__init__(seed=seed)
""")
    return tmp_path / "registry", seeds


def test_auto_replays_a_case_through_the_autosampler_of_a_local_registry(case, tmp_path):
    """``--optunahub-registry`` reaches the worker processes: each run builds the
    registry's AutoSampler with its seed (GitHub's, or none here, were it ignored)."""
    pytest.importorskip("optunahub")
    import optuna

    registry, seeds = _stand_in_registry(tmp_path)
    assert search.main(["--tables", "reduce_space_offset11", "--seeds", "2", "--jobs", "1", "--orders", "ascending", "--no-warm",
                        "--fractions", "0.025", "--strategies", "auto", "--optunahub-registry", str(registry),
                        "--out", str(tmp_path / "out")]) == 0  # fmt: skip
    rows = json.loads((tmp_path / "out" / "search-benchmark.json").read_text())["rows"]
    assert [(r["strategy"], r["budget"], r["seeds"]) for r in rows] == [("auto", 19, 2)]
    assert sorted(seeds.read_text().split()) == ["0", "1"]
    # A run is the study loop's with that sampler and seed.
    found = run_auto(case, "ascending", 3, 19, str(registry))
    assert len(found) == 19 and found == run_ours(case, optuna.samplers.RandomSampler(seed=3), "ascending", 3, 19)


def test_a_registry_without_the_autosampler_stops_in_one_line_before_any_run(tmp_path, capsys, monkeypatch):
    pytest.importorskip("optunahub")
    (tmp_path / "registry" / "package" / "samplers").mkdir(parents=True)
    monkeypatch.setattr(search, "benchmark", lambda *a, **k: pytest.fail("ran before its arguments were checked"))
    with pytest.raises(SystemExit):
        search.main(["--tables", "reduce_space_offset11", "--seeds", "1", "--strategies", "auto",
                     "--optunahub-registry", str(tmp_path / "registry"), "--out", str(tmp_path / "out")])  # fmt: skip
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.endswith(f": error: --optunahub-registry {tmp_path / 'registry'}: must be a checkout of OptunaHub's registry "
                          "holding package/samplers/auto_sampler/__init__.py, which is missing")  # fmt: skip
    assert not (tmp_path / "out").exists()


def test_auto_needs_optunahub_and_is_no_default(monkeypatch, tmp_path, capsys):
    """Without optunahub, naming auto stops in one line; by default it is not run
    (optunahub fetches its code from GitHub, which many machines cannot reach)."""
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "optunahub" else real(name, *a))
    assert search.needs("auto") == ["optunahub"]
    monkeypatch.setattr(search, "benchmark", lambda *a, **k: pytest.fail("ran before its arguments were checked"))
    with pytest.raises(SystemExit):
        search.main(["--tables", "reduce_space_offset11", "--seeds", "1", "--strategies", "auto", "--out", str(tmp_path)])
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(
        ": error: --strategies auto needs ['optunahub'], which do not import here")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object())
    assert search.needs("auto") == [] and "auto" not in search.OURS + search.KT_STRATEGIES


def test_a_registry_without_auto_among_the_strategies_stops_in_one_line(tmp_path, capsys, monkeypatch):
    """A registry given for a run that never uses it is a mistake (auto left out
    of --strategies), not something to pass over in silence."""
    monkeypatch.setattr(search, "benchmark", lambda *a, **k: pytest.fail("ran before its arguments were checked"))
    with pytest.raises(SystemExit):
        search.main(["--tables", "reduce_space_offset11", "--seeds", "1", "--strategies", "ordinal_global", "random",
                     "--optunahub-registry", str(tmp_path), "--out", str(tmp_path / "out")])  # fmt: skip
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(
        f": error: --optunahub-registry {tmp_path}: only for --strategies auto, which must be named, got ['ordinal_global', 'random']")
    assert not (tmp_path / "out").exists()


# Bad options and damaged inputs: one line naming the option or file, the rule and the value, before any run;
# no traceback, no partial output file, nothing written outside --out.


def _kt_table(path: Path, times: list, higher_is_better: bool = False, objective: str = "time") -> Path:
    """A Kernel Tuner cache of one parameter, a, whose configuration i has objective times[i]."""
    document = {"tune_params": {"a": list(range(len(times)))}, "objective": objective,
                "cache": {str(i): {"a": i, objective: t} for i, t in enumerate(times)}}  # fmt: skip
    if higher_is_better:
        document["objective_higher_is_better"] = True
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document))
    return path


def _stops(capsys, monkeypatch, argv: list[str]) -> str:
    """The one line main stops with, before any run (benchmark is never called)."""
    monkeypatch.setattr(search, "benchmark", lambda *a, **k: pytest.fail("ran before its arguments were checked"))
    with pytest.raises(SystemExit) as stopped:
        search.main(argv)
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    line = err.strip().splitlines()[-1]
    assert ": error: " in line
    return line


def _files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


@pytest.mark.parametrize(
    ("name", "shown"),
    [("x" * 237, "'xxx"), ("../../escaped", "'../../escaped'"), ("", "''"), (".hidden", "'.hidden'"), ("a/b", "'a/b'"),
     ("a\nb", "'a\\nb'"), ("-x", "'-x'"), ("a b", "'a b'")],
    ids=["237 characters", "a path out of --out", "empty", "hidden", "a folder", "a newline", "a leading dash", "a space"],
)  # fmt: skip
def test_a_name_that_is_no_plain_file_name_stops_before_any_run(tmp_path, capsys, monkeypatch, name, shown):
    table = _kt_table(tmp_path / "hub" / "G.json", [1.0, 2.0, 3.0])
    before = _files(tmp_path)
    line = _stops(capsys, monkeypatch, ["--tables", "--hub", str(table), "--out", str(tmp_path / "out" / "deep"), f"--name={name}"])
    assert "--name must be a plain file name: 1 to 200 of the characters A-Z a-z 0-9 _ + = . -, not starting with" in line
    assert line.split(", got ", 1)[1].startswith(shown)
    assert _files(tmp_path) == before  # no output folder, nothing beside it


def test_a_table_whose_objective_is_maximised_is_ranked_and_shown_so(tmp_path):
    """A Kernel Tuner cache of GFLOP/s (its direction from Kernel Tuner's map, not the file): the
    fastest configuration is the one of most GFLOP/s, and the header gives it in GFLOP/s."""
    pytest.importorskip("autotuning_methodology")
    table = _kt_table(tmp_path / "hub" / "G.json", [10.0, 40.0, 20.0, 30.0], objective="GFLOP/s")
    assert search.main(["--tables", "--hub", str(table), "--seeds", "1", "--jobs", "1", "--fractions", "--fixed", "4",
                        "--strategies", "random", "--orders", "ascending", "--out", str(tmp_path / "out"), "--name", "g"]) == 0  # fmt: skip
    rows = json.loads((tmp_path / "out" / "g.json").read_text())["rows"]
    assert [(r["optimum_gbs"], r["objective"], r["minimise"], r["near_1pct"]) for r in rows] == [(40.0, "GFLOP/s", False, 1)]
    assert "hub/G (ascending values): 4 configurations, optimum GFLOP/s 40, 1 within 1 %" in (tmp_path / "out" / "g.txt").read_text()


def test_a_long_plain_name_is_written_whole_and_nothing_else(tmp_path, monkeypatch):
    name = "search-hub_v1.2+" + "x" * 184  # 200 characters: the most a name may have
    assert search.name_unfit(name) is None and search.name_unfit(name + "x") is not None
    table = _kt_table(tmp_path / "hub" / "G.json", [1.0, 2.0, 3.0])
    monkeypatch.setattr(search, "benchmark", lambda *a, **k: ([], []))
    assert search.main(["--tables", "--hub", str(table), "--out", str(tmp_path / "out" / "new"), "--name", name]) == 0
    assert _files(tmp_path / "out") == {"new", f"new/{name}.txt", f"new/{name}.json"}


@pytest.mark.parametrize(
    ("out", "message"),
    [("{tmp}/afile", "--out {tmp}/afile: must be a folder (or one that can be made), got a file"),
     ("{tmp}/afile/sub", "--out {tmp}/afile/sub: must be a folder that can be made, got NotADirectoryError"),
     ("", "--out must name a folder, got ''"),
     ("{tmp}/taken", "--out {tmp}/taken: search-benchmark.json there must be a file the run can replace, or none, got a folder")],
)  # fmt: skip
def test_an_out_that_cannot_be_a_folder_stops_before_any_run(tmp_path, capsys, monkeypatch, out, message):
    (tmp_path / "afile").write_text("mine")
    (tmp_path / "taken" / "search-benchmark.json").mkdir(parents=True)
    table = _kt_table(tmp_path / "hub" / "G.json", [1.0, 2.0, 3.0])
    line = _stops(capsys, monkeypatch, ["--tables", "--hub", str(table), "--out", out.replace("{tmp}", str(tmp_path))])
    assert message.replace("{tmp}", str(tmp_path)) in line
    assert (tmp_path / "afile").read_text() == "mine"


@pytest.mark.parametrize("earlier", [False, True])
def test_the_two_output_files_are_written_both_or_neither(tmp_path, capsys, monkeypatch, earlier):
    """A failure while writing (here the JSON file's rename; a full disk alike) leaves
    neither new file nor a temporary one, and an earlier run's two files as they were:
    one line, after the runs, and the results printed."""
    table = _kt_table(tmp_path / "hub" / "G.json", [1.0, 2.0, 3.0])
    out = tmp_path / "out"
    if earlier:
        out.mkdir()
        (out / "r.txt").write_text("earlier text")
        (out / "r.json").write_text("{}")
    monkeypatch.setattr(search, "benchmark", lambda *a, **k: ([], []))
    real = os.replace

    def replace(src, dst, *args, **kwargs):
        if str(dst).endswith(".json"):
            raise OSError(28, "No space left on device")
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(SystemExit):
        search.main(["--tables", "--hub", str(table), "--out", str(out), "--name", "r"])
    monkeypatch.setattr(os, "replace", real)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1].endswith(
        f": error: --out {out}: r.txt and r.json must be written there, got OSError: [Errno 28] No space left on device (neither was)")
    if earlier:
        assert _files(out) == {"r.txt", "r.json"} and (out / "r.txt").read_text() == "earlier text"
    else:
        assert not out.exists()  # made for this run, and empty: removed


def test_a_run_that_stops_removes_the_out_folder_it_made(tmp_path, capsys, monkeypatch):
    table = _kt_table(tmp_path / "hub" / "G.json", [1.0, 2.0, 3.0])

    def refuse(*args, **kwargs):
        raise ValueError("a table Kernel Tuner's cache cannot hold")

    monkeypatch.setattr(search, "benchmark", refuse)
    with pytest.raises(SystemExit):
        search.main(["--tables", "--hub", str(table), "--out", str(tmp_path / "a" / "b")])
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(": error: a table Kernel Tuner's cache cannot hold")
    assert not (tmp_path / "a").exists()


def _merged_row(**change) -> dict:
    """A row as benchmark() writes it for a community table, with ``change``."""
    row = {"table": "hub/G", "order": "ascending", "strategy": "random", "budget": 5, "seeds": 2, "space": 6, "within_1pct": 0.5,
           "within_2pct": 0.5, "hits_1pct": 1, "median_first_1pct": math.inf, "optimum_gbs": 1000.0, "near_1pct": 1,
           "median_ratio": 0.9, "median_evaluations": 5.0, "score": 0.2, "score_m": 0.1, "budget_of": ["5 evaluations"]}  # fmt: skip
    return row | change


@pytest.mark.parametrize(
    ("change", "message"),
    [({"table": ["a"]}, "rows[1] table must be a non-empty string, got ['a']"),
     ({"budget": "x"}, "rows[1] budget must be a whole number >= 1, got 'x'"),
     ({"budget": True}, "rows[1] budget must be a whole number >= 1, got True"),
     ({"order": None}, "rows[1] order must be one of ['ascending', 'descending'], got None"),
     ({"within_1pct": "x"}, "rows[1] within_1pct must be a number in [0, 1], got 'x'"),
     ({"within_1pct": math.nan}, "rows[1] within_1pct must be a number in [0, 1], got nan"),
     ({"strategy": {}}, "rows[1] strategy must be a non-empty string, got {}"),
     ({"budget_of": 5}, "rows[1] budget_of must be a list of budget labels ('2.5%', '50 evaluations'), got 5"),
     ({"budget_of": ["many"]}, "rows[1] budget_of must be a list of budget labels ('2.5%', '50 evaluations'), got ['many']"),
     ({"score_m": "x"}, "rows[1] score_m must be a finite number or null, got 'x'"),
     ({"median_first_1pct": 0}, "rows[1] median_first_1pct must be a number >= 1, or Infinity, got 0"),
     ({"hits_1pct": 3}, "rows[1] hits_1pct must be at most its seeds (2), got 3"),
     ({"extra": [[1]]}, "rows[1] extra must be a plain value (a string, a number, a boolean or null), got [[1]]"),
     ({"optimum_gbs": None}, "rows[1] optimum_gbs must be a positive finite number, got None")],
)  # fmt: skip
def test_a_merged_row_of_a_field_of_the_wrong_type_stops_before_any_run(tmp_path, capsys, monkeypatch, change, message):
    merged = tmp_path / "old.json"
    merged.write_text(json.dumps({"rows": [_merged_row(), _merged_row(strategy="ordinal") | change]}))
    table = _kt_table(tmp_path / "hub" / "G.json", [1.0, 2.0, 3.0])
    line = _stops(capsys, monkeypatch, ["--tables", "--hub", str(table), "--merge", str(merged), "--out", str(tmp_path / "out")])
    assert line.endswith(f": error: --merge {merged}: {message}")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("old", "message"),
    [({"optimum_gbs": 100.0}, "got optimum 100 by time (lower is better) against 40 by GFLOP/s (higher is better)"),
     ({"optimum_gbs": 40.0, "objective": "GFLOP/s", "minimise": True},
      "got optimum 40 by GFLOP/s (lower is better) against 40 by GFLOP/s (higher is better)")],
    ids=["ranked as a time by an older reader", "the other direction"],
)  # fmt: skip
def test_merged_rows_of_a_table_ranked_otherwise_stop_before_any_run(tmp_path, capsys, monkeypatch, old, message):
    """Rows of one table ranked another way (an older reader took a GFLOP/s cache for times)
    would share a header and a comparison with this run's: the merge stops before any run."""
    table = _kt_table(tmp_path / "hub" / "G.json", [10.0, 40.0, 20.0], objective="GFLOP/s")
    merged = tmp_path / "old.json"
    merged.write_text(json.dumps({"rows": [_merged_row(**old)]}))
    line = _stops(capsys, monkeypatch, ["--tables", "--hub", str(table), "--merge", str(merged), "--out", str(tmp_path / "out")])
    assert line.endswith(f": error: --merge {merged}: rows of table hub/G (ascending values) must be ranked as those of "
                         f"this run's tables, {message}")  # fmt: skip
    agreeing = tmp_path / "same.json"
    agreeing.write_text(json.dumps({"rows": [_merged_row(optimum_gbs=40.0, objective="GFLOP/s", minimise=False)]}))
    monkeypatch.setattr(search, "benchmark", lambda *a, **k: ([], []))
    assert search.main(["--tables", "--hub", str(table), "--merge", str(agreeing), "--out", str(tmp_path / "out2")]) == 0


@pytest.mark.parametrize(
    ("text", "message"),
    [('{"rows": [{"budget": ' + "9" * 5000 + "}]}", "got ValueError: Exceeds the limit (4300 digits) for integer string"),
     ('{"rows": ' + "[" * 100_000 + "]" * 100_000 + "}", "got RecursionError: maximum recursion depth exceeded"),
     ("[1]", "must be a search benchmark's NAME.json (an object with rows), got list"),
     ('{"rows": [5]}', "rows[0] must be an object, got int")],
    ids=["a 5000-digit integer", "nested 100000 deep", "a list", "a row that is no object"],
)  # fmt: skip
def test_a_damaged_merged_file_stops_in_one_line_naming_it(tmp_path, capsys, monkeypatch, text, message):
    merged = tmp_path / "old.json"
    merged.write_text(text)
    line = _stops(capsys, monkeypatch, ["--tables", "reduce_space_offset11", "--merge", str(merged), "--out", str(tmp_path / "out")])
    assert f"--merge {merged}: " in line and message in line


def _end_a_waiting_read(pipe: Path, done: threading.Event, after_s: float = 10.0) -> None:
    """Should a read of ``pipe`` still wait after ``after_s``, open and close its
    writing end, so that the read ends (a test that reads it fails, not hangs)."""
    if done.wait(after_s):
        return
    while not done.is_set():
        try:
            os.close(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:  # no reader waits on it (yet), or no pipe
            pass
        done.wait(0.1)


@pytest.mark.parametrize("kind", ["a pipe", "a folder"])
def test_a_merged_path_that_is_no_regular_file_stops_before_it_is_read(tmp_path, capsys, monkeypatch, kind):
    merged = tmp_path / "old.json"
    if kind == "a pipe":
        os.mkfifo(merged)  # reading it would wait for a writer forever
    else:
        merged.mkdir()
    table = _kt_table(tmp_path / "hub" / "G.json", [1.0, 2.0, 3.0])
    done = threading.Event()
    watchdog = threading.Thread(target=_end_a_waiting_read, args=(merged, done), daemon=True)
    watchdog.start()
    try:
        line = _stops(capsys, monkeypatch, ["--tables", "--hub", str(table), "--merge", str(merged), "--out", str(tmp_path / "out")])
    finally:
        done.set()
        watchdog.join()
    assert line.endswith(f": error: --merge {merged}: must be a search benchmark's NAME.json in a regular file, got {kind}")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("times", "higher", "message"),
    [([1.0, 1.0, 1.0], False, "a table must hold correct configurations of different time (something to search), "
                              "got 3 correct, all of time 1"),
     ([2.5], False, "got 1 correct, all of time 2.5"),
     ([1.0, 1.0, "RuntimeFailedConfig"], False, "got 2 correct, all of time 1"),
     # A higher-is-better objective is scored as a rate: one <= 0 is refused (by the reader, or else by the benchmark).
     ([-1.0, -2.0], True, "positive"),
     ([5.0, 0.0], True, "positive")],
)  # fmt: skip
def test_a_hub_table_with_nothing_to_search_stops_before_any_run(tmp_path, capsys, monkeypatch, times, higher, message):
    good = _kt_table(tmp_path / "hub" / "good.json", [1.0, 2.0, 3.0])
    bad = _kt_table(tmp_path / "hub" / "bad.json", times, higher_is_better=higher)
    line = _stops(capsys, monkeypatch, ["--tables", "--hub", str(good), str(bad), "--out", str(tmp_path / "out")])
    assert f"{bad}: " in line and message in line
    assert not (tmp_path / "out").exists()


def test_a_rate_the_scores_cannot_read_is_refused_as_a_table_unfit():
    from tuner.search.tables.community import SpaceTable, table_unfit

    table = SpaceTable("t", {"a": [0, 1]}, entries={(0,): ("ok", 5.0), (1,): ("ok", -1.0)}, objective="gflops", minimise=False)
    assert table_unfit(table) == ("a higher-is-better objective is scored as a rate, so gflops must be positive in every "
                                         "correct configuration, got -1.0 at {'a': 1}")  # fmt: skip
    table.entries[(1,)] = ("compile_error", None)
    assert table_unfit(table) == ("a table must hold correct configurations of different gflops (something to search), "
                                         "got 1 correct, all of gflops 5")  # fmt: skip


def test_a_hub_folder_without_a_table_stops_in_one_line(tmp_path, capsys, monkeypatch):
    (tmp_path / "empty").mkdir()
    (tmp_path / "t1only").mkdir()
    (tmp_path / "t1only" / "T1.json").write_text("{}")
    for folder in ("empty", "t1only"):
        line = _stops(capsys, monkeypatch, ["--tables", "--hub", str(tmp_path / folder), "--out", str(tmp_path / "out")])
        assert line.endswith(f": error: --hub {tmp_path / folder}: a folder must hold a table (a Kernel Tuner cache or T4 file, "
                             "NAME.json or NAME.json.gz, besides its T1.json and metadata files), got none")  # fmt: skip
    line = _stops(capsys, monkeypatch, ["--tables", "--out", str(tmp_path / "out")])
    assert line.endswith(": error: --tables and --hub must name a table (or --merge a file), got none: nothing to run")
    assert not (tmp_path / "out").exists()


def test_a_hub_table_the_reader_trips_on_stops_in_one_line_naming_it(tmp_path, capsys, monkeypatch):
    odd = tmp_path / "hub" / "G_T4.json"
    odd.parent.mkdir()
    odd.write_text(json.dumps({"schema_version": "1.0.0", "results": [
        {"configuration": {"a": 1}, "invalidity": {"x": 1}, "correctness": 1,
         "measurements": [{"name": "time", "value": 1.0, "unit": "ms"}], "objectives": ["time"]}]}))  # fmt: skip
    surrogate = tmp_path / "hub2" / "G.json"
    surrogate.parent.mkdir()
    surrogate.write_text('{"tune_params": {"a\\ud800": [1, 2]}, "objective": "time", '
                         '"cache": {"1": {"a\\ud800": 1, "time": 1.0}, "2": {"a\\ud800": 2, "time": 2.0}}}')  # fmt: skip
    for path in (odd, surrogate):
        line = _stops(capsys, monkeypatch, ["--tables", "--hub", str(path), "--out", str(tmp_path / "out")])
        assert str(path) in line


def test_fixed_budgets_beyond_a_table_without_fractions_stop_before_any_run(tmp_path, capsys, monkeypatch):
    table = _kt_table(tmp_path / "hub" / "G.json", [1.0, 2.0, 3.0])
    line = _stops(capsys, monkeypatch, ["--tables", "--hub", str(table), "--fractions", "--fixed", "5", "--out", str(tmp_path / "o")])
    assert line.endswith(": error: --fixed [5]: table hub/G has 3 configurations, fewer than every budget, and --fractions "
                         "gives none: it would have no budget")  # fmt: skip


def test_a_strategy_or_order_named_twice_runs_once(tmp_path, monkeypatch):
    planned = {}
    monkeypatch.setattr(search, "benchmark", lambda names, seeds, strategies, *a, orders, **k: planned.update(
        names=names, strategies=strategies, orders=orders) or ([], []))  # fmt: skip
    table = _kt_table(tmp_path / "hub" / "G.json", [1.0, 2.0, 3.0])
    assert search.main(["--tables", "--hub", str(table), str(table), "--strategies", "random", "ordinal", "random",
                        "--orders", "descending", "descending", "--out", str(tmp_path / "out")]) == 0  # fmt: skip
    assert planned == {"names": ["hub/G"], "strategies": ["random", "ordinal"], "orders": ("descending",)}


def test_the_budgets_left_unscored_are_those_the_methodology_cannot_score():
    """Its standardisation divides by (optimum - its random baseline): where the
    baseline reaches the optimum (about 40 % of a space of distinct times, sooner with
    ties at the optimum) their code refuses, and our check says so first."""
    pytest.importorskip("autotuning_methodology")
    from autotuning_methodology.baseline import RandomSearchCalculatedBaseline

    for lookup in ({str(i): 1.0 + i for i in range(6)}, {str(i): 1.0 + (i * 7919) % 101 for i in range(101)},
                   {str(i): min(1.0 + i, 4.0) for i in range(12)}):  # fmt: skip
        case = Case("t", REGISTRY["reduce"], Problem("reduce", "int32", 1), pd.DataFrame(), {}, lookup)
        stats = search._SearchspaceStats(case)
        first = search.baseline_reaches_optimum(stats, case.size)
        assert first is not None and first < case.size
        for budget in range(1, case.size + 1):
            fevals = np.arange(1, budget + 1)
            strategy = np.full(budget, stats.total_performance_absolute_optimum() * 2)
            if budget < first:
                RandomSearchCalculatedBaseline(stats).get_standardised_curve(fevals, strategy, "fevals")
                assert search.methodology_score(case, [[case.optimum] * budget], budget) == pytest.approx(1.0)
                continue
            try:
                standardised = RandomSearchCalculatedBaseline(stats).get_standardised_curve(fevals, strategy, "fevals")
            except ValueError as error:
                assert "Division by zero" in str(error)
            else:  # its smoothing put the last point a rounding error off the optimum: divided by that
                assert np.max(np.abs(standardised)) > 1e9
            assert search.methodology_score(case, [[case.optimum] * budget], budget) is None


def test_a_budget_the_methodology_cannot_score_keeps_its_other_figures(tmp_path, capsys):
    """On 6 configurations the methodology's baseline reaches the optimum at the 2nd
    evaluation: budget 3 has no score_m, said in one line before the runs and in the
    text; budget 1 is scored, and every other figure is there."""
    pytest.importorskip("autotuning_methodology")
    table = _kt_table(tmp_path / "hub" / "G.json", [1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    assert search.main(["--tables", "--hub", str(table), "--fractions", "--fixed", "1", "3", "--seeds", "2", "--jobs", "1",
                        "--strategies", "random", "--orders", "ascending", "--out", str(tmp_path / "out")]) == 0  # fmt: skip
    note = ("hub/G: no score_m at budgets [3]: the methodology's random-search baseline reaches the optimum at evaluation 2 "
            "of its 6 configurations (its score divides by their difference); the other figures are kept")  # fmt: skip
    assert f": note: {note}" in capsys.readouterr().err
    result = json.loads((tmp_path / "out" / "search-benchmark.json").read_text())
    scores = {r["budget"]: r["score_m"] for r in result["rows"]}
    assert scores[3] is None and isinstance(scores[1], float)
    assert all(r["seeds"] == 2 and r["budget_of"] for r in result["rows"])
    assert note in (tmp_path / "out" / "search-benchmark.txt").read_text()
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["search-benchmark.json", "search-benchmark.txt"]


def test_a_cache_without_restrictions_that_lacks_combinations_gets_a_note_for_kernel_tuner(tmp_path, monkeypatch, capsys):
    """Without its T1 file a cache that leaves configurations out (those its space's
    restrictions excluded) makes Kernel Tuner pay an evaluation for each it draws:
    the run says so in one line, on stderr and in its text; with the T1 file, not."""
    params = {"x": [1, 2, 3, 4, 5, 6], "y": [1, 2, 4, 8]}
    cache = {f"{x},{y}": {"x": x, "y": y, "time": 1.0 + x / y} for x in params["x"] for y in params["y"] if x * y <= 8}
    folder = tmp_path / "hub"
    folder.mkdir()
    (folder / "G.json").write_text(json.dumps({"tune_params": params, "objective": "time", "cache": cache}))
    monkeypatch.setattr(search, "benchmark", lambda *a, **k: ([], []))
    argv = ["--tables", "--hub", str(folder), "--strategies", "random", "greedy_ils", "--out", str(tmp_path / "out")]
    assert search.main([*argv, "--name", "without"]) == 0
    note = (f"hub/G: {24 - len(cache)} of the 24 combinations of its values are not in the table and no restriction leaves "
            "them out; Kernel Tuner's strategies draw them as InvalidConfig")  # fmt: skip
    assert note in capsys.readouterr().err
    assert note in (tmp_path / "out" / "without.txt").read_text()
    assert search.main([*argv[:4], "random", "ordinal_global", "--out", str(tmp_path / "out"), "--name", "ours"]) == 0
    assert "InvalidConfig" not in capsys.readouterr().err  # no Kernel Tuner strategy in the run
    (folder / "T1.json").write_text(json.dumps({"ConfigurationSpace": {
        "TuningParameters": [{"Name": n, "Values": str(v)} for n, v in params.items()],
        "Conditions": [{"Expression": "x * y <= 8"}]}}))  # fmt: skip
    assert search.main([*argv, "--name", "with"]) == 0
    assert "InvalidConfig" not in capsys.readouterr().err
    assert "InvalidConfig" not in (tmp_path / "out" / "with.txt").read_text()


def _kt_grid(path: Path, sizes: tuple[int, int] = (6, 4)) -> Path:
    """A Kernel Tuner cache over x (sizes[0] values) and y (sizes[1] values), times of a smooth bowl."""
    cache = {f"{x},{y}": {"x": x, "y": y, "time": 1.0 + (x - 3) ** 2 / 10 + (y - 2) ** 2 / 7}
             for x in range(1, sizes[0] + 1) for y in range(1, sizes[1] + 1)}  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"tune_params": {"x": list(range(1, sizes[0] + 1)), "y": list(range(1, sizes[1] + 1))},
                                "objective": "time", "cache": cache}))  # fmt: skip
    return path


KT_ARGV = ["--tables", "--seeds", "2", "--jobs", "1", "--fractions", "0.5", "--orders", "ascending", "--name", "r"]


def test_a_kernel_tuner_strategy_that_fails_is_left_out_of_that_table_with_a_note(tmp_path, monkeypatch, capsys):
    """Kernel Tuner's own failure on a table it was handed (firefly_algorithm's IndexError on a small
    space, an AttributeError on switch values) costs its rows of that table, not the benchmark."""
    pytest.importorskip("kernel_tuner")
    table = _kt_grid(tmp_path / "hub" / "G.json")
    real = search.run_kt

    def breaks_at_seed_1(case, strategy, cache, seed, budget):
        if seed == 1:
            raise RuntimeError("simulated failure\nsecond line")
        return real(case, strategy, cache, seed, budget)

    monkeypatch.setattr(search, "run_kt", breaks_at_seed_1)  # the worker processes are forked from this one
    assert search.main([*KT_ARGV, "--hub", str(table), "--strategies", "random", "greedy_ils", "--out", str(tmp_path / "out")]) == 0
    rows = json.loads((tmp_path / "out" / "r.json").read_text())["rows"]
    assert {r["strategy"] for r in rows} == {"random"}
    note = ("greedy_ils on hub/G: Kernel Tuner failed in 1 of 2 runs (the first: seed 1, budget 12: RuntimeError: simulated "
            "failure second line); its rows of this table are left out")  # fmt: skip
    assert note in (tmp_path / "out" / "r.txt").read_text()
    assert f"note: {note}" in capsys.readouterr().err


def test_two_tables_whose_labels_flatten_alike_keep_their_own_kernel_tuner_caches(tmp_path, monkeypatch):
    """hub a-b/G and a/b-G: each strategy replays its own table, never the other's cache."""
    pytest.importorskip("kernel_tuner")
    tables = [_kt_grid(tmp_path / "a-b" / "G.json", (6, 4)), _kt_grid(tmp_path / "a" / "b-G.json", (5, 4))]
    monkeypatch.setattr(search.tempfile, "tempdir", str(tmp_path))  # where the run's Kernel Tuner caches go
    assert search.main([*KT_ARGV, "--hub", *(str(t.parent) for t in tables), "--strategies", "greedy_ils",
                        "--out", str(tmp_path / "out")]) == 0  # fmt: skip
    rows = json.loads((tmp_path / "out" / "r.json").read_text())["rows"]
    assert sorted((r["table"], r["space"]) for r in rows) == [("a-b/G", 24), ("a/b-G", 20)]
    assert not list(tmp_path.glob("kt-cache-*"))  # the caches' folder goes with the run


def test_a_restriction_kernel_tuner_cannot_read_stops_in_one_line_and_leaves_no_folder(tmp_path, capsys):
    pytest.importorskip("kernel_tuner")
    table = _kt_grid(tmp_path / "hub" / "G.json")
    (tmp_path / "hub" / "T1.json").write_text(json.dumps({"ConfigurationSpace": {
        "TuningParameters": [{"Name": "x", "Type": "int", "Values": "[1, 2, 3, 4, 5, 6]"},
                             {"Name": "y", "Type": "int", "Values": "[1, 2, 3, 4]"}],
        "Conditions": [{"Parameters": ["x"], "Expression": "x >> 1 >= 0"}]}}))  # fmt: skip
    with pytest.raises(SystemExit):
        search.main([*KT_ARGV, "--hub", str(table), "--strategies", "greedy_ils", "--out", str(tmp_path / "out" / "new")])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1].endswith(
        ": error: hub/G: Kernel Tuner must build the space of its restrictions ['x >> 1 >= 0'], got SyntaxError: invalid "
        "syntax (<string>, line 1)")  # fmt: skip
    assert not (tmp_path / "out").exists()


def test_a_hub_path_that_cannot_be_looked_at_stops_in_one_line(tmp_path, capsys, monkeypatch):
    """A path inside a folder without search permission: Path.exists raises there (Python 3.11)."""
    table = _kt_table(tmp_path / "locked" / "G.json", [1.0, 2.0, 3.0])
    real = Path.exists

    def exists(self, *args, **kwargs):
        if self == table:
            raise PermissionError(13, "Permission denied")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "exists", exists)
    line = _stops(capsys, monkeypatch, ["--tables", "--hub", str(table), "--out", str(tmp_path / "out")])
    assert line.endswith(f": error: --hub {table}: must be a table file or a folder of them that can be read, got "
                         "PermissionError: Permission denied")  # fmt: skip
    assert not (tmp_path / "out").exists()


def test_a_cache_entry_that_writes_1_0_for_1_is_that_configuration_to_every_strategy(tmp_path):
    """Kernel Tuner's cache keys compare values as Python does (1 == 1.0): the entry is the
    configuration of tune_params' 1, so a strategy that proposes 1 (Kernel Tuner's, the study's) finds it."""
    pytest.importorskip("kernel_tuner")
    from tuner.search.tables.community import load_table

    path = _kt_grid(tmp_path / "hub" / "G.json")
    document = json.loads(path.read_text())
    document["cache"]["1,1"] |= {"x": 1.0, "time": 0.5}  # the optimum, its x written as a float
    path.write_text(json.dumps(document))
    case = Case.from_space_table(load_table(path))
    (cfg,) = [cfg for cfg, _, time_ms in case.outcomes if time_ms == 0.5]
    assert cfg == {"x": 1, "y": 1} and type(cfg["x"]) is int
    found = run_kt(case, "greedy_ils", kt_cache(case, "ascending", tmp_path), 0, case.size)
    assert max(found) == case.optimum
    assert max(run_ours(case, "ordinal_global", "ascending", 0, case.size)) == case.optimum


def test_a_damaged_table_stops_in_one_line_without_the_usage(tmp_path, capsys, monkeypatch):
    """What a file holds is no mistake in the command line: its refusal is the one line, for the benchmark
    and for the replay alike (argparse's usage block is for arguments it could not parse)."""
    from tuner.search.tables import replay

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"tune_params": {"x": [1]}, "cache": {"1": 5}}))
    monkeypatch.setattr(search, "benchmark", lambda *a, **k: pytest.fail("ran before its arguments were checked"))
    with pytest.raises(SystemExit) as stopped:
        search.main(["--tables", "--hub", str(bad), "--seeds", "1", "--strategies", "random", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and err.count("\n") == 1 and "usage" not in err
    assert err.endswith(f": error: {bad}: cache entry '1' must be an object, got int\n")  # after the program's name
    with pytest.raises(SystemExit) as stopped:
        replay.main([str(bad), "--seeds", "1"])
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and err.count("\n") == 1 and f"{bad}: cache entry '1' must be an object, got int" in err


# ---- held-out figures ---------------------------------------------------------------------


def _scores(values: dict[str, float]):
    from search_heldout import Scores

    scores = Scores()
    for label, value in values.items():
        scores.score[label], scores.share[label] = value, 0.5
        scores.score_boot[label], scores.share_boot[label] = np.array([value - 0.01, value + 0.01]), np.array([0.4, 0.6])
    return scores


def test_the_held_out_choice_for_a_table_is_the_best_on_the_others():
    from search_heldout import differences, held_out, mean_difference

    # a is best on t1 and t2, b far ahead on t3 alone: a is chosen for t3, b (best on t1 + t3 on average) for t2.
    table = {("t1", "a"): _scores({"x": 0.6}), ("t1", "b"): _scores({"x": 0.5}),
             ("t2", "a"): _scores({"x": 0.6}), ("t2", "b"): _scores({"x": 0.5}),
             ("t3", "a"): _scores({"x": 0.1}), ("t3", "b"): _scores({"x": 0.9})}  # fmt: skip
    result = held_out(table, ["t1", "t2", "t3"], ["a", "b"], ["x"])
    assert result["choices"] == {"t1": "b", "t2": "b", "t3": "a"}
    # The choice's score on each table is the chosen strategy's there: (0.5 + 0.5 + 0.1) / 3.
    assert result["aggregate"]["held-out choice"]["x"][0] == pytest.approx(1.1 / 3)
    assert result["aggregate"]["a"]["x"][0] == pytest.approx(1.3 / 3)
    losses = [(t, d) for t, _, d, iv in differences(table, ["t1", "t2", "t3"], "a", "b", ["x"]) if iv[1] < 0]
    assert losses == [("t3", pytest.approx(-0.8))]
    # Over the tables a trails b by (0.1 + 0.1 - 0.8) / 3, its interval from each table's resamples.
    gap, (lo, hi) = mean_difference(table, ["t1", "t2", "t3"], "a", "b", ["x"])["x"]
    assert gap == pytest.approx(-0.2) and lo == pytest.approx(gap) and hi < 0  # resampled in step: no spread
    assert mean_difference(table, ["t1", "t2", "t3"], "a", "b", ["y"]) == {}  # no table scores it


def test_the_held_out_choice_per_budget_takes_each_budget_from_the_best_there_on_the_others():
    from search_heldout import format_held_out, held_out

    # a leads at the small budget on every table, b at the large one: chosen per budget, each cell is the leader's,
    # while the one choice over both budgets (b: 0.50 + 0.80 beats a's 0.60 + 0.60) loses the small budget.
    table = {(t, "a"): _scores({"small": 0.6, "large": 0.6}) for t in ("t1", "t2", "t3")}
    table |= {(t, "b"): _scores({"small": 0.5, "large": 0.8}) for t in ("t1", "t2", "t3")}
    result = held_out(table, ["t1", "t2", "t3"], ["a", "b"], ["small", "large"])
    assert result["choices_at"] == {"small": {"t1": "a", "t2": "a", "t3": "a"}, "large": {"t1": "b", "t2": "b", "t3": "b"}}
    assert set(result["choices"].values()) == {"b"}
    per_budget = result["aggregate"]["held-out choice per budget"]
    assert per_budget["small"][0] == pytest.approx(0.6) and per_budget["large"][0] == pytest.approx(0.8)
    assert result["aggregate"]["held-out choice"]["small"][0] == pytest.approx(0.5)
    text = format_held_out(result, ["small", "large"], [])
    assert "  small: a 3 of 3" in text and "  large: b 3 of 3" in text


def test_a_held_out_kernel_is_left_out_whole():
    from search_heldout import format_held_out, held_out

    # b wins both tables of kernel k and loses the lone table of kernel j. Left out a table at a time, k1 is
    # scored by b (k2 is among the others); left out by kernel, k1's choice sees only j, where a wins.
    table = {("k1", "a"): _scores({"x": 0.2}), ("k1", "b"): _scores({"x": 0.9}),
             ("k2", "a"): _scores({"x": 0.2}), ("k2", "b"): _scores({"x": 0.9}),
             ("j", "a"): _scores({"x": 0.6}), ("j", "b"): _scores({"x": 0.5})}  # fmt: skip
    by_table = held_out(table, ["k1", "k2", "j"], ["a", "b"], ["x"])
    by_kernel = held_out(table, ["k1", "k2", "j"], ["a", "b"], ["x"], {"k1": "k", "k2": "k", "j": "j"})
    assert by_table["choices"] == {"k1": "b", "k2": "b", "j": "b"}
    assert by_kernel["choices"] == {"k1": "a", "k2": "a", "j": "b"}
    assert by_kernel["choices_at"] == {"x": by_kernel["choices"]}
    assert by_kernel["aggregate"]["held-out choice"]["x"][0] == pytest.approx((0.2 + 0.2 + 0.5) / 3)
    text = format_held_out(by_kernel, ["x"], [])
    assert "score on the tables of the other kernels (2 kernels, each left out whole)" in text
    assert "best at that budget on the tables of the other kernels (2 kernels" in text
    assert "highest mean score on the others" in format_held_out(by_table, ["x"], [])


def test_a_budget_no_other_table_scores_leaves_only_its_own_cell_out_of_the_choice_per_budget():
    from search_heldout import format_held_out, held_out

    # Budget "b" is scored on t1 alone (the methodology cannot score it on t2 and t3): left out, t1 has no
    # choice at b, so the row has no cell at b, and still has its cell at a.
    table = {}
    for t, strategy, a, b in [("t1", "x", 0.6, 0.7), ("t1", "y", 0.5, 0.4), ("t2", "x", 0.6, None), ("t2", "y", 0.5, None),
                              ("t3", "x", 0.6, None), ("t3", "y", 0.5, None)]:  # fmt: skip
        scores = _scores({"a": a, "b": b if b is not None else 0.0})
        if b is None:
            scores.score["b"], scores.score_boot["b"] = None, None
        table[(t, strategy)] = scores
    result = held_out(table, ["t1", "t2", "t3"], ["x", "y"], ["a", "b"])
    assert result["choices_at"]["b"] == {"t1": None, "t2": "x", "t3": "x"}
    assert set(result["aggregate"]["held-out choice per budget"]) == {"a"}
    assert "  b: x 2 of 3, no choice 1 of 3" in format_held_out(result, ["a", "b"], [])


def test_a_community_tables_kernel_is_the_one_its_file_names(tmp_path):
    from tuner.search.tables.community import load_table

    named = _kt_grid(tmp_path / "one" / "GPU1.json")
    document = json.loads(named.read_text()) | {"kernel_name": "convolution_kernel"}
    named.write_text(json.dumps(document))
    assert load_table(named).kernel == "convolution_kernel"
    assert load_table(_kt_grid(tmp_path / "two" / "GPU2.json")).kernel == ""  # a cache that names none


def test_held_out_by_kernel_groups_the_tables_that_name_one_kernel(tmp_path, monkeypatch):
    first, second = _kt_grid(tmp_path / "a" / "G1.json"), _kt_grid(tmp_path / "b" / "G2.json")
    for path in (first, second):
        path.write_text(json.dumps(json.loads(path.read_text()) | {"kernel_name": "convolution_kernel"}))
    third = _kt_grid(tmp_path / "c" / "G3.json")  # names no kernel: its folder stands for it
    monkeypatch.setattr(search, "HUB", search.hub_files([str(first), str(second), str(third)]))
    for name in [*search.HUB, "reduce_space_offset11"]:
        monkeypatch.setitem(search._CASES, name, search.load_case(name))
    assert {name: search.kernel_of(name) for name in search.HUB} == {"a/G1": "convolution_kernel", "b/G2": "convolution_kernel",
                                                                      "c/G3": "c"}  # fmt: skip
    assert search.kernel_of("reduce_space_offset11") == "reduce"


def test_held_out_by_kernel_needs_two_kernels(tmp_path, capsys, monkeypatch):
    line = _stops(capsys, monkeypatch, ["--tables", "reduce_space_offset11", "reduce_hard_h200", "--held-out", "--held-out-by",
                                        "kernel", "--out", str(tmp_path / "o")])  # fmt: skip
    assert "--held-out-by kernel leaves each kernel's tables out to choose on the others', so the tables must measure two " \
           "kernels or more, got ['reduce']" in line  # fmt: skip


def test_held_out_by_kernel_needs_the_held_out_table(tmp_path, capsys, monkeypatch):
    for by in ("kernel", "table"):
        line = _stops(capsys, monkeypatch, ["--tables", "reduce_space_offset11", "--held-out-by", by, "--out", str(tmp_path / "o")])
        assert f"--held-out-by chooses what the held-out table leaves out, so it needs --held-out, got --held-out-by {by} alone" in line


def test_the_held_out_table_scores_every_table_given_by_path(tmp_path):
    pytest.importorskip("autotuning_methodology")
    first, second = _kt_grid(tmp_path / "one" / "GPU1.json", (6, 4)), _kt_grid(tmp_path / "two" / "GPU2.json", (8, 5))
    assert search.main(["--tables", "reduce_space_offset11", str(first), str(second), "--seeds", "3", "--jobs", "1",
                        "--fractions", "0.02", "--fixed", "5", "--orders", "ascending", "--strategies", "random", "ordinal",
                        "--held-out", "--bootstrap", "50", "--out", str(tmp_path / "out"), "--name", "h"]) == 0  # fmt: skip
    held = json.loads((tmp_path / "out" / "h.json").read_text())["held_out"]
    tables = ["reduce_space_offset11", "one/GPU1", "two/GPU2"]  # a folder's table is labelled by the folder
    assert held["labels"] == ["5 evaluations", "2.0%"] and sorted(held["choices"]) == sorted(tables)
    cells = {(r["table"], r["strategy"]): r for r in held["per_table"]}
    assert {t for t, _ in cells} == set(tables)
    for left, chosen in held["choices"].items():
        def mean_on_others(strategy, left=left):
            return np.mean([np.mean([cells[(t, strategy)][label][0] for label in held["labels"]]) for t in tables if t != left])

        assert chosen == max(["random", "ordinal"], key=mean_on_others)
    for row in cells.values():
        for label in held["labels"]:
            score, (lo, hi), share = row[label]
            assert lo <= hi and 0 <= share <= 1 and score <= 1
    text = (tmp_path / "out" / "h.txt").read_text()
    assert "Held out over 3 tables" in text and "held-out choice" in text


def test_held_out_figures_need_this_commands_runs(tmp_path, capsys, monkeypatch):
    merged = tmp_path / "old.json"
    merged.write_text(json.dumps({"rows": []}))
    line = _stops(capsys, monkeypatch, ["--tables", "reduce_space_offset11", "--held-out", "--merge", str(merged), "--out", str(tmp_path / "o")])
    assert "--held-out needs every seed's run of this command" in line


def test_a_seed_replays_one_run_however_the_threads_are_scheduled(case):
    # A table look-up measures at once: a study that asked its next trial in a thread meanwhile raced the
    # measurement it should follow, and what its sampler saw depended on when the thread got to run (a
    # loaded host). Switching threads as often as the interpreter can makes that race show in a few trials.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        runs = [run_ours(case, "ordinal", "ascending", 1, 40) for _ in range(3)]
    finally:
        sys.setswitchinterval(interval)
    assert runs[0] == runs[1] == runs[2]


def test_a_strategy_that_sees_its_budget_runs_once_per_budget(tmp_path):
    # On the 768 configurations, 10 evaluations are under 2 % of the space (ordinal_budget runs ordinal) and
    # 38 are not (ordinal_global): cut from one run to 38, its row at 10 would be ordinal_global's.
    assert search.main(["--tables", "reduce_space_offset11", "--seeds", "2", "--jobs", "1", "--orders", "ascending", "--no-warm",
                        "--fixed", "10", "--fractions", "0.05", "--strategies", "ordinal", "ordinal_global", "ordinal_budget",
                        "--out", str(tmp_path)]) == 0  # fmt: skip
    rows = json.loads((tmp_path / "search-benchmark.json").read_text())["rows"]
    figures = {(r["strategy"], r["budget"]): {k: v for k, v in r.items() if k != "strategy"} for r in rows}
    assert figures[("ordinal", 10)] != figures[("ordinal_global", 10)]
    assert figures[("ordinal_budget", 10)] == figures[("ordinal", 10)]
    assert figures[("ordinal_budget", 38)] == figures[("ordinal_global", 38)]
