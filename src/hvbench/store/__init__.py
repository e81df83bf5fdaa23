"""Persistent results: every run, cell, repetition and measurement, in one SQLite file
or a PostgreSQL database.

``hvbench.store.database`` owns all SQL, ``hvbench.store.schema`` the one schema
definition; the record types live in ``hvbench.store.records``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

#: Where each name below is defined. The package imports a module on the first use of
#: one of its names (:func:`__getattr__`): importing a record type must not import
#: SQLAlchemy (~0.15 s), which only the commands that open a store need.
_HOMES = {
    "Store": "database", "StoreError": "database", "new_run_id": "database",
    "utc_now": "database", "MIGRATIONS": "migrations", "SCHEMA_VERSION": "schema",
}

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


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(f"{__name__}.{_HOMES.get(name, 'records')}")
    return getattr(module, name)
