"""The fleet report's lead (analysis/fleet_verdict.py): each workload's main metric per
host with its % of that host's native, and the verdict of two hosts paired by cell."""

from __future__ import annotations

import math

import pytest

from hvbench.analysis.fleet_verdict import host_verdict, main_rows
from hvbench.store.records import MeasurementRow


def _rows(values: dict[tuple[str, str, str], list[float]], unit: str = "MB/s"
          ) -> list[MeasurementRow]:
    """(cell, phase, metric) -> one value per repetition; the cell is PLATFORM/WORKLOAD."""
    out = []
    for (cell, phase, metric), per_rep in values.items():
        platform, workload = cell.split("/")
        out += [MeasurementRow(0, cell, platform, workload, rep, 0, phase, metric, v, unit)
                for rep, v in enumerate(per_rep)]
    return out


def test_main_metric_only_and_percent_of_the_same_hosts_native() -> None:
    h1 = _rows({("native/dd", "write", "mb_s"): [100, 100], ("vm/dd", "write", "mb_s"): [50, 50],
                ("native/dd", "write", "lat_p99_ms"): [1, 1],
                ("vm/dd", "write", "lat_p99_ms"): [2, 2]})
    h2 = _rows({("native/dd", "write", "mb_s"): [200, 200], ("vm/dd", "write", "mb_s"): [150, 150]})
    rows = main_rows({"h1": h1, "h2": h2}, {"native"})
    assert [(r.cell, r.metric) for r in rows] == [("native/dd", "mb_s"), ("vm/dd", "mb_s")]
    native, vm = rows
    assert native.pct_native == {"h1": 100.0, "h2": 100.0}
    assert vm.means == {"h1": 50.0, "h2": 150.0}
    assert vm.pct_native == {"h1": 50.0, "h2": 75.0}


def test_no_percent_without_a_native_on_that_host() -> None:
    h1 = _rows({("native/dd", "write", "mb_s"): [100], ("vm/dd", "write", "mb_s"): [50]})
    h2 = _rows({("vm/dd", "write", "mb_s"): [40]})
    [_, vm] = main_rows({"h1": h1, "h2": h2}, {"native"})
    assert vm.pct_native == {"h1": 50.0}


def _pair(ratios: list[float], metric: str = "mb_s") -> list:  # type: ignore[type-arg]
    """Cells c0, c1, ... where h1 measured ``ratio`` times h2's 100."""
    h1 = _rows({(f"p{i}/w", "run", metric): [100 * r] for i, r in enumerate(ratios)})
    h2 = _rows({(f"p{i}/w", "run", metric): [100.0] for i in range(len(ratios))})
    return main_rows({"h1": h1, "h2": h2}, set())


def test_verdict_first_host_better_when_the_interval_clears_the_margin() -> None:
    v = host_verdict(_pair([1.30, 1.32, 1.28, 1.31]), ["h1", "h2"])
    assert v is not None and v.verdict == "h1 better" and v.cells == 4
    assert v.pct == pytest.approx(100 * (math.prod([1.30, 1.32, 1.28, 1.31]) ** 0.25 - 1))
    assert v.low_pct is not None and v.low_pct > 10


def test_verdict_second_host_better_for_a_lower_is_better_metric() -> None:
    # h1 boots 1.5 times slower than h2: h2 is better (boot_s: lower is better)
    v = host_verdict(_pair([1.5, 1.52, 1.48], metric="boot_s"), ["h1", "h2"])
    assert v is not None and v.verdict == "h2 better"
    assert v.high_pct is not None and v.high_pct < -10


def test_verdict_equivalent_within_the_margin() -> None:
    v = host_verdict(_pair([1.01, 0.99, 1.00, 1.02]), ["h1", "h2"])
    assert v is not None and v.verdict == "equivalent"


def test_verdict_inconclusive_when_the_interval_does_not_decide() -> None:
    v = host_verdict(_pair([1.5, 0.8, 1.2]), ["h1", "h2"])
    assert v is not None and v.verdict == "inconclusive"
    assert "crosses" in v.reason


def test_verdict_needs_three_cells_and_two_hosts() -> None:
    v = host_verdict(_pair([1.5, 1.5]), ["h1", "h2"])
    assert v is not None and v.verdict == "inconclusive" and v.low_pct is None
    assert "2 cell(s) paired" in v.reason
    assert host_verdict(_pair([1.5, 1.5, 1.5]), ["h1", "h2", "h3"]) is None
    assert host_verdict(_pair([1.5, 1.5, 1.5]), ["h1"]) is None
