"""Schema migrations of the results database, one function per ``PRAGMA user_version``.

``MIGRATIONS[i]`` takes a database from version ``i`` to ``i + 1``. Each runs inside the
caller's transaction (DDL is transactional in SQLite), so a crash mid-migration leaves the
previous version intact. Never edit a released migration: append a new one.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

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


Migration = Callable[[sqlite3.Connection], None]

#: ``MIGRATIONS[i]`` migrates from user_version ``i`` to ``i + 1``.
MIGRATIONS: list[Migration] = [migrate_to_1]

#: The schema version this hvbench writes.
SCHEMA_VERSION = len(MIGRATIONS)
