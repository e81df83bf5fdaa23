"""The results database: one SQLite file per results directory; all of hvbench's SQL.

Durability model. The runner may be killed (even with SIGKILL) at any moment, so every
write that records a finished measurement is one transaction committed before the method
returns: after a crash the file holds each repetition either completely or not at all.
The database runs in WAL mode with ``synchronous=FULL`` (a commit survives power loss too;
one fsync per repetition is negligible next to a benchmark phase), so one writer (the
runner) and any number of readers (reports) can use it at the same time; ``busy_timeout``
makes a briefly locked file wait instead of failing.

Duplicates are impossible by schema: ``UNIQUE(cell_id, repetition)``. A repetition
recorded as ``failed`` is *replaced* (with its measurements, samples and raw outputs) when
the same (cell, repetition) is recorded again, so resuming a run retries its failures; an
``ok`` repetition can never be recorded twice.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Self, cast

from hvbench.errors import HvbenchError
from hvbench.store.migrations import MIGRATIONS, SCHEMA_VERSION
from hvbench.store.records import (
    REPETITION_STATUSES,
    RUN_STATUSES,
    CellIdentity,
    CellRecord,
    CellRow,
    FailureRow,
    MeasurementRecord,
    MeasurementRow,
    RawRecord,
    RawRow,
    RepetitionStatus,
    RunRecord,
    RunStatus,
    RunSummary,
    SampleRecord,
    SampleRow,
    identity_of,
)

# The record types are re-exported so callers can take everything from this module.
__all__ = [
    "BUSY_TIMEOUT_MS",
    "CellIdentity",
    "CellRecord",
    "CellRow",
    "FailureRow",
    "MeasurementRecord",
    "MeasurementRow",
    "RawRecord",
    "RawRow",
    "RunRecord",
    "RunSummary",
    "SampleRecord",
    "SampleRow",
    "Store",
    "StoreError",
    "new_run_id",
    "utc_now",
]

#: How long a connection waits for a lock held by another process before giving up.
BUSY_TIMEOUT_MS = 10_000

_RUN_COLUMNS = (
    "id, study_name, study_path, study_text, seed, created_at, finished_at, status, "
    "hvbench_version, git_commit, env_json"
)


class StoreError(HvbenchError):
    """The results database cannot be opened, or a read or write was refused or failed.

    The message names the database file.
    """


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


class Store:
    """The results database at ``path`` (created, or migrated to the current schema).

    Use as a context manager or call :meth:`close`. With ``create=False`` a missing file
    is an error instead of a new empty database (what read-only commands want).

    Raises:
        StoreError: the file is missing (``create=False``), not an SQLite database, was
            written by a newer hvbench (its schema version is above this one's), or cannot
            be opened or migrated.
    """

    def __init__(self, path: str | Path, *, create: bool = True) -> None:
        self.path = Path(path)
        if not create and not self.path.is_file():
            raise StoreError(f"no results database at {self.path}")
        try:
            self._conn = sqlite3.connect(
                self.path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000
            )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open results database {self.path}: {exc}") from exc
        self._conn.row_factory = sqlite3.Row
        try:
            self._configure()
            self._migrate()
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise StoreError(f"{self.path} is not a usable hvbench database: {exc}") from exc
        except BaseException:
            self._conn.close()
            raise

    @classmethod
    def open(cls, path: str | Path, *, create: bool = True) -> Self:
        """Same as ``Store(path, create=create)``."""
        return cls(path, create=create)

    def close(self) -> None:
        """Close the connection (idempotent). Everything was already committed."""
        self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- connection plumbing --------------------------------------------------------------

    def _configure(self) -> None:
        conn = self._conn
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS:d}")
        conn.execute("PRAGMA foreign_keys = ON")  # off by default in SQLite, per connection
        conn.execute("PRAGMA journal_mode = WAL")  # persistent: stored in the file
        conn.execute("PRAGMA synchronous = FULL")

    def _user_version(self) -> int:
        return int(self._conn.execute("PRAGMA user_version").fetchone()[0])

    def _migrate(self) -> None:
        found = self._user_version()
        if found > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} has schema version {found}, but this hvbench only knows "
                f"versions up to {SCHEMA_VERSION}: it was written by a newer hvbench; "
                "upgrade hvbench to read it"
            )
        for target in range(found + 1, SCHEMA_VERSION + 1):
            with self._transaction(f"migrating to schema version {target}") as conn:
                # another process may have migrated between our read and our lock
                if self._user_version() >= target:
                    continue
                MIGRATIONS[target - 1](conn)
                conn.execute(f"PRAGMA user_version = {target:d}")

    @contextlib.contextmanager
    def _transaction(self, what: str) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE ... COMMIT; on any exception ROLLBACK and re-raise.

        IMMEDIATE takes the write lock up front so a transaction never fails half-way on a
        lock upgrade. SQLite errors become StoreError naming ``what`` and the file.
        """
        conn = self._conn
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                if conn.in_transaction:  # some errors already rolled back on their own
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise StoreError(f"{what} failed in {self.path}: {exc}; nothing was stored") from exc

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        try:
            return self._conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"reading {self.path} failed: {exc}") from exc

    def _require_run(self, run_id: str) -> None:
        if not self._read("SELECT 1 FROM runs WHERE id = ?", (run_id,)):
            raise self._no_run(run_id)

    def _no_run(self, run_id: str) -> StoreError:
        recent = [r["id"] for r in self._read("SELECT id FROM runs ORDER BY id DESC LIMIT 5")]
        held = f"its newest runs: {', '.join(recent)}" if recent else "it holds no runs"
        return StoreError(f"no run {run_id!r} in {self.path} ({held})")

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
    ) -> str:
        """Record a new run in status ``running`` and return its id.

        ``run_id=None`` generates a time-sortable id (see :func:`new_run_id`).

        Raises:
            StoreError: ``run_id`` already exists, or ``env`` is not JSON-serializable.
        """
        env_json = _dumps(dict(env), "the run environment")
        with self._transaction("creating a run") as conn:
            if run_id is not None and self._read("SELECT 1 FROM runs WHERE id=?", (run_id,)):
                raise StoreError(f"run {run_id!r} already exists in {self.path}")
            new_id = run_id if run_id is not None else self._unused_run_id()
            conn.execute(
                f"INSERT INTO runs ({_RUN_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?)",  # noqa: S608 (constant column list)
                (new_id, study_name, study_path, study_text, seed, utc_now(), None,
                 "running", hvbench_version, git_commit, env_json),
            )
        return new_id

    def _unused_run_id(self) -> str:
        while True:  # 65536 suffixes per second: a collision is rare, two in a row rarer
            candidate = new_run_id()
            if not self._read("SELECT 1 FROM runs WHERE id = ?", (candidate,)):
                return candidate

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

    def _add_cell(self, conn: sqlite3.Connection, run_id: str, cell: CellRecord) -> int:
        platform = _dumps(dict(cell.platform), f"platform of cell {cell.name!r}")
        workload = _dumps(dict(cell.workload), f"workload of cell {cell.name!r}")
        found = self._read(
            "SELECT id, platform_json, workload_json FROM cells WHERE run_id=? AND name=?",
            (run_id, cell.name),
        )
        if found:
            row = found[0]
            if (row["platform_json"], row["workload_json"]) != (platform, workload):
                raise StoreError(
                    f"cell {cell.name!r} of run {run_id} in {self.path} was stored with a "
                    "different platform or workload: the study changed since the run "
                    "started; start a new run instead of resuming"
                )
            return int(row["id"])
        ident = cell.identity or identity_of(cell.platform_name, cell.platform, cell.workload)
        cursor = conn.execute(
            "INSERT INTO cells (run_id, name, platform_name, platform_json, workload_name,"
            " workload_json, base_platform, scenario, platform_kind, workload_kind, method,"
            " image_size, file_size, neighbour_roles_json)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (run_id, cell.name, cell.platform_name, platform, cell.workload_name, workload,
             ident.base_platform, ident.scenario, ident.platform_kind, ident.workload_kind,
             ident.method, ident.image_size, ident.file_size,
             json.dumps(list(ident.neighbour_roles))),
        )
        return _rowid(cursor)

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
                raise StoreError(f"run {run_id} in {self.path} has no cells {unknown}")
            ids_json = json.dumps([by_name[n] for n in cell_names])
            found = self._read(
                "SELECT cell_ids_json FROM run_order WHERE run_id=? AND repetition=?",
                (run_id, repetition),
            )
            if found and found[0]["cell_ids_json"] != ids_json:
                raise StoreError(
                    f"run {run_id} in {self.path} already ran repetition {repetition} in "
                    "another cell order; resume must use the recorded order (see order())"
                )
            if not found:
                conn.execute(
                    "INSERT INTO run_order (run_id, repetition, cell_ids_json) VALUES (?,?,?)",
                    (run_id, repetition, ids_json),
                )

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
                part of the run; an invalid status; a measurement that is NaN or repeats
                a (phase, metric); sample values that are not JSON-serializable. Nothing
                is stored then.
        """
        if status not in REPETITION_STATUSES:
            raise StoreError(f"repetition status must be one of {REPETITION_STATUSES}")
        argv_json = None if qemu_argv is None else json.dumps(list(qemu_argv))
        what = f"recording repetition {repetition} of cell {cell_id} (run {run_id})"
        with self._transaction(what) as conn:
            self._check_cell(run_id, cell_id)
            self._drop_failed(conn, cell_id, repetition)
            cursor = conn.execute(
                "INSERT INTO repetitions (run_id, cell_id, repetition, position, status, error,"
                " console_log, qemu_argv_json, accel, started_at, finished_at)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (run_id, cell_id, repetition, position, status, error, console_log,
                 argv_json, accel, started_at, finished_at),
            )
            self._insert_results(conn, _rowid(cursor), measurements, samples, raw)
            return _rowid(cursor)

    def _check_cell(self, run_id: str, cell_id: int) -> None:
        if not self._read("SELECT 1 FROM cells WHERE id=? AND run_id=?", (cell_id, run_id)):
            raise StoreError(f"cell id {cell_id} is not part of run {run_id} in {self.path}")

    def _drop_failed(self, conn: sqlite3.Connection, cell_id: int, repetition: int) -> None:
        found = self._read(
            "SELECT id, status FROM repetitions WHERE cell_id=? AND repetition=?",
            (cell_id, repetition),
        )
        if not found:
            return
        if found[0]["status"] == "ok":
            raise StoreError(
                f"repetition {repetition} of cell {cell_id} is already recorded as ok in "
                f"{self.path}; refusing to store a duplicate"
            )
        # ON DELETE CASCADE removes the failed attempt's measurements, samples and raw output
        conn.execute("DELETE FROM repetitions WHERE id = ?", (found[0]["id"],))

    @staticmethod
    def _insert_results(
        conn: sqlite3.Connection,
        rep_id: int,
        measurements: Sequence[MeasurementRecord],
        samples: Sequence[SampleRecord],
        raw: Sequence[RawRecord],
    ) -> None:
        conn.executemany(
            "INSERT INTO measurements (repetition_id, phase, metric, value, unit)"
            " VALUES (?,?,?,?,?)",
            [(rep_id, m.phase, m.metric, m.value, m.unit) for m in measurements],
        )
        conn.executemany(
            "INSERT INTO samples (repetition_id, phase, monitor, t, values_json)"
            " VALUES (?,?,?,?,?)",
            [(rep_id, s.phase, s.monitor, s.t,
              _dumps(dict(s.values), f"sample of {s.monitor} at t={s.t}")) for s in samples],
        )
        conn.executemany(
            "INSERT INTO raw_outputs (repetition_id, phase, kind, content) VALUES (?,?,?,?)",
            [(rep_id, r.phase, r.kind, r.content) for r in raw],
        )

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
            cursor = conn.execute(
                "UPDATE runs SET status=?, finished_at=COALESCE(?, finished_at) WHERE id=?",
                (status, finished_at, run_id),
            )
            if cursor.rowcount == 0:
                raise self._no_run(run_id)

    # -- reads ----------------------------------------------------------------------------

    def done(self, run_id: str) -> set[tuple[int, int]]:
        """The (cell id, repetition) pairs recorded as ok: what a resumed run skips."""
        rows = self._read(
            "SELECT cell_id, repetition FROM repetitions WHERE run_id=? AND status='ok'",
            (run_id,),
        )
        return {(int(r["cell_id"]), int(r["repetition"])) for r in rows}

    def get_run(self, run_id: str) -> RunRecord:
        """The run ``run_id``.

        Raises:
            StoreError: no such run (the message lists the newest runs the file holds).
        """
        rows = self._read(f"SELECT {_RUN_COLUMNS} FROM runs WHERE id = ?", (run_id,))  # noqa: S608 (constant column list)
        if not rows:
            raise self._no_run(run_id)
        return _run_record(rows[0])

    def run_ids(self, *, prefix: str = "") -> list[str]:
        """The ids of the runs whose id starts with ``prefix`` (all by default), oldest
        first."""
        rows = self._read("SELECT id FROM runs WHERE substr(id, 1, ?) = ? "
                          "ORDER BY created_at, id", (len(prefix), prefix))
        return [str(r["id"]) for r in rows]

    def latest_run(self) -> RunRecord | None:
        """The most recently created run, or None for an empty database."""
        rows = self._read(
            f"SELECT {_RUN_COLUMNS} FROM runs ORDER BY created_at DESC, id DESC LIMIT 1"  # noqa: S608 (constant column list)
        )
        return _run_record(rows[0]) if rows else None

    def list_runs(self) -> list[RunSummary]:
        """Every run, oldest first, with cell and repetition counts.

        ``accelerator`` is the env's ``accelerator`` (or ``accel``) entry; without one,
        the distinct accelerators its repetitions recorded, comma-separated.
        """
        rows = self._read(
            "SELECT r.id, r.study_name, r.created_at, r.status, r.env_json,"
            " (SELECT COUNT(*) FROM cells c WHERE c.run_id = r.id) AS n_cells,"
            " (SELECT COUNT(*) FROM repetitions p WHERE p.run_id = r.id AND p.status = 'ok')"
            "   AS n_ok,"
            " (SELECT COUNT(*) FROM repetitions p WHERE p.run_id = r.id"
            "   AND p.status = 'failed') AS n_failed,"
            " (SELECT group_concat(DISTINCT p.accel) FROM repetitions p"
            "   WHERE p.run_id = r.id) AS accels"
            " FROM runs r ORDER BY r.created_at, r.id"
        )
        return [_run_summary(row) for row in rows]

    def cells(self, run_id: str) -> list[CellRow]:
        """The cells of a run in the order they were added."""
        rows = self._read(
            "SELECT id, name, platform_name, platform_json, workload_name, workload_json,"
            " base_platform, scenario, platform_kind, workload_kind, method, image_size,"
            " file_size, neighbour_roles_json FROM cells WHERE run_id = ? ORDER BY id",
            (run_id,),
        )
        return [
            CellRow(id=int(r["id"]), name=r["name"], platform_name=r["platform_name"],
                    platform=json.loads(r["platform_json"]), workload_name=r["workload_name"],
                    workload=json.loads(r["workload_json"]), identity=_identity(r))
            for r in rows
        ]

    def order(self, run_id: str) -> dict[int, list[str]]:
        """The recorded cell order of each repetition: repetition -> cell names."""
        names = {c.id: c.name for c in self.cells(run_id)}
        rows = self._read(
            "SELECT repetition, cell_ids_json FROM run_order WHERE run_id=? ORDER BY repetition",
            (run_id,),
        )
        return {
            int(r["repetition"]): [names[i] for i in json.loads(r["cell_ids_json"])]
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
        rows = self._read(
            "SELECT c.id AS cell_id, c.name AS cell, c.platform_name, c.workload_name,"
            " p.repetition, p.position, m.phase, m.metric, m.value, m.unit,"
            " c.base_platform, c.scenario, c.method, c.image_size"
            " FROM measurements m JOIN repetitions p ON m.repetition_id = p.id"
            " JOIN cells c ON p.cell_id = c.id"
            " WHERE p.run_id = ? AND (p.status = 'ok' OR ?)"
            " ORDER BY c.id, p.repetition, m.phase, m.metric",
            (run_id, include_failed),
        )
        return [
            MeasurementRow(cell_id=int(r["cell_id"]), cell=r["cell"],
                           platform=r["platform_name"], workload=r["workload_name"],
                           repetition=int(r["repetition"]), position=int(r["position"]),
                           phase=r["phase"], metric=r["metric"], value=float(r["value"]),
                           unit=r["unit"], base_platform=r["base_platform"],
                           scenario=r["scenario"], method=r["method"],
                           image_size=None if r["image_size"] is None
                           else float(r["image_size"]))
            for r in rows
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
        # "? IS NULL OR col = ?" keeps the SQL constant whatever filters are given
        rows = self._read(
            "SELECT c.name AS cell, p.repetition, s.phase, s.monitor, s.t, s.values_json"
            " FROM samples s JOIN repetitions p ON s.repetition_id = p.id"
            " JOIN cells c ON p.cell_id = c.id"
            " WHERE p.run_id = ? AND (? IS NULL OR c.name = ?)"
            " AND (? IS NULL OR p.repetition = ?) AND (? IS NULL OR s.phase = ?)"
            " AND (? IS NULL OR s.monitor = ?)"
            " ORDER BY c.id, p.repetition, s.phase, s.monitor, s.t, s.id",
            (run_id, cell, cell, repetition, repetition, phase, phase, monitor, monitor),
        )
        return [
            SampleRow(cell=r["cell"], repetition=int(r["repetition"]), phase=r["phase"],
                      monitor=r["monitor"], t=float(r["t"]), values=json.loads(r["values_json"]))
            for r in rows
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
        rows = self._read(
            "SELECT c.name AS cell, p.repetition, o.phase, o.kind, o.content"
            " FROM raw_outputs o JOIN repetitions p ON o.repetition_id = p.id"
            " JOIN cells c ON p.cell_id = c.id"
            " WHERE p.run_id = ? AND (? IS NULL OR c.name = ?)"
            " AND (? IS NULL OR p.repetition = ?) AND (? IS NULL OR o.kind = ?)"
            " ORDER BY c.id, p.repetition, o.id",
            (run_id, cell, cell, repetition, repetition, kind, kind),
        )
        return [
            RawRow(cell=r["cell"], repetition=int(r["repetition"]), phase=r["phase"],
                   kind=r["kind"], content=r["content"])
            for r in rows
        ]

    def failures(self, run_id: str) -> list[FailureRow]:
        """Repetitions of a run whose latest attempt failed.

        Raises:
            StoreError: no such run.
        """
        self._require_run(run_id)
        rows = self._read(
            "SELECT c.name AS cell, p.repetition, p.error, p.console_log, p.qemu_argv_json,"
            " p.accel, p.finished_at FROM repetitions p JOIN cells c ON p.cell_id = c.id"
            " WHERE p.run_id = ? AND p.status = 'failed' ORDER BY p.repetition, p.position",
            (run_id,),
        )
        return [
            FailureRow(cell=r["cell"], repetition=int(r["repetition"]), error=r["error"],
                       console_log=r["console_log"],
                       qemu_argv=None if r["qemu_argv_json"] is None
                       else json.loads(r["qemu_argv_json"]),
                       accel=r["accel"], finished_at=r["finished_at"])
            for r in rows
        ]

    def sample_monitors(self, run_id: str) -> list[str]:
        """The distinct monitor names of a run's samples (ok repetitions), sorted; lets a
        report load only the series it draws.

        Raises:
            StoreError: no such run.
        """
        self._require_run(run_id)
        rows = self._read(
            "SELECT DISTINCT s.monitor FROM samples s JOIN repetitions p"
            " ON s.repetition_id = p.id WHERE p.run_id = ? AND p.status = 'ok'"
            " ORDER BY s.monitor",
            (run_id,),
        )
        return [str(r["monitor"]) for r in rows]

    def run_seconds(self, run_id: str) -> float:
        """Seconds a run has spent measuring so far: every stored repetition's
        ``started_at`` to ``finished_at`` plus the guest boots stored with it (phase
        ``boot``). What a resumed tuning run has already spent of its time budget.

        Raises:
            StoreError: no such run.
        """
        self._require_run(run_id)
        total = 0.0
        for row in self._read("SELECT started_at, finished_at FROM repetitions "
                              "WHERE run_id = ?", (run_id,)):
            try:
                total += (datetime.fromisoformat(row["finished_at"])
                          - datetime.fromisoformat(row["started_at"])).total_seconds()
            except ValueError:  # a timestamp not written by this store: skipped
                continue
        boots = self._read(
            "SELECT COALESCE(SUM(m.value), 0) AS s FROM measurements m JOIN repetitions p"
            " ON m.repetition_id = p.id WHERE p.run_id = ? AND m.phase = 'boot'"
            " AND m.metric = 'boot_s'", (run_id,))
        return total + float(boots[0]["s"])

    def cell_durations(self, cells: Sequence[CellRecord]) -> dict[str, list[float]]:
        """Per cell name, the seconds (``started_at`` to ``finished_at``) of every ok
        repetition, in any run, of a stored cell with the same platform and workload
        definition; cells never run before are left out. Read-only (plans estimate a
        run's duration from it).

        Raises:
            StoreError: a definition cannot be encoded as JSON.
        """
        out: dict[str, list[float]] = {}
        for cell in cells:
            rows = self._read(
                "SELECT p.started_at, p.finished_at FROM repetitions p JOIN cells c"
                " ON p.cell_id = c.id WHERE c.platform_json = ? AND c.workload_json = ?"
                " AND p.status = 'ok'",
                (_dumps(dict(cell.platform), f"platform of cell {cell.name!r}"),
                 _dumps(dict(cell.workload), f"workload of cell {cell.name!r}")),
            )
            for row in rows:
                try:
                    took = (datetime.fromisoformat(row["finished_at"])
                            - datetime.fromisoformat(row["started_at"])).total_seconds()
                except ValueError:  # a timestamp not written by this store: skipped
                    continue
                out.setdefault(cell.name, []).append(took)
        return out


def _rowid(cursor: sqlite3.Cursor) -> int:
    if cursor.lastrowid is None:  # cannot happen after an INSERT; keeps the type exact
        raise StoreError("SQLite returned no row id for an INSERT")
    return cursor.lastrowid


def _identity(row: sqlite3.Row) -> CellIdentity:
    return CellIdentity(
        base_platform=row["base_platform"], platform_kind=row["platform_kind"],
        workload_kind=row["workload_kind"], scenario=row["scenario"], method=row["method"],
        image_size=row["image_size"], file_size=row["file_size"],
        neighbour_roles=tuple(json.loads(row["neighbour_roles_json"])))


def _run_record(row: sqlite3.Row) -> RunRecord:
    return RunRecord(
        id=row["id"], study_name=row["study_name"], study_path=row["study_path"],
        study_text=row["study_text"], seed=int(row["seed"]), created_at=row["created_at"],
        finished_at=row["finished_at"], status=cast(RunStatus, row["status"]),
        hvbench_version=row["hvbench_version"], git_commit=row["git_commit"],
        env=json.loads(row["env_json"]),
    )


def _run_summary(row: sqlite3.Row) -> RunSummary:
    env = json.loads(row["env_json"])
    accel = env.get("accelerator") or env.get("accel") if isinstance(env, dict) else None
    if accel is None and row["accels"]:
        accel = ",".join(sorted(str(row["accels"]).split(",")))
    return RunSummary(
        id=row["id"], study_name=row["study_name"], created_at=row["created_at"],
        status=cast(RunStatus, row["status"]), n_cells=int(row["n_cells"]),
        n_ok=int(row["n_ok"]), n_failed=int(row["n_failed"]),
        accelerator=None if accel is None else str(accel),
    )
