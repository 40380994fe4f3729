"""Whether a storage spec can serve a study (``storage_problem``), checked
before any work and without opening anything: the settings check every study's
storage with it when a config is read, Snakemake's start among them, so it
imports neither Optuna nor SQLAlchemy until a URL needs parsing."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from tuner.search.study.storage_server import server_problem

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
    everyone waits up to ``claims_sql.SQLITE_BUSY_TIMEOUT_S`` for it), though not on a
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
    return server_problem(text)


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


def stored_file_missing(spec: str | os.PathLike) -> str | None:
    """Where ``spec`` names a file that keeps a storage (a journal, an SQLite
    database) and it is not there: one line saying so, else None. A command
    that reads a study must not make an empty storage in its place (opening
    one creates its file)."""
    text = os.fspath(spec)
    if text.endswith((".log", ".jsonl")):
        path, what = Path(text), "journal file"
    elif text.startswith("sqlite:///") and text[len("sqlite:///") :] not in ("", ":memory:"):
        path, what = Path(text[len("sqlite:///") :]), "SQLite database"
    else:
        return None
    return None if path.is_file() else f"must name an existing {what}, got {text!r}, which does not exist"
