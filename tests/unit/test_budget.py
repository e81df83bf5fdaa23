"""The suite's time budget guard (tests/budget.py, registered by tests/conftest.py):
only a full run is checked, and one over its budget by more than the tolerance fails
with the slowest tests listed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.budget import (
    BUDGET_FILE,
    Budget,
    is_full_run,
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
    assert budget.full_s > 0 and budget.tolerance >= 0 and budget.slowest > 0
    assert budget.limit_s == budget.full_s * (1 + budget.tolerance)
    names = {p.name for p in suite_files()}
    assert {"test_budget.py", "test_fixture_runs.py", "test_cli.py"} <= names


def test_only_a_run_of_every_file_with_nothing_deselected_is_full(tmp_path: Path) -> None:
    files = _tree(tmp_path)
    assert is_full_run(files, 0, "", "", tmp_path)
    assert is_full_run([*files, tmp_path / "other.py"], 0, "", "", tmp_path)
    assert not is_full_run(files[:2], 0, "", "", tmp_path)       # unit only
    assert not is_full_run(files[2:], 0, "", "", tmp_path)       # one file
    assert not is_full_run(files, 3, "", "", tmp_path)           # --deselect, --lf
    assert not is_full_run(files, 0, "net", "", tmp_path)        # -k
    assert not is_full_run(files, 0, "", "integration", tmp_path)  # -m
    assert not is_full_run([], 0, "", "", tmp_path / "empty")


def test_over_budget_by_more_than_the_tolerance_fails_with_the_slowest_tests() -> None:
    budget = Budget(full_s=100.0, tolerance=0.25, slowest=2)
    durations = {"t::a": 1.0, "t::b": 30.0, "t::c": 20.0, "t::d": 30.0}
    assert over_budget_lines(124.9, budget, durations) == []
    assert over_budget_lines(125.0, budget, durations) == []
    lines = over_budget_lines(125.1, budget, durations)
    assert "125 s wall, budget 100 s + 25 % = 125 s" in lines[0]
    assert str(BUDGET_FILE) in lines[0]
    # the two slowest, ties by name
    assert [line.split()[-1] for line in lines[1:]] == ["t::b", "t::d"]
    assert slowest(durations, 3) == [("t::b", 30.0), ("t::d", 30.0), ("t::c", 20.0)]


def test_the_guard_fails_a_full_run_over_budget_and_spares_partial_runs(
        pytester: pytest.Pytester) -> None:
    """A throwaway suite (two files, 0.2 s) against a budget of 0.1 s (+ 25 %: 0.125 s):
    the full run fails and names the slowest test; one file, or -k, passes."""
    for suite in ("unit", "integration"):
        pytester.mkdir(suite)
        (pytester.path / suite / f"test_{suite}_slow.py").write_text(
            "import time\n\n\ndef test_slow():\n    time.sleep(0.1)\n")
    budget = pytester.path / "budget.toml"
    budget.write_text("[suite]\nfull_s = 0.1\ntolerance = 0.25\nslowest = 1\n")
    pytester.makeconftest(
        "from pathlib import Path\n\nfrom tests.budget import BudgetGuard\n\n\n"
        "def pytest_configure(config):\n"
        f"    config.pluginmanager.register(BudgetGuard(Path({str(pytester.path)!r}), "
        f"Path({str(budget)!r})), 'guard')\n")
    full = pytester.runpytest("unit", "integration")
    full.assert_outcomes(passed=2)
    assert full.ret == pytest.ExitCode.TESTS_FAILED
    full.stdout.fnmatch_lines([f"*test suite over budget*budget 0 s + 25 %*({budget})*",
                               "*s  *_slow.py::test_slow"])
    for partial in (["unit"], ["unit", "integration", "-k", "slow"],
                    ["unit", "integration", "--deselect", "unit/test_unit_slow.py::test_slow"]):
        done = pytester.runpytest(*partial)
        assert done.ret == pytest.ExitCode.OK, partial
        assert "over budget" not in done.stdout.str()
