"""Schema migrations of the results database, one function per ``PRAGMA user_version``.

``MIGRATIONS[i]`` takes a database from version ``i`` to ``i + 1``. Each runs inside the
caller's transaction (DDL is transactional in SQLite), so a crash mid-migration leaves the
previous version intact. Never edit a released migration: append a new one.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable

from hvbench.store.records import identity_of

_V1 = (
    """CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        study_name TEXT NOT NULL,
        study_path TEXT NOT NULL,
        study_text TEXT NOT NULL,
        seed INTEGER NOT NULL,
        created_at TEXT NOT NULL,
        finished_at TEXT,
        status TEXT NOT NULL
            CHECK (status IN ('running', 'complete', 'interrupted', 'failed')),
        hvbench_version TEXT NOT NULL,
        git_commit TEXT,
        env_json TEXT NOT NULL
    )""",
    """CREATE TABLE cells (
        id INTEGER PRIMARY KEY,
        run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        name TEXT NOT NULL,
        platform_name TEXT NOT NULL,
        platform_json TEXT NOT NULL,
        workload_name TEXT NOT NULL,
        workload_json TEXT NOT NULL,
        UNIQUE (run_id, name)
    )""",
    # run_id is redundant with cells.run_id; it is kept so per-run queries (done(), counts)
    # need no join. UNIQUE(cell_id, repetition) is what makes duplicates impossible.
    """CREATE TABLE repetitions (
        id INTEGER PRIMARY KEY,
        run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        cell_id INTEGER NOT NULL REFERENCES cells(id) ON DELETE CASCADE,
        repetition INTEGER NOT NULL,
        position INTEGER NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('ok', 'failed')),
        error TEXT,
        console_log TEXT,
        qemu_argv_json TEXT,
        accel TEXT,
        started_at TEXT NOT NULL,
        finished_at TEXT NOT NULL,
        UNIQUE (cell_id, repetition)
    )""",
    "CREATE INDEX repetitions_run ON repetitions(run_id, status)",
    # NOT NULL also rejects NaN: SQLite stores a bound NaN as NULL.
    """CREATE TABLE measurements (
        id INTEGER PRIMARY KEY,
        repetition_id INTEGER NOT NULL REFERENCES repetitions(id) ON DELETE CASCADE,
        phase TEXT NOT NULL,
        metric TEXT NOT NULL,
        value REAL NOT NULL,
        unit TEXT NOT NULL,
        UNIQUE (repetition_id, phase, metric)
    )""",
    """CREATE TABLE samples (
        id INTEGER PRIMARY KEY,
        repetition_id INTEGER NOT NULL REFERENCES repetitions(id) ON DELETE CASCADE,
        phase TEXT NOT NULL,
        monitor TEXT NOT NULL,
        t REAL NOT NULL,
        values_json TEXT NOT NULL
    )""",
    "CREATE INDEX samples_repetition ON samples(repetition_id, phase, monitor, t)",
    """CREATE TABLE raw_outputs (
        id INTEGER PRIMARY KEY,
        repetition_id INTEGER NOT NULL REFERENCES repetitions(id) ON DELETE CASCADE,
        phase TEXT NOT NULL,
        kind TEXT NOT NULL,
        content TEXT NOT NULL
    )""",
    "CREATE INDEX raw_outputs_repetition ON raw_outputs(repetition_id)",
    """CREATE TABLE run_order (
        run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        repetition INTEGER NOT NULL,
        cell_ids_json TEXT NOT NULL,
        PRIMARY KEY (run_id, repetition)
    )""",
)


def migrate_to_1(conn: sqlite3.Connection) -> None:
    """Create the initial schema (runs, cells, repetitions and their results)."""
    # one execute() per statement: executescript() would COMMIT the caller's transaction
    for statement in _V1:
        conn.execute(statement)


#: Version 2: a cell's identity as columns (see ``records.CellIdentity``).
_V2_COLUMNS = (
    "base_platform TEXT NOT NULL DEFAULT ''",
    "scenario TEXT",
    "platform_kind TEXT NOT NULL DEFAULT ''",
    "workload_kind TEXT NOT NULL DEFAULT ''",
    "method TEXT",
    "image_size INTEGER",
    "file_size INTEGER",
    "neighbour_roles_json TEXT NOT NULL DEFAULT '[]'",
)


def migrate_to_2(conn: sqlite3.Connection) -> None:
    """Add the cells' identity columns and fill them from the stored platform and
    workload definitions (structured JSON), so a version 1 database reports as before
    without any report parsing a name."""
    for column in _V2_COLUMNS:
        conn.execute(f"ALTER TABLE cells ADD COLUMN {column}")
    rows = conn.execute(
        "SELECT id, platform_name, platform_json, workload_json FROM cells").fetchall()
    for cell_id, platform_name, platform_json, workload_json in rows:
        found = identity_of(platform_name, json.loads(platform_json), json.loads(workload_json))
        conn.execute(
            "UPDATE cells SET base_platform=?, scenario=?, platform_kind=?, workload_kind=?,"
            " method=?, image_size=?, file_size=?, neighbour_roles_json=? WHERE id=?",
            (found.base_platform, found.scenario, found.platform_kind, found.workload_kind,
             found.method, found.image_size, found.file_size,
             json.dumps(list(found.neighbour_roles)), cell_id))


Migration = Callable[[sqlite3.Connection], None]

#: ``MIGRATIONS[i]`` migrates from user_version ``i`` to ``i + 1``.
MIGRATIONS: list[Migration] = [migrate_to_1, migrate_to_2]

#: The schema version this hvbench writes.
SCHEMA_VERSION = len(MIGRATIONS)
