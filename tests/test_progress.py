"""Progress of compile, sweeps and studies: a tqdm bar with rate and ETA on a
terminal, plain periodic lines elsewhere (Snakemake logs)."""

from __future__ import annotations

import io
import re
import shutil
import sys
from pathlib import Path

import optuna
import pytest

from tuner.families import REGISTRY, Problem
from tuner.progress import Progress, track
from tuner.search.study.run import StudyOptions, run_study
from tuner.search.study.storage import finished_trials
from tuner.stages.sweep_store import run_sweep

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent / "data"))
from fake_family import PROBLEM, FakeFamily, measure  # noqa: E402
from test_sweep import FAMILY, PARAMS, PROBLEMS, FakeSession  # noqa: E402

optuna.logging.set_verbosity(optuna.logging.WARNING)

PLAIN = re.compile(r"^(?P<what>.+): (?P<n>\d+)/(?P<total>\d+) \((?P<pct>\d+)%\) (?P<rate>[\d.]+)(?P<per>(?P<unit>\w+)/s|s/\w+), "
                   r"(?P<elapsed>[\d:]+) elapsed, (?P<left>[\d:]+) left$")  # fmt: skip


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_off_a_terminal_a_plain_line_every_interval_and_one_at_the_end(monkeypatch):
    monkeypatch.delenv("TUNER_PROGRESS", raising=False)
    stream, clock = io.StringIO(), Clock()
    with Progress("sweep:t int32 n=1024", 100, stream=stream, clock=clock, every_s=20) as progress:
        assert progress.mode == "lines"
        for _ in range(50):
            clock.now += 1.0  # one configuration a second
            progress.update()
    text = stream.getvalue()
    assert "\r" not in text and "\x1b" not in text
    lines = [PLAIN.match(line) for line in text.splitlines()]
    assert all(lines), text
    assert [int(m["n"]) for m in lines] == [20, 40, 50]  # at 20 s, 40 s, and the close
    first, last = lines[0], lines[-1]
    assert first["what"] == "sweep:t int32 n=1024" and first["total"] == "100" and first["pct"] == "20"
    assert first["rate"] == "1.00" and first["unit"] == "config"
    assert (first["elapsed"], first["left"]) == ("00:20", "01:20")  # 80 left at one a second
    assert (last["elapsed"], last["left"]) == ("00:50", "00:50")


def test_rate_and_eta_count_only_this_run_when_resuming(monkeypatch):
    monkeypatch.delenv("TUNER_PROGRESS", raising=False)
    stream, clock = io.StringIO(), Clock()
    with Progress("study:s", 40, initial=30, stream=stream, clock=clock) as progress:
        clock.now = 10.0
        progress.update(5)  # 5 in 10 s: 2 s each (tqdm turns slow rates round), 5 left
    match = PLAIN.match(stream.getvalue().strip())
    assert match and (match["n"], match["total"], match["rate"], match["per"], match["left"]) == (
        "35",
        "40",
        "2.00",
        "s/config",
        "00:10",
    )


def test_on_a_terminal_a_tqdm_bar_with_rate_and_eta(monkeypatch):
    monkeypatch.delenv("TUNER_PROGRESS", raising=False)
    stream, printed = Terminal(), []
    with Progress("compile for sm_90", 4, unit="module", stream=stream) as progress:
        assert progress.mode == "bar"
        for i in range(4):
            progress.update()
            progress.message(f"note {i}", printed.append)
    text = stream.getvalue()
    assert "\r" in text  # redrawn in place
    final = text.rstrip("\n").split("\r")[-1]
    assert re.fullmatch(r"compile for sm_90: 100%\|#+\| 4/4 \[\d\d:\d\d<\d\d:\d\d, +[\d.]+module/s\] *", final), final  # newer tqdm pads the line
    assert "0/4 [00:00<?" in text  # the ETA field, unknown before the first module
    assert printed == [f"note {i}" for i in range(4)]  # messages go to their own log, not into the bar
    assert "note" not in text


def test_environment_overrides_the_choice(monkeypatch):
    monkeypatch.setenv("TUNER_PROGRESS", "off")
    stream = Terminal()
    with Progress("x", 3, stream=stream) as progress:
        progress.update(3)
    assert stream.getvalue() == ""
    monkeypatch.setenv("TUNER_PROGRESS", "lines")
    with Progress("x", 3, stream=stream) as progress:
        progress.update(3)
    assert PLAIN.match(stream.getvalue().strip())["n"] == "3"


def test_track_counts_each_item_taken(monkeypatch):
    monkeypatch.delenv("TUNER_PROGRESS", raising=False)
    stream = io.StringIO()
    assert list(track(range(7), "profile", stream=stream)) == list(range(7))
    assert PLAIN.match(stream.getvalue().strip())["n"] == "7"


def test_a_sweep_reports_each_problem_in_the_log(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("TUNER_PROGRESS", raising=False)
    measured: list[str] = []
    run_sweep("t", FAMILY, PROBLEMS, PARAMS, store=tmp_path / "store", log=lambda m: None,
              open_problem=lambda f, p: FakeSession(f, p, measured))  # fmt: skip
    lines = [PLAIN.match(line) for line in capsys.readouterr().err.splitlines()]
    assert [(m["what"], m["n"], m["total"]) for m in lines if m] == [(f"sweep:t {p.key}", "24", "24") for p in PROBLEMS], (
        "one final line per problem"
    )
    # A rerun starts from what the store holds.
    run_sweep("t", FAMILY, PROBLEMS[:1], PARAMS | {"unroll": [2, 4, 8, 16]}, store=tmp_path / "store", log=lambda m: None,
              open_problem=lambda f, p: FakeSession(f, p, measured))  # fmt: skip
    (line,) = capsys.readouterr().err.splitlines()
    assert PLAIN.match(line)["n"] == PLAIN.match(line)["total"] == "32" and len(measured) == 48 + 8


def test_a_study_ticks_once_per_measured_configuration_towards_its_budget(tmp_path, monkeypatch):
    monkeypatch.delenv("TUNER_PROGRESS", raising=False)
    storage = str(tmp_path / "study.log")
    calls: list[dict] = []

    def recorded(cfg):
        calls.append(cfg)
        return measure(cfg)

    for budget in (6, 10):  # the second run resumes the first
        stream = io.StringIO()
        done = finished_trials(storage, "s")
        with Progress("study:s", budget, initial=done, stream=stream) as progress:
            run_study(StudyOptions.for_strategy("random", family=FakeFamily(), problem=PROBLEM, domains=None, storage=storage,
                                                study_name="s", measure=progress.counting(recorded), budget_trials=budget,
                                                timeout_s=None, seed=0))  # fmt: skip
        match = PLAIN.match(stream.getvalue().strip())
        assert (int(match["n"]), int(match["total"])) == (budget, budget)
        assert progress.n - done == len(calls) - (0 if budget == 6 else 6)
    assert finished_trials(storage, "s") == 10 and finished_trials(storage, "none yet") == 0


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_compile_counts_each_module(tmp_path, capsys, monkeypatch):
    from tuner.measure.compile import compile_all

    monkeypatch.delenv("TUNER_PROGRESS", raising=False)
    family = REGISTRY["copy"]
    problem = Problem("copy", "float32", 1 << 20)
    configs = family.configs({"variant": ["copy"], "vector_width": [1, 2], "block_size": [128, 256]})
    compiled = compile_all(family, configs, problem, arch="sm_90", cache_dir=tmp_path, jobs=2)
    (line,) = capsys.readouterr().err.splitlines()
    match = PLAIN.match(line)
    assert match["what"] == f"compile {problem.key}" and "module" in match["per"]  # module/s, or s/module when slow
    assert int(match["n"]) == int(match["total"]) == len(compiled) >= 2
