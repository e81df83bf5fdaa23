"""Fixtures every test layer shares: a private PostgreSQL server (started once per
session by the first test that asks for it, stopped and removed at the end) and a fresh
database on it per test. And the suite's time budget (tests/budget.toml): a full run
that exceeds it by more than its tolerance fails, listing the slowest tests."""

from __future__ import annotations

import itertools
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

from hvbench.store.pgserver import PostgresServer
from tests.budget import is_full_run, load_budget, over_budget_lines

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


class BudgetGuard:
    """Times the session and each test (setup + call + teardown); at the end of a full
    run (:func:`tests.budget.is_full_run`) over its budget, fails the session and
    prints why with the slowest tests."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.durations: dict[str, float] = defaultdict(float)
        self.deselected = 0
        self.files: set[Path] = set()
        self.failure: list[str] = []

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        self.files = {Path(item.path) for item in items}

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        self.deselected += len(items)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.durations[report.nodeid] += report.duration

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if exitstatus == pytest.ExitCode.INTERRUPTED:
            return
        option = session.config.option
        if not is_full_run(self.files, self.deselected, option.keyword, option.markexpr):
            return
        self.failure = over_budget_lines(time.monotonic() - self.started, load_budget(),
                                         self.durations)
        if self.failure:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.failure:
            terminalreporter.section("time budget", sep="=", red=True, bold=True)
            for line in self.failure:
                terminalreporter.write_line(line)


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(BudgetGuard(), "hvbench-budget-guard")
