"""Persistent results: every run, cell, repetition and measurement, in one SQLite file.

``hvbench.store.sqlite`` owns all SQL; the record types live in ``hvbench.store.records``.
"""

from hvbench.store.migrations import MIGRATIONS, SCHEMA_VERSION
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
from hvbench.store.sqlite import Store, StoreError, new_run_id, utc_now

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
