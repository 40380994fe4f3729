"""Claims: which configurations of a study are taken, in a record every worker shares.

The claims are the study's record: which configuration each trial measures,
and its results row once measured. A worker claims a configuration before
measuring it. The claim is taken atomically with the budget check (it
succeeds only where the configuration is unclaimed and fewer than ``budget``
configurations are claimed or measured), so concurrent workers never measure
one configuration twice and never overshoot the budget:

    claimed --record(row)--> measured --finish()--> done
       \\--release()--> (gone: the configuration may be claimed again)

``measured`` is written before anything else learns of the row (the
dashboard's Optuna storage, ``tuner.search.study.run``), so a worker killed after
it loses nothing: the next worker finds the row here and finishes the claim.

Trial numbers are the ledger's: a claim takes the number after the highest
one held (numbers of released claims are free again, and no row carries one).

Each claim names its owner, ``host/pid-namespace:pid:start-time`` of the
process (see ``this_owner``). A claim that is not ``done`` and whose owner is
gone (``owner_alive``: on this host, the process no longer runs; elsewhere,
its lease, refreshed by ``beat`` while measuring, has expired) is stale and is
taken over by the next worker that looks (``reap``).

Every store is an append-only log of operation records (``claim``,
``measured``, ``done``, ``release``, ``owner``, ``beat``), and a study's claims
are the fold of its records (``fold``). ``ClaimStore`` writes the state
machine once: under the log's exclusive lock it reads the records appended
since it last looked, checks the transition against the folded claims and
appends the record. A backend only reads and appends, under a lock:

* ``MemoryClaims``: a list in this process (in-memory Optuna storage);
* ``FileClaims``: ``X.jsonl.claims`` beside a journal file ``X.jsonl``,
  appended under an exclusive ``fcntl.flock`` (released by the kernel when a
  holder dies), records carrying a row fsynced once the lock is released;
* ``tuner.search.study.claims_sql.SqlClaims``: the table ``tuner_claim_records`` of
  the study's database (SQLite, PostgreSQL), one transaction per operation.

``tuner.search.study.storage.open_claims`` picks the store of a study's storage.
Journal files on a network file system need working ``flock`` there (NFSv4).
"""

from __future__ import annotations

import abc
import json
import os
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator, Mapping, NamedTuple

from tuner.search.study.claim_records import record_problem, row_problem, warn_on_stderr

CLAIMED, MEASURED, DONE = "claimed", "measured", "done"

# Budget answers of ClaimStore.claim.
OK, TAKEN, BUDGET = "ok", "taken", "budget"



class Claim(NamedTuple):
    """One configuration's claim (immutable: stores replace them).

    Attributes:
        key: the configuration's ``config_key``.
        state: ``claimed`` (being measured), ``measured`` (row recorded, the
            dashboard's trial maybe not written yet) or ``done``.
        trial: the study's number for the trial that measures it (unique
            among the claims held; rows carry it as ``trial``).
        owner: the claiming process (``this_owner``).
        worker: a label for people (the worker's name, or the owner).
        updated: ``time.time()`` of the last write or heartbeat.
        row: the results row as JSON text once measured.
        marks: what the dashboard's trial carries besides the row (user
            attributes such as ``rescue``, ``warm_start``), recorded with it.
    """

    key: str
    state: str
    trial: int
    owner: str
    worker: str
    updated: float
    row: str | None = None
    marks: dict | None = None


# ---- the state machine, once --------------------------------------------------


def fold(claims: dict[str, Claim], record: dict) -> None:
    """Apply one operation record to ``claims``. Records are appended only
    after ``ClaimStore`` checked their transition, so folding does not check
    again; a record about a claim that is gone changes nothing."""
    key, op, now = record["k"], record["op"], record["t"]
    if op == "claim":
        claims[key] = Claim(key, CLAIMED, record["trial"], record["owner"], record["worker"], now)
        return
    claim = claims.get(key)
    if claim is None:
        return
    if op == "release":
        del claims[key]
    elif op == "measured":
        claims[key] = claim._replace(state=MEASURED, row=record["row"], marks=record.get("marks"), updated=now)
    elif op == "done":
        claims[key] = claim._replace(state=DONE, updated=now)
    elif op == "owner":
        claims[key] = claim._replace(owner=record["owner"], worker=record["worker"], updated=now)
    elif op == "beat":
        claims[key] = claim._replace(updated=now)


class ClaimStore(abc.ABC):
    """Claims of one study, kept as the fold of an append-only log of
    operation records. Every method is atomic with respect to every other
    process and thread using the same log.

    A backend implements ``_locked`` only: under the log's lock (exclusive
    where records may be appended), read the records appended since this
    object last looked, fold them into ``self._claims`` (``fold``), and yield
    (claims, emit), where ``emit(record)`` appends one record (stamped with
    the time) and folds it."""

    #: Other processes may hold claims here (so heartbeats and staleness matter).
    shared = True

    def __init__(self, study: str) -> None:
        self.study = study
        self._claims: dict[str, Claim] = {}
        self._numbers: dict[str, int] = {}  # key -> trial number of the claims this object made

    @abc.abstractmethod
    @contextmanager
    def _locked(self, exclusive: bool) -> Iterator[tuple[dict[str, Claim], Callable[[dict], None]]]:
        """(current claims, emit) under the log's lock; see the class docstring."""

    def snapshot(self) -> dict[str, Claim]:
        """key -> claim, for every claim held now (measured ones with their row)."""
        with self._locked(exclusive=False) as (claims, _):
            return dict(claims)  # claims are immutable: a shallow copy is a snapshot

    def claim(self, key: str, trial: int | None, owner: str, worker: str, budget: int | None) -> str:
        """Claim ``key``: ``OK``; ``TAKEN`` where it is claimed already;
        ``BUDGET`` where ``budget`` configurations are claimed or measured
        already. The claim's trial number is ``trial`` where no claim holds
        that number, else (or where ``trial`` is None) the one after the
        highest held; ``numbered(key)`` says which."""
        with self._locked(exclusive=True) as (claims, emit):
            if key in claims:
                return TAKEN
            if budget is not None and len(claims) >= budget:
                return BUDGET
            held = {c.trial for c in claims.values()}
            if trial is None or trial in held:
                trial = max(held, default=-1) + 1
            emit({"k": key, "op": "claim", "trial": trial, "owner": owner, "worker": worker})
            self._numbers[key] = trial
            return OK

    def next_trial(self, claims: Mapping[str, Claim]) -> int:
        """The number the next claim takes, as far as ``claims`` (a snapshot) tell."""
        return max((c.trial for c in claims.values()), default=-1) + 1

    def numbered(self, key: str) -> int:
        """The trial number of the claim on ``key`` this object made last."""
        return self._numbers[key]

    def _transition(self, key: str, owner: str, state: str, op: dict) -> bool:
        with self._locked(exclusive=True) as (claims, emit):
            claim = claims.get(key)
            if claim is None or claim.owner != owner or (state and claim.state != state):
                return False
            emit({"k": key, **op})
            return True

    def record(self, key: str, owner: str, row: str, marks: Mapping[str, str] | None = None) -> bool:
        """claimed -> measured with ``row`` (and the dashboard's ``marks``,
        where any); False where ``owner`` does not hold the claim (any more)."""
        op = {"op": "measured", "row": row, **({"marks": dict(marks)} if marks else {})}
        return self._transition(key, owner, CLAIMED, op)

    def finish(self, key: str, owner: str) -> bool:
        """measured -> done, once the dashboard holds the trial."""
        return self._transition(key, owner, MEASURED, {"op": "done"})

    def release(self, key: str, owner: str) -> bool:
        """Drop a claim still in state claimed (nothing was measured)."""
        return self._transition(key, owner, CLAIMED, {"op": "release"})

    def beat(self, key: str, owner: str) -> bool:
        """Refresh the claim's lease."""
        return self._transition(key, owner, "", {"op": "beat"})

    def reap(self, stale: Callable[[Claim], bool], owner: str, worker: str) -> tuple[list[Claim], list[Claim]]:
        """Of the claims not done for which ``stale`` is true: release those
        still claimed and take over (owner := ``owner``) those measured.
        Returns (released, taken over) as they were, the latter with their rows."""
        released, taken = [], []
        with self._locked(exclusive=True) as (claims, emit):
            for claim in list(claims.values()):
                if claim.state == DONE or not stale(claim):
                    continue
                if claim.state == CLAIMED:
                    released.append(claim)
                    emit({"k": claim.key, "op": "release"})
                else:
                    taken.append(claim)
                    emit({"k": claim.key, "op": "owner", "owner": owner, "worker": worker})
        return released, taken


class MemoryClaims(ClaimStore):
    """Claims of a study in in-memory storage: only this process sees them
    (the log is the fold itself)."""

    shared = False

    def __init__(self, study: str) -> None:
        super().__init__(study)
        self._lock = threading.Lock()

    @contextmanager
    def _locked(self, exclusive):
        with self._lock:

            def emit(record: dict) -> None:
                fold(self._claims, {"t": time.time(), **record})

            yield self._claims, emit


class FileClaims(ClaimStore):
    """Claims in a file of JSON lines beside a journal, one line per operation,
    appended under an exclusive ``flock`` of the file and read under a shared
    one. Several studies may share the file (each line names its study)."""

    def __init__(self, path: str, study: str, log: Callable[[str], None] | None = None) -> None:
        super().__init__(study)
        self.path = path
        self.log = log or warn_on_stderr
        self._offset = 0
        self._lines = 0  # lines read up to _offset
        self._mutex = threading.Lock()  # this object's fold, between threads

    @contextmanager
    def _locked(self, exclusive):
        import fcntl

        with self._mutex:
            if not exclusive and not os.path.exists(self.path):
                yield self._claims, None
                return
            # A descriptor per operation: flock locks belong to the open file,
            # so a descriptor inherited by a forked child would share the lock.
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
            durable = False
            try:
                fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
                self._read(fd, exclusive)
                pending: list[bytes] = []

                def emit(record: dict) -> None:
                    nonlocal durable
                    record = {"s": self.study, "t": time.time(), **record}
                    pending.append(json.dumps(record, separators=(",", ":")).encode() + b"\n")
                    fold(self._claims, record)
                    durable |= "row" in record

                try:
                    yield self._claims, emit
                    if pending:
                        data = b"".join(pending)
                        if os.write(fd, data) != len(data):
                            raise OSError(f"short write to {self.path}")
                        self._offset += len(data)  # nobody else writes while we hold the lock
                except BaseException:
                    # The fold may hold records that were never written: read afresh next time.
                    self._claims, self._offset, self._lines = {}, 0, 0
                    raise
                # Only a measured row must outlive a crash of the machine (a
                # killed process loses nothing written): it is fsynced before
                # the caller goes on to tell Optuna, but after the lock is
                # released, so other workers never wait on the disk.
                fcntl.flock(fd, fcntl.LOCK_UN)
                if durable:
                    os.fsync(fd)
            finally:
                os.close(fd)  # releases the lock where it is still held

    def _read(self, fd: int, exclusive: bool) -> None:
        size = os.fstat(fd).st_size
        if size < self._offset:  # replaced or truncated under us: read it afresh
            self._claims, self._offset, self._lines = {}, 0, 0
        data = os.pread(fd, size - self._offset, self._offset) if size > self._offset else b""
        end = data.rfind(b"\n") + 1
        for line in data[:end].split(b"\n")[:-1]:
            self._lines += 1
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as error:
                # A line torn by a crash before torn tails were cut, or bytes
                # that are not ours: the claims of the other lines still hold.
                self._warn(f"not JSON ({error})")
                continue
            problem = record_problem(record)
            if problem:
                self._warn(problem)
            elif record["s"] == self.study:
                fold(self._claims, record)
        self._offset += end
        if exclusive and end < len(data):
            # A writer died mid-line (no one writes while we hold the lock):
            # cut the torn tail so the next record starts on a line of its own.
            aside = self.path + ".corrupt"
            with open(aside, "ab") as handle:
                handle.write(data[end:] + b"\n")
                handle.flush()
                os.fsync(handle.fileno())
            os.ftruncate(fd, self._offset)
            self.log(f"warning: {self.path}:{self._lines + 1}: no end of line (cut short by a crash); "
                     f"moved to {os.path.basename(aside)}, the operation it began did not happen")  # fmt: skip

    def _warn(self, problem: str) -> None:
        # Once per process and line: a study opens its claims several times.
        if (self.path, self._lines, self.log) not in _WARNED:
            _WARNED.add((self.path, self._lines, self.log))
            self.log(f"warning: {self.path}:{self._lines}: {problem}; line skipped, the other claims stand")


_WARNED: set[tuple[str, int, Callable]] = set()


def claim_row(store: ClaimStore, claim: Claim) -> dict | None:
    """The results row ``claim`` carries, or None, with one warning line,
    where its text is not a results row (a database edited by hand, say):
    that configuration is left out of the study's rows."""
    if claim.row is None:
        return None
    problem = row_problem(claim.row)
    if problem:
        warn_on_stderr(f"warning: claims of study {store.study!r}: the claim of {claim.key} holds {problem}; skipped")
        return None
    return json.loads(claim.row)



def claims_path(journal: str | os.PathLike) -> str:
    """The claims file beside a journal file."""
    return os.fspath(journal) + ".claims"
