"""Fixtures every test layer shares: a private PostgreSQL server (started once per
session by the first test that asks for it, stopped and removed at the end) and a fresh
database on it per test."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from hvbench.store.pgserver import PostgresServer

_names = itertools.count()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """Debian's PostgreSQL, initdb in a temporary directory, on a private unix socket;
    fsync off (nothing measured against it)."""
    with PostgresServer(durable=False) as server:
        yield server


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """The URL of a new, empty database on the session's private server."""
    return postgres_server.create_database(f"test_{next(_names)}")
