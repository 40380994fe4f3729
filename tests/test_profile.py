"""The profile stage without a GPU: ncu's raw CSV (captured on an H100 by the
stage itself, tests/data/ncu/), the join to the sweep's rows by configuration,
the choice of configurations, the settings, and the clean degradation when ncu
is missing or refuses to read counters."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tuner import settings as tuner_settings
from tuner.data import counters, results
from tuner.families import REGISTRY
from tuner.profile import ncu
from tuner.profile.stage import choose, join, read_manifest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "ncu"


def captured(name: str) -> pd.DataFrame:
    """The stored capture of sweep ``name`` joined as the stage joins it."""
    launches = ncu.parse_raw_csv((DATA / f"{name}.csv").read_text())
    rows = results.read(DATA / f"{name}.sweep.parquet")
    family = REGISTRY[rows["family"].iloc[0]]
    return join(launches, read_manifest(DATA / f"{name}.launches.jsonl"), rows, family)


def test_raw_csv_gives_one_row_per_launch_in_si_units():
    launches = ncu.parse_raw_csv((DATA / "layout_aos_soa.csv").read_text())
    assert list(launches["ID"]) == list(range(len(launches))) and len(launches) == 4
    assert set(launches["Kernel Name"]) == {"layout_aos", "layout_soa"}
    # The raw page prints "23,104" ns and "1,452,509,695,290.86" byte/s: separators dropped, units to seconds and bytes.
    assert launches["gpu__time_duration.sum"].between(1e-6, 1e-3).all()
    assert launches["dram__bytes_read.sum.per_second"].between(1e11, 1e13).all()
    assert set(counters.ncu_metrics()) <= set(launches.columns)


def test_messages_before_the_header_are_skipped_and_no_header_is_no_rows():
    text = (DATA / "layout_aos_soa.csv").read_text()
    assert len(ncu.parse_raw_csv("==PROF== Connected to process 1\n" + text)) == 4
    assert ncu.parse_raw_csv("==PROF== nothing profiled\n").empty


@pytest.mark.parametrize(
    "unit, scale", [("ns", 1e-9), ("usecond", 1e-6), ("byte/s", 1.0), ("Gbyte/s", 1e9), ("Kbyte", 1e3), ("%", 1.0), ("hz", 1.0)]
)
def test_units_scale_to_si(unit, scale):
    assert ncu.unit_scale(unit) == pytest.approx(scale)


def test_misaligned_reads_and_writes_fetch_extra_sectors():
    frame = captured("offset_read_write")
    assert len(frame) == 24 and frame["config_key"].is_unique
    reads = frame[frame.variant == "read_offset"].groupby("offset")
    writes = frame[frame.variant == "write_offset"].groupby("offset")
    assert reads["global_load_efficiency_pct"].max().to_dict() == {0: 100.0, 11: 80.0, 128: 100.0}
    assert writes["global_store_efficiency_pct"].max().to_dict() == {0: 100.0, 11: 80.0, 128: 100.0}
    assert reads["global_load_sectors_per_request"].mean()[11] == pytest.approx(5.0)
    # Joined to the timed row of the same configuration: its median time rides along.
    assert frame["time_ms_median"].gt(0).all() and frame["kernel"].eq(frame["variant"]).all()


def test_aos_uses_half_of_every_sector_and_soa_all():
    frame = captured("layout_aos_soa").set_index("variant")
    assert frame.loc["aos", "global_load_efficiency_pct"].tolist() == [50.0, 50.0]
    assert frame.loc["soa", "global_store_efficiency_pct"].tolist() == [100.0, 100.0]
    assert frame["fp32_flops"].eq(2 * 4194304).all()  # x += 10 and y += 20 on every element


def test_interleaved_shared_addressing_conflicts_and_sequential_does_not():
    frame = captured("reduce_bank_conflicts")
    per_request = frame.groupby("variant")["shared_conflicts_per_request"]
    assert per_request.min()["shared_interleaved"] > 1 > 0.1 > per_request.max()["shared_sequential"]


def test_the_ladder_diverges_only_in_the_neighbored_step():
    frame = captured("reduce_ladder")
    neighbored = frame[(frame.variant == "neighbored") & (frame.dtype == "int32")].iloc[0]
    assert neighbored["divergent_branches"] > 0 and neighbored["branch_efficiency_pct"] < 90
    assert neighbored["global_load_efficiency_pct"] == pytest.approx(25.0, abs=0.1)
    unrolled = frame[(frame.variant == "unrolled") & (frame.unroll == 8) & (frame.dtype == "int32")].iloc[0]
    assert unrolled["global_load_efficiency_pct"] > 99 and unrolled["instructions_per_warp"] < neighbored["instructions_per_warp"]


def test_a_launch_that_is_not_the_planned_one_is_refused():
    launches = ncu.parse_raw_csv((DATA / "layout_aos_soa.csv").read_text())
    manifest = read_manifest(DATA / "layout_aos_soa.launches.jsonl")
    rows = results.read(DATA / "layout_aos_soa.sweep.parquet")
    with pytest.raises(ValueError, match="harness launched"):
        join(launches, manifest[::-1], rows, REGISTRY["layout"])
    with pytest.raises(ValueError, match="profiled launches"):
        join(launches, manifest[:-1], rows, REGISTRY["layout"])


def test_a_counter_without_its_metrics_is_empty():
    values = counters.counter_values({"dram__bytes_read.sum": 8.0})
    assert values["dram_read_bytes"] == 8.0
    assert pd.isna(values["global_load_efficiency_pct"]) and pd.isna(values["branch_efficiency_pct"])


def test_choose_takes_every_verified_configuration_or_the_fastest_per_problem():
    rows = results.read(DATA / "reduce_ladder.sweep.parquet")
    family = REGISTRY["reduce"]
    every = choose(rows, family, "all")
    assert len(every) == int((rows.status == "ok").sum())
    top = choose(rows, family, 2)
    assert [p for p, _, _ in top] == [("float32", 1 << 24)] * 2 + [("int32", 1 << 24)] * 2
    for problem in {p for p, _, _ in top}:
        mine = rows[(rows.dtype == problem[0]) & (rows.n == problem[1])].nlargest(2, "bandwidth_gbs")
        assert {r["config_key"] for _, _, r in top if (r["dtype"], r["n"]) == problem} == set(mine["config_key"])
    assert all(family.kernel_name(cfg) for _, cfg, _ in top)


def test_report_choice_is_the_rows_the_report_shows_and_each_problems_fastest():
    from tuner.data.published import load_published
    from tuner.data.selection import usable
    from tuner.profile.stage import shown_by_report
    from tuner.report.comparisons import evaluate_all

    names = ("reduce_ladder", "reduce_bank_conflicts")
    rows = {name: results.read(DATA / f"{name}.sweep.parquet") for name in names}
    shown = shown_by_report(list(rows.values()))
    comparisons = evaluate_all(usable(pd.concat(rows.values(), ignore_index=True)), load_published())
    steps = {(r["source"], r["dtype"], int(r["n"]), r["config_key"]) for c in comparisons for r in c.chosen if r is not None}
    assert steps and shown == steps
    for name in names:
        family = REGISTRY[rows[name]["family"].iloc[0]]
        picked = choose(rows[name], family, "report", shown)
        keys = {(r["source"], r["dtype"], int(r["n"]), r["config_key"]) for _, _, r in picked}
        fastest = {(r.source, r.dtype, int(r.n), r.config_key)
                   for r in rows[name][rows[name].status == "ok"].sort_values("bandwidth_gbs").groupby(["dtype", "n"]).tail(1).itertuples()}  # fmt: skip
        mine = {key for key in steps if key[0] == f"sweep:{name}"}
        assert keys == mine | fastest, name
    ladder = choose(rows["reduce_ladder"], REGISTRY["reduce"], "report", shown)
    assert 0 < len(ladder) < int((rows["reduce_ladder"].status == "ok").sum())  # fewer than all of them


def config(tmp_path: Path, profile) -> dict:
    sweep = {
        "family": "layout",
        "dtypes": ["float32"],
        "sizes": [4194304],
        "params": {"variant": ["aos", "soa"], "block_size": [128, 256]},
    }
    if profile is not None:
        sweep["profile"] = profile
    return {"results_dir": str(tmp_path / "results"), "gpu": "test-gpu", "sweeps": {"layout_aos_soa": sweep}}


@pytest.mark.parametrize("profile, parsed", [("all", "all"), ("report", "report"), ({"top": 3}, 3), (None, None)])
def test_profile_setting_and_the_sweep_never_reruns_for_it(tmp_path, profile, parsed):
    settings = tuner_settings.parse(config(tmp_path, profile))
    assert settings.sweeps["layout_aos_soa"].profile == parsed
    assert "profile" not in json.loads(settings.stage_json("sweep", "layout_aos_soa"))
    back = tuner_settings.Settings.from_stage_json(settings.stage_json("profile", "layout_aos_soa"))
    assert back.sweeps["layout_aos_soa"].profile == parsed


@pytest.mark.parametrize("bad", ["some", {"top": 0}, {"top": 2, "bottom": 1}, 3])
def test_bad_profile_setting_is_one_line(tmp_path, bad):
    with pytest.raises(tuner_settings.ConfigError, match=r"^sweeps\.layout_aos_soa\.profile: must be all, report or \{top: N\}"):
        tuner_settings.parse(config(tmp_path, bad))


FAKE_NCU = """#!/bin/sh
case "$*" in
  *--query-metrics*) echo '"Metric Name","Metric Type"'; echo '"dram__bytes_read","Counter"'; exit 0;;
esac
echo "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters"
exit 1
"""


@pytest.mark.parametrize("tool, reason", [("missing", "is not an executable file"), ("refuses", "ERR_NVGPUCTRPERM")])
def test_without_counters_the_profile_is_empty_and_says_why(tmp_path, tool, reason):
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(config(tmp_path, "all")))
    gpu_dir = tmp_path / "results" / "test-gpu"
    (gpu_dir / "sweeps").mkdir(parents=True)
    (gpu_dir / "device.json").write_text("{}")
    results.write_atomic(results.read(DATA / "layout_aos_soa.sweep.parquet"), gpu_dir / "sweeps" / "layout_aos_soa.parquet")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "NCU": str(tmp_path / "ncu"),
    }
    if tool == "refuses":
        (tmp_path / "ncu").write_text(FAKE_NCU)
        (tmp_path / "ncu").chmod(0o755)
    proc = subprocess.run([sys.executable, "-m", "tuner", "profile", "layout_aos_soa", "--config", str(path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    frame, notes = counters.read_profiles(gpu_dir)
    assert frame.empty and len(notes) == 1 and reason in notes[0], notes
    assert reason in proc.stderr and len([line for line in proc.stderr.splitlines() if reason in line]) == 1


def test_profiling_a_sweep_without_the_setting_or_its_rows_is_a_config_error(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(config(tmp_path, None)))
    (tmp_path / "results" / "test-gpu").mkdir(parents=True)
    (tmp_path / "results" / "test-gpu" / "device.json").write_text("{}")
    run = [sys.executable, "-m", "tuner", "profile", "layout_aos_soa", "--config", str(path)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(run, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.strip().startswith("config error: sweeps.layout_aos_soa.profile:")
    path.write_text(yaml.safe_dump(config(tmp_path, "all")))
    proc = subprocess.run(run, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "config error: --measurements: must be the sweep's Parquet file" in proc.stderr


def test_dry_run_profiles_after_the_sweep_and_before_the_report(tmp_path):
    """The report's documents wait for the profiles; its figures do not (they are drawn beside the profile)."""
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(config(tmp_path, {"top": 2})))
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--configfile", str(path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert "rule profile:" in out
    assert out.index("rule sweep_layout_aos_soa:") < out.index("rule profile:") < out.index("rule plot_report:")
    inputs = {job[1]: job[2] for job in re.findall(r"^(local)?rule (\w+):\n    input: (.*)$", out, re.M)}
    profile = str(tmp_path / "results" / "test-gpu" / "profiles" / "layout_aos_soa.parquet")
    assert profile in inputs["plot_report"].split(", ") and profile not in inputs["draw_report"]


def test_ncu_is_found_on_path_or_beside_nvcc_or_not_at_all(tmp_path, monkeypatch):
    monkeypatch.delenv("NCU", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(ncu, "_NCU_GLOBS", ())
    with pytest.raises(ncu.NcuUnavailable, match=r"not found on PATH, beside nvcc or under /opt/nvidia"):
        ncu.find_ncu()
    (tmp_path / "nvcc").write_text("#!/bin/sh\n")
    (tmp_path / "nvcc").chmod(0o755)
    (tmp_path / "ncu").write_text("#!/bin/sh\n")
    (tmp_path / "ncu").chmod(0o755)
    assert ncu.find_ncu() == str(tmp_path / "ncu")


def test_ncu_metrics_are_asked_once_per_ncu_binary(tmp_path):
    from tuner.profile.stage import offered_metrics

    calls = tmp_path / "calls"
    tool = tmp_path / "ncu"
    tool.write_text(f"#!/bin/sh\necho asked >> {calls}\n" + FAKE_NCU.split("\n", 1)[1])
    tool.chmod(0o755)
    cache = tmp_path / "store" / "ncu-metrics.json"
    cache.parent.mkdir()
    assert offered_metrics(str(tool), cache) == {"dram__bytes_read"}
    assert offered_metrics(str(tool), cache) == {"dram__bytes_read"}
    assert calls.read_text().count("asked") == 1
    # Another ncu (here: the same file rewritten) is asked again.
    os.utime(tool, ns=(1, 1))
    assert offered_metrics(str(tool), cache) == {"dram__bytes_read"}
    assert calls.read_text().count("asked") == 2


# An ncu that replays the stored captures: profiling writes each planned
# sweep's captured manifest, --import prints their captured raw pages.
REPLAYING_NCU = """#!{python}
import csv, json, sys
from pathlib import Path
data, args = Path({data!r}), sys.argv[1:]
if "--query-metrics" in args:
    print('"Metric Name","Metric Type"')
    print("\\n".join(f'"{{m}}","Counter"' for m in {metrics!r}))
elif "--import" in args:
    sweeps = json.loads(Path({work!r}, "sweeps.json").read_text())
    pages = [list(csv.reader((data / f"{{s}}.csv").read_text().splitlines())) for s in sweeps]
    body = [row for page in pages for row in page[2:]]
    for number, row in enumerate(body):
        row[0] = str(number)  # one run numbers its launches in order
    csv.writer(sys.stdout, quoting=csv.QUOTE_ALL).writerows(pages[0][:2] + body)
else:
    with open({calls!r}, "a") as log:
        log.write("profiled\\n")
    plan = json.loads(Path(args[args.index("--plan") + 1]).read_text())
    sweeps = list(dict.fromkeys(p["sweep"] for p in plan["problems"]))
    Path({work!r}, "sweeps.json").write_text(json.dumps(sweeps))
    with open(args[args.index("--manifest") + 1], "w") as out:
        for s in sweeps:
            for line in (data / f"{{s}}.launches.jsonl").read_text().splitlines():
                out.write(json.dumps({{"sweep": s, **json.loads(line)}}) + "\\n")
"""


def test_sweeps_are_profiled_in_one_run_and_unchanged_ones_are_not_profiled_again(tmp_path, monkeypatch):
    from tuner.profile.stage import Profiled, profile_sweeps

    calls, tool = tmp_path / "calls", tmp_path / "ncu"
    metrics = sorted({ncu.base_name(m) for m in counters.ncu_metrics()})
    tool.write_text(
        REPLAYING_NCU.format(python=sys.executable, data=str(DATA), metrics=metrics, work=str(tmp_path), calls=str(calls))
    )
    tool.chmod(0o755)
    monkeypatch.setenv("NCU", str(tool))
    names = ("layout_aos_soa", "offset_read_write")

    def sweeps(rows: dict) -> list:
        return [
            Profiled(n, REGISTRY[rows[n]["family"].iloc[0]], rows[n], "all", tmp_path / "out" / f"{n}.parquet") for n in names
        ]

    rows = {n: results.read(DATA / f"{n}.sweep.parquet") for n in names}
    work = tmp_path / "store"
    done = profile_sweeps(sweeps(rows), work=work, child=[sys.executable, "-c", "pass"])
    assert calls.read_text().count("profiled") == 1  # one ncu run for both sweeps
    for name in names:
        frame, note = done[name]
        assert note == "" and len(frame) == len(captured(name)) > 0
        written = pd.read_parquet(tmp_path / "out" / f"{name}.parquet")
        pd.testing.assert_frame_equal(written.reset_index(drop=True), frame.reset_index(drop=True), check_dtype=False)
        by_key = lambda f: f.sort_values(["dtype", "n", "config_key"]).reset_index(drop=True)  # noqa: E731
        pd.testing.assert_frame_equal(by_key(frame), by_key(captured(name)))  # as when profiled alone

    # Nothing changed: no ncu run, the same rows.
    again = profile_sweeps(sweeps(rows), work=work, child=[sys.executable, "-c", "pass"])
    assert calls.read_text().count("profiled") == 1
    for name in names:
        pd.testing.assert_frame_equal(again[name][0].reset_index(drop=True), done[name][0].reset_index(drop=True))

    # One sweep re-measured: only it is profiled again, with its new timed rows beside the counters.
    rows["offset_read_write"] = rows["offset_read_write"].assign(time_ms_median=rows["offset_read_write"]["time_ms_median"] * 2)
    third = profile_sweeps(sweeps(rows), work=work, child=[sys.executable, "-c", "pass"])
    assert calls.read_text().count("profiled") == 2
    planned = json.loads((work / "plan.json").read_text())["problems"]
    assert {p["sweep"] for p in planned} == {"offset_read_write"}
    assert (
        third["offset_read_write"][0]["time_ms_median"].to_numpy()
        == 2 * done["offset_read_write"][0]["time_ms_median"].to_numpy()
    ).all()
    pd.testing.assert_frame_equal(
        third["layout_aos_soa"][0].reset_index(drop=True), done["layout_aos_soa"][0].reset_index(drop=True)
    )
