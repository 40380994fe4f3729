"""The journal's flock lock: exclusive across processes, released on release."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import optuna
import pytest

from tuner.search.storage import BatchedJournalStorage, FlockJournalLock, JournalFile, batched, open_storage

WAITER = textwrap.dedent(
    """
    import sys, time
    from tuner.search.storage import FlockJournalLock
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


def test_journal_storages_write_under_it(tmp_path):
    storage = open_storage(str(tmp_path / "study.log"))
    assert isinstance(storage._backend, JournalFile) and isinstance(storage._backend._lock, FlockJournalLock)
    study = optuna.create_study(storage=storage, study_name="s")
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=3)
    assert len(optuna.load_study(study_name="s", storage=open_storage(str(tmp_path / "study.log"))).trials) == 3


def test_a_batched_ask_is_one_append_and_reads_back_whole(tmp_path, monkeypatch):
    path = str(tmp_path / "study.log")
    storage = open_storage(path)
    assert isinstance(storage, BatchedJournalStorage)
    study = optuna.create_study(storage=storage, study_name="s")
    appends = []
    write = JournalFile.append_logs
    monkeypatch.setattr(JournalFile, "append_logs", lambda self, logs: (appends.append(len(logs)), write(self, logs)))
    dists = {name: optuna.distributions.CategoricalDistribution([1, 2, 3]) for name in "abcde"}
    with batched(storage):
        trial = study.ask(fixed_distributions=dists)
        trial.set_user_attr("config_key", "k")
        trial.set_user_attr("worker", "w")
    # The new trial alone (its number must be known), then 5 parameters and 2 attributes at once.
    assert appends == [1, 7]
    with batched(storage):
        trial.set_user_attr("status", "ok")
        study.tell(trial, 1.5)
    assert appends == [1, 7, 2]  # the attribute goes with the tell
    again = optuna.load_study(study_name="s", storage=open_storage(path)).trials[0]
    assert set(again.params) == set("abcde") and again.user_attrs == {"config_key": "k", "worker": "w", "status": "ok"}
    assert again.value == 1.5
    # Outside a batch every record is written as it comes, as Optuna does.
    trial = study.ask(fixed_distributions=dists)
    assert appends[3:] == [1, 1, 1, 1, 1, 1]


def test_a_batch_for_a_trial_finished_meanwhile_raises_as_it_ends(tmp_path):
    path = str(tmp_path / "study.log")
    storage = open_storage(path)
    study = optuna.create_study(storage=storage, study_name="s")
    trial = study.ask()
    other = optuna.load_study(study_name="s", storage=open_storage(path))
    other.tell(trial.number, state=optuna.trial.TrialState.FAIL)  # another worker takes it for dead
    with pytest.raises(optuna.exceptions.UpdateFinishedTrialError):
        with batched(storage):
            storage.set_trial_user_attr(trial._trial_id, "worker", "w")
    assert optuna.load_study(study_name="s", storage=open_storage(path)).trials[0].user_attrs == {}
