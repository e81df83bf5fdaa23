"""Persistent results: every run, cell, repetition and measurement, in one SQLite file
or a PostgreSQL database.

``hvbench.store.database`` owns all SQL, ``hvbench.store.schema`` the one schema
definition; the record types live in ``hvbench.store.records``.
"""

from hvbench.store.database import Store, StoreError, new_run_id, utc_now
from hvbench.store.migrations import MIGRATIONS
from hvbench.store.records import (
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
    cell_record,
)
from hvbench.store.schema import SCHEMA_VERSION

__all__ = [
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "CellIdentity",
    "CellRecord",
    "CellRow",
    "FailureRow",
    "MeasurementRecord",
    "MeasurementRow",
    "RawRecord",
    "RawRow",
    "RepetitionStatus",
    "RunRecord",
    "RunStatus",
    "RunSummary",
    "SampleRecord",
    "SampleRow",
    "Store",
    "StoreError",
    "cell_record",
    "new_run_id",
    "utc_now",
]
