"""The results database's schema, defined once for every engine (SQLAlchemy Core).

Each table and each column says in ``info["since"]`` the schema version that added it:
:mod:`hvbench.store.migrations` creates a version's new tables and adds its new columns
from these definitions, so SQLite and PostgreSQL get the same schema through the same
history, and the queries of :mod:`hvbench.store.database` use the same objects.

Types are chosen for both engines: ids are ``INTEGER`` on SQLite (a rowid alias) and
``BIGINT`` on PostgreSQL; every text column is ``TEXT``, with the binary ``"C"``
collation on PostgreSQL so that ``ORDER BY`` sorts as SQLite does (byte order, whatever
the server's locale); floats are double precision on both.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Column,
    Double,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.types import TypeEngine

#: The schema version this hvbench writes (SQLite ``PRAGMA user_version``, PostgreSQL
#: the ``hvbench_schema`` table).
SCHEMA_VERSION = 5

ID: TypeEngine[int] = BigInteger().with_variant(Integer(), "sqlite")
TEXT: TypeEngine[str] = Text().with_variant(Text(collation="C"), "postgresql")
BIG: TypeEngine[int] = BigInteger()


def _since(version: int) -> dict[str, Any]:
    return {"since": version}


def build(version: int = SCHEMA_VERSION) -> MetaData:
    """The tables, columns and indexes of schema ``version`` (the current one by
    default); each item's ``info["since"]`` names the version that added it."""
    md = MetaData()

    def col(name: str, type_: TypeEngine[Any], *args: Any, since: int = 1,
            **kwargs: Any) -> list[Column[Any]]:
        return [Column(name, type_, *args, info=_since(since), **kwargs)] \
            if since <= version else []

    def index(name: str, *columns: str, since: int = 1) -> list[Index]:
        return [Index(name, *columns, info=_since(since))] if since <= version else []

    Table(
        "runs", md,
        *col("id", TEXT, primary_key=True),
        *col("study_name", TEXT, nullable=False),
        *col("study_path", TEXT, nullable=False),
        *col("study_text", TEXT, nullable=False),
        *col("seed", BIG, nullable=False),
        *col("created_at", TEXT, nullable=False),
        *col("finished_at", TEXT),
        *col("status", TEXT, nullable=False),
        *col("hvbench_version", TEXT, nullable=False),
        *col("git_commit", TEXT),
        *col("env_json", TEXT, nullable=False),
        # Version 3: a fleet run is one run per host, grouped by fleet id (docs/fleet.md).
        *col("fleet_id", TEXT, since=3),
        *col("host", TEXT, since=3),
        CheckConstraint("status IN ('running', 'complete', 'interrupted', 'failed')",
                        name="runs_status"),
        info=_since(1),
    )

    Table(
        "cells", md,
        *col("id", ID, primary_key=True, autoincrement=True),
        *col("run_id", TEXT, ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        *col("name", TEXT, nullable=False),
        *col("platform_name", TEXT, nullable=False),
        *col("platform_json", TEXT, nullable=False),
        *col("workload_name", TEXT, nullable=False),
        *col("workload_json", TEXT, nullable=False),
        # Version 2: a cell's identity as columns (see ``records.CellIdentity``).
        *col("base_platform", TEXT, nullable=False, server_default="", since=2),
        *col("scenario", TEXT, since=2),
        *col("platform_kind", TEXT, nullable=False, server_default="", since=2),
        *col("workload_kind", TEXT, nullable=False, server_default="", since=2),
        *col("method", TEXT, since=2),
        *col("image_size", BIG, since=2),
        *col("file_size", BIG, since=2),
        *col("neighbour_roles_json", TEXT, nullable=False, server_default="[]", since=2),
        UniqueConstraint("run_id", "name", name="cells_run_name"),
        info=_since(1),
    )

    # run_id is redundant with cells.run_id; it is kept so per-run queries (done(), counts)
    # need no join. UNIQUE(cell_id, repetition) is what makes duplicates impossible.
    Table(
        "repetitions", md,
        *col("id", ID, primary_key=True, autoincrement=True),
        *col("run_id", TEXT, ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        *col("cell_id", ID, ForeignKey("cells.id", ondelete="CASCADE"), nullable=False),
        *col("repetition", Integer(), nullable=False),
        *col("position", Integer(), nullable=False),
        *col("status", TEXT, nullable=False),
        *col("error", TEXT),
        *col("console_log", TEXT),
        *col("qemu_argv_json", TEXT),
        *col("accel", TEXT),
        *col("started_at", TEXT, nullable=False),
        *col("finished_at", TEXT, nullable=False),
        CheckConstraint("status IN ('ok', 'failed')", name="repetitions_status"),
        UniqueConstraint("cell_id", "repetition", name="repetitions_cell_repetition"),
        *index("repetitions_run", "run_id", "status"),
        info=_since(1),
    )

    Table(
        "measurements", md,
        *col("id", ID, primary_key=True, autoincrement=True),
        *col("repetition_id", ID, ForeignKey("repetitions.id", ondelete="CASCADE"),
             nullable=False),
        *col("phase", TEXT, nullable=False),
        *col("metric", TEXT, nullable=False),
        *col("value", Double(), nullable=False),
        *col("unit", TEXT, nullable=False),
        UniqueConstraint("repetition_id", "phase", "metric", name="measurements_metric"),
        info=_since(1),
    )

    Table(
        "samples", md,
        *col("id", ID, primary_key=True, autoincrement=True),
        *col("repetition_id", ID, ForeignKey("repetitions.id", ondelete="CASCADE"),
             nullable=False),
        *col("phase", TEXT, nullable=False),
        *col("monitor", TEXT, nullable=False),
        *col("t", Double(), nullable=False),
        *col("values_json", TEXT, nullable=False),
        *index("samples_repetition", "repetition_id", "phase", "monitor", "t"),
        info=_since(1),
    )

    Table(
        "raw_outputs", md,
        *col("id", ID, primary_key=True, autoincrement=True),
        *col("repetition_id", ID, ForeignKey("repetitions.id", ondelete="CASCADE"),
             nullable=False),
        *col("phase", TEXT, nullable=False),
        *col("kind", TEXT, nullable=False),
        *col("content", TEXT, nullable=False),
        *index("raw_outputs_repetition", "repetition_id"),
        info=_since(1),
    )

    Table(
        "run_order", md,
        *col("run_id", TEXT, ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        *col("repetition", Integer(), nullable=False),
        *col("cell_ids_json", TEXT, nullable=False),
        PrimaryKeyConstraint("run_id", "repetition"),
        info=_since(1),
    )
    if version >= 3:
        # Version 3: runs of one fleet are found by their fleet id.
        Index("runs_fleet", md.tables["runs"].c.fleet_id, info=_since(3))
    if version >= 4:
        # Version 4: a host's noise floor per cell definition and metric, measured from
        # the A/A pairs of a run (``hvbench noise``; analysis/noise.py).
        Table(
            "noise_floors", md,
            *col("id", ID, primary_key=True, autoincrement=True, since=4),
            *col("run_id", TEXT, ForeignKey("runs.id", ondelete="CASCADE"), nullable=False,
                 since=4),
            *col("host", TEXT, nullable=False, since=4),
            # records.definition_key of the cell's platform and workload: what the floor
            # applies to, whatever the cell is named in another study.
            *col("definition", TEXT, nullable=False, since=4),
            *col("cell", TEXT, nullable=False, since=4),
            *col("phase", TEXT, nullable=False, since=4),
            *col("metric", TEXT, nullable=False, since=4),
            *col("pairs", Integer(), nullable=False, since=4),
            *col("mean", Double(), nullable=False, since=4),
            *col("sd_pct", Double(), nullable=False, since=4),
            *col("created_at", TEXT, nullable=False, since=4),
            UniqueConstraint("run_id", "cell", "phase", "metric", name="noise_floors_key"),
            *index("noise_floors_host", "host", "definition", since=4),
            info=_since(4),
        )
    if version >= 5:
        # Version 5: diagnosis thresholds calibrated on a host from the planted matrix
        # (``hvbench calibrate``; analysis/calibration.py). One row per threshold and
        # calibration; the newest calibration of a host is the one the rules read.
        Table(
            "calibrations", md,
            *col("id", ID, primary_key=True, autoincrement=True, since=5),
            *col("calibration", TEXT, nullable=False, since=5),
            *col("host", TEXT, nullable=False, since=5),
            *col("name", TEXT, nullable=False, since=5),
            *col("rule", TEXT, nullable=False, since=5),
            *col("default_value", Double(), nullable=False, since=5),
            *col("value", Double(), nullable=False, since=5),
            *col("calibrated", Integer(), nullable=False, since=5),
            *col("positives", Integer(), nullable=False, since=5),
            *col("negatives", Integer(), nullable=False, since=5),
            *col("note", TEXT, nullable=False, since=5),
            # The runs of the planted studies it was computed from (a JSON list).
            *col("runs_json", TEXT, nullable=False, since=5),
            *col("created_at", TEXT, nullable=False, since=5),
            UniqueConstraint("calibration", "name", name="calibrations_key"),
            *index("calibrations_host", "host", "created_at", since=5),
            info=_since(5),
        )
    return md


metadata = build()
runs = metadata.tables["runs"]
cells = metadata.tables["cells"]
repetitions = metadata.tables["repetitions"]
measurements = metadata.tables["measurements"]
samples = metadata.tables["samples"]
raw_outputs = metadata.tables["raw_outputs"]
run_order = metadata.tables["run_order"]
noise_floors = metadata.tables["noise_floors"]
calibrations = metadata.tables["calibrations"]

#: PostgreSQL keeps the schema version here (SQLite: ``PRAGMA user_version``).
schema_version = Table(
    "hvbench_schema", MetaData(),
    Column("version", Integer(), nullable=False),
)


def since(item: Table | Column[Any] | Index) -> int:
    """The schema version that added ``item``."""
    return int(item.info.get("since", 1))
