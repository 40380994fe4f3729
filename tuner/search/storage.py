"""Study storages: which Optuna storage a spec names (``open_storage``) and
why one cannot serve a study (``storage_problem``), checked before any work."""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import threading
import time
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any, Callable, Iterator

import optuna
from optuna.distributions import distribution_to_json
from optuna.storages import BaseStorage
from optuna.storages.journal import JournalFileBackend
from optuna.storages.journal._storage import JournalOperation

from tuner.search.claims import (
    SQLITE_BUSY_TIMEOUT_S,
)


class FlockJournalLock:
    """The journal's write lock (what Optuna's file locks do: ``acquire``,
    ``release``) as an ``flock`` of a file beside it.

    Optuna's default (a symlink retried with exponential back-off, up to 1 s
    between tries) lets waiting workers sleep on after the lock is free, and
    every worker writes about a dozen records per trial. ``flock`` wakes a
    waiter as the lock is released; it needs a local file system (or NFSv4),
    as the study's claims file does anyway. Threads of one process share it
    under the journal storage's own thread lock."""

    def __init__(self, journal: str) -> None:
        self._path = journal + ".flock"
        self._fd: int | None = None

    def acquire(self) -> bool:
        fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o644)
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


class JournalFile(JournalFileBackend):
    """Optuna's journal file, written under ``FlockJournalLock`` and without
    an fsync per record.

    Each worker appends about a dozen records per trial under one lock, and
    an fsync each kept that lock held for most of the time with four workers.
    What must survive a crash is durable elsewhere: every measured row is
    fsynced into the study's claims file before its trial is told, and a
    rerun finishes trials from there (``tuner.search.study``). A killed
    process loses nothing either way (its writes are in the page cache); an
    operating-system crash may lose the journal's last records, and Optuna
    skips a torn last line when it reads the file."""

    def __init__(self, path: str) -> None:
        self._path, self._flock = path, FlockJournalLock(path)
        super().__init__(path, lock_obj=self._flock)

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        text = "".join(json.dumps(log, separators=(",", ":")) + "\n" for log in logs)
        self._flock.acquire()
        try:
            with open(self._path, "ab") as f:
                f.write(text.encode("utf-8"))
        finally:
            self._flock.release()


class BatchedJournalStorage(optuna.storages.JournalStorage):
    """Optuna's journal storage, where a thread inside ``batched()`` holds back
    its trial parameter and user-attribute records and appends them with its
    next other record, or at the end of the block, in one write.

    Asking a trial writes one record per parameter and per attribute, each an
    append under the journal's lock followed by a read of what the other
    workers appended: fourteen round trips a trial, which several workers
    queue for. Batched, an ask is two appends (the new trial, whose number
    must be known, then its parameters and attributes) and a tell one. The
    records are the journal's own, in the same order; other workers see a
    trial's parameters when the block ends rather than one by one."""

    def __init__(self, backend: JournalFile) -> None:
        super().__init__(backend)
        self._batch = threading.local()  # .logs: this thread's held-back records, or None

    @contextmanager
    def batched(self) -> Iterator[None]:
        """Hold back this thread's parameter and attribute records until the
        block ends (or another record of this thread is written). Errors the
        held-back records cause (a trial finished meanwhile by another worker:
        ``UpdateFinishedTrialError``) are raised as the block ends."""
        self._batch.logs = []
        try:
            yield
        finally:
            logs, self._batch.logs = self._batch.logs, None
            if logs:
                with self._thread_lock:
                    self._backend.append_logs(logs)
                    self._sync_with_backend()

    def _held(self) -> list | None:
        return getattr(self._batch, "logs", None)

    def _record(self, op_code: int, fields: dict[str, Any]) -> dict[str, Any]:
        return {"op_code": op_code, "worker_id": self._replay_result.worker_id, **fields}

    def _write_log(self, op_code: int, extra_fields: dict[str, Any]) -> None:
        held = self._held() or []
        logs = [*held, self._record(op_code, extra_fields)]
        held.clear()
        self._backend.append_logs(logs)

    def set_trial_param(self, trial_id: int, param_name: str, param_value_internal: float, distribution: Any) -> None:
        held = self._held()
        if held is None:
            return super().set_trial_param(trial_id, param_name, param_value_internal, distribution)
        with self._thread_lock:
            held.append(self._record(JournalOperation.SET_TRIAL_PARAM, {"trial_id": trial_id, "param_name": param_name,
                        "param_value_internal": param_value_internal, "distribution": distribution_to_json(distribution)}))  # fmt: skip

    def set_trial_user_attr(self, trial_id: int, key: str, value: Any) -> None:
        held = self._held()
        if held is None:
            return super().set_trial_user_attr(trial_id, key, value)
        with self._thread_lock:
            held.append(self._record(JournalOperation.SET_TRIAL_USER_ATTR, {"trial_id": trial_id, "user_attr": {key: value}}))


def batched(storage: BaseStorage) -> AbstractContextManager:
    """``storage.batched()`` where the storage batches its writes, else nothing."""
    return getattr(storage, "batched", nullcontext)()


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
        return BatchedJournalStorage(JournalFile(text))
    if "://" not in text:
        raise ValueError(
            f"storage must be an Optuna URL (sqlite:///path.db) or a journal file path ending in .log or .jsonl, got {text!r}"
        )
    if text.startswith("sqlite:///"):
        Path(text[len("sqlite:///") :]).parent.mkdir(parents=True, exist_ok=True)
        # Workers queue for SQLite's write lock rather than fail after the
        # driver's default 5 s; get_storage adds Optuna's cache of finished trials.
        engine_kwargs = {"connect_args": {"timeout": SQLITE_BUSY_TIMEOUT_S}}
        return optuna.storages.get_storage(_retry(lambda: optuna.storages.RDBStorage(text, engine_kwargs=engine_kwargs)))
    return optuna.storages.get_storage(_retry(lambda: optuna.storages.RDBStorage(text)))


def finished_trials(spec: str | os.PathLike | None, study_name: str) -> int:
    """How many trials of the study in ``spec`` finished with a value (0 where
    there is no such study yet)."""
    try:
        study = optuna.load_study(study_name=study_name, storage=open_storage(spec))
    except KeyError:
        return 0
    return len(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)))


def _retry(make: Callable[[], Any], attempts: int = 5) -> Any:
    """``make()``, again after a moment where it failed: workers that open a
    new database together race to create its tables (on PostgreSQL the loser's
    CREATE TABLE fails with a unique violation in pg_type)."""
    for attempt in range(attempts):
        try:
            return make()
        except Exception:  # noqa: BLE001 - re-raised on the last attempt
            if attempt == attempts - 1:
                raise
            time.sleep(0.1 * (attempt + 1))


# Driver modules SQLAlchemy dialects import, and what to install for them.
_DRIVER_PACKAGES = {"psycopg2": "psycopg2-binary", "psycopg": "psycopg[binary]", "pymysql": "PyMySQL", "MySQLdb": "mysqlclient"}


def storage_problem(spec: str | os.PathLike | None, workers: int = 1) -> str | None:
    """Why ``spec`` cannot serve as the storage of a study run by ``workers``
    worker processes, in one line, or None where it can. Creates nothing.

    Checked: the form (a journal path ending in .log or .jsonl, or a URL that
    SQLAlchemy parses, of a database it knows, whose driver imports); for a
    journal or SQLite file, that its folder exists or can be created and is
    writable; that storage private to one process (in memory) has one worker.
    SQLite with several workers works (claims take SQLite's write lock, and
    everyone waits up to ``SQLITE_BUSY_TIMEOUT_S`` for it), though not on a
    network file system, where its locks are unreliable.
    """
    if workers < 1:
        return f"workers must be >= 1, got {workers}"
    if spec is None:
        return (
            None
            if workers == 1
            else f"in-memory storage cannot be shared by {workers} worker processes; give a journal file or a database URL"
        )
    text = os.fspath(spec)
    if text.endswith((".log", ".jsonl")):
        if importlib.util.find_spec("fcntl") is None:
            return f"journal storage {text!r} needs fcntl file locks, which this platform lacks; use a database URL"
        return _file_problem(Path(text), "journal file")
    if "://" not in text:
        return f"storage must be an Optuna URL (sqlite:///path.db) or a journal file path ending in .log or .jsonl, got {text!r}"
    import sqlalchemy

    try:
        url = sqlalchemy.engine.make_url(text)
    except Exception as exc:  # noqa: BLE001 - the parser's message says what is wrong
        return f"storage URL {text.split('://')[0]}://... is malformed: {exc}"
    shown = url.render_as_string(hide_password=True)
    try:
        dialect = url.get_dialect()
    except Exception:  # noqa: BLE001 - NoSuchModuleError and kin
        return f"storage URL {shown} names the database {url.drivername!r}, which SQLAlchemy does not know (use sqlite:///path.db or postgresql://...)"
    try:
        dialect.import_dbapi()
    except ImportError as exc:
        module = (exc.name or "").split(".")[0] or str(exc)
        package = _DRIVER_PACKAGES.get(module, module)
        other = ""
        if module == "psycopg2" and importlib.util.find_spec("psycopg") is not None:
            other = (
                f", or use the installed psycopg: {url.set(drivername='postgresql+psycopg').render_as_string(hide_password=True)}"
            )
        return f"storage URL {shown} needs the database driver {module!r}, which is not installed (pip install {package}{other})"
    if url.get_backend_name() == "sqlite":
        database = url.database or ""
        if database in ("", ":memory:") or database.startswith("file::memory:"):
            if workers > 1:
                return f"storage URL {shown} is an in-memory SQLite database, which {workers} worker processes cannot share"
            return None
        return _file_problem(Path(database), "SQLite database")
    return None


def _file_problem(path: Path, what: str) -> str | None:
    if path.is_dir():
        return f"{what} {str(path)!r} is a folder"
    if path.exists():
        return None if os.access(path, os.R_OK | os.W_OK) else f"{what} {str(path)!r} is not writable"
    folder = path.parent
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return f"folder of {what} {str(path)!r} cannot be created: {str(existing)!r} is a file"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"folder of {what} {str(path)!r} cannot be written: {str(existing)!r} is not writable"
    return None
