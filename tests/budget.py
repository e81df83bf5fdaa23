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
    """``full_s`` seconds per suite (``unit``, ``integration``) for a full run of it,
    exceeded by at most ``tolerance`` (a share); ``slowest``: how many tests the
    failure lists."""

    full_s: Mapping[str, float]
    tolerance: float
    slowest: int

    def seconds(self, suites: Iterable[str]) -> float:
        """The budget of a session that fully ran ``suites``: the sum of theirs."""
        return sum(self.full_s[suite] for suite in suites)

    def limit_s(self, suites: Iterable[str]) -> float:
        """The wall time above which a session that fully ran ``suites`` fails."""
        return self.seconds(suites) * (1.0 + self.tolerance)


def load_budget(path: Path = BUDGET_FILE) -> Budget:
    """The ``[suite]`` table of ``path``, with a ``full_s`` number per suite.

    Raises:
        OSError: the file cannot be read.
        KeyError, TypeError, ValueError, tomllib.TOMLDecodeError: it lacks a key or a
        number.
    """
    suite = tomllib.loads(path.read_text())["suite"]
    full = {name: float(suite["full_s"][name]) for name in SUITES}
    return Budget(full, float(suite["tolerance"]), int(suite["slowest"]))


def suite_files(tests: Path = TESTS, suites: Iterable[str] = SUITES) -> set[Path]:
    """Every test file of ``suites``."""
    return {p.resolve() for suite in suites for p in (tests / suite).rglob("test_*.py")}


def full_suites(collected: Iterable[Path], partial: bool,
                tests: Path = TESTS) -> tuple[str, ...]:
    """The suites the session ran whole: a test of every file of the suite was
    collected, and nothing was filtered (``partial``: deselected tests, ``-k``, ``-m``,
    ``--lf``). A session that runs only a part of a suite is never checked."""
    if partial:
        return ()
    seen = {p.resolve() for p in collected}
    return tuple(suite for suite in SUITES
                 if (files := suite_files(tests, (suite,))) and files <= seen)


def slowest(durations: Mapping[str, float], count: int) -> list[tuple[str, float]]:
    """The ``count`` tests of ``durations`` (node id -> seconds) that took longest."""
    return sorted(durations.items(), key=lambda item: (-item[1], item[0]))[:count]


def over_budget_lines(wall_s: float, budget: Budget, suites: tuple[str, ...],
                      durations: Mapping[str, float],
                      source: Path = BUDGET_FILE) -> list[str]:
    """The failure's text when ``wall_s`` of a session that fully ran ``suites``
    exceeds :meth:`Budget.limit_s`, else [] (``source``: the budget's file, named in
    it)."""
    limit = budget.limit_s(suites)
    if not suites or wall_s <= limit:
        return []
    lines = [f"test suite over budget: {wall_s:.0f} s wall for {' + '.join(suites)}, "
             f"budget {budget.seconds(suites):.0f} s + {100 * budget.tolerance:.0f} % = "
             f"{limit:.0f} s ({source}); the {budget.slowest} slowest tests "
             f"(setup + call + teardown):"]
    lines += [f"  {seconds:8.1f} s  {node}" for node, seconds in slowest(durations,
                                                                          budget.slowest)]
    return lines


class BudgetGuard:
    """Times the session and each test (setup + call + teardown); at the end of a
    session that ran whole suites (:func:`tests.budget.full_suites`) over their budget,
    fails the session and prints why with the slowest tests.

    Registered in the session that reports (pytest-xdist's controller, not its
    workers): the controller learns what its workers collected from
    ``pytest_xdist_node_collection_finished`` and receives every test's report."""

    def __init__(self, tests: Path = TESTS, budget_file: Path = BUDGET_FILE) -> None:
        self.tests, self.budget_file = tests, budget_file
        self.started = time.monotonic()
        self.durations: dict[str, float] = defaultdict(float)
        self.deselected = 0
        self.files: set[Path] = set()
        self.failure: list[str] = []
        self.root = Path.cwd()

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.root = Path(session.config.rootpath)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        self.files = {Path(item.path) for item in items}

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: object, ids: list[str]) -> None:
        # node ids are relative to the rootdir; every worker collects the same items
        self.files |= {self.root / nodeid.split("::", 1)[0] for nodeid in ids}

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        self.deselected += len(items)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.durations[report.nodeid] += report.duration

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if exitstatus == pytest.ExitCode.INTERRUPTED:
            return
        option = session.config.option
        # xdist's workers deselect (--deselect, --lf) where the controller cannot see
        # it: the options themselves make the session partial.
        partial = bool(self.deselected or option.keyword or option.markexpr
                       or getattr(option, "deselect", None) or getattr(option, "lf", False))
        suites = full_suites(self.files, partial, self.tests)
        self.failure = over_budget_lines(time.monotonic() - self.started,
                                         load_budget(self.budget_file), suites,
                                         self.durations, self.budget_file)
        if self.failure:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.failure:
            terminalreporter.section("time budget", sep="=", red=True, bold=True)
            for line in self.failure:
                terminalreporter.write_line(line)


def register(config: pytest.Config, tests: Path = TESTS,
             budget_file: Path = BUDGET_FILE) -> None:
    """Registers a :class:`BudgetGuard` in the session that reports: pytest-xdist's
    controller, which gets every worker's reports, and never in a worker (it runs a
    share of the tests)."""
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(BudgetGuard(tests, budget_file),
                                      "hvbench-budget-guard")
