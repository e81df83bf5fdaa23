"""The results database: an SQLite file (the default) or a PostgreSQL database shared by
a team; all of hvbench's SQL, written once in SQLAlchemy Core for both engines.

Where. ``Store(target)``: a file path is SQLite; a ``postgresql://user@host/dbname`` URL
(or ``postgresql+psycopg://...``; a socket directory as ``?host=/dir``) is PostgreSQL
through psycopg 3. The schema is one definition (:mod:`hvbench.store.schema`) with one
migration history (:mod:`hvbench.store.migrations`); SQLite keeps its version in
``PRAGMA user_version`` (so existing files upgrade in place), PostgreSQL in the
``hvbench_schema`` table, migrated under an advisory lock.

Durability model. The runner may be killed (even with SIGKILL) at any moment, so every
write that records a finished measurement is one transaction committed before the method
returns: after a crash the database holds each repetition either completely or not at
all. SQLite runs in WAL mode with ``synchronous=FULL`` (a commit survives power loss too;
one fsync per repetition is negligible next to a benchmark phase), so one writer and any
number of readers can use a file at the same time; ``busy_timeout`` makes a briefly
locked file wait instead of failing, and writes take the lock up front (``BEGIN
IMMEDIATE``). PostgreSQL takes any number of concurrent writers (several studies from
several machines): run ids are unique by primary key, a generated id that collides is
drawn again.

Duplicates are impossible by schema: ``UNIQUE(cell_id, repetition)``. A repetition
recorded as ``failed`` is *replaced* (with its measurements, samples and raw outputs) when
the same (cell, repetition) is recorded again, so resuming a run retries its failures; an
``ok`` repetition can never be recorded twice.
"""

from __future__ import annotations

import contextlib
import json
import math
import secrets
import zlib
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Self, cast

from sqlalchemy import (
    Connection,
    Engine,
    Row,
    Select,
    create_engine,
    delete,
    event,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, IntegrityError, SQLAlchemyError
from sqlalchemy.pool import NullPool

from hvbench.errors import HvbenchError
from hvbench.host.started import StopOnExit
from hvbench.store import schema as db
from hvbench.store.location import DB_ENV, is_url
from hvbench.store.migrations import MIGRATIONS
from hvbench.store.records import (
    REPETITION_STATUSES,
    RUN_STATUSES,
    CalibrationRecord,
    CalibrationRow,
    CellIdentity,
    CellRecord,
    CellRow,
    FailureRow,
    MeasurementRecord,
    MeasurementRow,
    NoiseFloorRecord,
    NoiseFloorRow,
    RawRecord,
    RawRow,
    RepetitionRow,
    RepetitionStatus,
    RunRecord,
    RunStatus,
    RunSummary,
    SampleRecord,
    SampleRow,
    identity_of,
)
from hvbench.store.schema import SCHEMA_VERSION

# The record types and the location helpers are re-exported so callers can take
# everything from this module.
__all__ = [
    "BUSY_TIMEOUT_MS",
    "DB_ENV",
    "CalibrationRecord",
    "CalibrationRow",
    "CellIdentity",
    "CellRecord",
    "CellRow",
    "FailureRow",
    "MeasurementRecord",
    "MeasurementRow",
    "NoiseFloorRecord",
    "NoiseFloorRow",
    "RawRecord",
    "RawRow",
    "RunRecord",
    "RunSummary",
    "SampleRecord",
    "SampleRow",
    "Store",
    "StoreError",
    "is_url",
    "new_run_id",
    "utc_now",
]

#: How long a connection waits for a lock held by another process before giving up.
BUSY_TIMEOUT_MS = 10_000
#: PostgreSQL advisory lock key that serialises concurrent migrations.
_MIGRATION_LOCK = zlib.crc32(b"hvbench-schema")
#: How many generated run ids a writer draws before it gives up (each collision needs
#: another writer creating a run in the same second with the same 16-bit suffix).
_ID_ATTEMPTS = 20

_RUN_COLUMNS = (db.runs.c.id, db.runs.c.study_name, db.runs.c.study_path,
                db.runs.c.study_text, db.runs.c.seed, db.runs.c.created_at,
                db.runs.c.finished_at, db.runs.c.status, db.runs.c.hvbench_version,
                db.runs.c.git_commit, db.runs.c.env_json, db.runs.c.fleet_id,
                db.runs.c.host)


class StoreError(HvbenchError):
    """The results database cannot be opened, or a read or write was refused or failed.

    The message names the database file (or URL, without its password).
    """


class MissingStoreError(StoreError):
    """The database a command reads does not exist: a wrong ``--db`` or
    ``$HVBENCH_DB`` is bad input (exit 2)."""

    exit_code = 2


def utc_now() -> str:
    """The current time as ISO 8601 UTC with seconds, the format of every stored timestamp."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def new_run_id() -> str:
    """A run id that sorts by creation time, e.g. ``20261123-011502-3fa2`` (UTC)."""
    return datetime.now(UTC).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)


def _dumps(value: Any, what: str) -> str:
    try:
        return json.dumps(value, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"{what} cannot be stored as JSON: {exc}") from exc


def _postgres_url(target: str) -> URL:
    try:
        url = make_url(target)
    except ArgumentError as exc:
        raise StoreError(f"{target!r} is not a database URL: {exc}") from exc
    return url.set(drivername="postgresql+psycopg")


class Store(StopOnExit):
    """The results database ``target``: an SQLite file path or a ``postgresql://`` URL
    (created, or migrated to the current schema).

    Use as a context manager or call :meth:`close`. With ``create=False`` a missing
    SQLite file is an error instead of a new empty database (what read-only commands
    want); a PostgreSQL database must exist (its tables are created when missing).

    Raises:
        StoreError: the file is missing (``create=False``), not an SQLite database, the
            server cannot be reached, the database was written by a newer hvbench (its
            schema version is above this one's), or it cannot be opened or migrated.
    """

    def __init__(self, target: str | Path, *, create: bool = True) -> None:
        self.postgres = is_url(target)
        url: URL | str
        if self.postgres:
            url = _postgres_url(str(target))
            self.location = url.render_as_string(hide_password=True)
            self.path: Path | None = None
        else:
            self.path = Path(target)
            self.location = str(self.path)
            if not create and not self.path.is_file():
                raise MissingStoreError(f"no results database at {self.path}")
            url = URL.create("sqlite+pysqlite", database=str(self.path))
        self._engine = self._make_engine(url)
        try:
            self._conn = self._engine.connect()
        except SQLAlchemyError as exc:
            self._engine.dispose()
            raise StoreError(f"cannot open results database {self.location}: "
                             f"{_reason(exc)}") from exc
        try:
            self._migrate()
        except SQLAlchemyError as exc:
            self.close()
            raise StoreError(f"{self.location} is not a usable hvbench database: "
                             f"{_reason(exc)}") from exc
        except BaseException:
            self.close()
            raise

    @classmethod
    def open(cls, target: str | Path, *, create: bool = True) -> Self:
        """Same as ``Store(target, create=create)``."""
        return cls(target, create=create)

    def close(self) -> None:
        """Close the connection (idempotent). Everything was already committed."""
        with contextlib.suppress(SQLAlchemyError):
            self._conn.close()
        self._engine.dispose()

    def stop(self) -> None:
        """Same as :meth:`close` (the ``with`` statement's exit)."""
        self.close()

    # -- connection plumbing --------------------------------------------------------------

    def _make_engine(self, url: URL) -> Engine:
        if self.postgres:
            return create_engine(url, poolclass=NullPool,
                                 connect_args={"connect_timeout": 10})
        engine = create_engine(url, poolclass=NullPool,
                               connect_args={"timeout": BUSY_TIMEOUT_MS / 1000})

        @event.listens_for(engine, "connect")
        def _configure(dbapi_conn: Any, record: Any) -> None:
            # The driver must not open transactions on its own (it would not before DDL):
            # the "begin" hook below emits BEGIN, so DDL is transactional too.
            dbapi_conn.isolation_level = None
            cursor = dbapi_conn.cursor()
            try:
                cursor.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS:d}")
                cursor.execute("PRAGMA foreign_keys = ON")  # off by default, per connection
                cursor.execute("PRAGMA journal_mode = WAL")  # persistent: stored in the file
                cursor.execute("PRAGMA synchronous = FULL")
            finally:
                cursor.close()

        @event.listens_for(engine, "begin")
        def _begin(conn: Connection) -> None:
            # IMMEDIATE takes the write lock up front so a write never fails half-way on
            # a lock upgrade; reads begin deferred and never block the writer.
            conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.info.get("write") else "BEGIN")

        return engine

    def _version(self, conn: Connection) -> int:
        if not self.postgres:
            return int(conn.exec_driver_sql("PRAGMA user_version").scalar_one())
        if conn.execute(select(func.to_regclass("hvbench_schema"))).scalar() is None:
            db.schema_version.create(conn)
            conn.execute(insert(db.schema_version).values(version=0))
        return int(conn.execute(select(db.schema_version.c.version)).scalar_one())

    def _set_version(self, conn: Connection, version: int) -> None:
        if self.postgres:
            conn.execute(update(db.schema_version).values(version=version))
        else:
            conn.exec_driver_sql(f"PRAGMA user_version = {version:d}")

    def _migrate(self) -> None:
        if self.postgres:  # creates the version table of a new database
            with self._transaction_raw() as conn:
                conn.execute(select(func.pg_advisory_xact_lock(_MIGRATION_LOCK)))
                found = self._version(conn)
        else:  # a read: a read-only file opens as long as it needs no migration
            with self._conn.begin():
                found = self._version(self._conn)
        if found > SCHEMA_VERSION:
            raise StoreError(
                f"{self.location} has schema version {found}, but this hvbench only knows "
                f"versions up to {SCHEMA_VERSION}: it was written by a newer hvbench; "
                "upgrade hvbench to read it"
            )
        for target in range(found + 1, SCHEMA_VERSION + 1):
            with self._transaction(f"migrating to schema version {target}") as conn:
                if self.postgres:
                    conn.execute(select(func.pg_advisory_xact_lock(_MIGRATION_LOCK)))
                # another process may have migrated between our read and our lock
                if self._version(conn) >= target:
                    continue
                MIGRATIONS[target - 1](conn)
                self._set_version(conn, target)

    @contextlib.contextmanager
    def _transaction_raw(self) -> Iterator[Connection]:
        """BEGIN (IMMEDIATE on SQLite) ... COMMIT; on any exception ROLLBACK, re-raise."""
        conn = self._conn
        conn.info["write"] = True
        try:
            with conn.begin():
                conn.info["write"] = False
                yield conn
        finally:
            conn.info["write"] = False

    @contextlib.contextmanager
    def _transaction(self, what: str) -> Iterator[Connection]:
        """A write transaction; database errors become StoreError naming ``what`` and
        the database."""
        try:
            with self._transaction_raw() as conn:
                yield conn
        except SQLAlchemyError as exc:
            raise StoreError(f"{what} failed in {self.location}: {_reason(exc)}; "
                             "nothing was stored") from exc

    def _read(self, query: Select[Any]) -> list[Row[Any]]:
        conn = self._conn
        try:
            if conn.in_transaction():  # inside a write: read what it sees
                return list(conn.execute(query).all())
            with conn.begin():
                return list(conn.execute(query).all())
        except SQLAlchemyError as exc:
            raise StoreError(f"reading {self.location} failed: {_reason(exc)}") from exc

    def _require_run(self, run_id: str) -> None:
        if not self._read(select(db.runs.c.id).where(db.runs.c.id == run_id)):
            raise self._no_run(run_id)

    def _no_run(self, run_id: str) -> StoreError:
        recent = [r.id for r in self._read(
            select(db.runs.c.id).order_by(db.runs.c.id.desc()).limit(5))]
        held = f"its newest runs: {', '.join(recent)}" if recent else "it holds no runs"
        return StoreError(f"no run {run_id!r} in {self.location} ({held})")

    # -- writes ---------------------------------------------------------------------------

    def create_run(
        self,
        *,
        run_id: str | None,
        study_name: str,
        study_path: str,
        study_text: str,
        seed: int,
        env: Mapping[str, Any],
        hvbench_version: str,
        git_commit: str | None,
        fleet_id: str | None = None,
        host: str | None = None,
        created_at: str | None = None,
    ) -> str:
        """Record a new run in status ``running`` and return its id.

        ``run_id=None`` generates a time-sortable id (see :func:`new_run_id`), drawn
        again when a concurrent writer took it. ``fleet_id`` and ``host``: the run is one
        host's part of a fleet run. ``created_at``: now unless given (a copied run).

        Raises:
            StoreError: ``run_id`` already exists, or ``env`` is not JSON-serializable.
        """
        env_json = _dumps(dict(env), "the run environment")
        for _attempt in range(_ID_ATTEMPTS):
            new_id = run_id if run_id is not None else new_run_id()
            try:
                with self._transaction("creating a run") as conn:
                    conn.execute(insert(db.runs).values(
                        id=new_id, study_name=study_name, study_path=study_path,
                        study_text=study_text, seed=seed,
                        created_at=created_at or utc_now(), finished_at=None,
                        status="running", hvbench_version=hvbench_version,
                        git_commit=git_commit, env_json=env_json, fleet_id=fleet_id,
                        host=host))
            except StoreError as exc:
                if not isinstance(exc.__cause__, IntegrityError):
                    raise
                if run_id is not None:
                    raise StoreError(f"run {run_id!r} already exists in {self.location}"
                                     ) from exc
                continue
            return new_id
        raise StoreError(f"no unused run id in {self.location} after {_ID_ATTEMPTS} tries")

    def add_cells(self, run_id: str, cells: Sequence[CellRecord]) -> dict[str, int]:
        """Store the cells of a run; return name -> cell id.

        Idempotent for resume: a cell already stored under the same name returns its id.

        Raises:
            StoreError: no such run, or a stored cell of that name has a different
                platform or workload definition (the study changed since the run began).
        """
        ids: dict[str, int] = {}
        with self._transaction(f"adding cells to run {run_id}") as conn:
            self._require_run(run_id)
            for cell in cells:
                ids[cell.name] = self._add_cell(conn, run_id, cell)
        return ids

    def _add_cell(self, conn: Connection, run_id: str, cell: CellRecord) -> int:
        platform = _dumps(dict(cell.platform), f"platform of cell {cell.name!r}")
        workload = _dumps(dict(cell.workload), f"workload of cell {cell.name!r}")
        c = db.cells.c
        found = self._read(select(c.id, c.platform_json, c.workload_json).where(
            c.run_id == run_id, c.name == cell.name))
        if found:
            row = found[0]
            if (row.platform_json, row.workload_json) != (platform, workload):
                raise StoreError(
                    f"cell {cell.name!r} of run {run_id} in {self.location} was stored with "
                    "a different platform or workload: the study changed since the run "
                    "started; start a new run instead of resuming"
                )
            return int(row.id)
        ident = cell.identity or identity_of(cell.platform_name, cell.platform, cell.workload)
        result = conn.execute(insert(db.cells).values(
            run_id=run_id, name=cell.name, platform_name=cell.platform_name,
            platform_json=platform, workload_name=cell.workload_name, workload_json=workload,
            base_platform=ident.base_platform, scenario=ident.scenario,
            platform_kind=ident.platform_kind, workload_kind=ident.workload_kind,
            method=ident.method, image_size=ident.image_size, file_size=ident.file_size,
            neighbour_roles_json=json.dumps(list(ident.neighbour_roles))))
        return _inserted_id(result.inserted_primary_key)

    def record_order(self, run_id: str, repetition: int, cell_names: Sequence[str]) -> None:
        """Record the (shuffled) order in which the cells run in ``repetition``.

        Idempotent: recording the same order again does nothing.

        Raises:
            StoreError: no such run, an unknown cell name, or a *different* order was
                already recorded for this repetition (resume must replay the stored one).
        """
        with self._transaction(f"recording the order of repetition {repetition}") as conn:
            self._require_run(run_id)
            by_name = {c.name: c.id for c in self.cells(run_id)}
            unknown = [n for n in cell_names if n not in by_name]
            if unknown:
                raise StoreError(f"run {run_id} in {self.location} has no cells {unknown}")
            ids_json = json.dumps([by_name[n] for n in cell_names])
            o = db.run_order.c
            found = self._read(select(o.cell_ids_json).where(
                o.run_id == run_id, o.repetition == repetition))
            if found and found[0].cell_ids_json != ids_json:
                raise StoreError(
                    f"run {run_id} in {self.location} already ran repetition {repetition} "
                    "in another cell order; resume must use the recorded order (see order())"
                )
            if not found:
                conn.execute(insert(db.run_order).values(
                    run_id=run_id, repetition=repetition, cell_ids_json=ids_json))

    def record_repetition(
        self,
        *,
        run_id: str,
        cell_id: int,
        repetition: int,
        position: int,
        status: RepetitionStatus,
        measurements: Sequence[MeasurementRecord] = (),
        samples: Sequence[SampleRecord] = (),
        raw: Sequence[RawRecord] = (),
        error: str | None = None,
        console_log: str | None = None,
        qemu_argv: Sequence[str] | None = None,
        accel: str | None = None,
        started_at: str,
        finished_at: str,
    ) -> int:
        """Record one finished repetition with all its results; return its id.

        Everything is one transaction, committed before this returns: after a crash the
        repetition is stored completely or not at all. A previous ``failed`` record of the
        same (cell, repetition) is replaced together with its results, so resume can retry
        failures.

        Raises:
            StoreError: an ``ok`` record of this (cell, repetition) exists; the cell is not
                part of the run; an invalid status; a measurement or sample time that is
                NaN or a measurement that repeats a (phase, metric); sample values that
                are not JSON-serializable. Nothing is stored then.
        """
        if status not in REPETITION_STATUSES:
            raise StoreError(f"repetition status must be one of {REPETITION_STATUSES}")
        what = f"recording repetition {repetition} of cell {cell_id} (run {run_id})"
        nan = [f"{m.phase}/{m.metric}" for m in measurements if math.isnan(m.value)]
        nan += [f"sample of {s.monitor} at t=nan" for s in samples if math.isnan(s.t)]
        if nan:  # SQLite would store NULL (refused), PostgreSQL NaN: refused on both
            raise StoreError(f"{what} failed in {self.location}: {nan[0]} is NaN; "
                             "nothing was stored")
        argv_json = None if qemu_argv is None else json.dumps(list(qemu_argv))
        with self._transaction(what) as conn:
            self._check_cell(run_id, cell_id)
            self._drop_failed(conn, cell_id, repetition)
            result = conn.execute(insert(db.repetitions).values(
                run_id=run_id, cell_id=cell_id, repetition=repetition, position=position,
                status=status, error=error, console_log=console_log,
                qemu_argv_json=argv_json, accel=accel, started_at=started_at,
                finished_at=finished_at))
            rep_id = _inserted_id(result.inserted_primary_key)
            self._insert_results(conn, rep_id, measurements, samples, raw)
            return rep_id

    def _check_cell(self, run_id: str, cell_id: int) -> None:
        c = db.cells.c
        if not self._read(select(c.id).where(c.id == cell_id, c.run_id == run_id)):
            raise StoreError(
                f"cell id {cell_id} is not part of run {run_id} in {self.location}")

    def _drop_failed(self, conn: Connection, cell_id: int, repetition: int) -> None:
        p = db.repetitions.c
        found = self._read(select(p.id, p.status).where(
            p.cell_id == cell_id, p.repetition == repetition))
        if not found:
            return
        if found[0].status == "ok":
            raise StoreError(
                f"repetition {repetition} of cell {cell_id} is already recorded as ok in "
                f"{self.location}; refusing to store a duplicate"
            )
        # ON DELETE CASCADE removes the failed attempt's measurements, samples and raw output
        conn.execute(delete(db.repetitions).where(p.id == found[0].id))

    @staticmethod
    def _insert_results(
        conn: Connection,
        rep_id: int,
        measurements: Sequence[MeasurementRecord],
        samples: Sequence[SampleRecord],
        raw: Sequence[RawRecord],
    ) -> None:
        rows: list[tuple[Any, list[dict[str, Any]]]] = [
            (db.measurements, [{"repetition_id": rep_id, "phase": m.phase,
                                "metric": m.metric, "value": m.value, "unit": m.unit}
                               for m in measurements]),
            (db.samples, [{"repetition_id": rep_id, "phase": s.phase, "monitor": s.monitor,
                           "t": s.t, "values_json": _dumps(dict(s.values),
                                                           f"sample of {s.monitor} at t={s.t}")}
                          for s in samples]),
            (db.raw_outputs, [{"repetition_id": rep_id, "phase": r.phase, "kind": r.kind,
                               "content": r.content} for r in raw]),
        ]
        for table, values in rows:
            if values:
                conn.execute(insert(table), values)

    def set_status(
        self, run_id: str, status: RunStatus, finished_at: str | None = None
    ) -> None:
        """Set a run's status (and its finish time, when given).

        Raises:
            StoreError: no such run, or ``status`` is not a run status.
        """
        if status not in RUN_STATUSES:
            raise StoreError(f"run status must be one of {RUN_STATUSES}, got {status!r}")
        with self._transaction(f"setting the status of run {run_id}") as conn:
            r = db.runs.c
            result = conn.execute(update(db.runs).where(r.id == run_id).values(
                status=status, finished_at=func.coalesce(finished_at, r.finished_at)))
            if result.rowcount == 0:
                raise self._no_run(run_id)

    def delete_run(self, run_id: str) -> None:
        """Remove run ``run_id`` and everything stored with it (cells, repetitions,
        measurements, samples, raw outputs, order, noise floors: the schema's foreign
        keys cascade), in one transaction.

        Raises:
            StoreError: no such run, or the write failed (nothing was removed).
        """
        with self._transaction(f"removing run {run_id}") as conn:
            result = conn.execute(delete(db.runs).where(db.runs.c.id == run_id))
            if result.rowcount == 0:
                raise self._no_run(run_id)

    def add_noise_floors(self, run_id: str, host: str,
                         floors: Sequence[NoiseFloorRecord]) -> None:
        """Store the noise floors measured in run ``run_id`` on ``host``, in one
        transaction; a floor already stored for the same run, cell, phase and metric is
        replaced (computing a run's floors again is idempotent).

        Raises:
            StoreError: no such run, or the write failed.
        """
        self._require_run(run_id)
        n = db.noise_floors.c
        now = utc_now()
        with self._transaction("storing noise floors") as conn:
            for f in floors:
                conn.execute(delete(db.noise_floors).where(
                    n.run_id == run_id, n.cell == f.cell, n.phase == f.phase,
                    n.metric == f.metric))
                conn.execute(insert(db.noise_floors).values(
                    run_id=run_id, host=host, definition=f.definition, cell=f.cell,
                    phase=f.phase, metric=f.metric, pairs=f.pairs, mean=f.mean,
                    sd_pct=f.sd_pct, created_at=now))

    def noise_floors(self, host: str | None = None, definitions: Sequence[str] | None = None
                     ) -> list[NoiseFloorRow]:
        """Stored noise floors, newest first; only ``host``'s and only those of
        ``definitions`` when given."""
        n = db.noise_floors.c
        query = select(db.noise_floors).order_by(n.created_at.desc(), n.id.desc())
        if host is not None:
            query = query.where(n.host == host)
        if definitions is not None:
            query = query.where(n.definition.in_(list(definitions)))
        return [NoiseFloorRow(run_id=r.run_id, host=r.host, created_at=r.created_at,
                              floor=NoiseFloorRecord(
                                  definition=r.definition, cell=r.cell, phase=r.phase,
                                  metric=r.metric, pairs=int(r.pairs), mean=float(r.mean),
                                  sd_pct=float(r.sd_pct)))
                for r in self._read(query)]

    def add_calibration(self, calibration: str, host: str, runs: Sequence[str],
                        thresholds: Sequence[CalibrationRecord]) -> None:
        """Store calibration ``calibration`` of ``host`` (computed from the planted
        studies' ``runs``), one row per threshold, in one transaction.

        Raises:
            StoreError: the id is taken, or the write failed.
        """
        now = utc_now()
        with self._transaction("storing a calibration") as conn:
            for t in thresholds:
                conn.execute(insert(db.calibrations).values(
                    calibration=calibration, host=host, name=t.name, rule=t.rule,
                    default_value=t.default_value, value=t.value,
                    calibrated=int(t.calibrated), positives=t.positives,
                    negatives=t.negatives, note=t.note, runs_json=json.dumps(list(runs)),
                    created_at=now))

    def calibrations(self, host: str | None = None) -> list[CalibrationRow]:
        """Stored calibrations, newest first; only ``host``'s when given."""
        c = db.calibrations.c
        # Newest calibration first; within one, the thresholds in the order stored.
        query = select(db.calibrations).order_by(c.created_at.desc(), c.calibration.desc(),
                                                 c.id)
        if host is not None:
            query = query.where(c.host == host)
        grouped: dict[str, list[Any]] = {}
        for r in self._read(query):
            grouped.setdefault(r.calibration, []).append(r)
        return [CalibrationRow(
            calibration=name, host=rows[0].host, created_at=rows[0].created_at,
            runs=tuple(json.loads(rows[0].runs_json)),
            thresholds=tuple(CalibrationRecord(
                name=r.name, rule=r.rule, default_value=float(r.default_value),
                value=float(r.value), calibrated=bool(r.calibrated),
                positives=int(r.positives), negatives=int(r.negatives), note=r.note)
                for r in rows)) for name, rows in grouped.items()]

    # -- reads ----------------------------------------------------------------------------

    def done(self, run_id: str) -> set[tuple[int, int]]:
        """The (cell id, repetition) pairs recorded as ok: what a resumed run skips."""
        p = db.repetitions.c
        rows = self._read(select(p.cell_id, p.repetition).where(
            p.run_id == run_id, p.status == "ok"))
        return {(int(r.cell_id), int(r.repetition)) for r in rows}

    def get_run(self, run_id: str) -> RunRecord:
        """The run ``run_id``.

        Raises:
            StoreError: no such run (the message lists the newest runs it holds).
        """
        rows = self._read(select(*_RUN_COLUMNS).where(db.runs.c.id == run_id))
        if not rows:
            raise self._no_run(run_id)
        return _run_record(rows[0])

    def run_ids(self, *, prefix: str = "") -> list[str]:
        """The ids of the runs whose id starts with ``prefix`` (all by default), oldest
        first."""
        r = db.runs.c
        rows = self._read(select(r.id).where(
            func.substr(r.id, 1, len(prefix)) == prefix).order_by(r.created_at, r.id))
        return [str(row.id) for row in rows]

    def latest_run(self) -> RunRecord | None:
        """The most recently created run, or None for an empty database."""
        r = db.runs.c
        rows = self._read(select(*_RUN_COLUMNS).order_by(r.created_at.desc(), r.id.desc())
                          .limit(1))
        return _run_record(rows[0]) if rows else None

    def fleet_runs(self, fleet_id: str) -> list[RunRecord]:
        """The runs (one per host) of the fleet run ``fleet_id``, by host name."""
        r = db.runs.c
        rows = self._read(select(*_RUN_COLUMNS).where(r.fleet_id == fleet_id)
                          .order_by(r.host, r.id))
        return [_run_record(row) for row in rows]

    def list_runs(self) -> list[RunSummary]:
        """Every run, oldest first, with cell and repetition counts.

        ``accelerator`` is the env's ``accelerator`` (or ``accel``) entry; without one,
        the distinct accelerators its repetitions recorded, comma-separated.
        """
        r, c, p = db.runs.c, db.cells.c, db.repetitions.c

        def count(table: Any, *where: Any) -> Any:
            return select(func.count()).select_from(table).where(*where).scalar_subquery()

        rows = self._read(select(
            r.id, r.study_name, r.created_at, r.status, r.env_json,
            count(db.cells, c.run_id == r.id).label("n_cells"),
            count(db.repetitions, p.run_id == r.id, p.status == "ok").label("n_ok"),
            count(db.repetitions, p.run_id == r.id, p.status == "failed").label("n_failed"),
        ).order_by(r.created_at, r.id))
        accels: dict[str, set[str]] = {}
        for row in self._read(select(p.run_id, p.accel).distinct()
                              .where(p.accel.is_not(None))):
            accels.setdefault(row.run_id, set()).add(str(row.accel))
        return [_run_summary(row, accels.get(row.id, set())) for row in rows]

    def cells(self, run_id: str) -> list[CellRow]:
        """The cells of a run in the order they were added."""
        c = db.cells.c
        rows = self._read(select(db.cells).where(c.run_id == run_id).order_by(c.id))
        return [
            CellRow(id=int(r.id), name=r.name, platform_name=r.platform_name,
                    platform=json.loads(r.platform_json), workload_name=r.workload_name,
                    workload=json.loads(r.workload_json), identity=_identity(r))
            for r in rows
        ]

    def order(self, run_id: str) -> dict[int, list[str]]:
        """The recorded cell order of each repetition: repetition -> cell names."""
        names = {c.id: c.name for c in self.cells(run_id)}
        o = db.run_order.c
        rows = self._read(select(o.repetition, o.cell_ids_json).where(o.run_id == run_id)
                          .order_by(o.repetition))
        return {
            int(r.repetition): [names[i] for i in json.loads(r.cell_ids_json)]
            for r in rows
        }

    def measurements(self, run_id: str, *, include_failed: bool = False) -> list[MeasurementRow]:
        """Every measurement of a run with its cell, platform, workload and repetition.

        Only ok repetitions unless ``include_failed`` (a failed repetition may hold the
        results of the phases that finished before it failed).

        Raises:
            StoreError: no such run.
        """
        self._require_run(run_id)
        c, p, m = db.cells.c, db.repetitions.c, db.measurements.c
        query = (select(c.id.label("cell_id"), c.name.label("cell"), c.platform_name,
                        c.workload_name, p.repetition, p.position, m.phase, m.metric,
                        m.value, m.unit, c.base_platform, c.scenario, c.method,
                        c.image_size)
                 .select_from(db.measurements.join(db.repetitions, m.repetition_id == p.id)
                              .join(db.cells, p.cell_id == c.id))
                 .where(p.run_id == run_id)
                 .order_by(c.id, p.repetition, m.phase, m.metric))
        if not include_failed:
            query = query.where(p.status == "ok")
        return [
            MeasurementRow(cell_id=int(r.cell_id), cell=r.cell,
                           platform=r.platform_name, workload=r.workload_name,
                           repetition=int(r.repetition), position=int(r.position),
                           phase=r.phase, metric=r.metric, value=float(r.value),
                           unit=r.unit, base_platform=r.base_platform,
                           scenario=r.scenario, method=r.method,
                           image_size=None if r.image_size is None
                           else float(r.image_size))
            for r in self._read(query)
        ]

    def samples(
        self,
        run_id: str,
        *,
        cell: str | None = None,
        repetition: int | None = None,
        phase: str | None = None,
        monitor: str | None = None,
    ) -> list[SampleRow]:
        """Time-series samples of a run, optionally filtered; ordered by cell, repetition, t.

        Raises:
            StoreError: no such run.
        """
        self._require_run(run_id)
        c, p, s = db.cells.c, db.repetitions.c, db.samples.c
        query: Select[Any] = (select(c.name.label("cell"), p.repetition, s.phase, s.monitor,
                        s.t.label("at"), s.values_json)
                 .select_from(db.samples.join(db.repetitions, s.repetition_id == p.id)
                              .join(db.cells, p.cell_id == c.id))
                 .where(p.run_id == run_id)
                 .order_by(c.id, p.repetition, s.phase, s.monitor, s.t, s.id))
        query = _filtered(query, (c.name, cell), (p.repetition, repetition),
                          (s.phase, phase), (s.monitor, monitor))
        return [
            SampleRow(cell=r.cell, repetition=int(r.repetition), phase=r.phase,
                      monitor=r.monitor, t=float(r.at), values=json.loads(r.values_json))
            for r in self._read(query)
        ]

    def raw_outputs(
        self,
        run_id: str,
        *,
        cell: str | None = None,
        repetition: int | None = None,
        kind: str | None = None,
    ) -> list[RawRow]:
        """Raw tool outputs of a run, optionally filtered.

        Raises:
            StoreError: no such run.
        """
        self._require_run(run_id)
        c, p, o = db.cells.c, db.repetitions.c, db.raw_outputs.c
        query: Select[Any] = (
            select(c.name.label("cell"), p.repetition, o.phase, o.kind, o.content)
                 .select_from(db.raw_outputs.join(db.repetitions, o.repetition_id == p.id)
                              .join(db.cells, p.cell_id == c.id))
                 .where(p.run_id == run_id)
                 .order_by(c.id, p.repetition, o.id))
        query = _filtered(query, (c.name, cell), (p.repetition, repetition), (o.kind, kind))
        return [
            RawRow(cell=r.cell, repetition=int(r.repetition), phase=r.phase,
                   kind=r.kind, content=r.content)
            for r in self._read(query)
        ]

    def failures(self, run_id: str) -> list[FailureRow]:
        """Repetitions of a run whose latest attempt failed.

        Raises:
            StoreError: no such run.
        """
        self._require_run(run_id)
        c, p = db.cells.c, db.repetitions.c
        rows = self._read(
            select(c.name.label("cell"), p.repetition, p.error, p.console_log,
                   p.qemu_argv_json, p.accel, p.finished_at)
            .select_from(db.repetitions.join(db.cells, p.cell_id == c.id))
            .where(p.run_id == run_id, p.status == "failed")
            .order_by(p.repetition, p.position))
        return [
            FailureRow(cell=r.cell, repetition=int(r.repetition), error=r.error,
                       console_log=r.console_log,
                       qemu_argv=None if r.qemu_argv_json is None
                       else json.loads(r.qemu_argv_json),
                       accel=r.accel, finished_at=r.finished_at)
            for r in rows
        ]

    def repetitions(self, run_id: str) -> list[RepetitionRow]:
        """Every stored repetition of a run, ok and failed, by cell and repetition.

        Raises:
            StoreError: no such run.
        """
        self._require_run(run_id)
        c, p = db.cells.c, db.repetitions.c
        rows = self._read(
            select(c.name.label("cell"), p.repetition, p.position, p.status, p.error,
                   p.console_log, p.qemu_argv_json, p.accel, p.started_at, p.finished_at)
            .select_from(db.repetitions.join(db.cells, p.cell_id == c.id))
            .where(p.run_id == run_id).order_by(c.id, p.repetition))
        return [
            RepetitionRow(cell=r.cell, repetition=int(r.repetition), position=int(r.position),
                          status=cast(RepetitionStatus, r.status), error=r.error,
                          console_log=r.console_log,
                          qemu_argv=None if r.qemu_argv_json is None
                          else json.loads(r.qemu_argv_json),
                          accel=r.accel, started_at=r.started_at, finished_at=r.finished_at)
            for r in rows
        ]

    def sample_monitors(self, run_id: str) -> list[str]:
        """The distinct monitor names of a run's samples (ok repetitions), sorted; lets a
        report load only the series it draws.

        Raises:
            StoreError: no such run.
        """
        self._require_run(run_id)
        p, s = db.repetitions.c, db.samples.c
        rows = self._read(
            select(s.monitor).distinct()
            .select_from(db.samples.join(db.repetitions, s.repetition_id == p.id))
            .where(p.run_id == run_id, p.status == "ok").order_by(s.monitor))
        return [str(r.monitor) for r in rows]

    def run_seconds(self, run_id: str) -> float:
        """Seconds a run has spent measuring so far: every stored repetition's
        ``started_at`` to ``finished_at`` plus the guest boots stored with it (phase
        ``boot``). What a resumed tuning run has already spent of its time budget.

        Raises:
            StoreError: no such run.
        """
        self._require_run(run_id)
        p, m = db.repetitions.c, db.measurements.c
        total = 0.0
        for row in self._read(select(p.started_at, p.finished_at).where(p.run_id == run_id)):
            try:
                total += (datetime.fromisoformat(row.finished_at)
                          - datetime.fromisoformat(row.started_at)).total_seconds()
            except (TypeError, ValueError):  # not finished, or not written by this store
                continue
        boots = self._read(
            select(func.coalesce(func.sum(m.value), 0.0))
            .select_from(db.measurements.join(db.repetitions, m.repetition_id == p.id))
            .where(p.run_id == run_id, m.phase == "boot", m.metric == "boot_s"))
        return total + float(boots[0][0])

    def cell_durations(self, cells: Sequence[CellRecord]) -> dict[str, list[float]]:
        """Per cell name, the seconds (``started_at`` to ``finished_at``) of every ok
        repetition, in any run, of a stored cell with the same platform and workload
        definition; cells never run before are left out. Read-only (plans estimate a
        run's duration from it).

        Raises:
            StoreError: a definition cannot be encoded as JSON.
        """
        out: dict[str, list[float]] = {}
        c, p = db.cells.c, db.repetitions.c
        for cell in cells:
            rows = self._read(
                select(p.started_at, p.finished_at)
                .select_from(db.repetitions.join(db.cells, p.cell_id == c.id))
                .where(c.platform_json == _dumps(dict(cell.platform),
                                                 f"platform of cell {cell.name!r}"),
                       c.workload_json == _dumps(dict(cell.workload),
                                                 f"workload of cell {cell.name!r}"),
                       p.status == "ok"))
            for row in rows:
                try:
                    took = (datetime.fromisoformat(row.finished_at)
                            - datetime.fromisoformat(row.started_at)).total_seconds()
                except ValueError:  # a timestamp not written by this store: skipped
                    continue
                out.setdefault(cell.name, []).append(took)
        return out


def _reason(exc: SQLAlchemyError) -> str:
    """The driver's own words, without SQLAlchemy's statement dump and help link."""
    orig = getattr(exc, "orig", None)
    text = str(orig if orig is not None else exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _filtered(query: Select[Any], *filters: tuple[Any, Any]) -> Select[Any]:
    for column, value in filters:
        if value is not None:
            query = query.where(column == value)
    return query


def _inserted_id(key: Any) -> int:
    if not key or key[0] is None:  # cannot happen after an INSERT; keeps the type exact
        raise StoreError("the database returned no row id for an INSERT")
    return int(key[0])


def _identity(row: Row[Any]) -> CellIdentity:
    return CellIdentity(
        base_platform=row.base_platform, platform_kind=row.platform_kind,
        workload_kind=row.workload_kind, scenario=row.scenario, method=row.method,
        image_size=row.image_size, file_size=row.file_size,
        neighbour_roles=tuple(json.loads(row.neighbour_roles_json)))


def _run_record(row: Row[Any]) -> RunRecord:
    return RunRecord(
        id=row.id, study_name=row.study_name, study_path=row.study_path,
        study_text=row.study_text, seed=int(row.seed), created_at=row.created_at,
        finished_at=row.finished_at, status=cast(RunStatus, row.status),
        hvbench_version=row.hvbench_version, git_commit=row.git_commit,
        env=json.loads(row.env_json), fleet_id=row.fleet_id, host=row.host,
    )


def _run_summary(row: Row[Any], accels: set[str]) -> RunSummary:
    env = json.loads(row.env_json)
    accel = env.get("accelerator") or env.get("accel") if isinstance(env, dict) else None
    if accel is None and accels:
        accel = ",".join(sorted(accels))
    return RunSummary(
        id=row.id, study_name=row.study_name, created_at=row.created_at,
        status=cast(RunStatus, row.status), n_cells=int(row.n_cells),
        n_ok=int(row.n_ok), n_failed=int(row.n_failed),
        accelerator=None if accel is None else str(accel),
    )
