"""Where a results database is, without SQL: the environment variable that names the
default one, and whether a target is a PostgreSQL URL or an SQLite file.

Apart from :mod:`hvbench.store.database` (which re-exports both) so that the CLI can
build its parser and pick a database without importing SQLAlchemy.
"""

from __future__ import annotations

import os

__all__ = ["DB_ENV", "POSTGRES_SCHEMES", "is_url"]

#: The environment variable that names the results database when ``--db`` is not given.
DB_ENV = "HVBENCH_DB"
#: The URL schemes of a PostgreSQL database; libpq takes ``postgres://`` as a synonym.
POSTGRES_SCHEMES = ("postgresql://", "postgres://", "postgresql+psycopg://")


def is_url(target: str | os.PathLike[str]) -> bool:
    """Whether ``target`` names a PostgreSQL database rather than an SQLite file
    (``postgresql://``, its libpq synonym ``postgres://``, or SQLAlchemy's
    ``postgresql+psycopg://``)."""
    return isinstance(target, str) and target.startswith(POSTGRES_SCHEMES)
