"""The journal's flock lock: exclusive across processes, released on release."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import optuna

from tuner.search.study.storage import FlockJournalLock, open_storage

WAITER = textwrap.dedent(
    """
    import sys, time
    from tuner.search.study.storage import FlockJournalLock
    lock = FlockJournalLock(sys.argv[1])
    print("ready", flush=True)
    start = time.monotonic()
    lock.acquire()
    print(time.monotonic() - start, flush=True)
    lock.release()
    """
)


def test_a_second_process_waits_until_the_lock_is_released(tmp_path):
    journal = str(tmp_path / "study.log")
    lock = FlockJournalLock(journal)
    lock.acquire()
    waiter = subprocess.Popen([sys.executable, "-c", WAITER, journal], stdout=subprocess.PIPE, text=True)
    assert waiter.stdout.readline() == "ready\n"
    time.sleep(0.5)
    assert waiter.poll() is None, "the waiter got the lock while it was held"
    lock.release()
    out, _ = waiter.communicate(timeout=30)
    assert waiter.returncode == 0
    assert float(out) >= 0.4  # it waited for the release


def test_journal_storages_write_under_it(tmp_path, monkeypatch):
    held = []
    acquire = FlockJournalLock.acquire
    monkeypatch.setattr(FlockJournalLock, "acquire", lambda self: held.append(self) or acquire(self))
    storage = open_storage(str(tmp_path / "study.log"))
    study = optuna.create_study(storage=storage, study_name="s")
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=3)
    assert len(held) >= 3 * 3  # each trial's creation, parameter and tell at least
    assert {lock.path for lock in held} == {str(tmp_path / "study.log.flock")}
    assert len(optuna.load_study(study_name="s", storage=open_storage(str(tmp_path / "study.log"))).trials) == 3
