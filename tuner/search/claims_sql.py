"""Claims kept in a table of the study's own database (SQLite, PostgreSQL):
one transaction per operation, serialised per study (``SELECT ... FOR UPDATE``
on the study's row in PostgreSQL, ``BEGIN IMMEDIATE`` in SQLite)."""

from __future__ import annotations

import os
import threading
import time
from contextlib import contextmanager
from typing import Any

from tuner.search.claims import (
    BUDGET,
    CLAIMED,
    DONE,
    MEASURED,
    OK,
    SQLITE_BUSY_TIMEOUT_S,
    TAKEN,
    Claim,
    ClaimStore,
)

_SQL: dict[str, Any] = {}
_ENGINES: dict[tuple[str, int], Any] = {}
_ENGINES_LOCK = threading.Lock()


def _tables():
    if not _SQL:
        import sqlalchemy as sa

        metadata = sa.MetaData()
        _SQL["metadata"] = metadata
        _SQL["studies"] = sa.Table("tuner_claim_studies", metadata, sa.Column("study_name", sa.String(512), primary_key=True))
        _SQL["claims"] = sa.Table(
            "tuner_claims",
            metadata,
            sa.Column("study_name", sa.String(512), primary_key=True),
            sa.Column("config_key", sa.String(512), primary_key=True),
            sa.Column("trial_number", sa.Integer, nullable=False),
            sa.Column("owner", sa.String(255), nullable=False),
            sa.Column("worker", sa.String(255), nullable=False),
            sa.Column("state", sa.String(16), nullable=False),
            sa.Column("row_json", sa.Text, nullable=True),
            sa.Column("updated_at", sa.Float, nullable=False),
        )
    return _SQL["studies"], _SQL["claims"]


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
    """Claims in the table ``tuner_claims`` of the study's database."""

    def __init__(self, url: str, study: str, create: bool = True) -> None:
        super().__init__(study)
        self.engine = _engine(url)
        self.studies, self.claims = _tables()
        self.exists = True
        if create:
            self._create()
        else:
            import sqlalchemy as sa

            self.exists = sa.inspect(self.engine).has_table(self.claims.name)

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
    def _txn(self):
        import sqlalchemy as sa

        with self.engine.begin() as conn:
            # The per-study lock row serialises claim operations (SQLite
            # ignores FOR UPDATE, but its BEGIN IMMEDIATE did that already).
            conn.execute(sa.select(self.studies.c.study_name).where(self.studies.c.study_name == self.study).with_for_update())
            yield conn

    def _where(self, key: str | None = None):
        c = self.claims.c
        return (c.study_name == self.study) if key is None else ((c.study_name == self.study) & (c.config_key == key))

    @staticmethod
    def _claim_of(r) -> Claim:
        row = r.row_json if "row_json" in r._fields else None
        return Claim(r.config_key, r.state, r.trial_number, r.owner, r.worker, r.updated_at, row)

    def snapshot(self, rows=False):
        import sqlalchemy as sa

        if not self.exists:
            return {}
        c = self.claims.c
        columns = [c.config_key, c.state, c.trial_number, c.owner, c.worker, c.updated_at] + ([c.row_json] if rows else [])
        with self.engine.connect().execution_options(tuner_read=True) as conn:
            result = conn.execute(sa.select(*columns).where(self._where())).all()
        return {r.config_key: self._claim_of(r) for r in result}

    def claim(self, key, trial, owner, worker, budget):
        import sqlalchemy as sa

        with self._txn() as conn:
            if conn.execute(sa.select(self.claims.c.state).where(self._where(key))).first() is not None:
                return TAKEN
            if budget is not None:
                count = conn.execute(sa.select(sa.func.count()).select_from(self.claims).where(self._where())).scalar_one()
                if count >= budget:
                    return BUDGET
            conn.execute(
                sa.insert(self.claims).values(
                    study_name=self.study, config_key=key, trial_number=trial, owner=owner, worker=worker,
                    state=CLAIMED, row_json=None, updated_at=time.time(),
                )
            )  # fmt: skip
            return OK

    def _update(self, key: str, owner: str, current: str, **values) -> bool:
        import sqlalchemy as sa

        c = self.claims.c
        condition = self._where(key) & (c.owner == owner)
        if current:
            condition &= c.state == current
        with self._txn() as conn:
            return conn.execute(sa.update(self.claims).where(condition).values(updated_at=time.time(), **values)).rowcount == 1

    def record(self, key, owner, row):
        return self._update(key, owner, CLAIMED, state=MEASURED, row_json=row)

    def finish(self, key, owner):
        return self._update(key, owner, MEASURED, state=DONE)

    def beat(self, key, owner):
        return self._update(key, owner, "")

    def release(self, key, owner):
        import sqlalchemy as sa

        c = self.claims.c
        with self._txn() as conn:
            condition = self._where(key) & (c.owner == owner) & (c.state == CLAIMED)
            return conn.execute(sa.delete(self.claims).where(condition)).rowcount == 1

    def reap(self, stale, owner, worker):
        import sqlalchemy as sa

        c = self.claims.c
        released, taken = [], []
        with self._txn() as conn:
            result = conn.execute(sa.select(*self.claims.c).where(self._where() & (c.state != DONE))).all()
            for r in result:
                claim = self._claim_of(r)
                if not stale(claim):
                    continue
                if claim.state == CLAIMED:
                    conn.execute(sa.delete(self.claims).where(self._where(claim.key)))
                    released.append(claim)
                else:
                    values = {"owner": owner, "worker": worker, "updated_at": time.time()}
                    conn.execute(sa.update(self.claims).where(self._where(claim.key)).values(**values))
                    taken.append(claim)
        return released, taken

    def adopt(self, entries, owner, worker):
        import sqlalchemy as sa

        entries = list(entries)
        if not entries:
            return 0
        with self._txn() as conn:
            present = set(conn.execute(sa.select(self.claims.c.config_key).where(self._where())).scalars())
            fresh = {key: (trial, row) for key, trial, row in entries if key not in present}
            for key, (trial, row) in fresh.items():
                conn.execute(
                    sa.insert(self.claims).values(
                        study_name=self.study, config_key=key, trial_number=trial, owner=owner, worker=worker,
                        state=DONE, row_json=row, updated_at=time.time(),
                    )
                )  # fmt: skip
        return len(fresh)
