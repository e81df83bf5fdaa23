"""The suite's time budget (tests/budget.toml) and the guard (:class:`BudgetGuard`, a
pytest plugin tests/conftest.py registers) that checks it at the end of a session. The
decisions are pure functions, checked by tests/unit/test_budget.py, which also runs the
guard in a throwaway suite."""

from __future__ import annotations

import time
import tomllib
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
BUDGET_FILE = TESTS / "budget.toml"
#: The suites a full run collects every file of.
SUITES = ("unit", "integration")


@dataclass(frozen=True)
class Budget:
    """``full_s`` seconds for a full run, exceeded by at most ``tolerance`` (a share);
    ``slowest``: how many tests the failure lists."""

    full_s: float
    tolerance: float
    slowest: int

    @property
    def limit_s(self) -> float:
        """The wall time above which a full run fails."""
        return self.full_s * (1.0 + self.tolerance)


def load_budget(path: Path = BUDGET_FILE) -> Budget:
    """The ``[suite]`` table of ``path``.

    Raises:
        OSError: the file cannot be read.
        KeyError, ValueError, tomllib.TOMLDecodeError: it lacks a key or a number.
    """
    suite = tomllib.loads(path.read_text())["suite"]
    return Budget(float(suite["full_s"]), float(suite["tolerance"]), int(suite["slowest"]))


def suite_files(tests: Path = TESTS) -> set[Path]:
    """Every test file of the suites a full run covers."""
    return {p.resolve() for suite in SUITES for p in (tests / suite).rglob("test_*.py")}


def is_full_run(collected: Iterable[Path], deselected: int, keyword: str, markexpr: str,
                tests: Path = TESTS) -> bool:
    """True when the session ran the whole suite: a test of every file of
    :func:`suite_files` was collected and nothing was deselected or filtered by ``-k``
    or ``-m``. (A session that runs only a part can take any time: never checked.)"""
    if deselected or keyword or markexpr:
        return False
    files = suite_files(tests)
    return bool(files) and files <= {p.resolve() for p in collected}


def slowest(durations: Mapping[str, float], count: int) -> list[tuple[str, float]]:
    """The ``count`` tests of ``durations`` (node id -> seconds) that took longest."""
    return sorted(durations.items(), key=lambda item: (-item[1], item[0]))[:count]


def over_budget_lines(wall_s: float, budget: Budget, durations: Mapping[str, float],
                      source: Path = BUDGET_FILE) -> list[str]:
    """The failure's text when ``wall_s`` exceeds :attr:`Budget.limit_s`, else []
    (``source``: the budget's file, named in it)."""
    if wall_s <= budget.limit_s:
        return []
    lines = [f"test suite over budget: {wall_s:.0f} s wall, budget {budget.full_s:.0f} s "
             f"+ {100 * budget.tolerance:.0f} % = {budget.limit_s:.0f} s ({source}); "
             f"the {budget.slowest} slowest tests (setup + call + teardown):"]
    lines += [f"  {seconds:8.1f} s  {node}" for node, seconds in slowest(durations,
                                                                          budget.slowest)]
    return lines


class BudgetGuard:
    """Times the session and each test (setup + call + teardown); at the end of a full
    run (:func:`tests.budget.is_full_run`) over its budget, fails the session and
    prints why with the slowest tests."""

    def __init__(self, tests: Path = TESTS, budget_file: Path = BUDGET_FILE) -> None:
        self.tests, self.budget_file = tests, budget_file
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
        if not is_full_run(self.files, self.deselected, option.keyword, option.markexpr,
                           self.tests):
            return
        self.failure = over_budget_lines(time.monotonic() - self.started,
                                         load_budget(self.budget_file), self.durations,
                                         self.budget_file)
        if self.failure:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.failure:
            terminalreporter.section("time budget", sep="=", red=True, bold=True)
            for line in self.failure:
                terminalreporter.write_line(line)
