"""One background thread samples several monitors at a fixed rate.

Usage::

    with MonitorSet([DiskStatsSampler("vda"), HostCpuSampler(),
                     ThreadCpuSampler(qemu_pid, vcpu_tids)], hz=10) as monitors:
        run_workload()
    result = monitors.result          # or: result = monitors.stop()

``start()`` takes the first sample of every monitor before it returns and ``stop()``
the last one, so the window is exactly start..stop. Ticks are ``t0 + k / hz`` on the
monotonic clock (no drift); a tick missed because the host was overloaded is skipped,
not caught up in a burst. See :class:`MonitorResult` for what comes out, and the
package docstring for every metric name.
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from hvbench.errors import HvbenchError, SpecError
from hvbench.host.started import StartStop
from hvbench.monitors.base import Monitor, MonitorReport, Sample, SeriesRow, ThreadReport
from hvbench.monitors.devices import backing_device, device_for_path, whole_disk
from hvbench.monitors.readers import (
    CgroupIoSampler,
    DiskStatsSampler,
    HostCpuSampler,
    NetDevSampler,
    ProcessIoSampler,
    ThreadCpuSampler,
)

__all__ = [
    "DEFAULT_HZ",
    "CgroupIoSampler",
    "DiskStatsSampler",
    "HostCpuSampler",
    "Monitor",
    "MonitorResult",
    "MonitorSet",
    "NetDevSampler",
    "ProcessIoSampler",
    "ThreadCpuSampler",
    "backing_device",
    "device_for_path",
    "vcpu_thread_ids",
    "whole_disk",
]

DEFAULT_HZ = 10.0
#: How long stop() waits for the sampling thread (a read of a process's /proc files
#: can block briefly while the kernel tears the process down).
JOIN_TIMEOUT_S = 5.0


@dataclass
class MonitorResult:
    """What a window of sampling produced.

    - ``summary``: ``<monitor>.<metric>`` over the whole window (first to last sample,
      not a mean of intervals), e.g. ``host.disk.vda.util_pct``, ``qemu.vcpu.cpu_pct``
    - ``series``: per monitor name, one ``(seconds since start, {metric: value})`` row
      per interval, metric names relative to the monitor
    - ``threads``: per thread monitor, each thread's metrics over the window
    - ``errors``: per monitor name, why it stopped early or never started (its summary
      then covers the window up to its last good sample)
    """

    summary: dict[str, float] = field(default_factory=dict)
    series: dict[str, list[SeriesRow]] = field(default_factory=dict)
    threads: dict[str, list[ThreadReport]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    #: Length of the window (start() to the last sample), seconds.
    seconds: float = 0.0
    #: Samples taken by the monitor that took most.
    samples: int = 0
    #: CPU time the sampling thread used (time.thread_time), seconds.
    sampler_cpu_s: float = 0.0
    #: When the window started (time.monotonic()); series times are relative to it.
    t0: float = 0.0
    #: Raw text kept with the window, by raw-output kind (the guest sampler's lines).
    raw: dict[str, str] = field(default_factory=dict)
    #: Length of the interval ``summary`` and ``threads`` cover when the window was
    #: stopped with a focus (seconds; None: they cover the whole window).
    focus_s: float | None = None

    def rows(self) -> Iterator[tuple[str, float, dict[str, float]]]:
        """Every series row as (monitor name, t, values)."""
        for monitor, points in self.series.items():
            for t, values in points:
                yield monitor, t, values

    @property
    def sampler_cpu_pct(self) -> float:
        """The sampling thread's CPU time as % of one core over the window."""
        return self.sampler_cpu_s / self.seconds * 100.0 if self.seconds > 0 else 0.0


class MonitorSet(StartStop):
    """Samples ``monitors`` at ``hz`` in one daemon thread between start() and stop().

    A monitor that fails to open or fails while sampling (its process exited, its
    device vanished) is stopped with its error recorded in the result; the others go
    on and nothing is raised from the thread. A set runs once.
    """

    def __init__(self, monitors: Sequence[Monitor], hz: float = DEFAULT_HZ) -> None:
        """Raises :class:`SpecError` when ``hz`` is not positive or two monitors share
        a name."""
        if not hz > 0:
            raise SpecError(f"monitor sampling rate must be > 0 Hz, got {hz!r}")
        names = [m.name for m in monitors]
        if len(set(names)) != len(names):
            raise SpecError(f"monitor names must be unique, got {names}")
        self.monitors = list(monitors)
        self.period = 1.0 / hz
        self._samples: dict[str, list[Sample]] = {name: [] for name in names}
        self._errors: dict[str, str] = {}
        self._active: list[Monitor] = []
        # The thread sleeps in poll() on a pipe: one syscall per tick, cheaper than
        # threading.Event's condition variable, and stop() wakes it at once by writing.
        self._wake_r, self._wake_w = -1, -1
        self._thread: threading.Thread | None = None
        self._started = False
        self._thread_cpu_s = 0.0
        self.t0 = 0.0
        self.result: MonitorResult | None = None
        #: The sampling thread's kernel thread id while it runs (for /proc checks).
        self.thread_id: int | None = None

    def start(self) -> None:
        """Open the monitors, take the first samples and start the thread. Raises
        :class:`HvbenchError` if the set was started before."""
        if self._started:
            raise HvbenchError("a MonitorSet can be started only once; make a new one")
        self._started = True
        for monitor in self.monitors:
            try:
                monitor.open()
            except Exception as exc:  # any failure only disables this monitor
                self._fail(monitor, exc)
                continue
            self._active.append(monitor)
        self._wake_r, self._wake_w = os.pipe()
        self.t0 = time.monotonic()
        self._sample_all()
        self._thread = threading.Thread(target=self._loop, name="hvbench-sampler",
                                        daemon=True)
        self._thread.start()
        self.thread_id = self._thread.native_id

    def _fail(self, monitor: Monitor, exc: BaseException) -> None:
        self._errors[monitor.name] = f"{type(exc).__name__}: {exc}"
        monitor.close()
        if monitor in self._active:
            self._active.remove(monitor)

    def _sample_all(self) -> None:
        for monitor in list(self._active):
            now = time.monotonic()
            try:
                raw = monitor.sample()
            except Exception as exc:  # the thread must outlive any monitor
                self._fail(monitor, exc)
                continue
            self._samples[monitor.name].append((now, raw))

    def _loop(self) -> None:
        start_cpu = time.thread_time()
        poller = select.poll()
        poller.register(self._wake_r, select.POLLIN)
        tick = self.t0
        try:
            while True:
                tick += self.period
                late = time.monotonic() - tick
                if late > 0:  # skip missed ticks but stay on the t0 + k * period grid
                    tick += (late // self.period + 1) * self.period
                if poller.poll(max(0.0, tick - time.monotonic()) * 1000.0):
                    return  # stop() wrote to the pipe
                self._sample_all()
        finally:
            self._thread_cpu_s = time.thread_time() - start_cpu

    def stop(self, focus: tuple[float, float] | None = None) -> MonitorResult:
        """Stop the thread (waits up to :data:`JOIN_TIMEOUT_S`), take the last samples,
        compute the result and close the monitors. With ``focus`` (monotonic start,
        end), the summary and per-thread metrics cover the samples nearest to that
        interval (:func:`focused`); the series still cover the whole window. Safe to
        call again: returns the same result. Never raises for a monitor's failure (see
        ``result.errors``)."""
        if self.result is not None:
            return self.result
        if self._thread is not None:
            os.write(self._wake_w, b"x")
            self._thread.join(JOIN_TIMEOUT_S)
            if self._thread.is_alive():
                self._errors["sampler"] = (f"sampling thread did not stop within "
                                           f"{JOIN_TIMEOUT_S} s; last samples missing")
            else:
                self._sample_all()
        self.result = self._build_result(focus)
        for monitor in self.monitors:
            monitor.close()
        self._active.clear()
        if self._thread is None or not self._thread.is_alive():
            for fd in (self._wake_r, self._wake_w):
                if fd >= 0:
                    with contextlib.suppress(OSError):
                        os.close(fd)
        return self.result

    def _report(self, monitor: Monitor, samples: Sequence[Sample]) -> MonitorReport:
        try:
            return monitor.report(samples, self.t0)
        except Exception as exc:  # one bad monitor must not hide the rest
            return MonitorReport(error=f"{type(exc).__name__}: {exc}")

    def _build_result(self, focus: tuple[float, float] | None = None) -> MonitorResult:
        result = MonitorResult(errors=dict(self._errors), sampler_cpu_s=self._thread_cpu_s,
                               t0=self.t0)
        last = self.t0
        for monitor in self.monitors:
            samples = list(self._samples[monitor.name])
            report = self._report(monitor, samples)
            if report.error and monitor.name not in result.errors:
                result.errors[monitor.name] = report.error
            result.series[monitor.name] = report.series
            if focus is not None:
                report = self._report(monitor, focused(samples, *focus))
            result.summary |= {f"{monitor.name}.{k}": v for k, v in report.summary.items()}
            if report.threads:
                result.threads[monitor.name] = report.threads
            result.samples = max(result.samples, len(samples))
            last = max([last] + [t for t, _ in samples[-1:]])
        result.seconds = last - self.t0
        if focus is not None:
            result.focus_s = max(0.0, focus[1] - focus[0])
        return result

    def samples(self, name: str) -> list[Sample]:
        """The raw samples of monitor ``name`` so far (time.monotonic(), raw)."""
        return list(self._samples[name])

    def between(self, name: str, start: float, end: float) -> dict[str, float]:
        """Monitor ``name``'s summary between the samples nearest to the monotonic
        instants ``start`` and ``end`` (e.g. to match another tool's interval). Raises
        :class:`HvbenchError` if the monitor has fewer than two samples."""
        samples = self.samples(name)
        if len(samples) < 2:
            raise HvbenchError(f"monitor {name!r} has fewer than two samples")
        monitor = next(m for m in self.monitors if m.name == name)
        return monitor.report(focused(samples, start, end), self.t0).summary


def focused(samples: Sequence[Sample], start: float, end: float) -> list[Sample]:
    """The samples from the one nearest to ``start`` to the one nearest to ``end``
    (monotonic instants), at least two when there are two: the stretch of a window an
    interval inside it covers, at the sampling rate's resolution (pure)."""
    if len(samples) < 2:
        return list(samples)
    first = min(range(len(samples)), key=lambda i: abs(samples[i][0] - start))
    last = min(range(len(samples)), key=lambda i: abs(samples[i][0] - end))
    if last <= first:
        first, last = (first, first + 1) if first + 1 < len(samples) else (first - 1, first)
    return list(samples[first:last + 1])


def vcpu_thread_ids(qmp_cpus: Sequence[dict[str, Any]]) -> set[int]:
    """The thread ids in a QMP ``query-cpus-fast`` reply's ``return`` list."""
    return {int(cpu["thread-id"]) for cpu in qmp_cpus if "thread-id" in cpu}
