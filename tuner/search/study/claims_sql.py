"""Claims kept in the study's own database (SQLite, PostgreSQL): the records
of ``tuner.search.study.claims`` as rows of the table ``tuner_claim_records``
(id, study_name, record), read and appended in one transaction per
operation, serialised per study (``SELECT ... FOR UPDATE`` on the study's
row of ``tuner_claim_studies`` in PostgreSQL, ``BEGIN IMMEDIATE`` in SQLite,
which ignores FOR UPDATE)."""

from __future__ import annotations

import json
import os
import threading
import time
from contextlib import contextmanager
from typing import Any

from tuner.search.study.claim_records import record_problem, warn_on_stderr
from tuner.search.study.claims import ClaimStore, fold

# Workers queue for SQLite's write lock this long rather than fail.
SQLITE_BUSY_TIMEOUT_S = 60

_SQL: dict[str, Any] = {}
_ENGINES: dict[tuple[str, int], Any] = {}
_ENGINES_LOCK = threading.Lock()


def _tables():
    if not _SQL:
        import sqlalchemy as sa

        metadata = sa.MetaData()
        _SQL["metadata"] = metadata
        _SQL["studies"] = sa.Table("tuner_claim_studies", metadata, sa.Column("study_name", sa.String(512), primary_key=True))
        _SQL["records"] = sa.Table(
            "tuner_claim_records",
            metadata,
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
            sa.Column("study_name", sa.String(512), nullable=False, index=True),
            sa.Column("record", sa.Text, nullable=False),
        )
    return _SQL["studies"], _SQL["records"]


def _engine(url: str):
    """One engine per URL and process. On SQLite every transaction is
    ``BEGIN IMMEDIATE`` (the database's write lock, taken at once, so two
    claims cannot interleave) unless marked ``tuner_read``, with a busy
    timeout so that workers queue instead of failing."""
    import sqlalchemy as sa

    with _ENGINES_LOCK:
        engine = _ENGINES.get((url, os.getpid()))
        if engine is not None:
            return engine
        if url.startswith("sqlite"):
            engine = sa.create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S})

            @sa.event.listens_for(engine, "connect")
            def _connect(dbapi_connection, record):  # noqa: ARG001
                dbapi_connection.isolation_level = None  # SQLAlchemy's BEGIN, below, not the driver's

            @sa.event.listens_for(engine, "begin")
            def _begin(connection):
                read = connection.get_execution_options().get("tuner_read")
                connection.exec_driver_sql("BEGIN" if read else "BEGIN IMMEDIATE")

        else:
            engine = sa.create_engine(url, pool_pre_ping=True)
        _ENGINES[(url, os.getpid())] = engine
        return engine


class SqlClaims(ClaimStore):
    """Claims as records in the table ``tuner_claim_records`` of the study's
    database, read in id order; a study's records are appended only under
    its lock, so their ids grow in the order they were committed."""

    def __init__(self, url: str, study: str, create: bool = True) -> None:
        super().__init__(study)
        self.engine = _engine(url)
        self.studies, self.records = _tables()
        self._last_id = 0  # records read up to this id
        self._mutex = threading.Lock()  # this object's fold, between threads
        if create:
            self._create()
            self.exists = True
        else:
            import sqlalchemy as sa

            self.exists = sa.inspect(self.engine).has_table(self.records.name)

    def _create(self) -> None:
        import sqlalchemy as sa

        for attempt in range(5):
            try:
                _SQL["metadata"].create_all(self.engine)
                with self.engine.begin() as conn:
                    found = conn.execute(sa.select(self.studies.c.study_name).where(self.studies.c.study_name == self.study))
                    if found.first() is None:
                        conn.execute(sa.insert(self.studies).values(study_name=self.study))
                return
            except (sa.exc.IntegrityError, sa.exc.OperationalError, sa.exc.ProgrammingError):
                # Another worker created the same table or row at the same time.
                if attempt == 4:
                    raise
                time.sleep(0.05 * (attempt + 1))

    @contextmanager
    def _locked(self, exclusive):
        import sqlalchemy as sa

        with self._mutex:
            if not self.exists:
                yield self._claims, None
                return
            if exclusive:
                connection = self.engine.begin()
            else:
                connection = self.engine.connect().execution_options(tuner_read=True)
            try:
                with connection as conn:
                    if exclusive:
                        # The per-study lock row serialises appends (SQLite ignores
                        # FOR UPDATE, but its BEGIN IMMEDIATE did that already).
                        studies = self.studies.c.study_name
                        conn.execute(sa.select(studies).where(studies == self.study).with_for_update())
                    self._read(conn)
                    pending: list[dict] = []

                    def emit(record: dict) -> None:
                        record = {"t": time.time(), **record}
                        pending.append({"study_name": self.study, "record": json.dumps(record, separators=(",", ":"))})
                        fold(self._claims, record)

                    yield self._claims, emit
                    # Nobody appends to this study while we hold its lock, so
                    # ours are the records that follow the ones read.
                    for values in pending:
                        self._last_id = conn.execute(sa.insert(self.records).values(**values)).inserted_primary_key[0]
            except BaseException:
                # The fold may hold records that were never committed: read afresh next time.
                self._claims, self._last_id = {}, 0
                raise

    def _read(self, conn) -> None:
        import sqlalchemy as sa

        r = self.records.c
        query = sa.select(r.id, r.record).where((r.study_name == self.study) & (r.id > self._last_id)).order_by(r.id)
        for record_id, text in conn.execute(query):
            self._last_id = record_id
            try:
                record = json.loads(text)
            except ValueError as error:
                record, problem = None, f"not JSON ({error})"
            else:
                problem = record_problem({"s": self.study, **record} if isinstance(record, dict) else record)
            if problem:
                warn_on_stderr(f"warning: claims of study {self.study!r}: record {record_id} of tuner_claim_records "
                               f"is {problem}; skipped, the other claims stand")  # fmt: skip
                continue
            fold(self._claims, record)
