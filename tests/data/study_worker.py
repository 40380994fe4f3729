"""One study worker process on the fake family, for tests/test_study_workers.py.

    python study_worker.py STORAGE STUDY BUDGET SEED --calls FILE
        [--sleep S] [--pause POINT:S] [--kill POINT:N] [--no-ask-ahead] [--ready FILE --go FILE]

Each measurement sleeps ``--sleep`` seconds, then appends its config_key to
``--calls`` (one line, one write, so concurrent workers do not interleave).
``--pause POINT:S`` sleeps S seconds at a point of the loop (to widen a
race); ``--kill POINT:N`` SIGKILLs this process the Nth time it reaches
POINT: a point ``run_study`` passes to its ``at`` callback, or ``measure``
(inside measure, before it finishes), once any ask in progress has ended (so
a worker asking ahead leaves one more claim, stale). ``--seen FILE`` appends,
for each ask, one JSON line: the rows measured by other workers that were in
the claims as the ask began, and those of them the sampler's study held when
the sampler was asked. With ``--ready``/``--go`` it touches the first file once
imported and waits for the second before it starts, so that workers start together.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import optuna  # noqa: E402
from fake_family import PROBLEM, FakeFamily, measure  # noqa: E402

import tuner.search.study.run as study_module  # noqa: E402
from tuner.data.results import config_key  # noqa: E402
from tuner.search.samplers.registry import make_sampler  # noqa: E402
from tuner.search.study.storage import open_claims  # noqa: E402


class Watching(optuna.samplers.BaseSampler):
    """A sampler that notes, as it is first asked for a trial, which rows of
    other workers its study holds, then lets ``inner`` choose."""

    def __init__(self, inner: optuna.samplers.BaseSampler, noted) -> None:
        self.inner, self.noted = inner, noted

    def infer_relative_search_space(self, study, trial):
        self.noted(trial.number, _finished_keys(study))
        return self.inner.infer_relative_search_space(study, trial)

    def sample_relative(self, study, trial, search_space):
        return self.inner.sample_relative(study, trial, search_space)

    def sample_independent(self, study, trial, param_name, param_distribution):
        return self.inner.sample_independent(study, trial, param_name, param_distribution)


def _finished_keys(study) -> set[str]:
    return {config_key(t.params) for t in study.get_trials(deepcopy=False) if t.state.is_finished() and t.params}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("storage")
    parser.add_argument("study")
    parser.add_argument("budget", type=int)
    parser.add_argument("seed", type=int)
    parser.add_argument("--calls", required=True)
    parser.add_argument("--sleep", type=float, default=0.0)
    parser.add_argument("--sampler", default="tpe")
    parser.add_argument("--pause", default="")
    parser.add_argument("--kill", default="")
    parser.add_argument("--no-ask-ahead", action="store_true")
    parser.add_argument("--seen")
    parser.add_argument("--ready")
    parser.add_argument("--go")
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)

    kill_point, _, kill_count = args.kill.partition(":")
    pause_point, _, pause_s = args.pause.partition(":")
    reached: dict[str, int] = {}
    asks = threading.Condition()  # "asking" counts an ask up, "asked" down
    in_flight = [0]
    mine: set[str] = set()  # configurations this worker measured
    before: list[set[str]] = []  # per ask: other workers' rows in the claims as it began
    claims = open_claims(args.storage, args.study) if args.seen else None

    def others_rows() -> set[str]:
        return {key for key, claim in claims.snapshot().items() if claim.row is not None and key not in mine}

    def reach(point: str) -> None:
        reached[point] = reached.get(point, 0) + 1
        if point in ("asking", "asked"):
            if point == "asking" and claims is not None:
                before.append(others_rows())
            with asks:
                in_flight[0] += 1 if point == "asking" else -1
                asks.notify_all()
        if point == pause_point:
            time.sleep(float(pause_s))
        if point == kill_point and reached[point] == int(kill_count):
            with asks:
                asks.wait_for(lambda: in_flight[0] == 0)  # not in the middle of an ask ahead
            os.kill(os.getpid(), signal.SIGKILL)

    noted_trials: set[int] = set()

    def note(number: int, held: set[str]) -> None:
        if number in noted_trials:
            return  # asked again within one trial
        noted_trials.add(number)
        expected = before[len(noted_trials) - 1]
        with open(args.seen, "a") as f:
            f.write(json.dumps({"expected": sorted(expected), "held": sorted(held & expected),
                                "others": len(held - mine)}) + "\n")  # fmt: skip

    def measure_slowly(cfg: dict) -> dict:
        mine.add(config_key(cfg))
        reach("measure")
        time.sleep(args.sleep)
        row = measure(cfg)
        fd = os.open(args.calls, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (config_key(cfg) + "\n").encode())
        finally:
            os.close(fd)
        return row

    sampler = Watching(make_sampler(args.sampler, args.seed), note) if args.seen else None
    if args.ready:
        Path(args.ready).touch()
        while not Path(args.go).exists():
            time.sleep(0.005)
    if sampler is None:  # one sampler, made once, seeded past the study's claims so far (as a resumed study's is)
        sampler = make_sampler(args.sampler, study_module.resumed_seed(args.storage, args.study, args.seed))
    outcome = study_module.run_study(
        study_module.StudyOptions(family=FakeFamily(), problem=PROBLEM, domains=None, storage=args.storage,
                                  study_name=args.study, measure=measure_slowly, budget_trials=args.budget, timeout_s=None,
                                  sampler=sampler, seed=args.seed, worker=f"worker-{args.seed}",
                                  ask_ahead=not args.no_ask_ahead, at=reach),
    )
    print(json.dumps({"measured": outcome.measured, "lost": outcome.lost, "stop_reason": outcome.stop_reason}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
