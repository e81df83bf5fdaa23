"""Schema migrations of the results database, one function per schema version, the same
for SQLite and PostgreSQL.

``MIGRATIONS[i]`` takes a database from version ``i`` to ``i + 1``. Each runs inside the
caller's transaction (DDL is transactional in SQLite and in PostgreSQL), so a crash
mid-migration leaves the previous version intact. The DDL comes from the one schema
definition (:mod:`hvbench.store.schema`): a version creates the tables and adds the
columns and indexes whose ``since`` is that version, compiled for the connection's
engine. Never change what a released version added: append a new version.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from sqlalchemy import Connection, select, update
from sqlalchemy.schema import CreateColumn

from hvbench.store.records import identity_of
from hvbench.store.schema import build, since


def add_version(conn: Connection, version: int) -> None:
    """Create what schema ``version`` added: its new tables (with their indexes), then
    its new columns and indexes of the existing tables."""
    md = build(version)
    dialect = conn.dialect
    for table in md.sorted_tables:
        if since(table) == version:
            table.create(conn)
            continue
        for column in table.columns:
            if since(column) == version:
                ddl = CreateColumn(column).compile(dialect=dialect)
                conn.exec_driver_sql(f"ALTER TABLE {table.name} ADD COLUMN {ddl}")
        for index in table.indexes:
            if since(index) == version:
                index.create(conn)


def migrate_to_1(conn: Connection) -> None:
    """Create the initial schema (runs, cells, repetitions and their results)."""
    add_version(conn, 1)


def migrate_to_2(conn: Connection) -> None:
    """Add the cells' identity columns and fill them from the stored platform and
    workload definitions (structured JSON), so a version 1 database reports as before
    without any report parsing a name."""
    add_version(conn, 2)
    cells = build(2).tables["cells"]
    rows = conn.execute(select(cells.c.id, cells.c.platform_name, cells.c.platform_json,
                               cells.c.workload_json)).all()
    for cell_id, platform_name, platform_json, workload_json in rows:
        found = identity_of(platform_name, json.loads(platform_json), json.loads(workload_json))
        conn.execute(update(cells).where(cells.c.id == cell_id).values(
            base_platform=found.base_platform, scenario=found.scenario,
            platform_kind=found.platform_kind, workload_kind=found.workload_kind,
            method=found.method, image_size=found.image_size, file_size=found.file_size,
            neighbour_roles_json=json.dumps(list(found.neighbour_roles))))


def migrate_to_3(conn: Connection) -> None:
    """Add a run's fleet id and host (a fleet is one run per host; NULL for a run of
    one machine) and the index that finds a fleet's runs."""
    add_version(conn, 3)


def migrate_to_4(conn: Connection) -> None:
    """Add the noise floors table (a host's A/A spread per cell definition and
    metric)."""
    add_version(conn, 4)


def migrate_to_5(conn: Connection) -> None:
    """Add the calibrations table (diagnosis thresholds measured on a host from the
    planted matrix)."""
    add_version(conn, 5)


Migration = Callable[[Connection], None]

#: ``MIGRATIONS[i]`` migrates from schema version ``i`` to ``i + 1``.
MIGRATIONS: list[Migration] = [migrate_to_1, migrate_to_2, migrate_to_3,
                               migrate_to_4, migrate_to_5]
