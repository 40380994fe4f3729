"""What the README and the documents under docs/ say about the shipped
reference results, checked against those results: every number of "What it found on an NVIDIA H200" recomputed
from results/reference/nvidia-h200 (and the blogs' numbers from the report's
data files), so a statement the data do not bear (or a number left behind
when the data change) fails here."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pandas as pd
import pytest

from tuner.data import results
from tuner.report.comparisons import evaluate_all
from tuner.report.published import load_published
from tuner.report.selection import usable

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "results" / "reference"
H200 = REFERENCE / "nvidia-h200"
# Benchmark outputs and timing logs live beside the benchmarks, one folder per GPU.
HISTORY = ROOT / "benchmarks" / "results" / "history"
# The README and docs/ read as one text: a section is found wherever it lives.
README = "\n".join(p.read_text() for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))])
N28 = 1 << 28


def section(title: str) -> str:
    """The README section under ``## title``, its lines joined by single spaces."""
    start = README.index(f"## {title}\n")
    end = README.find("\n## ", start + 1)
    return " ".join(README[start : end if end > 0 else None].split())


def claim(pattern: str, text: str) -> re.Match:
    found = re.search(pattern, text)
    assert found, f"the README no longer says /{pattern}/: update the check in {Path(__file__).name} with the statement"
    return found


@pytest.fixture(scope="module")
def data():
    dataset = results.read(H200 / "measurements.parquet")
    ok = dataset[dataset["status"] == "ok"]
    comparisons = {c.spec.key: c for c in evaluate_all(usable(dataset), load_published())}
    return dataset, ok, json.loads((H200 / "peaks.json").read_text()), comparisons


def best(ok: pd.DataFrame, family: str, dtype: str, n: int) -> pd.Series:
    rows = ok[(ok["family"] == family) & (ok["dtype"] == dtype) & (ok["n"] == n)]
    return rows.loc[rows["bandwidth_gbs"].idxmax()]


FOUND = section("What it found on an NVIDIA H200")


def test_the_run_the_section_describes(data):
    dataset, ok, _, _ = data
    found = claim(r"run, (\d+) min (\d+) s, (\d+) rows, every one verified", FOUND)
    assert int(found[3]) == len(dataset) == len(ok)
    measuring = (dataset["timestamp"].max() - dataset["timestamp"].min()).total_seconds()
    stated = 60 * int(found[1]) + int(found[2])
    assert measuring <= stated <= measuring + 120  # the rows' time stamps span the measuring, the run adds set-up


def table_rows() -> list[tuple[str, float, float]]:
    rows = re.findall(r"^\| (.+?) \| (\d+) \| ([\d.]+) \|$", README[README.index("## What it found") :], re.M)
    assert len(rows) >= 6
    return [(label, float(gbs), float(of_copy)) for label, gbs, of_copy in rows]


@pytest.mark.parametrize("label, gbs, of_copy", table_rows(), ids=lambda v: str(v)[:40])
def test_each_row_of_the_headline_table(data, label, gbs, of_copy):
    _, ok, peaks, _ = data
    copy = peaks["copy_gbs"]
    if label.startswith("theoretical"):
        clock, bits = map(int, claim(r"\((\d+) MHz x 2 x (\d+) bits\)", label).groups())
        assert (clock, bits) == (round(peaks["memory_clock_mhz"]), peaks["bus_width_bits"])
        value = peaks["theoretical_gbs"]
    elif label.startswith("read-only stream"):
        value = peaks["read_gbs"]
    elif label.startswith("device-to-device copy"):
        value = copy
    elif label.startswith("CUB `DeviceReduce::Sum`, 2^28 int32"):
        assert "n=268435456 int32" in peaks["cub_reduce_note"]
        value = peaks["cub_reduce_gbs"]
    elif label.startswith("best reduction, 2^28 int32"):
        row = best(ok, "reduce", "int32", N28)
        variant, load_bytes, in_flight = claim(r"`(\w+)`: (\d+)-byte loads, (\d+) per thread in flight", label).groups()
        assert (row["variant"], row["vector_width"] * 4, row["unroll"]) == (variant, int(load_bytes), int(in_flight))
        value = row["bandwidth_gbs"]
    elif label.startswith("best vector add, 2^28 int32"):
        row = best(ok, "vector_add", "int32", N28)
        assert row["vector_width"] * 4 == int(claim(r"(\d+)-byte vectors", label)[1])
        value = row["bandwidth_gbs"]
    else:
        pytest.fail(f"README row {label!r} has no check against the data: add one to {Path(__file__).name}")
    assert gbs == round(value), label
    assert of_copy == round(value / copy, 2), label


def test_the_reduction_ladder(data):
    _, ok, _, _ = data
    ladder = ok[(ok["source"] == "sweep:reduce_ladder") & (ok["dtype"] == "int32") & (ok["n"] == N28)]
    step = ladder.groupby(["variant", "unroll"])["bandwidth_gbs"].max().round()
    found = claim(r"ladder at 2\^28 int32 climbs from (\d+) GB/s \(neighbored\) to (\d+) GB/s \(unrolled x(\d)\) "
                  r"and (\d+) GB/s \(shared memory, x(\d)\)", FOUND)  # fmt: skip
    assert int(found[1]) == step[("neighbored", 1)] == step.min()
    assert int(found[2]) == step[("unrolled", int(found[3]))]
    assert int(found[4]) == step[("shared", int(found[5]))]
    slower = claim(
        r"warp-unrolled and completely unrolled steps are \*slower\* than plain unrolling \((\d+) and (\d+) GB/s\)", FOUND
    )
    assert (int(slower[1]), int(slower[2])) == (step[("unrolled_warp", 8)], step[("complete", 8)])
    assert max(step[("unrolled_warp", 8)], step[("complete", 8)]) < step[("unrolled", 8)]


def test_misaligned_access(data):
    _, ok, _, comparisons = data
    found = claim(r"Misaligned reads and writes \(offset 11\) cost about (\d+) % \((\d+)-(\d+) % on the lesson's Fermi\)", FOUND)
    rows = ok[ok["source"] == "sweep:offset_read_write"]
    by = rows.groupby(["variant", "l1_cache", "offset"])["bandwidth_gbs"].max().unstack("offset")
    costs = 100 * (1 - by[11] / by[0])
    assert round(costs.mean()) == int(found[1]) and (abs(costs - int(found[1])) <= 1).all(), costs
    published = pd.concat([comparisons[k].rows for k in ("offset_read_m2070", "offset_write_m2070")])
    fermi = 100 * (1 - published[published["step / config"].str.startswith("offset 11")]["published_speedup"])
    assert (round(fermi.min()), round(fermi.max())) == (int(found[2]), int(found[3]))


def test_aos_and_soa(data):
    _, ok, _, comparisons = data
    found = claim(r"AoS is (\d+)-(\d+) % faster than SoA at blocks (\d+)-(\d+) and level at (\d+), "
                  r"where the lesson's M2070 ran SoA ([\d.]+)x faster", FOUND)  # fmt: skip
    low, high, first, last, level = map(int, found.groups()[:5])
    layout = ok[ok["family"] == "layout"].groupby(["n", "block_size", "variant"])["bandwidth_gbs"].max().unstack("variant")
    faster = 100 * (layout["aos"] / layout["soa"] - 1)
    blocks = faster.index.get_level_values("block_size")
    inside = faster[(blocks >= first) & (blocks <= last)]
    assert len(inside) >= 6 and (math.floor(inside.min()), math.ceil(inside.max())) == (low, high), faster
    assert (abs(faster[blocks == level]) < 0.5).all(), faster
    assert float(found[6]) == round(comparisons["aos_soa_m2070"].rows["published_speedup"].max(), 2)


def test_the_study_against_the_exhaustive_sweep(data):
    _, ok, _, _ = data
    found = claim(r"The TPE study of (\d+) trials \((\d+) % of the (\d+)-point space\) found ([\d.]+)x the exhaustive "
                  r"optimum, within 2 % after (\d+) trials", FOUND)  # fmt: skip
    study = ok[ok["source"] == "study:reduce_int32"].sort_values("trial")
    sweep = ok[ok["source"] == "sweep:reduce_space"]
    optimum = sweep["bandwidth_gbs"].max()
    assert (len(study), len(sweep)) == (int(found[1]), int(found[3]))
    assert round(100 * len(study) / len(sweep)) == int(found[2])
    assert round(study["bandwidth_gbs"].max() / optimum, 4) == float(found[4])
    reached = (study["bandwidth_gbs"].cummax() >= 0.98 * optimum).to_numpy()
    assert int(reached.argmax()) + 1 == int(found[5])


def test_timing_repeatability():
    found = claim(r"\(([\d.]+) % median difference on the H200\)", section("How long the pipeline takes"))
    repeat = json.loads((HISTORY / "nvidia-h200" / "timing.json").read_text())["repeatability"]
    assert round(100 * repeat["median_abs_diff"], 2) == float(found[1])


def test_scaling_over_two_gpus():
    found = claim(r"On two H200s a (\d+)-trial study gave (\d+) rows of (\d+) distinct configurations with a journal and with SQLite",
                  section("Spreading a search over several GPUs"))  # fmt: skip
    for storage in ("journal", "sqlite"):
        runs = json.loads((HISTORY / "nvidia-h200" / f"scaling-2-gpus-{storage}.json").read_text())
        two = next(r for r in runs if r["workers"] == 2)
        assert (two["budget"], two["rows"], two["distinct"]) == tuple(int(g) for g in found.groups())


def scaling_runs(folder: str, numbers) -> list[dict]:
    """Each run's table, by worker count."""
    return [{r["workers"]: r for r in json.loads((HISTORY / "nvidia-h200" / folder / f"run-{n}.json").read_text())["scaling"]} for n in numbers]


def test_scaling_over_four_gpus():
    text = " ".join(section("Spreading a search over several GPUs").split())
    exact = lambda runs: all(r["rows"] == r["distinct"] == r["budget"] for t in runs for r in t.values())  # noqa: E731
    four = scaling_runs("scaling-runs-4gpus", range(1, 7))
    found = claim(r"4 workers ran ([\d.]+)x, ([\d.]+)x and ([\d.]+)x one worker's trials per second and 2 workers "
                  r"([\d.]+)x, ([\d.]+)x and ([\d.]+)x, in three runs with the whole space", text)  # fmt: skip
    assert [f"{t[4]['steady_speedup']:.2f}" for t in four[:3]] + [f"{t[2]['steady_speedup']:.2f}" for t in four[:3]] == list(
        found.groups()
    )
    assert [t[1]["budget"] for t in four] == [1536] * 3 + [800] * 3 and exact(four)
    found = claim(r"four workers gave ([\d.]+)x, ([\d.]+)x and ([\d.]+)x \(runs 4 to 6 there\)", text)
    assert [f"{t[4]['steady_speedup']:.2f}" for t in four[3:]] == list(found.groups())
    assert all(t[4]["steady_s"] < 2 for t in four[3:])  # "lasted under 2 s"

    two = scaling_runs("scaling-runs-2gpus", range(16, 25))
    found = claim(r"six such runs gave ([\d.]+)x, ([\d.]+)x, ([\d.]+)x, ([\d.]+)x, ([\d.]+)x and ([\d.]+)x", text)
    whole = two[:3] + two[6:]
    assert [f"{t[2]['steady_speedup']:.2f}" for t in whole] == list(found.groups())
    assert [t[1]["budget"] for t in two] == [1536] * 3 + [800] * 3 + [1536] * 3 and exact(two)
    found = claim(r"worker ran (\d+) to (\d+) trials per second, up from (\d+) to (\d+)", text)
    rates = [t[1]["steady_trials_per_s"] for t in whole]
    assert [round(min(rates)), round(max(rates))] == [int(found[1]), int(found[2])]
    found = claim(r"two workers gave ([\d.]+)x, ([\d.]+)x and ([\d.]+)x on two H200s \(runs 19 to 21; one worker's steady rate "
                  r"was (\d+) trials per second in the [\d.]+x run, (\d+) to (\d+) in the others\)", text)  # fmt: skip
    assert [f"{t[2]['steady_speedup']:.2f}" for t in two[3:6]] == list(found.groups()[:3])
    assert [round(two[4][1]["steady_trials_per_s"]), round(two[3][1]["steady_trials_per_s"])] == [int(found[4]), int(found[6])]
    assert round(two[5][1]["steady_trials_per_s"]) == int(found[5])

    before = scaling_runs("scaling-runs-2gpus", range(10, 16))
    found = claim(r"That code gave ([\d.]+)x, ([\d.]+)x and ([\d.]+)x with 800 trials and ([\d.]+)x, ([\d.]+)x and ([\d.]+)x "
                  r"with the whole space on two H200s \(runs 10 to 15 there\), and ([\d.]+)x, ([\d.]+)x and ([\d.]+)x at 4 workers", text)  # fmt: skip
    older = scaling_runs("scaling-runs", (18, 19, 20))
    assert [f"{t[2]['steady_speedup']:.2f}" for t in before] + [f"{t[4]['steady_speedup']:.2f}" for t in older] == list(
        found.groups()
    )
    assert [round(before[n][1]["steady_trials_per_s"]) for n in (3, 4)] == [75, 75]  # "up from 74 to 75"
    assert round(before[5][1]["steady_trials_per_s"]) == 74 and exact(before) and exact(older)
    first = {r["workers"]: r for r in json.loads((HISTORY / "nvidia-h200" / "scaling-4-gpus-journal.json").read_text())["scaling"]}
    assert older[0] == first  # "its first run is scaling-4-gpus-journal.txt"

    costs = claim(r"([\d.]+) ms against ([\d.]+) ms all-in on an H200 at that code", text)
    measured = json.loads((HISTORY / "nvidia-h200" / "costs-study-vs-sweep-232ac5e.json").read_text())["costs"]
    assert [round(measured["study_ms_per_trial"], 1), round(measured["sweep_ms_per_point"], 1)] == [
        float(g) for g in costs.groups()
    ]
    assert list(measured["study_walls_s"]) == ["200", "800"] and measured["sweep_points"] == {"quarter": 384, "full": 1536}
    assert "600 more trials, and of 1152 more sweep points" in text
    hard = claim(r"a trial took ([\d.]+) ms and a sweep point ([\d.]+) ms: the study's (\d+) trials took ([\d.]+) s of searching "
                 r"and the sweep's (\d+) points ([\d.]+) s", text)  # fmt: skip
    phases = (HISTORY / "nvidia-h100-80gb-hbm3" / "reduce_hard_2e24-costs" / "run.txt").read_text()
    assert f"study (all) {hard[4]} s" in phases and f"sweep (all) {hard[6]} s" in phases
    assert round(float(hard[4]) / int(hard[3]) * 1e3, 1) == float(hard[1])
    assert round(float(hard[6]) / int(hard[5]) * 1e3, 1) == float(hard[2])


def yardstick(gpu: str, label: str) -> float:
    text = (HISTORY / gpu / "yardsticks.txt").read_text()
    return float(re.search(rf"^{re.escape(label)}.*?([\d.]+) x (?:CUB|copy)", text, re.M)[1])


def test_complete_reductions_and_yardsticks():
    found = claim(r"as ([\d.]+)x CUB for int32 and ([\d.]+)x for float32 on the H200, ([\d.]+)x and ([\d.]+)x on the H100", FOUND)
    h200, h100 = "nvidia-h200", "nvidia-h100-80gb-hbm3"
    measured = [yardstick(h200, "BEST int32 complete"), yardstick(h200, "BEST float32 complete"),
                yardstick(h100, "BEST int32 complete"), yardstick(h100, "BEST float32 complete")]  # fmt: skip
    assert [round(m, 3) for m in measured] == [float(g) for g in found.groups()]
    adds = claim(r"best vector add there is ([\d.]+)x the device copy on the H200 and ([\d.]+)x on the H100 \(int32\)", FOUND)
    assert round(yardstick(h200, "BEST int32 vector add"), 3) == float(adds[1])
    assert round(yardstick(h100, "BEST int32 vector add"), 3) == float(adds[2])
    above = claim(r"at most ([\d.]+) % above ours", FOUND)
    # The independent harness over ours, per yardstick (copy, read, CUB int32 and float32): each "holds".
    pattern = re.compile(r"^\S.*?([\d.]+)\s+yes\s", re.M)
    ratios = [float(m[1]) for g in (h200, h100) for m in pattern.finditer((HISTORY / g / "yardsticks.txt").read_text())]
    assert len(ratios) == 8 and max(ratios) <= 1.01
    assert round(100 * (max(ratios) - 1), 1) == float(above[1])
    pipeline = claim(r"the pipeline's own best complete reduction is ([\d.]+)x CUB \(int32\)", FOUND)
    dataset = results.read(REFERENCE / h100 / "measurements.parquet")
    rows = dataset[(dataset.status == "ok") & (dataset.family == "reduce") & (dataset.dtype == "int32") & (dataset.n == N28)]
    complete = rows[rows["finish"].notna() & (rows["finish"] != "host")]
    cub = json.loads((REFERENCE / h100 / "peaks.json").read_text())["cub_reduce_gbs"]
    assert round(complete["bandwidth_gbs"].max() / cub, 3) == float(pipeline[1])


def test_kill_and_resume_on_the_h100():
    found = claim(r"on an H100 the (\d+)-point sweep and the (\d+)-trial study came back whole, every configuration measured once",
                  section("When things go wrong"))  # fmt: skip
    check = json.loads((HISTORY / "nvidia-h100-80gb-hbm3" / "kill-resume.json").read_text())
    assert check["final_status"] == 0 and {k["killed_at"] for k in check["kills"]} == {"sweep", "study"}
    assert check["sweep_grid"] == check["sweep_rows"] == check["sweep_store_lines"] == int(found[1])
    assert check["sweep_measured_twice"] == 0
    assert check["study_budget"] == check["study_rows"] == check["study_distinct"] == int(found[2])


def test_the_cold_pipeline_on_the_h100():
    text = section("How long the pipeline takes")
    found = claim(r"\((\d+) s, `benchmarks/results/history/nvidia-h100-80gb-hbm3/pipeline-timing-final.txt`; (\d+) s of it the\s+"
                  r"profile job, (\d+) configurations of 11 sweeps under one Nsight Compute run; (\d+) s checking the\s+"
                  r"elementwise outputs\)", text)  # fmt: skip
    everything = claim(r"made the profile\s+job (\d+) s of a (\d+) s run.*?with one job per sweep it took (\d+) s", text)
    before = claim(r"took (\d+) s of the (\d+) s the same\s+pipeline took before", text)
    folder = HISTORY / "nvidia-h100-80gb-hbm3"
    timing = json.loads((folder / "pipeline-timing-final.json").read_text())
    host_checks = json.loads((folder / "pipeline-timing-host-checks.json").read_text())
    assert timing["exit"] == 0 and abs(timing["wall_s"] - int(found[1])) <= 0.5  # the table rounds the unrounded wall
    assert int(found[1]) < 180  # the goal: under 3 minutes
    assert [round(job["seconds"]) for job in timing["jobs"] if job["rule"].startswith("profile")] == [int(found[2])]
    assert f"profile: {found[3]} configurations of 11 sweeps" in (folder / "pipeline-timing-final.txt").read_text()
    second = claim(r"A second run, at a later commit on a machine\s+that had just run the GPU tests, took (\d+) s", text)
    later = json.loads((folder / "pipeline-timing-baaacd0.json").read_text())
    assert later["exit"] == 0 and round(later["wall_s"]) == int(second[1])
    third = claim(r"At 07139bd, where each study worker measures in a process of its\s+own, a fresh H100 took (\d+) s", text)
    latest = json.loads((folder / "pipeline-timing-07139bd.json").read_text())
    assert latest["exit"] == 0 and round(latest["wall_s"]) == int(third[1]) < 180
    all_profiled = json.loads((folder / "pipeline-timing-all-profiled.json").read_text())
    assert [round(job["seconds"]) for job in all_profiled["jobs"] if job["rule"] == "profile"] == [int(everything[1])]
    assert round(all_profiled["wall_s"]) == int(everything[2])
    per_sweep = json.loads((folder / "pipeline-timing-11-profile-jobs.json").read_text())
    jobs = [job["seconds"] for job in per_sweep["jobs"] if job["rule"].startswith("profile_")]
    assert len(jobs) == 11 and round(sum(jobs)) == int(everything[3])
    elementwise = (
        "copy_widths",
        "vector_add_widths",
        "vector_add_unroll",
        "offset_read_write",
        "offset_unroll_blocks",
        "layout_aos_soa",
    )
    assert round(sum(timing["phases"][f"sweep_{name}"]["verify"] for name in elementwise)) == int(found[4])
    assert round(sum(host_checks["phases"][name]["verify"] for name in elementwise)) == int(before[1])
    assert host_checks["exit"] == 0 and round(host_checks["wall_s"]) == int(before[2])


def test_the_default_study_run_for_real_on_the_hard_space():
    found = claim(r"\(([\d.]+) GB/s, (\d+) configurations within 1 %\) at its (\d+)th evaluation, ([\d.]+) s after\s+`tune` started "
                  r"\(([\d.]+) s of it waiting for nvcc\)", README)  # fmt: skip
    run = HISTORY / "nvidia-h100-80gb-hbm3" / "reduce_hard_2e24-study-run"
    sweep = results.read(run / "sweep.parquet")
    study = results.read(run / "study.parquet").sort_values("trial").reset_index(drop=True)
    ok = sweep[sweep.status == "ok"]
    optimum = ok.bandwidth_gbs.max()
    hits = study.index[(study.status == "ok") & (study.bandwidth_gbs >= 0.99 * optimum)]
    first = hits[0]
    assert len(sweep) == 7200 and len(study) == 360
    assert [round(optimum, 1), int((ok.bandwidth_gbs >= 0.99 * optimum).sum()), first + 1,
            round(study.stage_elapsed_s[first], 1), round(study.compile_s[: first + 1].sum(), 1)] == [
        float(found[1]), int(found[2]), int(found[3]), float(found[4]), float(found[5])]  # fmt: skip
