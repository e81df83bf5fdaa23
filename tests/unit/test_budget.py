"""The suite's time budget guard (tests/budget.py, registered by tests/conftest.py):
only a session that ran whole suites is checked, and one over their budget by more than
the tolerance fails with the slowest tests listed, with or without pytest-xdist."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.budget import (
    BUDGET_FILE,
    Budget,
    full_suites,
    load_budget,
    over_budget_lines,
    slowest,
    suite_files,
)

pytest_plugins = ("pytester",)


def _tree(root: Path) -> list[Path]:
    files = [root / "unit" / "test_a.py", root / "unit" / "test_b.py",
             root / "integration" / "test_c.py"]
    for path in files:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
    (root / "unit" / "helper.py").write_text("")
    return files


def test_the_shipped_budget_loads_and_covers_both_suites() -> None:
    budget = load_budget(BUDGET_FILE)
    assert set(budget.full_s) == {"unit", "integration"}
    assert min(budget.full_s.values()) > 0 and budget.tolerance >= 0 and budget.slowest > 0
    both = budget.full_s["unit"] + budget.full_s["integration"]
    assert budget.limit_s(("unit", "integration")) == both * (1 + budget.tolerance)
    names = {p.name for p in suite_files()}
    assert {"test_budget.py", "test_fixture_runs.py", "test_cli.py"} <= names


def test_a_budget_without_a_suite_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "budget.toml"
    path.write_text("[suite]\ntolerance = 0.25\nslowest = 3\n[suite.full_s]\nunit = 9\n")
    with pytest.raises(KeyError, match="integration"):
        load_budget(path)


def test_only_a_suite_whose_every_file_ran_unfiltered_is_full(tmp_path: Path) -> None:
    files = _tree(tmp_path)
    assert full_suites(files, False, tmp_path) == ("unit", "integration")
    assert full_suites([*files, tmp_path / "other.py"], False, tmp_path) == (
        "unit", "integration")
    assert full_suites(files[:2], False, tmp_path) == ("unit",)
    assert full_suites(files[2:], False, tmp_path) == ("integration",)
    assert full_suites(files[1:], False, tmp_path) == ("integration",)  # one unit file
    assert full_suites(files, True, tmp_path) == ()       # -k, -m, --deselect, --lf
    assert full_suites([], False, tmp_path / "empty") == ()


def test_over_budget_by_more_than_the_tolerance_fails_with_the_slowest_tests() -> None:
    budget = Budget(full_s={"unit": 40.0, "integration": 60.0}, tolerance=0.25, slowest=2)
    both = ("unit", "integration")
    durations = {"t::a": 1.0, "t::b": 30.0, "t::c": 20.0, "t::d": 30.0}
    assert over_budget_lines(124.9, budget, both, durations) == []
    assert over_budget_lines(125.0, budget, both, durations) == []
    assert over_budget_lines(500.0, budget, (), durations) == []   # nothing whole
    lines = over_budget_lines(125.1, budget, both, durations)
    assert "125 s wall for unit + integration, budget 100 s + 25 % = 125 s" in lines[0]
    assert str(BUDGET_FILE) in lines[0]
    # the two slowest, ties by name
    assert [line.split()[-1] for line in lines[1:]] == ["t::b", "t::d"]
    assert slowest(durations, 3) == [("t::b", 30.0), ("t::d", 30.0), ("t::c", 20.0)]
    # the unit suite alone is held to its own share
    assert over_budget_lines(50.0, budget, ("unit",), durations) == []
    assert "50 s wall for unit, budget 40 s + 25 % = 50 s" in over_budget_lines(
        50.1, budget, ("unit",), durations)[0]


def _throwaway_suite(pytester: pytest.Pytester) -> Path:
    """Two suites: a unit test that sleeps 0.2 s against a unit budget of 0.05 s (+ 25 %:
    0.0625 s), an integration test that does not, against 30 s."""
    for suite, body in (("unit", "time.sleep(0.2)"), ("integration", "pass")):
        pytester.mkdir(suite)
        (pytester.path / suite / f"test_{suite}_one.py").write_text(
            f"import time\n\n\ndef test_one():\n    {body}\n")
    budget = pytester.path / "budget.toml"
    budget.write_text("[suite]\ntolerance = 0.25\nslowest = 1\n"
                      "[suite.full_s]\nunit = 0.05\nintegration = 30\n")
    pytester.makeconftest(
        "from pathlib import Path\n\nfrom tests import budget\n\n\n"
        "def pytest_configure(config):\n"
        f"    budget.register(config, Path({str(pytester.path)!r}), Path({str(budget)!r}))\n")
    return budget


def test_the_guard_fails_a_whole_suite_over_budget_and_spares_partial_runs(
        pytester: pytest.Pytester) -> None:
    """The whole unit suite over its budget fails and names the slowest test; with the
    integration suite its budget adds, and a part of a suite is never checked."""
    budget = _throwaway_suite(pytester)
    # in-process, without the plugins this suite has installed (xdist alone costs
    # about 0.5 s of imports a run); the xdist path is the next test's
    quiet = ("-p", "no:xdist", "-p", "no:hypothesispytest", "-p", "no:anyio")
    whole = pytester.runpytest("unit", *quiet)
    whole.assert_outcomes(passed=1)
    assert whole.ret == pytest.ExitCode.TESTS_FAILED
    whole.stdout.fnmatch_lines([f"*test suite over budget*for unit, budget 0 s + 25 %*"
                                f"({budget})*", "*s  unit/test_unit_one.py::test_one"])
    for spared in (["unit", "integration"], ["integration"], ["unit", "-k", "one"],
                   ["unit", "--deselect", "unit/test_unit_one.py::test_one"]):
        done = pytester.runpytest(*spared, *quiet)
        assert done.ret in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED), spared
        assert "over budget" not in done.stdout.str(), spared


def test_the_guard_checks_a_suite_run_by_xdist_workers_once(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """``-n 2`` (as `make test` runs the unit suite): the controller, which collected
    nothing itself, sees the workers' collection and fails the session; the workers
    never check (each ran a share)."""
    pytest.importorskip("xdist")
    _throwaway_suite(pytester)
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[2]))
    done = pytester.runpytest_subprocess("-n", "2", "unit")
    assert done.ret == pytest.ExitCode.TESTS_FAILED, done.stdout.str()
    assert done.stdout.str().count("test suite over budget") == 1
    done.stdout.fnmatch_lines(["*1 passed*"])
