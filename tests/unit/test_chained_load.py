"""A neighbour's chained load over a window: the rate of its completed runs, unless a
run was still going long past its length when the window ended (the load stopped:
then no rate, and the window says why). Real threads, fake runs; no guest."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import Any, cast

import pytest

from hvbench.errors import CommandError
from hvbench.model.scenario import NeighbourSpec
from hvbench.monitors.sampler import MonitorResult
from hvbench.run.scenario import (
    LOAD_CHUNK_S,
    NEIGHBOUR_EVIDENCE_KIND,
    OVERDUE_S,
    ChainedLoad,
    Neighbour,
    ScenarioMonitors,
)


class _Guest:
    """A neighbour's guest as far as the window asks: what it can tell of a failure."""

    def failure_evidence(self) -> str:
        return "[kernel warnings and errors (dmesg, levels 0-4)]\n<4>NETDEV WATCHDOG"


def _window(load: ChainedLoad, t0: float, t1: float) -> MonitorResult:
    nb = Neighbour("nb0", NeighbourSpec(role="net", load="iperf3"), cast(Any, _Guest()))
    nb.load = load
    run = SimpleNamespace(spec=SimpleNamespace(start=None), neighbours=[nb])
    result = MonitorResult()
    ScenarioMonitors(cast(Any, run), [], 10.0)._add_loads(result, t0, t1)
    return result


def _hung_chain() -> tuple[ChainedLoad, threading.Event, float]:
    """A chain whose first run completes at 40 Mbit/s and whose second never returns
    until released; returns it, the release, and when the second run began."""
    release, second = threading.Event(), threading.Event()
    calls: list[float] = []

    def once() -> float:
        calls.append(time.monotonic())
        if len(calls) == 1:
            return 40.0
        second.set()
        release.wait(30)
        raise CommandError(["iperf3"], -1, "", "the load", tool_error="released")
    load = ChainedLoad("nb0", once)
    load.start()
    assert second.wait(10)
    return load, release, calls[1]


def test_a_run_long_past_its_length_at_the_windows_end_leaves_no_rate() -> None:
    load, release, since = _hung_chain()
    try:
        end = since + OVERDUE_S + 5.0
        # The completed run overlaps the window, yet the window's load had stopped.
        assert load.rate_between(since - 1.0, end) == 40.0
        result = _window(load, since - 1.0, end)
        assert "nb0.load.goodput_mbit_s" not in result.summary
        assert result.errors["nb0.load"].startswith(
            f"its load generator's run of {LOAD_CHUNK_S:g} s had not finished after "
            f"{OVERDUE_S + 5.0:.0f} s")
        assert result.raw[NEIGHBOUR_EVIDENCE_KIND] == \
            "[nb0]\n[kernel warnings and errors (dmesg, levels 0-4)]\n<4>NETDEV WATCHDOG\n"
        assert load.overdue_at(end) == pytest.approx(OVERDUE_S + 5.0, abs=0.5)
    finally:
        release.set()
        load.stop()


def test_a_run_within_its_time_keeps_the_completed_runs_rate() -> None:
    load, release, since = _hung_chain()
    try:
        end = since + OVERDUE_S - 1.0
        assert load.overdue_at(end) is None
        result = _window(load, since - 1.0, end)
        assert result.summary["nb0.load.goodput_mbit_s"] == 40.0
        assert "nb0.load" not in result.errors and not result.raw
    finally:
        release.set()
        load.stop()
    assert load.overdue_at(time.monotonic() + 3600.0) is None  # no run in progress
