"""Where a study is kept: the Optuna storage a spec names (``open_storage``),
and the claims that go with it (``open_claims``); whether a spec can serve a
study is ``tuner.search.study.storage_spec``'s. Optuna is used through
its public API: a journal is Optuna's ``JournalStorage`` over ``JournalFile``,
a ``JournalFileBackend`` that overrides only the backend interface
(``append_logs``, ``read_logs``)."""

from __future__ import annotations

import fcntl
import json
import math
import os
import sys
import threading
import time
import weakref
from pathlib import Path
from typing import Any, Callable, Iterator

import optuna
from optuna.storages import BaseStorage
from optuna.storages.journal import JournalFileBackend

from tuner.errors import DamagedFile
from tuner.search.study.claims import ClaimStore, FileClaims, MemoryClaims, claims_path
from tuner.search.study.claims_sql import SQLITE_BUSY_TIMEOUT_S
from tuner.search.study.storage_server import driver_connect_timeout_s, server_engine_kwargs, with_password


class FlockJournalLock:
    """The journal's write lock (what Optuna's file locks do: ``acquire``,
    ``release``) as an ``flock`` of a file beside it.

    Optuna's default (a symlink retried with exponential back-off, up to 1 s
    between tries) lets waiting workers sleep on after the lock is free, and
    every worker writes to it after each measurement. ``flock`` wakes a
    waiter as the lock is released; it needs a local file system (or NFSv4),
    as the study's claims file does anyway. Threads of one process share it
    under the journal storage's own thread lock."""

    def __init__(self, journal: str) -> None:
        self.path = journal + ".flock"
        self._fd: int | None = None

    def acquire(self) -> bool:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return True

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


# Fields each journal operation's record must carry for Optuna to replay it
# (besides op_code and worker_id), by op code: study operations name their
# study, trial operations their trial.
_JOURNAL_FIELDS = {0: ("study_name", "directions"), 1: ("study_id",), 2: ("study_id", "user_attr"),
                   3: ("study_id", "system_attr"), 4: ("study_id",), 5: ("trial_id", "param_name", "param_value_internal",
                   "distribution"), 6: ("trial_id", "state"), 7: ("trial_id",), 8: ("trial_id", "user_attr"),
                   9: ("trial_id", "system_attr"), 10: ()}  # fmt: skip


def journal_record_problem(record: Any) -> str | None:
    """Why a decoded line of a journal is not a record Optuna can replay, or None."""
    if not isinstance(record, dict):
        return f"a JSON {type(record).__name__}, not a journal record (an object)"
    op = record.get("op_code")
    if not isinstance(op, int) or isinstance(op, bool) or op not in _JOURNAL_FIELDS:
        return f"a record whose op_code is {str(op)[:40]!r}, not one of Optuna's journal operations"
    missing = [name for name in ("worker_id", *_JOURNAL_FIELDS[op]) if name not in record]
    return f"a record of op_code {op} without {missing}" if missing else None


class JournalFile(JournalFileBackend):
    """Optuna's journal file, written under ``FlockJournalLock`` and without
    an fsync per record, read defensively.

    Each worker appends a record per measured trial under one lock, and an
    fsync each would keep that lock held while the disk catches up.
    What must survive a crash is durable elsewhere: the journal only shows
    the study on the dashboard, and every measured row is fsynced into the
    study's claims file, its record, before its trial is added here. A killed
    process loses nothing either way (its writes are in the page cache); an
    operating-system crash or a full disk may leave the journal's last line
    torn. Optuna skips a torn last line when it reads, but a record appended
    after it would join it into a line that never decodes, so ``append_logs``
    first moves a torn tail aside (``<journal>.torn``, fsynced). A line
    inside the file that is not a record stops the reader with one line
    naming the file, the line and the command that recovers
    (``DamagedFile``)."""

    def __init__(self, path: str, log: Callable[[str], None] | None = None) -> None:
        self._path, self._flock = path, FlockJournalLock(path)
        self._log = log or (lambda line: print(line, file=sys.stderr, flush=True))
        super().__init__(path, lock_obj=self._flock)

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        data = "".join(json.dumps(log, separators=(",", ":")) + "\n" for log in logs).encode("utf-8")
        self._flock.acquire()
        try:
            fd = os.open(self._path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    self._set_aside_torn_tail(fd, size)
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
        finally:
            self._flock.release()

    def _set_aside_torn_tail(self, fd: int, size: int) -> None:
        """Move the bytes after the last end of line to ``<journal>.torn``
        (fsynced first, so nothing is lost) and cut them from the journal;
        called under the journal's lock."""
        cut, chunk = size, 1 << 16
        while cut > 0:
            start = max(0, cut - chunk)
            at = os.pread(fd, cut - start, start).rfind(b"\n")
            if at >= 0:
                cut = start + at + 1
                break
            cut = start
        tail = os.pread(fd, size - cut, cut)
        aside = self._path + ".torn"
        with open(aside, "ab") as handle:
            handle.write(tail + b"\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.ftruncate(fd, cut)
        os.fsync(fd)
        line = _lines_before(fd, cut) + 1
        self._log(f"warning: {self._path}:{line}: no end of line (torn by a crash or a full disk); {len(tail)} bytes "
                  f"moved to {os.path.basename(aside)}, the study goes on from the record before")  # fmt: skip

    def read_logs(self, log_number_from: int) -> Iterator[dict[str, Any]]:
        line = log_number_from  # lines read, so the next is line + 1
        try:
            for record in super().read_logs(log_number_from):
                line += 1
                problem = journal_record_problem(record)
                if problem:
                    raise DamagedFile(self._damaged(line, problem))
                yield record
        except ValueError as error:  # JSONDecodeError, or Optuna's "Invalid log format"
            raise DamagedFile(self._damaged(line + 1, f"not a JSON record ({error})")) from None

    def _damaged(self, line: int, problem: str) -> str:
        with open(self._path, "rb") as handle:
            offset = sum(len(text) for _, text in zip(range(line - 1), handle))
        return (f"{self._path}:{line}: {problem}, so the study cannot be read past it; keep lines 1 to {line - 1} with "
                f"`truncate -s {offset} {self._path}` (the measured rows of later trials are kept in "
                f"{os.path.basename(self._path)}.claims and are not measured again), then run the stage again")  # fmt: skip


def _lines_before(fd: int, offset: int) -> int:
    lines, at, chunk = 0, 0, 1 << 20
    while at < offset:
        data = os.pread(fd, min(chunk, offset - at), at)
        lines += data.count(b"\n")
        at += len(data)
    return lines


def open_storage(spec: str | os.PathLike | BaseStorage | None) -> BaseStorage:
    """The Optuna storage that ``spec`` names.

    Args:
        spec: None for in-memory; a storage object (returned as is); a path
            ending in ``.log`` or ``.jsonl`` for a journal file (safe for
            several processes, no database needed); else an Optuna storage URL
            (``sqlite:///study.db``, ``postgresql://...``).

    Raises:
        ValueError: ``spec`` is a string that is neither a journal path nor a URL.
    """
    if spec is None:
        return optuna.storages.InMemoryStorage()
    if isinstance(spec, BaseStorage):
        return spec
    text = os.fspath(spec)
    if text.endswith((".log", ".jsonl")):
        Path(text).parent.mkdir(parents=True, exist_ok=True)
        return _located(optuna.storages.JournalStorage(JournalFile(text)), ("journal", text))
    if "://" not in text:
        raise ValueError(
            f"storage must be an Optuna URL (sqlite:///path.db) or a journal file path ending in .log or .jsonl, got {text!r}"
        )
    if text.startswith("sqlite:///"):
        Path(text[len("sqlite:///") :]).parent.mkdir(parents=True, exist_ok=True)
        # Workers queue for SQLite's write lock rather than fail after the
        # driver's default 5 s; get_storage adds Optuna's cache of finished trials.
        engine_kwargs = {"connect_args": {"timeout": SQLITE_BUSY_TIMEOUT_S}}
        rdb = _retry(lambda: optuna.storages.RDBStorage(text, engine_kwargs=engine_kwargs))
        return _located(optuna.storages.get_storage(rdb), ("database", text))
    # A server: its password from the environment (never on a command line), a connect timeout.
    url = with_password(text)
    # A try that waited out the whole connect timeout met a server that does not
    # answer: trying again would only make the stage wait five times as long.
    rdb = _retry(lambda: optuna.storages.RDBStorage(url, engine_kwargs=server_engine_kwargs(text)),
                 unless_slower_than_s=0.9 * driver_connect_timeout_s())  # fmt: skip
    return _located(optuna.storages.get_storage(rdb), ("database", url))


# Where each storage ``open_storage`` made keeps its study, so that its claims
# are found beside it without reaching into Optuna's objects.
_LOCATIONS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_MEMORY: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # in-memory storage -> study name -> claims
_MEMORY_LOCK = threading.Lock()


def _located(storage: BaseStorage, location: tuple[str, str]) -> BaseStorage:
    _LOCATIONS[storage] = location
    return storage


def open_claims(storage: str | os.PathLike | BaseStorage | None, study_name: str, create: bool = True) -> ClaimStore | None:
    """The claims of study ``study_name`` kept with ``storage`` (a spec, as
    ``open_storage`` takes, or a storage it returned).

    A database keeps them in its own tables (``SqlClaims``), a journal file
    in a file beside it (``FileClaims``); any other storage (in-memory, or one
    made elsewhere) in this process only (``MemoryClaims``, one per storage
    object and study).

    With ``create`` False, nothing is created: None where the study has no
    claims in a shared store yet.
    """
    if storage is None or isinstance(storage, (str, os.PathLike)):
        storage = open_storage(storage)
    kind, where = _LOCATIONS.get(storage, ("", ""))
    if not kind and isinstance(storage, optuna.storages.RDBStorage):
        kind, where = "database", storage.url
    if kind == "database":
        from tuner.search.study.claims_sql import SqlClaims  # SQLAlchemy only where a database is used

        store = SqlClaims(where, study_name, create=create)
        return store if store.exists else None
    if kind == "journal":
        path = claims_path(where)
        if not create and not os.path.exists(path):
            return None
        return FileClaims(path, study_name)
    with _MEMORY_LOCK:
        stores = _MEMORY.setdefault(storage, {})
        if study_name not in stores:
            if not create:
                return None
            stores[study_name] = MemoryClaims(study_name)
        return stores[study_name]


def resumed_seed(storage: str | os.PathLike | BaseStorage | None, study_name: str, seed: int) -> int:
    """``seed`` offset by the number of claims study ``study_name`` of
    ``storage`` holds so far (``seed`` itself for a study not begun: nothing
    is created here)."""
    if storage is None:
        return seed  # a study in a memory of its own: not begun
    if isinstance(storage, (str, os.PathLike)) and os.fspath(storage).endswith((".log", ".jsonl")):
        if not os.path.exists(storage):
            return seed
    claims = open_claims(storage, study_name, create=False)
    return seed + (len(claims.snapshot()) if claims is not None else 0)


def finished_trials(spec: str | os.PathLike | None, study_name: str) -> int:
    """How many trials of the study in ``spec`` finished with a value (0 where
    there is no such study yet)."""
    try:
        study = optuna.load_study(study_name=study_name, storage=open_storage(spec))
    except KeyError:
        return 0
    return len(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)))


def _retry(make: Callable[[], Any], attempts: int = 5, unless_slower_than_s: float = math.inf) -> Any:
    """``make()``, again after a moment where it failed quicker than
    ``unless_slower_than_s``: workers that open a new database together race
    to create its tables (on PostgreSQL the loser's CREATE TABLE fails with a
    unique violation in pg_type)."""
    for attempt in range(attempts):
        start = time.monotonic()
        try:
            return make()
        except Exception as error:  # noqa: BLE001 - re-raised on the last attempt
            # A lost race is an answer, however slow a loaded host made it: only silence is taken for a dead server.
            slow = time.monotonic() - start >= unless_slower_than_s and not _lost_race(error)
            if attempt == attempts - 1 or slow:
                raise
            time.sleep(0.1 * (attempt + 1))


def _lost_race(error: BaseException) -> bool:
    """Whether ``error`` (or what it was raised from) is the database's unique
    violation of a worker that lost the race to create the tables."""
    seen: BaseException | None = error
    while seen is not None:
        if type(seen).__name__ in ("IntegrityError", "UniqueViolation"):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


