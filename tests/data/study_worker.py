"""One study worker process on the fake family, for tests/test_study_workers.py.

    python study_worker.py STORAGE STUDY BUDGET SEED --calls FILE
        [--sleep S] [--pause POINT:S] [--kill POINT:N] [--no-ask-ahead] [--ready FILE --go FILE]

Each measurement sleeps ``--sleep`` seconds, then appends its config_key to
``--calls`` (one line, one write, so concurrent workers do not interleave).
``--pause POINT:S`` sleeps S seconds at a hook point (to widen a race);
``--kill POINT:N`` SIGKILLs this process the Nth time it reaches POINT: a
``tuner.search.study`` hook point, or ``measure`` (inside measure, before it
finishes), after any ask in progress has claimed its configuration (so a
worker asking ahead leaves one more claim, stale). With ``--ready``/``--go`` it touches the first file once imported
and waits for the second before it starts, so that workers start together.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import optuna  # noqa: E402
from fake_family import PROBLEM, FakeFamily, measure  # noqa: E402

import tuner.search.samplers as samplers_module  # noqa: E402
import tuner.search.study as study_module  # noqa: E402
import tuner.search.trials as trials_module  # noqa: E402
from tuner.data.results import config_key  # noqa: E402


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
    parser.add_argument("--ready")
    parser.add_argument("--go")
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)

    kill_point, _, kill_count = args.kill.partition(":")
    pause_point, _, pause_s = args.pause.partition(":")
    reached: dict[str, int] = {}

    def reach(point: str) -> None:
        reached[point] = reached.get(point, 0) + 1
        if point == pause_point:
            time.sleep(float(pause_s))
        if point == kill_point and reached[point] == int(kill_count):
            trials_module.ASKS_IN_FLIGHT.wait_idle()  # not in the middle of an ask ahead
            os.kill(os.getpid(), signal.SIGKILL)

    def measure_slowly(cfg: dict) -> dict:
        reach("measure")
        time.sleep(args.sleep)
        row = measure(cfg)
        fd = os.open(args.calls, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (config_key(cfg) + "\n").encode())
        finally:
            os.close(fd)
        return row

    samplers_module._hook = reach
    if args.ready:
        Path(args.ready).touch()
        while not Path(args.go).exists():
            time.sleep(0.005)
    outcome = study_module.run_study(
        family=FakeFamily(),
        problem=PROBLEM,
        domains=None,
        storage=args.storage,
        study_name=args.study,
        measure=measure_slowly,
        budget_trials=args.budget,
        timeout_s=None,
        sampler=args.sampler,
        seed=args.seed,
        worker=f"worker-{args.seed}",
        ask_ahead=not args.no_ask_ahead,
    )
    print(json.dumps({"measured": outcome.measured, "lost": outcome.lost, "stop_reason": outcome.stop_reason}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
