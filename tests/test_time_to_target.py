"""Time to target: a study's evaluations and wall time (compile included, and
apart) to within 1 % of its own final best and of the exhaustive best; the
stopwatch that records them in the rows; and the report line."""

from __future__ import annotations

import datetime as dt
import time

import numpy as np
import pandas as pd
import pytest

from tuner.data import results
from tuner.data.time_to_target import reach, seconds_text, timeline, to_final_best
from tuner.errors import FatalDeviceError
from tuner.measure.stopwatch import Stopwatch
from tuner.progress import Phases
from tuner.report.document import study_items
from tuner.report.studies import summarise_study

START = dt.datetime(2025, 1, 1, tzinfo=dt.timezone.utc)


def study_frame(bandwidths, *, elapsed=None, compile_s=None, started=None, trials=None, statuses=None):
    """Rows of study ``s`` (reduce int32, 2^20) in the results schema; timing
    columns only where given (else as in files older than them)."""
    count = len(bandwidths)
    rows = []
    for i, gbs in enumerate(bandwidths):
        status = statuses[i] if statuses else "ok"
        row = {"source": "study:s", "family": "reduce", "variant": "shuffle", "dtype": "int32", "n": 1 << 20,
               "block_size": 128 << (i % 4), "unroll": 1 << (i // 4 % 4), "config_key": f"cfg{i}",
               "trial": trials[i] if trials else i, "status": status,
               "bandwidth_gbs": gbs if status == "ok" else None, "time_ms_median": 1.0 if status == "ok" else None}  # fmt: skip
        if elapsed is not None:
            begun = started[i] if started else 0.0
            row |= {"stage_started_at": (START + dt.timedelta(seconds=begun)).isoformat(), "stage_elapsed_s": elapsed[i],
                    "compile_s": compile_s[i] if compile_s else 0.0}  # fmt: skip
        rows.append(row)
    assert len(rows) == count
    return results.to_frame(rows)


# ---- the computation ----------------------------------------------------------------


def test_first_row_within_one_percent_of_the_final_best_with_its_wall_and_compile_seconds():
    # The best is 300; 297 (99 %) is first reached by the 4th row; 296 would not count.
    rows = study_frame([100, 296, 150, 297, 300, 120], elapsed=[2.0, 2.5, 3.0, 3.5, 4.0, 4.5],
                       compile_s=[1.5, 0.2, 0.0, 0.3, 0.1, 0.0])  # fmt: skip
    got = to_final_best(rows)
    assert (got.evaluations, got.wall_s, got.compile_s) == (4, 3.5, pytest.approx(2.0))
    assert (got.total_evaluations, got.total_wall_s, got.total_compile_s) == (6, 4.5, pytest.approx(2.1))
    assert got.target_gbs == 300.0 and got.note == ""
    assert got.sentence("its final best") == "within 1 % of its final best after 4 evaluations, 3.5 s (compile 2.0 s)"


def test_rows_that_failed_count_as_evaluations_but_never_as_hits():
    rows = study_frame([999, 100, 300], elapsed=[1.0, 2.0, 3.0], statuses=["wrong_result", "ok", "ok"])
    got = to_final_best(rows)
    assert (got.target_gbs, got.evaluations, got.wall_s) == (300.0, 3, 3.0)


def test_a_target_never_reached_says_so_with_what_the_study_spent():
    rows = study_frame([100, 200, 250], elapsed=[1.0, 2.0, 62.0], compile_s=[1.0, 0.0, 0.0])
    got = reach(timeline(rows), target_gbs=260.0)  # 250 < 0.99 * 260
    assert (got.evaluations, got.wall_s, got.compile_s) == (None, None, None)
    assert got.sentence("the exhaustive best") == "never within 1 % of the exhaustive best (3 evaluations, 1 min 2 s)"
    assert reach(timeline(rows), target_gbs=252.0).evaluations == 3  # 250 >= 0.99 * 252


def test_rows_without_a_wall_clock_still_give_evaluations_in_trial_order():
    # Stored out of order: trial order puts 298 (trial 1) before 300 (trial 2).
    rows = study_frame([300, 100, 298], trials=[2, 0, 1])
    assert rows["stage_elapsed_s"].isna().all()  # older files read with the columns empty
    got = to_final_best(rows)
    assert (got.evaluations, got.wall_s, got.compile_s, got.total_wall_s) == (2, None, None, None)
    assert got.sentence("its final best") == (
        "within 1 % of its final best after 2 evaluations (wall time not recorded; counted in trial order)"
    )


def test_a_partial_wall_clock_is_not_passed_off_as_the_whole():
    rows = study_frame([100, 300], elapsed=[1.0, 2.0])
    rows.loc[0, "stage_elapsed_s"] = np.nan
    got = to_final_best(rows)
    assert got.wall_s is None and got.evaluations == 2
    assert got.note == "wall time not recorded for 1 of 2 rows"


def test_several_workers_are_ordered_by_when_each_row_finished():
    # Trial 1 (a slow configuration on a second worker) finishes last; trial 2 reaches the best first.
    rows = study_frame([100, 300, 300], elapsed=[1.0, 9.0, 2.0], compile_s=[0.5, 0.5, 0.5], trials=[0, 1, 2])
    got = to_final_best(rows)
    assert (got.evaluations, got.wall_s, got.compile_s) == (2, 2.0, 1.0)


def test_a_resumed_study_counts_the_time_each_run_ran_but_not_the_gap_between_them():
    # Run 1 starts at 0 and ends at 10 s; run 2 starts an hour later and measures the best 4 s in.
    rows = study_frame([100, 200, 300], elapsed=[5.0, 10.0, 4.0], started=[0.0, 0.0, 3600.0], compile_s=[1.0, 1.0, 2.0])
    got = to_final_best(rows)
    assert (got.evaluations, got.wall_s, got.compile_s) == (3, 14.0, 4.0)


def test_runs_on_two_hosts_at_once_count_their_overlap_once():
    # Host A runs from 0 to 10 s, host B from 5 s to 13 s (joined late); B's row at 13 s is the best.
    rows = study_frame([100, 300], elapsed=[10.0, 8.0], started=[0.0, 5.0])
    got = to_final_best(rows)
    assert (got.evaluations, got.wall_s) == (2, 13.0)


def test_seconds_read_as_a_person_would_say_them():
    assert [seconds_text(s) for s in (0.04, 3.44, 59.9, 60.0, 265.4, 3725.0, None)] == [
        "0.0 s", "3.4 s", "59.9 s", "1 min 0 s", "4 min 25 s", "1 h 02 min", "—",
    ]  # fmt: skip


# ---- the report --------------------------------------------------------------------------


def sweep_rows(best_gbs: float) -> pd.DataFrame:
    rows = study_frame([best_gbs, 10.0])
    rows["source"] = "sweep:space"
    rows["trial"] = pd.NA
    return rows


def test_the_study_section_states_evaluations_and_wall_time_to_the_final_and_exhaustive_best():
    rows = study_frame([100, 296, 297, 300], elapsed=[2.0, 3.0, 3.4, 80.0], compile_s=[0.6, 0.1, 0.1, 2.0])
    summary = summarise_study("s", rows, pd.concat([rows, sweep_rows(299.0)], ignore_index=True))
    assert summary.exhaustive_gbs == 299.0
    items = study_items(summary)
    assert "time to target: within 1 % of its final best after 3 evaluations, 3.4 s (compile 0.8 s); "  \
           "within 1 % of the exhaustive best after 3 evaluations, 3.4 s (compile 0.8 s)" in items  # fmt: skip
    assert "the whole study: 4 evaluations, 1 min 20 s (compile 2.8 s), from the start of its tune command" in items

    never = summarise_study("s", rows, pd.concat([rows, sweep_rows(400.0)], ignore_index=True))
    line = next(i for i in study_items(never) if i.startswith("time to target:"))
    assert line.endswith("; never within 1 % of the exhaustive best (4 evaluations, 1 min 20 s)")


def test_the_study_section_of_old_results_says_wall_time_was_not_recorded():
    rows = study_frame([100, 300, 299])
    items = study_items(summarise_study("s", rows, rows))
    assert (
        "time to target: within 1 % of its final best after 2 evaluations (wall time not recorded; counted in trial order)"
        in items
    )
    assert not any(i.startswith("the whole study") for i in items)


def test_the_rendered_report_carries_the_line_in_markdown_and_html(tmp_path):
    from tuner.report import build_report

    rows = study_frame([100, 296, 297, 300], elapsed=[2.0, 3.0, 3.4, 80.0], compile_s=[0.6, 0.1, 0.1, 2.0])
    outputs = build_report(rows, device={"name": "Test GPU"}, peaks={}, out_dir=tmp_path)
    line = "time to target: within 1 % of its final best after 3 evaluations, 3.4 s (compile 0.8 s)"
    assert f"- {line}" in outputs.markdown.read_text()
    assert f"<li>{line}</li>" in outputs.html.read_text()


# ---- the stopwatch ------------------------------------------------------------------------


def test_the_stopwatch_stamps_rows_with_the_stage_start_the_seconds_since_and_compile_seconds():
    compiled = {"s": 0.0}

    def measure(cfg):
        compiled["s"] += cfg["compile"]
        return {"status": "ok", "bandwidth_gbs": 1.0}

    started = time.time() - 5.0
    watch = Stopwatch(started, lambda: compiled["s"])
    rows = [watch.measuring(measure)({"compile": c}) for c in (1.25, 0.0, 0.5)]
    assert [r["compile_s"] for r in rows] == [1.25, 0.0, 0.5]
    elapsed = [r["stage_elapsed_s"] for r in rows]
    assert 5.0 <= elapsed[0] <= elapsed[1] <= elapsed[2] < 60.0
    stamped = pd.Timestamp(rows[0]["stage_started_at"]).timestamp()
    assert stamped == pytest.approx(started, abs=1e-6)


def test_the_row_of_a_device_fault_is_stamped_before_it_is_recorded():
    def faulting(cfg):
        raise FatalDeviceError("context lost", row={"status": "launch_error", "error": "illegal address"})

    watch = Stopwatch(time.time(), lambda: 0.75)
    with pytest.raises(FatalDeviceError) as raised:
        watch.measuring(faulting)({})
    assert raised.value.row["compile_s"] == 0.75 and raised.value.row["stage_elapsed_s"] >= 0.0
    assert raised.value.row["error"] == "illegal address"


# ---- end to end: the tune command on a replayed table, no GPU -----------------------------


class ReplayBench:
    """The measuring harness of the tune stage with a table look-up for the GPU:
    each module (configuration without its launch parameters) nvcc has not
    built yet costs ``COMPILE_S`` in the compile phase, as in ``Bench``."""

    COMPILE_S = 0.03
    from types import SimpleNamespace

    from tuner.measure.bench import Bench

    gpu, cache_dir = SimpleNamespace(arch="sm_90"), None  # nothing is compiled ahead (the study's compile_ahead is off)

    phase = Bench.phase
    phase_summary = Bench.phase_summary

    def __init__(self, table: pd.DataFrame) -> None:
        self.phases = Phases()
        self.table = table
        self.modules: set[tuple] = set()

    def problem(self, family, problem):
        from tuner.search.tables.replay import table_measure

        lookup = table_measure(self.table, family)
        bench = self

        class Session:
            def measure(self, cfg, source):
                module = (cfg["variant"], cfg["unroll"], cfg["vector_width"])
                if module not in bench.modules:
                    with bench.phase("compile"):
                        time.sleep(bench.COMPILE_S)
                    bench.modules.add(module)
                return lookup(cfg) | {"source": source}

        return Session()


def replay_table(family, problem, domains) -> pd.DataFrame:
    """An exhaustive table of the study's space: GB/s by distance from block 512, unroll 4, vector 4."""
    rows = []
    for cfg in family.space(problem, domains):
        gbs = (
            1000.0
            - 40 * abs(np.log2(cfg["block_size"] / 512))
            - 25 * abs(np.log2(cfg["unroll"] / 4))
            - 30 * abs(np.log2(cfg["vector_width"] / 4))
        )
        rows.append(cfg | {"family": family.name, "dtype": problem.dtype, "n": problem.n, "status": "ok", "bandwidth_gbs": gbs,
                           "time_ms_median": problem.n * 4 / gbs / 1e6, "config_key": results.config_key(cfg)})  # fmt: skip
    return results.to_frame(rows)


def test_the_tune_command_records_its_wall_clock_in_the_rows_and_prints_the_time_to_target(
    tmp_path, monkeypatch, capsys, measure_in_thread
):
    from tuner import cli
    from tuner.families import REGISTRY
    from tuner.settings import parse

    monkeypatch.setenv("TUNER_PROGRESS", "off")
    params = {"variant": ["shuffle"], "block_size": [128, 256, 512, 1024], "unroll": [1, 2, 4, 8], "vector_width": [1, 2, 4],
              "offset": [0], "grid_blocks_per_sm": [2], "cache_hint": ["none"], "min_blocks": [0], "finish": ["host"]}  # fmt: skip
    config = {"results_dir": str(tmp_path / "results"), "gpu": "test-gpu", "sweeps": {},
              "studies": {"search": {"family": "reduce", "dtype": "int32", "n": 1 << 20, "budget_trials": 16,
                                     "storage": str(tmp_path / "study.log"), "params": params, "compile_ahead": False}}}  # fmt: skip
    settings = parse(config)
    study = settings.study("search")
    bench = ReplayBench(replay_table(REGISTRY["reduce"], study.problem, study.domains()))
    measure_in_thread(bench)
    (settings.run.gpu_dir).mkdir(parents=True)
    (settings.run.gpu_dir / "device.json").write_text("{}")

    before = time.time()
    assert cli.main(["tune", "search", "--settings", settings.stage_json("study", "search")]) == 0
    after = time.time()
    rows = results.read(settings.run.gpu_dir / "studies" / "search.parquet").sort_values("trial", ignore_index=True)

    # One start for the whole run, the command's, taken before anything was measured.
    assert len(rows) == 16 and rows["stage_started_at"].nunique() == 1
    started = rows["stage_started_at"].iloc[0].timestamp()
    assert before <= started <= after
    elapsed = rows["stage_elapsed_s"].to_numpy()
    assert (np.diff(elapsed) > 0).all() and elapsed[-1] <= after - started
    # Every module compiled once, its seconds on the row that needed it.
    assert rows["compile_s"].sum() == pytest.approx(bench.phases["compile"])
    assert (rows["compile_s"] >= ReplayBench.COMPILE_S).sum() == len(bench.modules)

    # The first row within 1 % of the best, found here from the rows themselves.
    bandwidth = rows["bandwidth_gbs"].to_numpy()
    first = int(np.flatnonzero(bandwidth >= 0.99 * bandwidth.max())[0])
    got = to_final_best(rows)
    assert (got.evaluations, got.wall_s) == (first + 1, pytest.approx(elapsed[first]))
    assert got.compile_s == pytest.approx(rows["compile_s"][: first + 1].sum())
    expected = (f"within 1 % of its final best after {first + 1} evaluations, {seconds_text(elapsed[first])} "
                f"(compile {seconds_text(got.compile_s)})")  # fmt: skip
    assert f"study search: {expected}" in capsys.readouterr().out
    assert f"time to target: {expected}" in study_items(summarise_study("search", rows, rows))


def test_a_replayed_table_lends_its_measurements_but_not_its_wall_clock():
    from tuner.families import REGISTRY
    from tuner.search.tables.replay import table_measure

    table = study_frame([100.0, 300.0], elapsed=[5.0, 9.0], compile_s=[2.0, 0.5])
    family = REGISTRY["reduce"]
    cfg = {p.name: (table.loc[1, p.name] if pd.notna(table.loc[1, p.name]) else p.default) for p in family.params}
    row = table_measure(table, family)({k: (v.item() if hasattr(v, "item") else v) for k, v in cfg.items()})
    assert row["bandwidth_gbs"] == 300.0
    assert not {"stage_started_at", "stage_elapsed_s", "compile_s"} & set(row)
