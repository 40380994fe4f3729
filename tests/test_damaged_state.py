"""Files the pipeline writes and reads back, damaged: a sweep's row store, a
study's claims and journal, the Parquet and JSON files of best, collect and
the report. A line that is not a record is set aside or skipped with one
warning naming the file and line; a file a stage cannot do without stops it
with one line naming the file and the command that recovers; nothing already
measured is lost or measured twice, and nothing is written elsewhere."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import optuna
import pytest

from tuner.data import results
from tuner.data.counters import read_profiles
from tuner.data.readback import read_json
from tuner.errors import DamagedFile
from tuner.families import REGISTRY, Problem
from tuner.search.study.claims import CLAIMED, FileClaims, claim_row
from tuner.search.study.run import StudyOptions, open_storage, run_study, study_rows
from tuner.search.study.storage import open_claims
from tuner.stages.sweep_store import STORE_FILE, RowStore, run_sweep

sys.path.insert(0, str(Path(__file__).parent / "data"))
from fake_family import PROBLEM, FakeFamily, measure  # noqa: E402

optuna.logging.set_verbosity(optuna.logging.WARNING)

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "results" / "reference" / "nvidia-h200"

# ---- the sweep's row store -------------------------------------------------------

FAMILY = REGISTRY["reduce"]
PARAMS = {"variant": ["unrolled"], "block_size": [128, 256, 512], "unroll": [2, 4]}
PROBLEMS = [Problem("reduce", "int32", 1 << 20)]
TOTAL = 6


class FakeSession:
    def __init__(self, problem, measured: list):
        self.problem, self.measured = problem, measured

    def measure(self, cfg, source):
        self.measured.append(results.config_key(cfg))
        return {"family": "reduce", "dtype": self.problem.dtype, "n": self.problem.n, "source": source,
                "config_key": results.config_key(cfg), "status": "ok", "bandwidth_gbs": float(cfg["block_size"]), **cfg}  # fmt: skip


def sweep(store: Path, said: list, measured: list):
    return run_sweep("t", FAMILY, PROBLEMS, PARAMS, store=store, log=said.append,
                     open_problem=lambda f, p: FakeSession(p, measured))  # fmt: skip


def warnings(said: list[str]) -> list[str]:
    return [line for line in said if line.startswith("warning:")]


def files_under(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


NOT_ROWS = {
    "a list": b"[1, 2, 3]",
    "an empty object": b"{}",
    "a row missing its key": b'{"family": "reduce", "dtype": "int32", "n": 1048576, "status": "ok"}',
    "a string": b'"row"',
    "null": b"null",
    "n as text": b'{"family": "reduce", "dtype": "int32", "n": "many", "config_key": "{}", "status": "ok"}',
    "bytes that are not UTF-8": b'{"family": "\xff\xfe"}',
    "half a row": b'{"family": "reduce", "dty',
}


@pytest.mark.parametrize("line", list(NOT_ROWS.values()), ids=list(NOT_ROWS))
def test_a_line_of_the_row_store_that_is_not_a_row_is_set_aside_and_nothing_else_is_lost(tmp_path, line):
    store = tmp_path / "store"
    sweep(store, [], [])
    path = store / STORE_FILE
    rows = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(rows[:3]) + line + b"\n" + b"".join(rows[3:]))  # inserted as line 4
    said, measured = [], []
    frame = sweep(store, said, measured)
    assert len(warnings(said)) == 1, said
    assert warnings(said)[0].startswith(f"warning: {path}:4: ") and "\n" not in warnings(said)[0]
    assert measured == [] and len(frame) == TOTAL  # every row kept, none measured again
    assert frame.groupby("config_key").size().max() == 1
    corrupt = list(store.glob("*.corrupt"))
    assert len(corrupt) == 1 and corrupt[0].read_bytes() == line + b"\n"  # moved, not lost
    assert path.read_bytes() == b"".join(rows)
    said = []
    sweep(store, said, measured)
    assert said == [line for line in said if not line.startswith("warning:")] and measured == []  # quarantined once


def test_a_replaced_row_and_a_torn_tail_are_measured_again_once_each(tmp_path):
    store = tmp_path / "store"
    sweep(store, [], [])
    path = store / STORE_FILE
    rows = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(rows[0] + b"[1, 2, 3]\n" + b"".join(rows[2:-1]) + rows[-1][:30])
    said, measured = [], []
    frame = sweep(store, said, measured)
    assert [w.split(": ")[1] for w in warnings(said)] == [f"{path}:2", f"{path}:{len(rows)}"]
    assert len(measured) == 2 and len(frame) == TOTAL and frame.groupby("config_key").size().max() == 1
    assert path.read_bytes().endswith(b"\n") and len(path.read_bytes().splitlines()) == TOTAL


def test_a_row_the_results_schema_refuses_is_set_aside_when_tabled(tmp_path):
    store = tmp_path / "store"
    sweep(store, [], [])
    path = store / STORE_FILE
    row = json.loads(path.read_bytes().splitlines()[0])
    with open(path, "ab") as handle:
        handle.write(json.dumps({**row, "config_key": "other", "not_a_column": 1}).encode() + b"\n")
    said = []
    frame = RowStore(store, said.append).rows()
    assert len(frame) == TOTAL and len(warnings(said)) == 1
    assert f"{path}:{TOTAL + 1}: a row the results schema refuses" in warnings(said)[0]


# ---- the claims file -------------------------------------------------------------

ME = "here/1:1:1"

NOT_CLAIMS = {
    "a list": b"[1, 2, 3]",
    "an empty object": b"{}",
    "a claim without its trial": b'{"s":"s","k":"k9","op":"claim","t":1.0,"owner":"o","worker":"w"}',
    "an unknown operation": b'{"s":"s","k":"k9","op":"steal","t":1.0}',
    "a trial that is text": b'{"s":"s","k":"k9","op":"claim","t":1.0,"trial":"zero","owner":"o","worker":"w"}',
    "not JSON": b"\xff{claims",
}


@pytest.mark.parametrize("line", list(NOT_CLAIMS.values()), ids=list(NOT_CLAIMS))
def test_a_line_of_the_claims_file_that_is_not_a_record_is_skipped_with_one_warning(tmp_path, line):
    path = tmp_path / "study.log.claims"
    said: list[str] = []
    a = FileClaims(str(path), "s", log=said.append)
    assert a.claim("k1", 0, ME, "w", budget=None) == "ok"
    assert a.record("k1", ME, '{"config_key": "k1", "status": "ok"}')
    with open(path, "ab") as handle:
        handle.write(line + b"\n")
    b = FileClaims(str(path), "s", log=said.append)
    assert b.claim("k2", 1, ME, "w", budget=None) == "ok"  # the store goes on
    seen = b.snapshot()
    assert sorted(seen) == ["k1", "k2"] and seen["k1"].row and seen["k2"].state == CLAIMED
    assert said == [f"warning: {path}:3: " + said[0].split(":3: ", 1)[1]] and "\n" not in said[0]
    assert len(path.read_bytes().splitlines()) == 4  # nothing of the file is lost


def test_a_torn_claims_line_is_moved_aside_before_the_next_record(tmp_path):
    path = tmp_path / "study.log.claims"
    said: list[str] = []
    a = FileClaims(str(path), "s", log=said.append)
    a.claim("k1", 0, ME, "w", budget=None)
    with open(path, "ab") as handle:
        handle.write(b'{"s":"s","k":"k2","op":"measured","row":"{\\"con')
    b = FileClaims(str(path), "s", log=said.append)
    assert b.claim("k3", 1, ME, "w", budget=None) == "ok"
    assert len(said) == 1 and said[0].startswith(f"warning: {path}:2: no end of line")
    assert (tmp_path / "study.log.claims.corrupt").read_bytes().startswith(b'{"s":"s","k":"k2"')
    assert [json.loads(line)["k"] for line in path.read_bytes().splitlines()] == ["k1", "k3"]


def test_a_claim_whose_row_is_not_a_row_is_left_out_with_one_warning(tmp_path, capsys):
    store = FileClaims(str(tmp_path / "c.claims"), "s")
    store.claim("k", 0, ME, "w", budget=None)
    store.record("k", ME, "[1, 2")
    assert claim_row(store, store.snapshot()["k"]) is None
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "the claim of k holds a row that is not JSON" in err[0]


# ---- the study's journal ---------------------------------------------------------

FAKE = FakeFamily()


class Recorder:
    def __init__(self):
        self.keys: list[str] = []

    def __call__(self, cfg):
        self.keys.append(results.config_key(cfg))
        return measure(cfg)


def study(storage: str, budget: int, recorder: Recorder):
    return run_study(StudyOptions.for_strategy("random", family=FAKE, problem=PROBLEM, domains=None, storage=storage,
                                               study_name="s", measure=recorder, budget_trials=budget, timeout_s=None,
                                               seed=0))  # fmt: skip


def rows_of(storage: str) -> list[dict]:
    return study_rows(storage, "s")


def test_a_torn_last_journal_line_is_set_aside_and_the_study_goes_on(tmp_path, capfd):
    journal = str(tmp_path / "optuna.log")
    first = Recorder()
    study(journal, 5, first)
    data = Path(journal).read_bytes()
    Path(journal).write_bytes(data[:-25])  # an OS crash during the last append
    second = Recorder()
    outcome = study(journal, 10, second)
    err = [line for line in capfd.readouterr().err.splitlines() if line.startswith("warning:")]
    assert len(err) == 1 and err[0].startswith(f"warning: {journal}:") and "moved to optuna.log.torn" in err[0]
    assert len(set(first.keys) | set(second.keys)) == len(first.keys) + len(second.keys) == 10  # none twice
    assert outcome.total_measured == 10 and len(rows_of(journal)) == 10  # readable, every row there
    assert Path(journal + ".torn").read_bytes() == data[data.rindex(b"\n", 0, len(data) - 25) + 1 : -25] + b"\n"


@pytest.mark.parametrize(
    "damage, problem",
    [
        (lambda line, following: line[:20] + following, "not a JSON record"),  # a torn line joined to the next append
        (lambda line, following: b"[1, 2, 3]", "a JSON list, not a journal record"),
        (lambda line, following: b"{}", "a record whose op_code is 'None'"),
        (lambda line, following: b'{"op_code": 4, "worker_id": "w"}', "a record of op_code 4 without ['study_id']"),
    ],
    ids=["glued", "list", "empty", "missing"],
)
def test_a_damaged_journal_line_stops_with_one_line_whose_command_recovers_every_row(tmp_path, damage, problem):
    journal = str(tmp_path / "optuna.log")
    first = Recorder()
    study(journal, 6, first)
    lines = Path(journal).read_bytes().split(b"\n")
    k = len(lines) // 2
    lines[k] = damage(lines[k], lines[k + 1])
    if b"{" in lines[k][20:]:  # glued: the next record is now part of the line
        del lines[k + 1]
    Path(journal).write_bytes(b"\n".join(lines))
    with pytest.raises(DamagedFile) as caught:
        study(journal, 10, Recorder())
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{journal}:{k + 1}: {problem}")
    command = message.split("`")[1]
    assert command.startswith("truncate -s ")
    subprocess.run(shlex.split(command), check=True)
    second = Recorder()
    study(journal, 10, second)
    assert not set(first.keys) & set(second.keys)  # nothing measured twice
    keys = {row["config_key"] for row in rows_of(journal)}
    assert keys == set(first.keys) | set(second.keys) and len(keys) == 10  # nothing measured lost


def test_the_claims_of_a_journal_study_are_found_after_a_torn_tail(tmp_path):
    journal = str(tmp_path / "optuna.log")
    study(journal, 3, Recorder())
    Path(journal).write_bytes(Path(journal).read_bytes()[:-5])
    storage = open_storage(journal)
    claims = open_claims(storage, "s", create=False)
    assert claims is not None and len(claims.snapshot()) == 3


# ---- Parquet and JSON files read by best, collect and the report ----------------------


def results_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "results" / "gpu"
    folder.mkdir(parents=True)
    for name in ("measurements.parquet", "device.json", "peaks.json"):
        shutil.copy(REFERENCE / name, folder / name)
    return folder


def tuner(*args: str, cwd: Path, module: str = "tuner") -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


MAINS = {"tuner": "tuner.cli", "tuner.report": "tuner.report.__main__"}


def tuner_here(*args: str, cwd: Path, monkeypatch, capfd, module: str = "tuner") -> tuple[int, str]:
    """``python -m MODULE ARGS`` run in this process (its ``main``): (exit status, stderr)."""
    import importlib

    monkeypatch.chdir(cwd)
    capfd.readouterr()
    try:
        status = importlib.import_module(MAINS[module]).main(list(args))
    except SystemExit as stop:
        status = stop.code if isinstance(stop.code, int) else 1
    return status, capfd.readouterr().err


def tuner_in(process: bool, *args: str, cwd: Path, monkeypatch, capfd, module: str = "tuner") -> tuple[int, str]:
    """(exit status, stderr) of ``python -m MODULE ARGS``: as a process, or in this one (the tests that
    refuse one input after another run one case each as a process, for what a process adds: its exit
    status and nothing printed at import)."""
    if process:
        proc = tuner(*args, cwd=cwd, module=module)
        return proc.returncode, proc.stderr
    return tuner_here(*args, cwd=cwd, monkeypatch=monkeypatch, capfd=capfd, module=module)


DAMAGES = {
    "empty": lambda data: b"",
    "cut short": lambda data: data[: len(data) // 2],
    "not UTF-8": lambda data: b"\xff\xfe" + data,
}


@pytest.mark.parametrize("damage", list(DAMAGES.values()), ids=list(DAMAGES))
@pytest.mark.parametrize("name", ["measurements.parquet", "device.json"])
def test_best_stops_in_one_line_on_a_damaged_input_and_writes_nothing(tmp_path, monkeypatch, capfd, name, damage):
    folder = results_folder(tmp_path)
    target = folder / name
    target.write_bytes(damage(target.read_bytes()))
    before = files_under(tmp_path)
    process = name == "measurements.parquet" and damage is DAMAGES["empty"]
    status, err = tuner_in(process, "best", "--results", str(folder), cwd=tmp_path, monkeypatch=monkeypatch, capfd=capfd)
    assert status == 1, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {target}: not ") and "remove it and make it again with `" in lines[0]
    assert " readable " in lines[0]
    assert files_under(tmp_path) == before


def test_collect_stops_in_one_line_on_a_truncated_part_and_writes_nothing(tmp_path):
    good = tmp_path / "sweeps" / "a.parquet"
    good.parent.mkdir()
    shutil.copy(REFERENCE / "measurements.parquet", good)
    bad = tmp_path / "sweeps" / "b.parquet"
    bad.write_bytes(good.read_bytes()[:1000])
    proc = tuner("collect", str(good), str(bad), "--out", str(tmp_path / "m.parquet"), cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [
        f"error: {bad}: not a readable Parquet file ({proc.stderr.split('file (', 1)[1].split(')')[0]}); remove it and make "
        f"it again with `python -m tuner sweep b` (it reads its rows back from its store, measuring only what is missing)"
    ]
    assert not (tmp_path / "m.parquet").exists()


@pytest.mark.parametrize(
    "text, problem",
    [
        (b'{"copy_gbs": 3000', "not readable JSON"),
        (b"[3000]", "a JSON list, not an object"),
        (b'{"copy_gbs": "fast"}', "copy_gbs is 'fast', not a number"),
    ],
    ids=["cut short", "a list", "a word for a number"],
)
def test_the_report_stops_in_one_line_on_damaged_peaks(tmp_path, monkeypatch, capfd, text, problem):
    folder = results_folder(tmp_path)
    (folder / "peaks.json").write_bytes(text)
    before = files_under(tmp_path)
    status, err = tuner_in(problem == "not readable JSON", "--results", str(folder), cwd=tmp_path, monkeypatch=monkeypatch,
                           capfd=capfd, module="tuner.report")  # fmt: skip
    assert status == 2, err
    assert err.splitlines() == [f"error: {folder / 'peaks.json'}: {problem}" + err.split(problem, 1)[1].rstrip("\n")]
    assert "make it again with `python -m tuner peaks`" in err
    assert files_under(tmp_path) == before


def test_a_damaged_profile_is_left_out_of_the_report_with_one_warning(tmp_path):
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "sweep.parquet").write_bytes(b"PAR1 cut")
    said: list[str] = []
    frame, notes = read_profiles(tmp_path, log=said.append)
    assert frame.empty and len(notes) == 1 and notes[0].startswith("sweep: unreadable")
    assert len(said) == 1 and said[0].startswith(f"warning: {tmp_path / 'profiles' / 'sweep.parquet'}: unreadable")


def test_a_missing_or_damaged_device_json_of_a_measuring_stage_is_one_line(tmp_path):
    with pytest.raises(DamagedFile, match=r"device\.json: missing; remove it and make it again with `python -m tuner describe`$"):
        read_json(tmp_path / "device.json")
    (tmp_path / "peaks.json").write_text('{"read_gbs": [1]}')
    with pytest.raises(DamagedFile, match=r"peaks\.json: read_gbs is '\[1\]', not a number; .*`python -m tuner peaks`$"):
        read_json(tmp_path / "peaks.json", numbers=("_gbs",))


def test_replay_study_rows_names_a_damaged_journal_in_one_line(tmp_path):
    journal = str(tmp_path / "optuna.log")
    study(journal, 4, Recorder())
    lines = Path(journal).read_bytes().split(b"\n")
    lines[2] = b"[1, 2, 3]"
    Path(journal).write_bytes(b"\n".join(lines))
    before = files_under(tmp_path)
    proc = tuner("rows", "--storage", journal, "--study", "s", "--budget", "4", "--out", str(tmp_path / "rows.parquet"),
                 cwd=tmp_path, module="tuner.search.tables.replay_study")  # fmt: skip
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [f"error: {journal}:3: a JSON list, not a journal record (an object), so the study cannot be read "
                                        f"past it; keep lines 1 to 2 with `truncate -s {len(lines[0]) + len(lines[1]) + 2} "
                                        f"{journal}` (the measured rows of later trials are kept in optuna.log.claims and are "
                                        f"not measured again), then run the stage again"]  # fmt: skip
    assert files_under(tmp_path) == before


def test_a_whole_number_past_its_columns_type_is_a_damaged_file_in_one_line(tmp_path):
    import numpy as np
    import pandas as pd

    folder = results_folder(tmp_path)
    target = folder / "measurements.parquet"
    frame = pd.read_parquet(target)
    frame["block_size"] = np.uint64(2**64 - 1)  # no int64 holds it
    frame.to_parquet(target)
    proc = tuner("best", "--results", str(folder), cwd=tmp_path)
    assert proc.returncode == 1 and proc.stderr.startswith(f"error: {target}: not results rows ("), proc.stderr
    assert len(proc.stderr.splitlines()) == 1
    proc = tuner(str(target), "--family", "reduce", "--dtype", "int32", "--n", "268435456", cwd=tmp_path,
                 module="tuner.search.tables.replay")  # fmt: skip
    assert proc.returncode == 2 and f"error: {target}: not results rows (" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
