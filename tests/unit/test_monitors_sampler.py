"""MonitorSet mechanics with fake monitors: timing grid, failures, stop semantics."""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Sequence
from itertools import pairwise
from typing import Any

import pytest

from hvbench.errors import HostError, HvbenchError, SpecError
from hvbench.monitors.base import MonitorReport, Sample, ThreadReport
from hvbench.monitors.readers import ThreadCpuSampler
from hvbench.monitors.sampler import MonitorSet, focused, vcpu_thread_ids
from tests.unit.waiting import wait_until


class Counter:
    """Counts its samples; fails with HostError at sample number ``fail_at``."""

    def __init__(self, name: str, fail_at: int = 0, fail_open: bool = False) -> None:
        self.name = name
        self.fail_at = fail_at
        self.fail_open = fail_open
        self.count = 0
        self.closed = 0
        self.threads: set[str] = set()

    def open(self) -> None:
        if self.fail_open:
            raise HostError(f"{self.name} cannot open")

    def sample(self) -> int:
        self.threads.add(threading.current_thread().name)
        self.count += 1
        if self.count == self.fail_at:
            raise HostError(f"{self.name} vanished")
        return self.count

    def report(self, samples: Sequence[Sample], t0: float) -> MonitorReport:
        out = MonitorReport()
        if len(samples) >= 2:
            out.summary = {"n": float(samples[-1][1] - samples[0][1])}
        out.series = [(tb - t0, {"d": float(b - a)}) for (_, a), (tb, b) in pairwise(samples)]
        return out

    def close(self) -> None:
        self.closed += 1


def test_summary_series_and_names() -> None:
    good = Counter("a.b")
    with MonitorSet([good], hz=50) as monitors:
        time.sleep(0.3)
    result = monitors.result
    assert result is not None and result.errors == {}
    assert result.summary == {"a.b.n": float(good.count - 1)}
    assert len(result.series["a.b"]) == good.count - 1 == result.samples - 1
    assert all(values == {"d": 1.0} for _, values in result.series["a.b"])
    assert next(result.rows())[0] == "a.b"
    # The first sample is taken by start() and the last by stop(), in the caller's
    # thread; the others in the sampling thread.
    assert good.threads == {threading.current_thread().name, "hvbench-sampler"}
    assert 0.25 < result.seconds < 1.0 and good.closed >= 1


def test_ticks_stay_on_the_start_grid() -> None:
    good = Counter("grid")
    monitors = MonitorSet([good], hz=20)
    monitors.start()
    time.sleep(1.0)
    samples = monitors.samples("grid")
    monitors.stop()
    # Each sample from the thread is a little after t0 + k/hz: wake-up latency does not
    # accumulate (no drift), whatever the sample index.
    offsets = [(t - monitors.t0) % 0.05 for t, _ in samples[1:]]
    assert statistics.median(offsets) < 0.01, offsets
    assert 15 <= len(samples) <= 23


def test_a_failing_monitor_is_stopped_and_the_others_go_on() -> None:
    good, bad, never = Counter("good"), Counter("bad", fail_at=3), Counter("never",
                                                                           fail_open=True)
    monitors = MonitorSet([good, bad, never], hz=50)
    monitors.start()
    time.sleep(0.3)
    result = monitors.stop()
    assert result.errors == {"bad": "HostError: bad vanished",
                             "never": "HostError: never cannot open"}
    assert bad.count == 3 and bad.closed >= 1
    assert result.summary["bad.n"] == 1.0  # samples 1 and 2 made it
    assert result.summary["good.n"] > 5 and "never.n" not in result.summary


def test_stop_twice_and_start_once() -> None:
    monitors = MonitorSet([Counter("c")], hz=100)
    monitors.start()
    first = monitors.stop()
    assert monitors.stop() is first
    with pytest.raises(HvbenchError, match="only once"):
        monitors.start()
    assert not any(t.name == "hvbench-sampler" and t.is_alive()
                   for t in threading.enumerate())


def test_stop_without_start_gives_an_empty_result() -> None:
    result = MonitorSet([Counter("c")]).stop()
    assert result.summary == {} and result.errors == {}


def test_bad_arguments() -> None:
    with pytest.raises(SpecError, match="> 0 Hz"):
        MonitorSet([], hz=0)
    with pytest.raises(SpecError, match="unique"):
        MonitorSet([Counter("x"), Counter("x")])


def test_between_picks_the_nearest_samples() -> None:
    monitors = MonitorSet([Counter("c")], hz=100)
    monitors.start()
    # Until the samples it needs: a loaded worker's sampler drops late ticks.
    assert wait_until(lambda: len(monitors.samples("c")) >= 8)
    monitors.stop()
    samples = monitors.samples("c")
    assert monitors.between("c", samples[2][0] + 0.001, samples[7][0] - 0.001) == {"n": 5.0}


class Stepped(Counter):
    """A counter whose thread list names the samples its summary covered."""

    def report(self, samples: Sequence[Sample], t0: float) -> MonitorReport:
        out = super().report(samples, t0)
        out.threads = [ThreadReport(1, "t", "vcpu", {"first": float(samples[0][1])})]
        return out


def test_a_focus_narrows_the_summary_and_threads_but_not_the_series() -> None:
    monitors = MonitorSet([Stepped("c")], hz=100)
    monitors.start()
    assert wait_until(lambda: len(monitors.samples("c")) >= 13)
    samples = list(monitors.samples("c"))
    focus = (samples[5][0] + 0.001, samples[12][0] - 0.001)
    result = monitors.stop(focus)
    everything = monitors.samples("c")
    assert result.summary == {"c.n": 7.0}  # samples 6..13 of the counter
    assert result.threads["c"][0].metrics == {"first": 6.0}
    assert len(result.series["c"]) == len(everything) - 1
    assert result.focus_s == pytest.approx(focus[1] - focus[0])
    assert MonitorSet([Counter("d")]).stop().focus_s is None


def test_focused_keeps_two_samples_and_the_stretch_between() -> None:
    samples: list[Sample] = [(float(t), t) for t in range(10)]
    assert focused(samples, 2.2, 5.9) == samples[2:7]
    # an interval inside one sampling period still gives an interval, not one sample
    assert focused(samples, 4.4, 4.45) == samples[4:6]
    assert focused(samples, 9.6, 9.7) == samples[8:10]
    assert focused(samples[:1], 0, 1) == samples[:1]


def test_a_process_that_does_not_exist_is_reported() -> None:
    result = MonitorSet([ThreadCpuSampler(2**22 + 7)], hz=50).stop()
    assert result.summary == {}
    monitors = MonitorSet([ThreadCpuSampler(2**22 + 7)], hz=50)
    monitors.start()
    result = monitors.stop()
    assert result.errors["qemu"] == f"HostError: qemu: process {2**22 + 7} exited"
    assert result.summary == {}


def test_vcpu_thread_ids_from_query_cpus_fast() -> None:
    reply: list[dict[str, Any]] = [
        {"cpu-index": 0, "thread-id": 5827, "qom-path": "/machine/unattached/device[0]"},
        {"cpu-index": 1, "thread-id": 5828}]
    assert vcpu_thread_ids(reply) == {5827, 5828}
