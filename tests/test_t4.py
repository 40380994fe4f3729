"""T4 files written from our results and read back, and the community's
tables (Kernel Tuner caches, T4, T1) as replay tables.

The hub files are from the benchmark hub of the Auto-Tuning Association
(AutoTuningAssociation/benchmark_hub, MIT licence, DOI 10.5281/zenodo.15364124)."""

from __future__ import annotations

import gzip
import json
import math
import os
import random
import re
import time
from pathlib import Path

import pandas as pd
import pytest

from tuner.cli import main as cli_main
from tuner.data import t4
from tuner.data.results import read
from tuner.families import REGISTRY
from tuner.families.base import MAX_ENUMERATED, Family, Problem
from tuner.search.study.run import StudyOptions, run_study
from tuner.search.tables import community as tables
from tuner.search.tables.community import (
    SpaceTable,
    load_table,
    read_kernel_tuner_cache,
    read_t1,
    restriction_check,
    table_family,
    table_measure,
    table_problem,
)
from tuner.search.tables.replay import _quiet_optuna

REPO = Path(__file__).resolve().parents[1]
H200 = REPO / "results" / "reference" / "nvidia-h200" / "measurements.parquet"
HUB = REPO.parent / "shared" / "benchmark_hub"
PROBLEM = Problem("reduce", "int32", 268435456)
needs_hub = pytest.mark.skipif(not (HUB / "convolution_milo" / "T1.json").exists(), reason="the benchmark hub's files are not here")


@pytest.fixture(scope="module")
def sweep() -> pd.DataFrame:
    """The H200 reduce space's offset-11 half (768 configurations)."""
    rows = t4.problem_rows(read(H200), PROBLEM.key, "sweep:reduce_space")
    return rows[rows["offset"] == 11]


def _with_failures(sweep: pd.DataFrame) -> pd.DataFrame:
    """The sweep with its best row failed in each way our statuses say."""
    rows = sweep.sort_values("bandwidth_gbs", ascending=False).copy()
    for i, status in enumerate(["compile_error", "launch_error", "wrong_result", "infeasible"]):
        rows.iloc[i, rows.columns.get_loc("status")] = status
        rows.iloc[i, rows.columns.get_loc("error")] = f"made {status} for the test"
    return rows


def test_our_rows_as_t4_follow_the_published_schemas(sweep):
    pytest.importorskip("kernel_tuner")
    rows = _with_failures(sweep)
    document = t4.to_t4(rows, [p.name for p in REGISTRY["reduce"].params])
    used = t4.validate(document)
    assert any("kernel_tuner" in str(f) and f.name == "results-schema.json" for f in used)
    assert any(f.name == "metadata-schema.json" for f in used)
    by_status = {}
    for record, result in zip(rows.to_dict("records"), document["results"]):
        by_status.setdefault(record["status"], (record, result))
    record = by_status["ok"][0]
    by_status = {s: result for s, (_, result) in by_status.items()}
    assert {s: r["invalidity"] for s, r in by_status.items()} == {
        "ok": "correct", "compile_error": "compile", "launch_error": "runtime",
        "wrong_result": "correctness", "infeasible": "constraints",
    }  # fmt: skip
    assert by_status["ok"]["correctness"] == 1 and by_status["wrong_result"]["correctness"] == 0
    ok = {m["name"]: m["value"] for m in by_status["ok"]["measurements"]}
    assert ok["time"] == record["time_ms_median"] and ok["time_p90"] == record["time_ms_p90"]
    assert ok["bandwidth_gbs"] == record["bandwidth_gbs"] and "rel_spread" in ok
    assert by_status["compile_error"]["measurements"] == [{"name": "time", "value": "CompilationFailedConfig", "unit": "ms"}]
    assert by_status["ok"]["objectives"] == ["time", "bandwidth_gbs"]
    assert document["metadata"]["timeunit"] == "milliseconds"
    assert document["metadata"]["tuner"]["objectives"] == {"time": "min", "bandwidth_gbs": "max"}
    # A document breaking the schema is refused: the check can fail.
    import jsonschema

    document["results"][0]["invalidity"] = "fine"
    with pytest.raises(jsonschema.ValidationError):
        t4.validate(document)


def test_the_methodology_package_reads_our_t4(sweep, tmp_path):
    """The methodology's own loader (its T4 schema, its reading of measurements)."""
    searchspace = pytest.importorskip("autotuning_methodology.searchspace_statistics")
    # Its loader asserts on a file whose first result failed (a NaN sum against 0): a correct one first.
    rows = _with_failures(sweep).iloc[::-1]
    path = t4.write_t4(t4.to_t4(rows, [p.name for p in REGISTRY["reduce"].params]), tmp_path / "h200.json")
    stats = searchspace.SearchspaceStatistics("reduce", "h200", True, ["benchmark"], ["time"], path)
    assert stats.size == len(sweep)
    ok = sweep.sort_values("bandwidth_gbs", ascending=False).iloc[4:]
    assert stats.objective_performances_total_sorted[0] == pytest.approx(ok["time_ms_median"].min())
    assert len(stats.objective_performances_total_sorted) == len(sweep) - 4  # the failed rows are NaN there


def test_a_sweep_as_t4_replays_to_the_same_optimum(sweep, tmp_path):
    path = tmp_path / "sweep.json.gz"
    t4.write_t4(t4.to_t4(_with_failures(sweep), [p.name for p in REGISTRY["reduce"].params]), path)
    table = load_table(path)
    assert table.objective == "bandwidth_gbs" and not table.minimise
    assert table.size == len(sweep) - 1  # the infeasible row is not part of the space
    assert sorted(s for s, _ in table.entries.values() if s != "ok") == ["compile_error", "launch_error", "wrong_result"]
    ok = sweep.sort_values("bandwidth_gbs", ascending=False).iloc[4:]
    assert table.optimum == ok["bandwidth_gbs"].max()

    def replayed(family, problem, domains, measure):
        with _quiet_optuna():
            outcome = run_study(StudyOptions.for_strategy("ordinal", family=family, problem=problem, domains=domains,
                                                          storage=None, study_name="rt", measure=measure, budget_trials=77,
                                                          timeout_s=None, seed=3))  # fmt: skip
        return outcome

    family = table_family(table)
    ours = replayed(family, table_problem(table), table.params, table_measure(table))
    assert ours.best["bandwidth_gbs"] == table.optimum
    # Two configurations can time alike to the timer's resolution: the answer is one of those at the optimum.
    best = ok[ok["bandwidth_gbs"] == table.optimum]
    assert any(all(ours.best[p] == row[p] for p in table.params) for _, row in best.iterrows())
    # The failed configurations were measured (each costs one) and never won.
    assert len(ours.rows) == 77
    assert family.violations(dict(zip(table.params, next(iter(table.entries)))), table_problem(table)) == []


def test_a_plugin_familys_configuration_is_exported_as_it_was_keyed(tmp_path, capsys, small_results):
    """Before, a plug-in family's switch (True, False: an Int64 results column) was exported as 1 and 0:
    the configuration came from the table's typed columns, not from the configuration measured."""
    from tuner.data.results import _column_type

    keyed = [{"flag": True, "ratio": 0.5, "mode": "a"}, {"flag": False, "ratio": 2.0, "mode": "b"},
             {"flag": True, "ratio": 1e300, "mode": "1"}]  # fmt: skip
    rows = read(small_results).head(len(keyed)).copy()
    rows["family"] = "switched"
    rows["config_key"] = [json.dumps(c, sort_keys=True) for c in keyed]
    for name in ("flag", "ratio", "mode"):  # the columns as the pipeline types a plug-in's parameters
        values = [c[name] for c in keyed]
        rows[name] = pd.Series(values, dtype=object, index=rows.index).astype(_column_type(tuple(values)))
    assert rows["flag"].tolist() == [1, 0, 1]  # the column alone cannot tell a switch from a number
    rows.to_parquet(tmp_path / "switched.parquet", index=False)
    out = tmp_path / "switched.json"
    assert cli_main(["t4", str(tmp_path / "switched.parquet"), "--out", str(out)]) == 0, capsys.readouterr().err
    exported = [r["configuration"] for r in t4.read_json(out)["results"]]
    assert exported == keyed
    assert [[type(v) for v in c.values()] for c in exported] == [[type(v) for v in c.values()] for c in keyed]
    assert [r["configuration"] for r in t4.read_t4(out)] == keyed
    # A row without a key still gives its columns; a parameter the export does not list is left out.
    document = t4.to_t4(rows.assign(config_key=None), ["flag", "mode"])
    assert [r["configuration"] for r in document["results"]] == [{"flag": 1, "mode": "a"}, {"flag": 0, "mode": "b"},
                                                                 {"flag": 1, "mode": "1"}]  # fmt: skip
    document = t4.to_t4(rows, ["flag", "mode"])
    assert [r["configuration"] for r in document["results"]] == [{k: c[k] for k in ("flag", "mode")} for c in keyed]


@needs_hub
def test_the_hub_cache_and_its_t4_are_the_same_table():
    cache = load_table(HUB / "convolution_milo" / "A100.json.gz")
    published = load_table(HUB / "convolution_milo" / "A100_T4.json.gz")
    assert cache.size == published.size == 4362
    assert cache.entries.keys() == published.entries.keys()
    assert cache.optimum == pytest.approx(published.optimum)
    assert sum(s != "ok" for s, _ in cache.entries.values()) == 161
    params, restrictions = read_t1(HUB / "convolution_milo" / "T1.json")
    assert list(cache.params) == list(params) and len(restrictions) == 4
    family, problem = table_family(cache), table_problem(cache)
    assert len(family.space(problem, cache.params)) == 4362  # the product is 5120: the rest is restricted
    absent = {"block_size_x": 256, "block_size_y": 16, "tile_size_x": 1, "tile_size_y": 1, "read_only": 0, "use_padding": 0,
              "use_shmem": 0, "use_cmem": 1, "filter_height": 15, "filter_width": 15}  # fmt: skip
    assert family.violations(absent, problem) and table_measure(cache)(absent)["status"] == "launch_error"


# A space shaped as the hub's hotspot T1 writes it: block widths as a sum of a
# list and a range, tiles as comprehensions, and restrictions that leave a small
# part of a product past the listing limit (37 x 6 x 10^4 x 2 = 4.4 million).
HOTSPOT_LIKE = {
    "block_size_x": "[1, 2, 4, 8, 16] + list(range(32, 1024+1, 32))",
    "block_size_y": "[2**i for i in range(0, 6)]",
    "tile_size_x": "[i for i in range(1, 11)]",
    "tile_size_y": "[i for i in range(1, 11)]",
    "temporal_tiling_factor": "[i for i in range(1, 11)]",
    "loop_unroll_factor_t": "[i for i in range(1, 10+1)]",
    "sh_power": "[0, 1]",
}
HOTSPOT_RULES = ["block_size_x*block_size_y>= 32", "temporal_tiling_factor % loop_unroll_factor_t == 0",
                 "block_size_x*block_size_y <= 1024",
                 "(block_size_x*tile_size_x + temporal_tiling_factor * 2) * (block_size_y*tile_size_y + "
                 "temporal_tiling_factor * 2) * (2+sh_power) * 4 <= 49152"]  # fmt: skip


def test_a_table_past_the_listing_limit_is_listed_from_its_configurations(tmp_path):
    """A study on a table whose product of values is too large to list still
    draws only the table's configurations (before, it searched the product and
    found almost none of them)."""
    (tmp_path / "T1.json").write_text(json.dumps({"ConfigurationSpace": {
        "TuningParameters": [{"Name": n, "Type": "int", "Values": v} for n, v in HOTSPOT_LIKE.items()],
        "Conditions": [{"Expression": e, "Parameters": []} for e in HOTSPOT_RULES]}}))  # fmt: skip
    params, restrictions = read_t1(tmp_path / "T1.json")
    assert len(params["block_size_x"]) == 37 and params["block_size_y"] == [1, 2, 4, 8, 16, 32]
    names, allowed = list(params), restriction_check(restrictions)
    rng = random.Random(5)
    cache = {}
    while len(cache) < 300:
        cfg = {n: rng.choice(v) for n, v in params.items()}
        if allowed(cfg) is None:
            time = 1.0 + abs(cfg["block_size_x"] * cfg["block_size_y"] - 256) / 64 + cfg["temporal_tiling_factor"] / 7
            cache[",".join(str(cfg[n]) for n in names)] = cfg | {"time": time}
    path = tmp_path / "hot.json"
    path.write_text(json.dumps({"tune_params": params, "objective": "time", "cache": cache}))
    table = load_table(path)  # checked against the T1 beside it
    family, problem = table_family(table), table_problem(table)
    assert math.prod(len(values) for values in params.values()) > MAX_ENUMERATED
    listed = family.listed_space(problem, table.params)
    assert listed is not None and len(listed) == 300
    in_product_order = sorted(listed, key=lambda cfg: [params[n].index(cfg[n]) for n in names])
    assert listed == in_product_order  # as a family lists its space
    with _quiet_optuna():
        outcome = run_study(StudyOptions.for_strategy("ordinal_global", family=family, problem=problem, domains=table.params,
                                                      storage=None, study_name="hot", measure=table_measure(table),
                                                      budget_trials=60, timeout_s=None, seed=1))  # fmt: skip
    assert len(outcome.rows) == 60 and all(row["status"] == "ok" for row in outcome.rows)


@pytest.mark.parametrize(
    "domains",
    [None, {}, {"a": [1.0, 2]}, {"a": [True, False]}, {"a": [1, 2, 1]}, {"a": [1, 1.0]}, {"b": ["y", "x"], "a": [4, 2, 1]},
     {"a": [1, 2, 4], "b": ["x", "y"], "c": [True, False], "f": [0.5, 1.0]}, {"f": [1, 0.5]}, {"c": [1, 0, True]}, {"a": [7]}],
)  # fmt: skip
def test_a_table_lists_its_space_as_a_family_does(domains):
    """Read from the table, the space is what testing every combination gives, in its
    order: the values a parameter does not accept (a float for an integer) left out, a
    value listed twice giving its configurations twice, no domains the defaults."""
    table = SpaceTable("t", {"a": [1, 2, 4], "b": ["x", "y"], "c": [True, False], "f": [0.5, 1.0]},
                       entries={(1, "x", True, 0.5): ("ok", 1.0), (2, "y", False, 1.0): ("ok", 2.0),
                                (4, "x", False, 0.5): ("ok", 3.0), (1, "y", True, 1.0): ("ok", 4.0)})  # fmt: skip
    family, problem = table_family(table), table_problem(table)
    listed, tested = family.space(problem, domains), Family.space(family, problem, domains)
    assert listed == tested and [[type(v) for v in c.values()] for c in listed] == [[type(v) for v in c.values()] for c in tested]


def _cache(tmp_path: Path, cache: dict, **header) -> Path:
    path = tmp_path / "kt.json.gz"
    body = {"tune_params": {"x": [1, 2, 3]}, "objective": "time", "cache": cache} | header
    path.write_bytes(gzip.compress(json.dumps(body).encode()))
    return path


def test_unreadable_tables_fail_in_one_line_naming_the_file_and_rule(tmp_path):
    path = _cache(tmp_path, {"1": {"x": 1, "time": 2.0}, "2": {"x": 2, "time": "Broken"}})
    with pytest.raises(ValueError, match=r"kt.json.gz: cache entry '2' time must be a number or one of .*got 'Broken'") as err:
        read_kernel_tuner_cache(path)
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match=r"kt.json.gz: cache entry '1' must give every parameter, missing \['x'\]"):
        read_kernel_tuner_cache(_cache(tmp_path, {"1": {"time": 2.0}}))
    with pytest.raises(ValueError, match="must hold a correct configuration, got none of 1"):
        read_kernel_tuner_cache(_cache(tmp_path, {"1": {"x": 1, "time": "RuntimeFailedConfig"}}))
    (tmp_path / "T1.json").write_text(json.dumps({"ConfigurationSpace": {"TuningParameters": [{"Name": "x", "Values": "[1, 2, 3]"}],
                                                                         "Conditions": [{"Expression": "x != 2"}]}}))  # fmt: skip
    with pytest.raises(ValueError, match=r"configuration \{'x': 2\} must pass the restriction 'x != 2'"):
        load_table(_cache(tmp_path, {"1": {"x": 1, "time": 2.0}, "2": {"x": 2, "time": 1.0}}))
    (tmp_path / "T1.json").write_text(json.dumps({"ConfigurationSpace": {"TuningParameters": [{"Name": "x", "Values": "[1, 2, 3]"}],
                                                                         "Conditions": [{"Expression": "().__class__"}]}}))  # fmt: skip
    with pytest.raises(ValueError, match="T1.json: a restriction must be plain arithmetic over parameters"):
        load_table(_cache(tmp_path, {"1": {"x": 1, "time": 2.0}}))
    (tmp_path / "bad.json").write_text("{nope")
    with pytest.raises(ValueError, match=r"bad.json: must be JSON \(gzipped or not\)"):
        load_table(tmp_path / "bad.json")


GOOD_CACHE = {"tune_params": {"x": [1, 2, 3]}, "objective": "time", "cache": {"1": {"x": 1, "time": 2.0}, "2": {"x": 2, "time": 1.0}}}
T4_RESULT = {"configuration": {"x": 1}, "invalidity": "correct", "correctness": 1, "objectives": ["time"],
             "measurements": [{"name": "time", "value": 1.0, "unit": "ms"}]}  # fmt: skip


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (GOOD_CACHE | {"tune_params": [1, 2]}, r"tune_params must map each parameter to its values, got list"),
        (GOOD_CACHE | {"tune_params": {"x": 3}}, r"parameter 'x' must have a non-empty list of values, got 3"),
        (GOOD_CACHE | {"tune_params": {"x": [[1], 2]}}, r"values of 'x' must be numbers \(whole ones of at most 64 bits\), strings or booleans, got \[1\]"),
        (GOOD_CACHE | {"objective": 3}, r"objective must name the measured quantity \(or list names, the first ranking\), got 3"),
        (GOOD_CACHE | {"cache": {"1": 5}}, r"cache entry '1' must be an object, got int"),
        (GOOD_CACHE | {"cache": {"1": {"x": 7, "time": 1.0}}}, r"cache entry '1' x must be one of tune_params \[1, 2, 3\], got 7"),
        (GOOD_CACHE | {"cache": {"1": {"x": [1], "time": 1.0}}}, r"cache entry '1' x must be one of tune_params \[1, 2, 3\], got \[1\]"),
        (GOOD_CACHE | {"cache": {"1": {"x": 1, "time": True}}}, r"cache entry '1' time must be a positive finite number, got True"),
        ({"results": [T4_RESULT | {"measurements": 5}]}, r"results\[0\]\.measurements must be a list of \{name, value, unit\} objects, got 5"),
        ({"results": [T4_RESULT | {"measurements": [{"name": "time", "value": "fast"}]}]},
         r"results\[0\] is correct, so measurement 'time' must be a positive number, got 'fast'"),
        ({"results": [T4_RESULT | {"configuration": {"x": [1]}}]}, r"results\[0\]\.configuration x must be a number, a string or a boolean, got \[1\]"),
        ({"results": [T4_RESULT | {"measurements": [{"name": [1], "value": 1.0}]}]},
         r"results\[0\]\.measurements: a measurement's name must be a string, got \[1\]"),
        (GOOD_CACHE | {"cache": {"1": {"x": 1, "time": 10**400}}}, r"cache entry '1' time must be a positive finite number, got <a 1329-bit integer>"),
        (GOOD_CACHE | {"cache": {"1": {"x": 1, "time": 5e-324}}}, r"cache entry '1' time must be large enough that 1000 / time is finite, got 5e-324"),
        (GOOD_CACHE | {"cache": {"1": {"x": 1, "time": 2.0}, "1.0": {"x": 1.0, "time": 1.0}}},
         r"cache entry '1.0' must be a configuration of its own, got \{'x': 1.0\} a second time"),
        (GOOD_CACHE | {"cache": {"1": {"x": True, "time": 2.0}}}, r"cache entry '1' x must be one of tune_params \[1, 2, 3\], got True"),
        ({"results": [T4_RESULT, T4_RESULT | {"invalidity": "runtime"}]}, r"results\[1\] must be a configuration of its own, got \{'x': 1\} a second time"),
        ({"results": [T4_RESULT | {"measurements": [{"name": "time", "value": 5e-324, "unit": "ms"}]}]},
         r"results\[0\] measurement 'time' must be large enough that 1000 / time is finite, got 5e-324"),
        (GOOD_CACHE | {"tune_params": {"a\nb": [1]}, "cache": {"1": {"a\nb": 2, "time": 1.0}}},
         r"cache entry '1' 'a\\nb' must be one of tune_params \[1\], got 2"),
        (GOOD_CACHE | {"tune_params": {"x": [1, True]}}, r"values of 'x' must be distinct \(1, 1\.0 and True count as one\), got \[1, True\]"),
        ({"results": [T4_RESULT | {"invalidity": ["correct"]}]}, r"results\[0\]\.invalidity must be one of .*, got \['correct'\]"),
        ({"results": [T4_RESULT | {"correctness": "0"}]}, r"results\[0\]\.correctness must be a number \(1 correct, 0 not\), got 0"),
        ({"results": [T4_RESULT | {"configuration": {"x": 10**4000}}]},
         r"values of 'x' must be numbers \(whole ones of at most 64 bits\), strings or booleans, got <a 13288-bit integer>"),
        # A rate of 0 (or below) has no ratio to the optimum, whichever way the objective goes.
        (GOOD_CACHE | {"objective_higher_is_better": True, "cache": {"1": {"x": 1, "time": 0}}},
         r"cache entry '1' time must be a positive finite number, got 0"),
        ({"results": [T4_RESULT | {"measurements": [{"name": "gflops", "value": 0.0}]}], "metadata": {"tuner": {
            "ranked_by": "gflops", "objectives": {"gflops": "max"}}}},
         r"results\[0\] is correct, so measurement 'gflops' must be a positive number, got 0.0"),
        (GOOD_CACHE | {"tune_params": {f"p{i}": [1] for i in range(257)}}, r"a space may have at most 256 parameters, got 257"),
        ({"results": [T4_RESULT | {"configuration": {f"p{i}": 1 for i in range(257)}}]}, r"a space may have at most 256 parameters, got 257"),
        (GOOD_CACHE | {"tune_params": {"x\ud800": [1]}, "cache": {"1": {"x\ud800": 1, "time": 1.0}}},
         r"the name and values of 'x\\ud800' must be Unicode text \(JSON's \\ud800 alone is half of a character\), got 'x\\ud800'"),
        (GOOD_CACHE | {"tune_params": {"x": [1, "b\udc00"]}},
         r"the name and values of 'x' must be Unicode text \(JSON's \\ud800 alone is half of a character\), got 'b\\udc00'"),
        (GOOD_CACHE | {"objective_higher_is_better": "no"}, r"objective_higher_is_better must be true or false, got 'no'"),
        # Kernel Tuner 1.x writes its objectives as a list: the first ranks.
        (GOOD_CACHE | {"objective": ["time", 3]}, r"objective must name the measured quantity \(or list names, the first "
                                                  r"ranking\), got \['time', 3\]"),
        ({"results": [T4_RESULT | {"objectives": ["throughput"], "measurements": [{"name": "throughput", "value": 1.0}]}]},
         r"objective 'throughput' must be one whose direction is known \(Kernel Tuner's \['time', .*\], or a name holding "
         r"'time' or one of \['score', 'gflop/s', 'gflops', 'gb/s'\], as the methodology's scoring reads them\), got none"),
        # Kernel Tuner refuses to guess the direction of an objective it does not know; so does the reader.
        (GOOD_CACHE | {"objective": "speed", "cache": {"1": {"x": 1, "speed": 2.0}}},
         r"objective 'speed' must be one whose direction Kernel Tuner knows \['time', .*'GFLOP/s', .*\], or the file must "
         r"say objective_higher_is_better, got neither"),
        # True is 1 to Python: read as one value, a parameter of true, 2, 3 became [True, 2, 3] (as a cache refuses it).
        ({"results": [T4_RESULT | {"configuration": {"x": True}}, T4_RESULT | {"configuration": {"x": 2}},
                      T4_RESULT | {"configuration": {"x": 3}}]},
         r"values of 'x' must be all booleans or all numbers \(Python counts true as 1\), got True in results\[0\] and 2 in "
         r"results\[1\]"),
        ({"results": [T4_RESULT | {"configuration": {"x": 2.5}}, T4_RESULT | {"configuration": {"x": 0}},
                      T4_RESULT | {"configuration": {"x": False}, "invalidity": "compile"}]},
         r"values of 'x' must be all booleans or all numbers \(Python counts true as 1\), got 2.5 in results\[0\] and False "
         r"in results\[2\]"),
        # Two times of one result: the last won, and could become the optimum.
        ({"results": [T4_RESULT | {"measurements": [{"name": "time", "value": 5.0}, {"name": "time", "value": 0.1}]}]},
         r"results\[0\] is correct, so measurement 'time' must be given once, got it 2 times: \[5.0, 0.1\]"),
        ({"results": [T4_RESULT | {"configuration": {"x": 2}},
                      T4_RESULT | {"measurements": [{"name": "time", "value": 1.0}, {"name": "time", "value": "fast"}]}]},
         r"results\[1\] is correct, so measurement 'time' must be given once, got it 2 times: \[1.0, 'fast'\]"),
    ],
)  # fmt: skip
def test_malformed_tables_fail_in_one_line_naming_the_file_rule_and_value(tmp_path, document, message):
    path = tmp_path / "table.json"
    path.write_text(json.dumps(document))
    with pytest.raises(ValueError, match=rf"^{re.escape(str(tmp_path))}/table.json: {message}$") as err:
        load_table(path)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("objective", "extra", "best_x"),
    [
        ("time", {}, 3),  # the smallest time
        ("GFLOP/s", {}, 1),  # a Kernel Tuner cache names the objective but not its direction: its map gives it
        ("energy", {}, 3),
        ("GFLOPS/W", {}, 1),
        ("speed", {"objective_higher_is_better": True}, 1),  # the file's own word wins
        ("time", {"objective_higher_is_better": True}, 1),
        (["GFLOP/s"], {}, 1),  # as Kernel Tuner 1.x writes it: a list, the first ranking
        (["time", "energy"], {}, 3),
    ],
)  # fmt: skip
def test_a_kernel_tuner_cache_is_ranked_the_way_its_objective_goes(tmp_path, objective, extra, best_x):
    first = objective[0] if isinstance(objective, list) else objective
    cache = {str(x): {"x": x, "energy": 1.0 / value, first: value} for x, value in ((1, 30.0), (2, 20.0), (3, 10.0))}
    path = tmp_path / "kt.json"
    path.write_text(json.dumps({"tune_params": {"x": [1, 2, 3]}, "objective": objective, "cache": cache} | extra))
    table = load_table(path)
    best = max(table.entries, key=lambda key: table.entries[key][1])
    assert table.config(best) == {"x": best_x}
    assert table.minimise == (best_x == 3)


@pytest.mark.parametrize(
    ("objective", "metadata", "best_x"),
    [
        ("time", None, 3),
        ("energy", None, 3),  # Kernel Tuner's map: lower is better
        ("GFLOP/s", None, 1),
        ("score", None, 1),  # the methodology's rule: a name holding score, gflop/s, gflops or gb/s is maximised
        ("GFLOPS", None, 1),
        ("achieved gb/s", None, 1),
        ("kernel_time_us", None, 3),  # ... one holding time minimised
        ("duration", {"tuner": {"ranked_by": "duration", "objectives": {"duration": "max"}}}, 1),  # our metadata wins
    ],
)  # fmt: skip
def test_a_t4_file_is_ranked_the_way_its_objective_goes(tmp_path, objective, metadata, best_x):
    results = [{"configuration": {"x": x}, "invalidity": "correct", "correctness": 1, "objectives": [objective],
                "measurements": [{"name": objective, "value": value, "unit": ""}]}
               for x, value in ((1, 30.0), (2, 20.0), (3, 10.0))]  # fmt: skip
    path = tmp_path / "t4.json"
    path.write_text(json.dumps({"results": results} | ({"metadata": metadata} if metadata else {})))
    table = load_table(path)
    best = max(table.entries, key=lambda key: table.entries[key][1])
    assert table.config(best) == {"x": best_x}


def test_a_kernel_tuner_1x_cache_reads_its_error_markers(tmp_path):
    """Kernel Tuner 1.x writes a failed configuration's marker under __error__, with no time;
    ErrorConfig (the class of every marker) is a failure too; InvalidConfig is not in the space."""
    cache = {"1": {"x": 1, "time": 2.0}, "2": {"x": 2, "__error__": "CompilationFailedConfig"},
             "3": {"x": 3, "__error__": "ErrorConfig"}, "4": {"x": 4, "__error__": "InvalidConfig"},
             "5": {"x": 5, "time": 1.0, "__error__": "RuntimeFailedConfig"}}  # fmt: skip
    path = tmp_path / "kt.json"
    path.write_text(json.dumps({"tune_params": {"x": [1, 2, 3, 4, 5]}, "objective": "time", "cache": cache}))
    table = load_table(path)
    assert table.entries == {(1,): ("ok", 500.0), (2,): ("compile_error", None), (3,): ("launch_error", None),
                             (5,): ("launch_error", None)}  # fmt: skip
    path.write_text(json.dumps({"tune_params": {"x": [1, 2]}, "objective": "time",
                                "cache": {"1": {"x": 1, "time": 2.0}, "2": {"x": 2, "__error__": "Oops"}}}))  # fmt: skip
    with pytest.raises(ValueError, match=r"cache entry '2' __error__ must be a number or one of \['CompilationFailedConfig', "):
        load_table(path)


def test_a_kernel_tuner_cache_left_open_reads_as_kernel_tuner_reads_it(tmp_path):
    """Kernel Tuner appends each entry with a trailing comma and closes the file only when a
    run ends; a cache of a run that was stopped has no closing braces."""
    header = json.dumps({"tune_params": {"x": [1, 2, 3]}, "objective": "time", "cache": {}}, indent="")[:-3]
    entries = "".join("\n" + json.dumps({str(x): {"x": x, "time": float(x)}})[1:-1] + "," for x in (1, 2, 3))
    path = tmp_path / "open.json"
    path.write_text(header + entries)
    assert sorted(load_table(path).entries) == [(1,), (2,), (3,)]
    path.write_text(header)  # no entry yet: an empty cache
    with pytest.raises(ValueError, match="must hold a correct configuration"):
        load_table(path)
    # Cut anywhere but after an entry's comma, the file is damaged, not open.
    for cut in (header + entries + '\n"4": {"x": 4, "ti', header + entries[:-1]):
        path.write_text(cut)
        with pytest.raises(ValueError, match=r"open.json: must be JSON \(gzipped or not\), got JSONDecodeError"):
            load_table(path)
    # Only a cache is closed so: a T1 file (here one whose parameter is named cache) cut after a comma is damaged.
    t1 = '{"ConfigurationSpace": {"TuningParameters": [{"Name": "cache", "Values": "[1, 2, 3]"}],'
    (tmp_path / "T1.json").write_text(t1)
    with pytest.raises(ValueError, match=r"T1.json: must be JSON \(gzipped or not\), got JSONDecodeError"):
        tables.read_t1(tmp_path / "T1.json")
    t1 = '{"tune_params": {"x": [1]}, "ConfigurationSpace": {"cache": {"TuningParameters": [{"Name": "x", "Values": "[1]"}],'
    (tmp_path / "T1.json").write_text(t1)
    with pytest.raises(ValueError, match=r"T1.json: must be JSON \(gzipped or not\), got JSONDecodeError"):
        tables.read_t1(tmp_path / "T1.json")


@pytest.mark.parametrize("name", ["T1.json", "t1.json", "T1.json.gz"])
def test_the_t1_file_beside_a_table_is_found_by_any_name_a_hub_folder_gives_it(tmp_path, name):
    (tmp_path / "kt.json").write_text(json.dumps(GOOD_CACHE | {"cache": {str(x): {"x": x, "time": float(x)} for x in (1, 2, 3)}}))
    t1 = json.dumps({"ConfigurationSpace": {"TuningParameters": [{"Name": "x", "Values": "[1, 2, 3]"}],
                                            "Conditions": [{"Expression": "x < 3"}]}}).encode()  # fmt: skip
    (tmp_path / name).write_bytes(gzip.compress(t1) if name.endswith(".gz") else t1)
    with pytest.raises(ValueError, match=r"configuration \{'x': 3\} must pass the restriction 'x < 3'"):
        load_table(tmp_path / "kt.json")
    (tmp_path / ("t1.JSON" if name != "t1.json" else "T1.JSON")).write_bytes(t1)
    with pytest.raises(ValueError, match=r"kt.json: the folder must hold at most one T1 file beside it, got \["):
        load_table(tmp_path / "kt.json")


def test_a_pipe_or_a_folder_is_refused_before_it_is_read(tmp_path):
    os.mkfifo(tmp_path / "table.json")  # reading it would wait for a writer forever
    with pytest.raises(ValueError, match=r"table.json: must be JSON \(gzipped or not\) in a regular file, got a pipe$"):
        load_table(tmp_path / "table.json")
    (tmp_path / "T1.json").mkdir()
    (tmp_path / "kt.json").write_text(json.dumps(GOOD_CACHE))
    with pytest.raises(ValueError, match=r"T1.json: must be JSON \(gzipped or not\) in a regular file, got a folder$"):
        load_table(tmp_path / "kt.json", t1=tmp_path / "T1.json")


def test_restrictions_too_slow_to_check_over_the_table_stop_in_one_line(tmp_path, monkeypatch):
    # Each restriction is short, but 450 string minimums of 9,999 characters take tens of milliseconds
    # a configuration: checking 2,000 configurations would take about a minute.
    monkeypatch.setattr(tables, "MAX_CHECK_SECONDS", 5.0)
    slow = " and ".join(["min('x'*9999)<'y'"] * 450)
    (tmp_path / "T1.json").write_text(json.dumps({"ConfigurationSpace": {
        "TuningParameters": [{"Name": "x", "Values": "list(range(2000))"}], "Conditions": [slow]}}))  # fmt: skip
    cache = {str(x): {"x": x, "time": 1.0 + x} for x in range(2000)}
    (tmp_path / "kt.json").write_text(json.dumps({"tune_params": {"x": list(range(2000))}, "objective": "time", "cache": cache}))
    started = time.perf_counter()
    with pytest.raises(ValueError, match=r"T1.json: the restrictions must take at most 5 s to check over the table's 2000 "
                                         r"configurations, got [\d.]+ ms a configuration \(\d+ s\)$"):  # fmt: skip
        load_table(tmp_path / "kt.json")
    assert time.perf_counter() - started < 5.0  # stopped on its projection, not at the end


def test_what_only_labels_a_cache_or_compares_equal_is_not_refused(tmp_path):
    path = tmp_path / "table.json"
    path.write_text(json.dumps(GOOD_CACHE | {"problem_size": "(4096, 4096)"}))
    assert load_table(path).problem_size == ()  # a label in a form we do not read: left out
    path.write_text(json.dumps(GOOD_CACHE | {"problem_size": [4096, 4096]}))
    assert load_table(path).problem_size == (4096, 4096)
    floats = {"tune_params": {"x": [1.0, 2.0]}, "objective": "time", "cache": {"1": {"x": 1, "time": 2.0}, "2": {"x": 2.0, "time": 1.0}}}
    path.write_text(json.dumps(floats))
    assert load_table(path).size == 2  # 1 is 1.0, as the table's keys compare


@pytest.mark.parametrize(
    ("condition", "message"),
    [
        ("x.real > 0", r"T1.json: a restriction must be plain arithmetic over parameters, got 'x.real > 0' \(Attribute is not allowed\)"),
        ("open('/etc/passwd')", r"T1.json: a restriction must be plain arithmetic over parameters, got .* may be called\)"),
        ("[y for y in range(9)]", r"T1.json: a restriction must be plain arithmetic over parameters, got .*\(ListComp is not allowed\)"),
        ("[0] * 10**9", r"T1.json: a restriction must be plain arithmetic over parameters, got .*\(a list, tuple or set may only stand beside 'in'\)"),
        ("b'a' * 9 == x", r"T1.json: a restriction must be plain arithmetic over parameters, got .*\(constant b'a' is not allowed\)"),
        ("+".join(["x"] * 20_000), r"T1.json: a restriction must be at most 10000 characters, got 39999"),
        ("y > 1", r"T1.json: a restriction may name only parameters \['x'\], got 'y > 1' naming \['y'\]"),
        ("x > ", r"T1.json: a restriction must be a Python expression, got 'x > ' \(invalid syntax\)"),
        (5, r"T1.json: a restriction must be a Python expression \(a string\), got 5"),
        # Evaluated for each configuration, these would not finish: refused as they run.
        ("9**9**9 > x", r"table.json: restriction '9\*\*9\*\*9 > x' must evaluate for \{'x': 1\}, got ValueError: an exponent must be at most 64, got 387420489"),
        ("(((x + 9) ** 64) ** 64) ** 64 > 0", r"table.json: restriction .* got ValueError: a power must stay under 1024 bits, got .*"),
        ("'a' * 10**9 != 'b'", r"table.json: restriction .* got ValueError: a string or list repeated must stay under 10000 items, got 1 x 1000000000"),
        ("'a' * 5000 * 5000 != 'b'", r"table.json: restriction .* got ValueError: a string or list repeated must stay under 10000 items, got 5000 x 5000"),
        ("'%0999999999d' % x == ''", r"table.json: restriction .* got ValueError: % must take numbers \(string formatting is not a restriction\), got .*"),
        ("x in [0] * 10**9", r"T1.json: a restriction must be plain arithmetic over parameters, got .*\(a list, tuple or set may only stand beside 'in'\)"),
        ("x in [0] * 1000", r"T1.json: a restriction must be plain arithmetic over parameters, got .*\(a list, tuple or set may only stand beside 'in'\)"),
        ("round(x, -(10**9)) == 0", r"table.json: restriction .* got ValueError: round's digits must be at most 64, got -1000000000"),
        ("x << 10**9 > 0", r"table.json: restriction .* got ValueError: a shift must be at most 1024 bits, got 1000000000"),
        ("(1 << 1000 << 1000) % (x + 1) >= 0", r"table.json: restriction .* got ValueError: a shift must stay under 1024 bits, got a 1001-bit number << 1000"),
        ("len('a' * 9000 + 'a' * 9000) > x", r"table.json: restriction .* got ValueError: strings or lists added must stay under 10000 items, got 9000 \+ 9000"),
        ("x % 0 == 0", r"table.json: restriction 'x % 0 == 0' must evaluate for \{'x': 1\}, got ZeroDivisionError: integer modulo by zero"),
    ],
)  # fmt: skip
def test_hostile_restrictions_are_refused_in_one_line(tmp_path, condition, message):
    (tmp_path / "T1.json").write_text(json.dumps({"ConfigurationSpace": {
        "TuningParameters": [{"Name": "x", "Values": "[1, 2, 3]"}], "Conditions": [{"Expression": condition}]}}))  # fmt: skip
    (tmp_path / "table.json").write_text(json.dumps(GOOD_CACHE))
    with pytest.raises(ValueError, match=rf"^{re.escape(str(tmp_path))}/{message}$") as err:
        load_table(tmp_path / "table.json")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("space", "message"),
    [
        ({"TuningParameters": [{"Name": "x", "Values": "[1]"}, {"Name": "x", "Values": "[2]"}]},
         r"parameter names must be distinct, got 'x' twice"),
        ({"TuningParameters": [{"Name": "x", "Values": {"a": 1, "b": 2}}]}, r"Values of 'x' must be a list or a string, got dict"),
        ({"TuningParameters": [{"Name": f"p{i}", "Values": "list(range(100000))"} for i in range(11)]},
         r"the parameters must hold at most 1000000 values together, got 1100000 or more"),
        ({"TuningParameters": [{"Name": "round", "Values": "[1, 2]"}], "Conditions": [{"Expression": "round > 1"}]},
         r"a parameter a restriction can name must not read as another's name, a function's or one with '__', got \['round'\]"),
        ({"TuningParameters": [{"Name": "x", "Values": "[1, 2]"}, {"Name": "\uff58", "Values": "[1, 2]"}],
          "Conditions": [{"Expression": "\uff58 > 1"}]},
         r"a parameter a restriction can name must not read as another's name, .* got \['x'\]"),
        ({"TuningParameters": [{"Name": "x", "Values": "[1, 2]"}], "Conditions": [{"Expression": "x > 0"}] * 1001},
         r"a space may have at most 1000 restrictions, got 1001"),
        # A fault of a condition names the condition, not TuningParameters.
        ({"TuningParameters": [{"Name": "x", "Values": "[1, 2]"}],
          "Conditions": [{"Expression": "x > 0"}, {"Parameters": ["x"]}]},
         r"ConfigurationSpace\.Conditions\[1\]\.Expression must be given \(the restriction as a Python expression\), got a "
         r"condition of only \['Parameters'\]$"),
        ({"TuningParameters": [{"Name": "x", "Values": "[1, 2]"}], "Conditions": {"Expression": "x > 0"}},
         r"ConfigurationSpace\.Conditions must be a list, got dict$"),
    ],
)  # fmt: skip
def test_t1_spaces_that_would_mislead_or_cost_too_much_are_refused(tmp_path, space, message):
    (tmp_path / "T1.json").write_text(json.dumps({"ConfigurationSpace": space}))
    with pytest.raises(ValueError, match=message) as err:
        read_t1(tmp_path / "T1.json")
    assert "\n" not in str(err.value) and str(err.value).startswith(f"{tmp_path / 'T1.json'}: ")


def test_a_restriction_reads_a_parameter_as_python_reads_its_name(tmp_path):
    """Python reads the name 'ｘ' (fullwidth) as 'x': a parameter so named is found by its restriction."""
    (tmp_path / "T1.json").write_text(json.dumps({"ConfigurationSpace": {
        "TuningParameters": [{"Name": "\uff58", "Values": "[1, 2, 3]"}], "Conditions": [{"Expression": "\uff58 != 2"}]}}))  # fmt: skip
    params, restrictions = read_t1(tmp_path / "T1.json")
    check = restriction_check(restrictions)
    assert [check({"\uff58": v}) for v in params["\uff58"]] == [None, "\uff58 != 2", None]


def test_plain_restrictions_still_hold(tmp_path):
    """What T1 files and Kernel Tuner write: comparisons, chains, membership,
    powers and the allowed calls, over every parameter."""
    conditions = ["1 <= x * 2 <= 6", "x in [1, 2]", "max(x, 1) ** 2 < 2 ** 8", "x % 2 == 1 or int(x / 2) == 1", "-x < 0 if x else True",
                  "x in {1, 2}", "(x, 1) in [(1, 1), (2, 1)]", "x & (x - 1) == 0", "x is not None", "~x < 0 and x << 1 <= 4",
                  "round(x / 3, 2) < 1"]  # fmt: skip
    (tmp_path / "T1.json").write_text(json.dumps({"ConfigurationSpace": {
        "TuningParameters": [{"Name": "x", "Values": "[1, 2, 3]"}], "Conditions": [{"Expression": c} for c in conditions]}}))  # fmt: skip
    (tmp_path / "table.json").write_text(json.dumps(GOOD_CACHE))
    table = load_table(tmp_path / "table.json")
    assert table.restrictions == conditions and table.size == 2
    (tmp_path / "T1.json").write_text(json.dumps({"ConfigurationSpace": {
        "TuningParameters": [{"Name": "x", "Values": "[1, 2, 3]"}], "Conditions": [{"Expression": "x != 2"}]}}))  # fmt: skip
    with pytest.raises(ValueError, match=r"configuration \{'x': 2\} must pass the restriction 'x != 2'"):
        load_table(tmp_path / "table.json")


@pytest.mark.parametrize(
    ("content", "why"),
    [(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03garbage", "BadGzipFile|error"), (b"[" * 100_000, "RecursionError"),
     (b'{"cache": ' + b"1" * 5000 + b"}", "ValueError")],
)  # fmt: skip
def test_damaged_files_fail_in_one_line_naming_them(tmp_path, content, why):
    path = tmp_path / "table.json.gz"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}: must be JSON \(gzipped or not\), got ({why})") as err:
        load_table(path)
    assert "\n" not in str(err.value)


def test_a_file_that_unpacks_past_the_limit_is_refused_before_it_is_read_whole(tmp_path, monkeypatch):
    """A gzip file a few kilobytes long can unpack to gigabytes: at most the limit is unpacked."""
    monkeypatch.setattr(t4, "MAX_JSON_BYTES", 4096)
    path = tmp_path / "bomb.json.gz"
    path.write_bytes(gzip.compress(b" " * 10_000 + b"{}"))
    with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}: must hold at most 0 MiB of JSON \(unpacked\), got more$"):
        load_table(path)
    path.write_bytes(gzip.compress(b" " * 4000 + json.dumps(GOOD_CACHE).encode()[:90]))  # under the limit: read as before
    with pytest.raises(ValueError, match="must be JSON"):
        load_table(path)


def test_the_t4_command_writes_a_problem(tmp_path, capsys):
    out = tmp_path / "h200.json"
    assert cli_main(["t4", str(H200), "--problem", PROBLEM.key, "--out", str(out)]) == 0
    assert "1536 results (1536 correct) of reduce-int32-n268435456 from ['sweep:reduce_space']" in capsys.readouterr().out
    assert len(json.loads(out.read_text())["results"]) == 1536
    assert cli_main(["t4", str(H200), "--out", str(out)]) == 2
    assert "config error: t4: --problem must name one of the table's problems" in capsys.readouterr().err
    assert cli_main(["t4", str(H200), "--problem", PROBLEM.key, "--out", str(tmp_path)]) == 2
    assert f"config error: t4: --out must name the file to write, got '{tmp_path}', a folder" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["h200.json"]  # nothing half-written beside it
    damaged = tmp_path / "damaged.parquet"  # a correct row whose time is missing: no T4 reader could rank it
    rows = pd.read_parquet(H200)
    rows.loc[rows.index[rows["source"] == "sweep:reduce_space"][0], "time_ms_median"] = float("nan")
    rows.to_parquet(damaged)
    assert cli_main(["t4", str(damaged), "--problem", PROBLEM.key, "--out", str(tmp_path / "d.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"config error: t4: {damaged}: a correct results row must give ['time', 'bandwidth_gbs'] as "
                          "positive numbers, got time_ms_median None for {") and len(err.splitlines()) == 1  # fmt: skip
    damaged.unlink()
    os.mkfifo(tmp_path / "pipe.json")  # the rename of a finished file would put it in the pipe's place
    assert cli_main(["t4", str(H200), "--problem", PROBLEM.key, "--out", str(tmp_path / "pipe.json")]) == 2
    assert f"config error: t4: {tmp_path / 'pipe.json'}: must be a file to write (or none yet), got a device, pipe or socket" \
        in capsys.readouterr().err  # fmt: skip
    assert (tmp_path / "pipe.json").is_fifo() and sorted(p.name for p in tmp_path.iterdir()) == ["h200.json", "pipe.json"]


@pytest.fixture
def small_results(tmp_path) -> Path:
    """A results Parquet file of 40 rows of one problem (the H200's sweep of the search benchmark's hard space)."""
    path = tmp_path / "rh.parquet"
    pd.read_parquet(REPO / "benchmarks" / "tables" / "reduce_hard_h200.parquet").head(40).to_parquet(path)
    return path


def _t4_refused(capsys, args: list[str]) -> str:
    """The one line the t4 command stops with (exit status 2)."""
    assert cli_main(["t4", *args]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.splitlines()) == 1, captured.err
    return captured.err.strip()


def test_the_t4_command_never_writes_over_measurements(tmp_path, capsys, small_results):
    """Before, `t4 rh.parquet --out rh.parquet` exited 0 with the measurements replaced by T4 JSON."""
    measured = small_results.read_bytes()
    refused = {
        # the input itself, by its own name or another (a hard link, a symbolic link named .json)
        str(small_results): "--out: must not be the results it reads (their measurements would be lost), got "
        f"'{small_results}', the input itself",
        "hard.json": "the input itself",
        # not a T4 file's name (the help promises .json or .json.gz)
        "new.parquet": "--out: must end in .json or .json.gz (a T4 file, gzipped where .gz), got ",
        "t4.csv": "--out: must end in .json or .json.gz",
        # another Parquet file, whatever its name
        "other.json": "--out: must not be a Parquet file (its measurements would be lost), got ",
        "rh.parquet/x.json": "--out: must be in a folder, got ",
    }
    os.link(small_results, tmp_path / "hard.json")
    (tmp_path / "other.json").write_bytes(measured)
    before = sorted(p.name for p in tmp_path.iterdir())
    for out, message in refused.items():
        assert message in _t4_refused(capsys, [str(small_results), "--out", str(tmp_path / out)]), out
    assert small_results.read_bytes() == measured and (tmp_path / "other.json").read_bytes() == measured
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written, nothing half-written
    # A folder of results: none of its Parquet files either, by any name.
    folder = tmp_path / "results"
    (folder / "sweeps").mkdir(parents=True)
    (folder / "sweeps" / "rh.parquet").write_bytes(measured)
    (folder / "rh.json").symlink_to(folder / "sweeps" / "rh.parquet")
    assert _t4_refused(capsys, [str(folder), "--out", str(folder / "rh.json")]).endswith(
        f"got '{folder / 'rh.json'}', the input folder's sweeps/rh.parquet"
    )
    assert (folder / "sweeps" / "rh.parquet").read_bytes() == measured
    # An export is written, and written again over itself (JSON, gzipped where .gz, whatever the case).
    for out in ("t4.json", "t4.json", "T4.JSON.GZ"):
        assert cli_main(["t4", str(small_results), "--out", str(tmp_path / out)]) == 0
        assert "40 results" in capsys.readouterr().out
        assert len(t4.read_json(tmp_path / out)["results"]) == 40
    assert (tmp_path / "T4.JSON.GZ").read_bytes()[:2] == b"\x1f\x8b"


def test_the_t4_command_never_writes_over_a_file_that_is_no_t4_file(tmp_path, capsys, small_results):
    """Before, `t4 results/gpu --out results/gpu/peaks.json` exited 0 with the measured peaks (and so
    device.json) replaced by T4 JSON: only Parquet files were kept. A T4 file is still written over."""
    rule = "--out: must be a new file or a T4 file to write over (a JSON object with ['results', 'schema_version']), got"
    reference = REPO / "results" / "reference" / "nvidia-h200"
    files = {
        "peaks.json": (reference / "peaks.json").read_bytes(),
        "device.json": (reference / "device.json").read_bytes(),
        "half.json": b'{"results": []}',
        "list.json": b"[1, 2]",
        "notes.json": b"not JSON",
        "peaks.json.gz": gzip.compress((reference / "peaks.json").read_bytes()),
    }
    whats = {
        "peaks.json": "a JSON object without ['results', 'schema_version']",
        "device.json": "a JSON object without ['results', 'schema_version']",
        "half.json": "a JSON object without ['schema_version']",
        "list.json": "a JSON list, not an object",
        "notes.json": "no JSON (gzipped or not)",
        "peaks.json.gz": "a JSON object without ['results', 'schema_version']",
    }
    for name, content in files.items():
        (tmp_path / name).write_bytes(content)
    for name, what in whats.items():
        line = _t4_refused(capsys, [str(small_results), "--out", str(tmp_path / name)])
        assert line == f"config error: t4: {rule} '{tmp_path / name}', which holds {what}"
    assert {name: (tmp_path / name).read_bytes() for name in files} == files  # nothing written over
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*files, small_results.name])  # nor beside them
    # A T4 file (gzipped or not) and an empty file (nothing to lose) are written over.
    (tmp_path / "empty.json").write_bytes(b"")
    for out in ("t4.json", "t4.json", "t4.json.gz", "t4.json.gz", "empty.json"):
        assert cli_main(["t4", str(small_results), "--out", str(tmp_path / out)]) == 0, capsys.readouterr().err
        assert "40 results" in capsys.readouterr().out
        assert len(t4.read_json(tmp_path / out)["results"]) == 40


def test_the_t4_command_says_what_its_input_is_when_it_is_no_results_table(tmp_path, capsys, small_results):
    """A T4 file (or any other) given as the input is the wrong input, not a damaged one: before,
    a JSON file was called an unreadable Parquet file to remove, a pipe got a FileNotFoundError
    and an empty folder a --problem to choose among none."""
    document = t4.to_t4(read(small_results), [p.name for p in REGISTRY["reduce"].params])
    t4.write_t4(document, tmp_path / "good.json")
    t4.write_t4(document, tmp_path / "good.json.gz")
    (tmp_path / "notes.txt").write_text("not a table\n")
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "empty").mkdir()
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "good.json").write_bytes((tmp_path / "good.json").read_bytes())
    rule = "must be a results Parquet file (measurements.parquet, sweeps/*.parquet) or a results folder, got"
    for name, what in [("good.json", "a JSON file"), ("good.json.gz", "a gzipped file (a T4 or Kernel Tuner file?), not Parquet"),
                       ("notes.txt", "a file that is not Parquet (it begins b'not a ta', not b'PAR1')"), ("pipe", "a pipe"),
                       ("empty", NO_TABLE), ("other", NO_TABLE),
                       ("absent", "nothing there")]:  # fmt: skip
        line = _t4_refused(capsys, [str(tmp_path / name), "--out", str(tmp_path / "t4.json")])
        assert line == f"config error: t4: {tmp_path / name}: {rule} {what}"
        assert "remove" not in line
    assert not (tmp_path / "t4.json").exists()
    assert (tmp_path / "good.json").read_bytes() == json.dumps(document).encode() + b"\n"  # left as it was
    # Parquet files with no results rows in them: said so, not a --problem to choose among none.
    read(small_results).assign(status=None).to_parquet(tmp_path / "statusless.parquet")
    statusless = tmp_path / "statusless.parquet"
    assert _t4_refused(capsys, [str(statusless), "--out", str(tmp_path / "t4.json")]) == (
        f"config error: t4: {statusless}: must hold results rows (of a sweep, a study or measurements), got none"
    )


NO_TABLE = ("a folder that holds no results table (no measurements.parquet, sweeps/*.parquet, studies/*.parquet or "
            ".parquet file of its own)")
SAXPY = REPO / "examples" / "saxpy" / "reference" / "nvidia-h100-80gb-hbm3"
H100 = REPO / "results" / "reference" / "nvidia-h100-80gb-hbm3"


def _results_folder(source: Path, to: Path) -> Path:
    """A copy of a shipped results folder's tables (never the tracked files themselves), with the
    per-sweep and per-study tables a run collects its dataset from, split from that dataset where
    the folder ships without them."""
    for path in source.rglob("*.parquet"):
        (to / path.relative_to(source)).parent.mkdir(parents=True, exist_ok=True)
        (to / path.relative_to(source)).write_bytes(path.read_bytes())
    if not (to / "sweeps").exists() and (to / "measurements.parquet").exists():
        dataset = pd.read_parquet(to / "measurements.parquet")
        for source_name, rows in dataset.groupby("source"):
            kind, _, name = source_name.partition(":")
            folder = {"sweep": "sweeps", "study": "studies"}.get(kind)
            if folder:
                (to / folder).mkdir(exist_ok=True)
                rows.to_parquet(to / folder / f"{name}.parquet", index=False)
    return to


def _exported(capsys, folder: Path, problem: str, out: Path) -> list[dict]:
    assert cli_main(["t4", str(folder), "--problem", problem, "--out", str(out)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    return t4.read_json(out)["results"]


def test_a_results_folder_gives_each_row_once(tmp_path, capsys):
    """Before, the saxpy folder gave 450 results for its 225 configurations: the sweep's rows from both
    measurements.parquet and sweeps/saxpy_space.parquet."""
    folder = _results_folder(SAXPY, tmp_path / "saxpy")
    problem = "saxpy-float32-n67108864"
    configurations = len(read(SAXPY / "sweeps" / "saxpy_space.parquet"))
    assert configurations == 225
    results = _exported(capsys, folder, problem, tmp_path / "all.json")
    assert len(results) == configurations
    assert len({json.dumps(r["configuration"], sort_keys=True) for r in results}) == configurations
    # Before collect (no measurements.parquet): its sweeps and studies, once each.
    (folder / "measurements.parquet").unlink()
    assert len(_exported(capsys, folder, problem, tmp_path / "sweeps.json")) == configurations
    assert _exported(capsys, folder, problem, tmp_path / "sweeps.json") == results
    # A folder of tables (a results folder's sweeps/) is read as its own Parquet files.
    assert _exported(capsys, folder / "sweeps", problem, tmp_path / "own.json") == results
    assert cli_main(["t4", str(folder), "--problem", problem, "--source", "study:saxpy_search",
                     "--out", str(tmp_path / "study.json")]) == 0  # fmt: skip
    assert "25 results" in capsys.readouterr().out


def test_a_results_folders_profiles_are_no_results_rows(tmp_path, capsys):
    """Before, the H100 reference folder was refused outright: its profiles/copy_widths.parquet (hardware
    counters) "lacks ['status']"."""
    folder = _results_folder(H100, tmp_path / "h100")
    assert (folder / "profiles" / "copy_widths.parquet").exists()
    problem = "reduce-int32-n268435456"
    results = _exported(capsys, folder, problem, tmp_path / "h100.json")
    expected = t4.problem_rows(read(H100 / "measurements.parquet"), problem)
    assert len(results) == len(expected) == 1536
    # Before collect: sweeps, studies and peaks, never profiles; the largest source is again the exhaustive sweep.
    (folder / "measurements.parquet").unlink()
    assert cli_main(["t4", str(folder), "--problem", problem, "--source", "study:reduce_int32",
                     "--out", str(tmp_path / "study.json")]) == 0  # fmt: skip
    assert "154 results" in capsys.readouterr().out
    assert cli_main(["t4", str(folder), "--problem", problem, "--out", str(tmp_path / "sweeps.json")]) == 0
    assert "1536 results" in capsys.readouterr().out
    again = t4.read_json(tmp_path / "sweeps.json")["results"]
    assert sorted(json.dumps(r["configuration"], sort_keys=True) for r in again) == sorted(
        json.dumps(r["configuration"], sort_keys=True) for r in results
    )
    # A folder whose measurements.parquet is no file is refused, not read around.
    (folder / "measurements.parquet").mkdir()
    line = _t4_refused(capsys, [str(folder), "--problem", problem, "--out", str(tmp_path / "x.json")])
    assert line == (f"config error: t4: {folder}: must be a results Parquet file (measurements.parquet, sweeps/*.parquet) or "
                    "a results folder, got a folder whose measurements.parquet is a folder, not a Parquet file")  # fmt: skip


def test_a_path_that_cannot_be_looked_at_stops_in_one_line(tmp_path, capsys, monkeypatch, small_results):
    """On Python 3.11, Path.exists raises PermissionError where a folder on the way may not be
    entered (EACCES, as a user other than root): a traceback, before. Faked here with os.stat,
    as the tests run as root, whom no permission stops."""
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "table.json").write_text(json.dumps(GOOD_CACHE))
    (locked / "rh.parquet").write_bytes(small_results.read_bytes())
    real_stat = os.stat

    def stat(path, *args, **kwargs):
        if str(path).startswith(str(locked / "")):
            raise PermissionError(13, "Permission denied", str(path))
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", stat)
    denied = "got PermissionError: [Errno 13] Permission denied"
    for read_it in (t4.read_json, load_table):
        with pytest.raises(ValueError) as err:
            read_it(locked / "table.json")
        assert str(err.value).startswith(f"{locked / 'table.json'}: must be a readable file, {denied}")
        assert "\n" not in str(err.value)
    assert _t4_refused(capsys, [str(locked / "rh.parquet"), "--out", str(tmp_path / "t4.json")]).startswith(
        f"config error: t4: {locked / 'rh.parquet'}: must be a results Parquet file (measurements.parquet, sweeps/*.parquet) "
        f"or a results folder this user may read, {denied}"
    )
    assert _t4_refused(capsys, [str(small_results), "--out", str(locked / "t4.json")]).startswith(
        f"config error: t4: {locked / 't4.json'}: must be a file to write (or none yet), {denied}"
    )


def _t4_results(*configurations: dict) -> dict:
    return {"results": [T4_RESULT | {"configuration": c, "measurements": [{"name": "time", "value": 1.0 + i, "unit": "ms"}]}
                        for i, c in enumerate(configurations)]}  # fmt: skip


def test_a_t4_value_written_two_ways_is_one_value_written_one_way(tmp_path):
    """1 and 1.0 are one value (as a cache's keys compare with its tune_params): the table keeps
    the first result's form, or the T1 file's where one is beside it, in its parameters and in
    every key alike (before, a key kept each result's own form: 1 beside the parameter's 1.0)."""
    path = tmp_path / "t4.json"
    path.write_text(json.dumps(_t4_results({"x": 1.0, "y": 1}, {"x": 1, "y": 2}, {"x": 2, "y": 1})))
    table = load_table(path)
    assert table.params == {"x": [1.0, 2], "y": [1, 2]} and [type(v) for v in table.params["x"]] == [float, int]
    assert [[type(v) for v in key] for key in table.entries] == [[float, int], [float, int], [int, int]]
    family, problem = table_family(table), table_problem(table)
    assert [table_measure(table)(cfg)["status"] for cfg in family.space(problem, table.params)] == ["ok"] * 3
    # With a T1 file, its form wins.
    (tmp_path / "T1.json").write_text(json.dumps({"ConfigurationSpace": {"TuningParameters": [
        {"Name": "y", "Values": "[1, 2]"}, {"Name": "x", "Values": "[0, 1, 2, 3]"}]}}))  # fmt: skip
    table = load_table(path)
    assert list(table.params) == ["y", "x"] and [type(v) for v in table.params["x"]] == [int] * 4
    assert [[type(v) for v in key] for key in table.entries] == [[int, int]] * 3
    # A boolean is no number against a T1 file either (a cache's against its tune_params likewise): 0 and 1, not False and True.
    path.write_text(json.dumps(_t4_results({"x": True, "y": 1}, {"x": False, "y": 2})))
    with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}: values of 'x' must be of {re.escape(str(tmp_path))}/T1.json "
                                         r"\[0, 1, 2, 3\], got \[False, True\]$"):  # fmt: skip
        load_table(path)
    # A measurement other than the objective given twice is no ambiguity the replay reads: left as it was.
    document = _t4_results({"x": 1, "y": 1}, {"x": 2, "y": 2})
    document["results"][0]["measurements"] += [{"name": "power", "value": 1.0}, {"name": "power", "value": 2.0}]
    document["results"][1] |= {"invalidity": "runtime", "measurements": [{"name": "time", "value": "RuntimeFailedConfig"}] * 2}
    path.write_text(json.dumps(document))
    assert load_table(path).size == 2


def test_a_t1_parameter_of_100000_values_is_listed_in_moments(tmp_path):
    """A T1 parameter of list(range(1, 100001)) beside an 8-configuration cache: listing its space
    took 37 s (Param.accepts scanned the 100,000 values for each of them); a few hundredths now.
    The bound is generous: a scan per value would take ten times longer."""
    (tmp_path / "T1.json").write_text(json.dumps({"ConfigurationSpace": {"TuningParameters": [
        {"Name": "x", "Values": "list(range(1, 100001))"}, {"Name": "y", "Values": "[1, 2]"}]}}))  # fmt: skip
    cache = {f"{x},{y}": {"x": x, "y": y, "time": 1.0 + x / 10 + y} for x in (1, 5, 77, 100000) for y in (1, 2)}
    (tmp_path / "kt.json").write_text(json.dumps({"tune_params": {"x": list(range(1, 100001)), "y": [1, 2]},
                                                  "objective": "time", "cache": cache}))  # fmt: skip
    table = load_table(tmp_path / "kt.json")
    family, problem = table_family(table), table_problem(table)
    started = time.perf_counter()
    listed = family.space(problem, table.params)
    assert time.perf_counter() - started < 5.0
    assert sorted((c["x"], c["y"]) for c in listed) == sorted((c["x"], c["y"]) for c in cache.values())


class _EqualToTwo:
    """Equal to 2 but hashed apart from it: only a scan of the values finds it among them."""

    def __eq__(self, other):
        return other == 2

    __hash__ = object.__hash__


def test_a_parameter_accepts_what_a_scan_of_its_values_accepts():
    """``Param.accepts`` looks values up in a set built once; what it accepts is what testing
    ``value in values`` (a scan) accepted: 1, 1.0 and True are one, but a float or a boolean
    only where the values have one; unhashable values and ones hashed unlike their equals too."""
    import numpy as np

    from tuner.families.base import Param

    nan = float("nan")
    domains = [(1, 2, 4), (1.0, 2.5), (True, False), (0, 1), ("a", "b"), (None, 1), (1, "1"), (nan, 2), ([1], 2),
               (_EqualToTwo(), 3)]  # fmt: skip
    probes = [1, 1.0, True, False, 0, 0.0, 2, 2.5, "a", "1", None, nan, float("nan"), [1], (1,), np.int64(2), np.float64(1.0),
              np.bool_(True), _EqualToTwo(), 10**30, -0.0]  # fmt: skip

    def scanned(param, value):  # the scan ``accepts`` did before
        if isinstance(value, (bool, float)) and not any(type(v) is type(value) for v in param.values):
            return False
        return value in param.values

    for values in domains:
        param = Param("p", values, "")
        for value in probes:
            assert param.accepts(value) == scanned(param, value), (values, value)


@pytest.mark.parametrize("dropped", [["status"], ["family", "n"]])
def test_a_table_without_the_columns_a_problem_needs_stops_in_one_line_naming_them(tmp_path, capsys, dropped):
    table = tmp_path / "table.parquet"
    pd.read_parquet(H200).drop(columns=dropped).to_parquet(table)
    for problem in ([], ["--problem", PROBLEM.key]):
        assert cli_main(["t4", str(table), *problem, "--out", str(tmp_path / "t4.json")]) == 2
        assert capsys.readouterr().err.splitlines() == [
            f"config error: t4: {table}: must have the results columns ['family', 'dtype', 'n', 'status'], lacks {dropped}"
        ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["table.parquet"]


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ("[2**i for i in range(0, 6)]", [1, 2, 4, 8, 16, 32]),
        ("[16 * i for i in range(1, 5)]", [16, 32, 48, 64]),
        ("[i for i in range(10) if i % 4 == 0]", [0, 4, 8]),
        ("[i for i in range(10**9)]", "a range must hold at most 100000 values, got 1000000000"),
        ("[2**i for i in range(0, 100)]", "a value must be a whole number of at most 64 bits, got a 65-bit one"),
        ("[x.__class__ for x in range(3)]", r"or a sum of these, got .* \(Attribute is not allowed\)"),
        ("[y for i in range(3)]", r"\(name 'y' is not one of its loop's variables\)"),
        ("[i for i in range(3) for j in range(3)]", r"\(a comprehension must have one loop over range\(\)\)"),
        ("[1 / i for i in range(2)]", "must evaluate, got ZeroDivisionError"),
        # As the hub's hotspot space writes its block widths: a list and a range, summed.
        ("[1, 2, 4, 8, 16] + list(range(32, 1024+1, 32))", [1, 2, 4, 8, 16, *range(32, 1025, 32)]),
        ("list(range(1, 4)) + [2**4] + [i * 10 for i in range(2, 4)]", [1, 2, 3, 16, 20, 30]),
        ("range(3)", [0, 1, 2]),
        ("list(range(60000)) + list(range(60000, 120000))", "must hold at most 100000 values, got 120000 or more"),
        ("[1] + open('T1.json')", r"\(Call is not one of these\)"),
        ("[1] + list([2])", r"\(list\(\) must take one range\(\)\)"),
        ("[1] * 3", r"\(BinOp is not one of these\)"),
        ("[2] + [x]", r"\(name 'x' is not allowed\)"),
        ("['a' * 10000 for i in range(100000)]", r"\(a comprehension or range must make numbers\)"),
        ("[1, 2] + [2]", r"values of 'x' must be distinct \(1, 1\.0 and True count as one\), got \[1, 2, 2\]"),
        # Nothing that would run long or build much: lists only beside 'in', of constants, one loop,
        # no calls but min, max and the like inside it, every number at most 64 bits, its steps bounded.
        ("[[[0]*10000]*10000]", r"\(a list, tuple or set may only stand beside 'in'\)"),
        ("[x + (x in [0]*10000) for x in range(100000)]", r"\(a list, tuple or set may only stand beside 'in'\)"),
        ("[list(range(1000)) for x in range(1000)]", r"\(only \['abs', .*\] may be called\)"),
        ("[[x for x in range(100000)] for x in range(100000)]", r"\(ListComp is not allowed\)"),
        ("[((2**64)**15)**64, 1]", "a power must stay under 1024 bits, got a 961-bit number \\*\\* 64"),
        ("[2**60 * 2**10, 1]", "a value must be a whole number of at most 64 bits, got a 71-bit one"),
        ("[2**60 * 2**10 + x for x in range(100000)]", "a value must be a whole number of at most 64 bits, got a 71-bit one"),
        pytest.param("[x for x in range(100000) if x in (" + ",".join(["1"] * 4000) + ")]",
                     "a comprehension must take at most 10000000 steps, got 100000 values of an expression of 4008 parts",
                     id="a-membership-test-of-4000-values-100000-times"),
        ("[" + "-" * 990 + "1]", "must evaluate, got RecursionError"),
    ],
)  # fmt: skip
def test_t1_values_may_be_comprehensions_ranges_and_sums(tmp_path, values, expected):
    """T1 files write powers of two as comprehensions and block widths as sums of lists and ranges;
    read like restrictions, never run beyond that."""
    (tmp_path / "T1.json").write_text(json.dumps({"ConfigurationSpace": {"TuningParameters": [{"Name": "x", "Values": values}]}}))
    if isinstance(expected, list):
        assert read_t1(tmp_path / "T1.json") == ({"x": expected}, [])
    else:
        with pytest.raises(ValueError, match=expected) as err:
            read_t1(tmp_path / "T1.json")
        assert "\n" not in str(err.value) and str(err.value).startswith(f"{tmp_path / 'T1.json'}: ")


def test_a_cache_kernel_tuner_writes_reads_open_and_closed(tmp_path):
    """Written by Kernel Tuner's own code: its header as process_cache writes it (the objective
    as a list, the file left open), its entries by store_cache (a failure as an ErrorConfig under
    __error__, with no objective), then closed by close_cache."""
    util = pytest.importorskip("kernel_tuner.util")
    path = tmp_path / "kt.json"
    header = {"device_name": "GPU", "kernel_name": "k", "problem_size": [1024], "tune_params_keys": ["x", "y"],
              "tune_params": {"x": [1, 2, 3], "y": [0, 1]}, "objective": ["GFLOP/s"], "cache": {}}  # fmt: skip
    path.write_text(json.dumps(header, indent="")[:-3])
    cache = {}
    for x in (1, 2, 3):
        for y in (0, 1):
            entry = {"x": x, "y": y, "GFLOP/s": 10.0 * x + y, "times": [1.0]}
            if (x, y) == (3, 1):
                entry = {"x": x, "y": y, "__error__": util.RuntimeFailedConfig()}
            util.store_cache(f"{x},{y}", entry, str(path), cache)
    for state in ("open", "closed"):
        table = load_table(path)
        assert table.objective == "GFLOP/s" and not table.minimise, state
        assert table.entries[(3, 1)] == ("launch_error", None) and table.entries[(3, 0)] == ("ok", 30.0), state
        assert max(value for status, value in table.entries.values() if status == "ok") == 30.0
        util.close_cache(str(path))
