"""The workloads' shared timeline: deadline, marks, order and phase arithmetic."""

from __future__ import annotations

import pytest

from hvbench.errors import GuestTimeoutError
from hvbench.workloads.timeline import Timeline, check_order, phase_durations

BOUNDS = {"first": ("a", "b"), "second": ("c", "d")}


class FakeClock:
    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_remaining_counts_down_from_the_timeout_and_raises_at_the_end() -> None:
    clock = FakeClock()
    times = Timeline(10.0, "demo", clock=clock)
    assert times.deadline == 110.0
    clock.now = 104.0
    assert times.remaining("a step") == pytest.approx(6.0)
    with pytest.raises(GuestTimeoutError, match=r"demo workload: no time left for boot "
                                                r"within timeout_s = 10 s"):
        times.remaining("boot", need=6.5)
    clock.now = 110.0
    with pytest.raises(GuestTimeoutError, match="the end"):
        times.remaining("the end")


def test_marks_now_or_given_and_each_only_once() -> None:
    clock = FakeClock(5.0)
    times = Timeline(60.0, "demo", clock=clock)
    assert times.mark("a") == 5.0
    assert times.mark("b", 7.5) == 7.5
    times.update({"c": 8.0, "d": 9.0})
    assert times.marks == {"a": 5.0, "b": 7.5, "c": 8.0, "d": 9.0}
    with pytest.raises(ValueError, match="'a' is set already"):
        times.mark("a")
    with pytest.raises(ValueError, match="'d' is set already"):
        times.update({"d": 10.0})
    times.check_order(["a", "b", "c", "d"])
    assert phase_durations(times.marks, BOUNDS) == {"first": 2.5, "second": 1.0}


def test_phase_durations_follow_the_order_asked_for() -> None:
    marks = {"a": 1.0, "b": 2.0, "c": 4.0, "d": 7.0}
    assert list(phase_durations(marks, BOUNDS, ["second", "first"])) == ["second", "first"]
    with pytest.raises(KeyError):
        phase_durations({"a": 1.0}, BOUNDS)


def test_check_order_names_missing_and_reversed_marks() -> None:
    with pytest.raises(ValueError, match="marks missing: b, c"):
        check_order({"a": 1.0}, ["a", "b", "c"])
    with pytest.raises(ValueError, match=r"b \(0\.500000\) comes before a"):
        check_order({"a": 1.0, "b": 0.5}, ["a", "b"])
    check_order({"a": 1.0, "b": 1.0}, ["a", "b"])
