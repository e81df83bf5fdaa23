"""Fixtures every test layer shares: a private PostgreSQL server (started once per
session by the first test that asks for it, stopped and removed at the end) and a fresh
database on it per test. And the suite's time budget (tests/budget.toml): a full run
that exceeds it by more than its tolerance fails, listing the slowest tests."""

from __future__ import annotations

import itertools
import signal
from collections.abc import Iterator

import pytest

from hvbench.kinds import install
from hvbench.store.pgserver import PostgresServer
from tests import budget

# As the CLI does at start-up: every workload kind registers itself into the core.
install()

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


def pytest_configure(config: pytest.Config) -> None:
    budget.register(config)
    # Tests run studies in this process: a SIGTERM (a CI job cancelled, a session
    # ended) must unwind them as Ctrl-C does, so their labs, guests and cgroups are
    # stopped; Python's default for SIGTERM ends the process with no cleanup at all.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
