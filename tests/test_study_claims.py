"""The claim stores behind tuner.search.study.run (tuner.search.study.claims), one by one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import optuna
import pytest

from tuner.search.study.claims import (
    BUDGET,
    CLAIMED,
    DONE,
    MEASURED,
    OK,
    TAKEN,
    Claim,
    FileClaims,
    MemoryClaims,
    claims_path,
)
from tuner.search.study.claims_sql import SqlClaims
from tuner.search.study.owners import Heartbeat, owner_alive, this_owner
from tuner.search.study.storage import open_claims, open_storage

ME = this_owner()
OTHER = "elsewhere/1:42:1000"


@pytest.fixture(params=["memory", "file", "sqlite"])
def make_store(request, tmp_path):
    """A factory of stores of one kind over one place: two calls give two
    views of the same claims, as two worker processes have."""

    def make(study: str = "s"):
        if request.param == "memory":
            storage = request.node.__dict__.setdefault("_storage", optuna.storages.InMemoryStorage())
            return open_claims(storage, study)
        if request.param == "file":
            return FileClaims(str(tmp_path / "study.jsonl.claims"), study)
        return SqlClaims(f"sqlite:///{tmp_path / 'study.db'}", study)

    return make


def test_claims_are_exclusive_and_bounded_by_the_budget(make_store):
    a, b = make_store(), make_store()
    assert a.claim("k1", 0, ME, "w0", budget=2) == OK
    assert b.claim("k1", 1, OTHER, "w1", budget=2) == TAKEN
    assert b.claim("k2", 1, OTHER, "w1", budget=2) == OK
    assert a.claim("k3", 2, ME, "w0", budget=2) == BUDGET
    assert a.claim("k3", 2, ME, "w0", budget=None) == OK
    seen = b.snapshot()
    assert sorted(seen) == ["k1", "k2", "k3"]
    assert (seen["k1"].owner, seen["k1"].worker, seen["k1"].trial, seen["k1"].state) == (ME, "w0", 0, CLAIMED)


def test_a_claim_goes_claimed_measured_done_by_its_owner_only(make_store):
    a, b = make_store(), make_store()
    a.claim("k", 0, ME, "w0", budget=None)
    assert not b.record("k", OTHER, "{}")
    assert not a.finish("k", ME)  # not measured yet
    assert a.record("k", ME, '{"status": "ok"}')
    assert not a.record("k", ME, "{}")  # once
    assert not a.release("k", ME)  # measured: kept
    assert b.snapshot()["k"].state == MEASURED
    assert b.snapshot()["k"].row == '{"status": "ok"}'
    assert a.finish("k", ME)
    assert b.snapshot()["k"].state == DONE


def test_a_released_claim_frees_the_configuration_and_the_budget(make_store):
    a, b = make_store(), make_store()
    a.claim("k", 0, ME, "w0", budget=1)
    assert b.claim("j", 1, OTHER, "w1", budget=1) == BUDGET
    assert not b.release("k", OTHER)
    assert a.release("k", ME)
    assert b.snapshot() == {}
    assert b.claim("k", 1, OTHER, "w1", budget=1) == OK


def test_reap_releases_unmeasured_and_takes_over_measured_claims(make_store):
    a, b = make_store(), make_store()
    for key in ("claimed", "measured", "done", "alive"):
        a.claim(key, 0, OTHER if key != "alive" else ME, "w", budget=None)
    a.record("measured", OTHER, "row-m")
    a.record("done", OTHER, "row-d")
    a.finish("done", OTHER)
    released, taken = b.reap(lambda c: c.owner == OTHER, ME, "me")
    assert [c.key for c in released] == ["claimed"]
    assert [(c.key, c.row, c.owner) for c in taken] == [("measured", "row-m", OTHER)]
    now = a.snapshot()
    assert sorted(now) == ["alive", "done", "measured"]
    assert (now["measured"].owner, now["measured"].worker, now["measured"].state) == (ME, "me", MEASURED)
    assert a.finish("measured", ME)


def test_studies_do_not_share_claims(make_store):
    a, b = make_store("one"), make_store("two")
    assert a.claim("k", 0, ME, "w", budget=1) == OK
    assert b.claim("k", 0, ME, "w", budget=1) == OK
    assert list(a.snapshot()) == list(b.snapshot()) == ["k"]


def test_heartbeat_refreshes_the_lease(make_store):
    store = make_store()
    store.claim("k", 0, ME, "w", budget=None)
    before = store.snapshot()["k"].updated
    with Heartbeat(store, ME, 0.01) as heartbeat:
        time.sleep(0.05)
        assert store.snapshot()["k"].updated == before  # holding nothing yet
        with heartbeat.holding("k"):
            time.sleep(0.1)
        held = store.snapshot()["k"].updated
        assert held > before
        time.sleep(0.05)
        assert store.snapshot()["k"].updated == held  # no longer held


def test_a_file_store_survives_a_line_torn_by_a_crash(tmp_path):
    path = str(tmp_path / "c.claims")
    a = FileClaims(path, "s")
    a.claim("k1", 0, ME, "w", budget=None)
    with open(path, "ab") as f:
        f.write(b'{"s":"s","k":"k2","op":"cla')  # killed mid-write
    b = FileClaims(path, "s")
    assert list(b.snapshot()) == ["k1"]
    assert b.claim("k3", 1, ME, "w", budget=None) == OK
    assert sorted(a.snapshot()) == sorted(FileClaims(path, "s").snapshot()) == ["k1", "k3"]
    lines = open(path).read().splitlines()
    assert [json.loads(line)["k"] for line in lines] == ["k1", "k3"]


def test_owners_alive_and_gone():
    assert owner_alive(Claim("k", CLAIMED, 0, ME, "w", time.time()), lease_s=60)
    host = ME.rsplit(":", 2)[0]
    # A process of this host that has exited (and one that reuses its pid).
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    assert not owner_alive(Claim("k", CLAIMED, 0, f"{host}:{process.pid}:1", "w", time.time()), lease_s=60)
    assert not owner_alive(Claim("k", CLAIMED, 0, f"{host}:{os.getpid()}:1", "w", time.time()), lease_s=60)
    # Exited but not yet reaped by its parent (a zombie): gone.
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    owner = None
    while time.monotonic() < deadline:
        with open(f"/proc/{zombie.pid}/stat") as f:
            stat = f.read()
        if stat[stat.rindex(")") + 2] == "Z":
            owner = f"{host}:{zombie.pid}:{stat[stat.rindex(')') + 2 :].split()[19]}"
            break
        time.sleep(0.01)
    assert owner is not None
    assert not owner_alive(Claim("k", CLAIMED, 0, owner, "w", time.time()), lease_s=60)
    zombie.wait()
    # Another host: alive while its lease is fresh.
    assert owner_alive(Claim("k", CLAIMED, 0, OTHER, "w", time.time() - 30), lease_s=60)
    assert not owner_alive(Claim("k", CLAIMED, 0, OTHER, "w", time.time() - 90), lease_s=60)
    assert not owner_alive(Claim("k", CLAIMED, 0, "garbage", "w", 0.0), lease_s=60)


def test_open_claims_picks_the_store_of_the_storage(tmp_path):
    memory = optuna.storages.InMemoryStorage()
    assert isinstance(open_claims(memory, "s"), MemoryClaims)
    assert open_claims(memory, "s") is open_claims(memory, "s")
    assert open_claims(optuna.storages.InMemoryStorage(), "s") is not open_claims(memory, "s")
    assert open_claims(optuna.storages.InMemoryStorage(), "t", create=False) is None

    journal = tmp_path / "study.jsonl"
    assert open_claims(open_storage(journal), "s", create=False) is None
    store = open_claims(open_storage(journal), "s")
    assert isinstance(store, FileClaims) and store.path == claims_path(journal) == f"{journal}.claims"

    url = f"sqlite:///{tmp_path / 'study.db'}"
    assert open_claims(open_storage(url), "s", create=False) is None
    assert isinstance(open_claims(open_storage(url), "s"), SqlClaims)
    assert isinstance(open_claims(open_storage(url), "s", create=False), SqlClaims)


def test_trial_numbers_come_from_the_claims(make_store):
    a, b = make_store(), make_store()
    assert a.claim("k0", None, ME, "w0", budget=None) == OK and a.numbered("k0") == 0
    # A number another claim holds already (two workers read the same next
    # number): the one after the highest held.
    assert b.claim("k1", 0, OTHER, "w1", budget=None) == OK and b.numbered("k1") == 1
    assert a.claim("k2", 7, ME, "w0", budget=None) == OK and a.numbered("k2") == 7
    assert a.next_trial(a.snapshot()) == 8
    # A released claim's number is free again: no row ever carried it.
    assert a.release("k2", ME)
    assert b.claim("k3", None, OTHER, "w1", budget=None) == OK and b.numbered("k3") == 2
    assert {key: c.trial for key, c in a.snapshot().items()} == {"k0": 0, "k1": 1, "k3": 2}


def test_a_row_keeps_its_marks_and_older_records_without_them_still_fold(tmp_path):
    path = str(tmp_path / "study.jsonl.claims")
    older = [{"s": "s", "k": "k0", "op": "claim", "t": 1.0, "trial": 0, "owner": OTHER, "worker": "w"},
             {"s": "s", "k": "k0", "op": "measured", "t": 2.0, "row": '{"status": "ok"}'},
             {"s": "s", "k": "k0", "op": "done", "t": 3.0}]  # fmt: skip
    with open(path, "w") as f:
        f.writelines(json.dumps(record) + "\n" for record in older)
    store = FileClaims(path, "s")
    assert store.snapshot()["k0"] == Claim("k0", DONE, 0, OTHER, "w", 3.0, '{"status": "ok"}', None)
    assert store.claim("k1", None, ME, "w", budget=None) == OK and store.numbered("k1") == 1
    assert store.record("k1", ME, '{"status": "ok"}', {"rescue": "random"})
    assert FileClaims(path, "s").snapshot()["k1"].marks == {"rescue": "random"}


def test_marks_that_are_not_texts_are_skipped_with_one_line(tmp_path):
    path = str(tmp_path / "study.jsonl.claims")
    store = FileClaims(path, "s")
    store.claim("k", None, ME, "w", budget=None)
    with open(path, "a") as f:
        f.write(json.dumps({"s": "s", "k": "k", "op": "measured", "t": 2.0, "row": "{}", "marks": ["x"]}) + "\n")
    warnings = []
    assert FileClaims(path, "s", log=warnings.append).snapshot()["k"].state == CLAIMED
    assert len(warnings) == 1 and "marks are" in warnings[0] and f"{path}:2" in warnings[0]
