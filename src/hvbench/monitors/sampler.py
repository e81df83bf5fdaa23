"""One background thread samples every monitor at a fixed rate.

The loop only reads counters (``os.pread`` on file descriptors kept open; procfs
regenerates a file on every read at offset 0) and appends the raw bytes; parsing and
metrics happen after ``stop()``, outside the sampling window. Summaries cover the whole
window; the series has one row per monitor per interval.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
import time
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from hvbench.errors import HostError
from hvbench.monitors.cpu import (
    ClassTotals,
    ThreadSample,
    class_metrics,
    classify,
    host_cpu_metrics,
    parse_proc_stat,
    parse_schedstat,
    parse_task_stat,
    thread_deltas,
)
from hvbench.monitors.diskstats import (
    DiskCounters,
    device_for_path,
    iostat_metrics,
    parse_diskstats,
)

DEFAULT_HZ = 10.0


def _pread(fd: int) -> bytes:
    return os.pread(fd, 65536, 0)


class Monitor(Protocol):
    name: str

    def open(self) -> None: ...
    def snapshot(self) -> Any: ...
    def decode(self, raw: Any) -> Any: ...
    def summary(self, snapshots: Sequence[tuple[float, Any]]) -> dict[str, float]: ...
    def series(self, snapshots: Sequence[tuple[float, Any]]) -> list[tuple[float,
                                                                         dict[str, float]]]: ...
    def close(self) -> None: ...


def _pairwise(snaps: Sequence[tuple[float, Any]]) -> Iterator[tuple[float, Any, Any, float]]:
    for (t0, a), (t1, b) in itertools.pairwise(snaps):
        if t1 > t0:
            yield t1, a, b, t1 - t0


class _CounterMonitor:
    """A monitor whose counters only grow: the summary is last minus first."""

    name = ""

    def metrics(self, a: Any, b: Any, seconds: float) -> dict[str, float]:
        raise NotImplementedError

    def summary(self, snapshots: Sequence[tuple[float, Any]]) -> dict[str, float]:
        if len(snapshots) < 2 or snapshots[-1][0] <= snapshots[0][0]:
            return {}
        (t0, a), (t1, b) = snapshots[0], snapshots[-1]
        return self.metrics(a, b, t1 - t0)

    def series(self, snapshots: Sequence[tuple[float, Any]]) -> list[tuple[float,
                                                                         dict[str, float]]]:
        return [(t, self.metrics(a, b, dt)) for t, a, b, dt in _pairwise(snapshots)]


class DiskStatsSampler(_CounterMonitor):
    """``iostat -x`` metrics of one block device, from /proc/diskstats."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.name = f"host.disk.{device}"
        self._fd: int | None = None

    def open(self) -> None:
        self._fd = os.open("/proc/diskstats", os.O_RDONLY | os.O_CLOEXEC)

    def snapshot(self) -> bytes:
        if self._fd is None:
            raise RuntimeError("not open")
        return _pread(self._fd)

    def decode(self, raw: Any) -> DiskCounters:
        stats = parse_diskstats(raw.decode())
        if self.device not in stats:
            raise LookupError(f"block device {self.device} vanished from /proc/diskstats")
        return stats[self.device]

    def metrics(self, a: Any, b: Any, seconds: float) -> dict[str, float]:
        return iostat_metrics(a, b, seconds)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class HostCpuSampler(_CounterMonitor):
    """All-CPU busy/user/system/iowait/steal from /proc/stat."""

    name = "host.cpu"

    def __init__(self) -> None:
        self._fd: int | None = None

    def open(self) -> None:
        self._fd = os.open("/proc/stat", os.O_RDONLY | os.O_CLOEXEC)

    def snapshot(self) -> bytes:
        if self._fd is None:
            raise RuntimeError("not open")
        return _pread(self._fd)

    def decode(self, raw: Any) -> tuple[int, ...]:
        return parse_proc_stat(raw.decode())

    def metrics(self, a: Any, b: Any, seconds: float) -> dict[str, float]:
        return host_cpu_metrics(a, b)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class ThreadCpuSampler:
    """A process's threads by class (see :mod:`hvbench.monitors.cpu`).

    Thread descriptors stay open between samples; the task list is re-read every
    ``relist_every`` samples to catch threads that QEMU's pool starts on demand.
    """

    def __init__(self, pid: int, vcpu_tids: Collection[int] = (), name: str = "qemu",
                 relist_every: int = 5) -> None:
        self.pid = pid
        self.name = name
        self.vcpu_tids = frozenset(vcpu_tids)
        self.relist_every = relist_every
        self._fds: dict[int, tuple[int, int]] = {}
        self.classes: dict[int, str] = {}
        self._count = 0

    def open(self) -> None:
        self._relist()

    def _relist(self) -> None:
        try:
            tids = {int(t.name) for t in Path(f"/proc/{self.pid}/task").iterdir()}
        except OSError as exc:
            raise LookupError(f"process {self.pid} is gone") from exc
        for tid in tids - set(self._fds):
            with contextlib.suppress(OSError):
                base = f"/proc/{self.pid}/task/{tid}"
                stat = os.open(f"{base}/stat", os.O_RDONLY | os.O_CLOEXEC)
                sched = os.open(f"{base}/schedstat", os.O_RDONLY | os.O_CLOEXEC)
                self._fds[tid] = (stat, sched)

    def snapshot(self) -> dict[int, tuple[bytes, bytes]]:
        self._count += 1
        if self._count % self.relist_every == 0:
            self._relist()
        out = {}
        for tid, (stat_fd, sched_fd) in list(self._fds.items()):
            try:
                out[tid] = (_pread(stat_fd), _pread(sched_fd))
            except OSError:
                self._forget(tid)
        if not out:
            raise LookupError(f"process {self.pid} has no threads left")
        return out

    def decode(self, raw: Any) -> dict[int, ThreadSample]:
        out = {}
        for tid, (stat, sched) in raw.items():
            try:
                comm, ticks = parse_task_stat(stat.decode())
                run, wait, slices = parse_schedstat(sched.decode())
            except (ValueError, IndexError):
                continue  # the thread exited between the two reads
            out[tid] = ThreadSample(comm, ticks, run, wait, slices)
            if tid not in self.classes:
                self.classes[tid] = classify(tid, self.pid, comm, self.vcpu_tids)
        return out

    def _forget(self, tid: int) -> None:
        for fd in self._fds.pop(tid, ()):
            with contextlib.suppress(OSError):
                os.close(fd)

    def _totals(self, snapshots: Sequence[tuple[float, Any]]) -> dict[str, ClassTotals]:
        totals: dict[str, ClassTotals] = {}
        for _, a, b, dt in _pairwise(snapshots):
            for name, acc in thread_deltas(a, b, dt, self.classes).items():
                totals.setdefault(name, ClassTotals()).add(acc)
        return totals

    def summary(self, snapshots: Sequence[tuple[float, Any]]) -> dict[str, float]:
        if len(snapshots) < 2:
            return {}
        return class_metrics(self._totals(snapshots), snapshots[-1][0] - snapshots[0][0])

    def series(self, snapshots: Sequence[tuple[float, Any]]) -> list[tuple[float,
                                                                         dict[str, float]]]:
        return [(t, class_metrics(thread_deltas(a, b, dt, self.classes), dt))
                for t, a, b, dt in _pairwise(snapshots)]

    def close(self) -> None:
        for tid in list(self._fds):
            self._forget(tid)


@dataclass
class MonitorResult:
    """What a window of sampling produced."""

    summary: dict[str, float] = field(default_factory=dict)
    series: dict[str, list[tuple[float, dict[str, float]]]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    samples: int = 0

    def rows(self) -> Iterator[tuple[str, float, dict[str, float]]]:
        for monitor, points in self.series.items():
            for t, values in points:
                yield monitor, t, values


class MonitorSet:
    """Samples ``monitors`` at ``hz`` in one daemon thread between start() and stop().

    A monitor that fails (its process exited, its device vanished) is dropped with its
    error recorded in the result; the others go on. ``stop()`` is safe to call twice.
    """

    def __init__(self, monitors: Sequence[Monitor], hz: float = DEFAULT_HZ) -> None:
        self.monitors = list(monitors)
        self.period = 1.0 / hz
        self._snaps: dict[str, list[tuple[float, Any]]] = {m.name: [] for m in monitors}
        self._errors: dict[str, str] = {}
        self._active: list[Monitor] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0
        self.thread_cpu_s = 0.0

    def __enter__(self) -> MonitorSet:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        for monitor in self.monitors:
            try:
                monitor.open()
            except (OSError, LookupError) as exc:
                self._errors[monitor.name] = str(exc)
                continue
            self._active.append(monitor)
        self._t0 = time.monotonic()
        self._sample(self._t0)
        self._thread = threading.Thread(target=self._loop, name="hvbench-sampler", daemon=True)
        self._thread.start()

    def _sample(self, now: float) -> None:
        for monitor in list(self._active):
            try:
                self._snaps[monitor.name].append((now - self._t0, monitor.snapshot()))
            except (OSError, LookupError, ValueError) as exc:
                self._errors[monitor.name] = str(exc)
                self._active.remove(monitor)

    def _loop(self) -> None:
        tick = self._t0
        while True:
            tick += self.period
            if self._stop.wait(max(0.0, tick - time.monotonic())):
                break
            self._sample(time.monotonic())
        self.thread_cpu_s = time.thread_time()

    def _decoded(self, monitor: Monitor, result: MonitorResult) -> list[tuple[float, Any]]:
        out = []
        for t, raw in self._snaps[monitor.name]:
            try:
                out.append((t, monitor.decode(raw)))
            except (LookupError, ValueError) as exc:
                result.errors[monitor.name] = str(exc)
                break
        return out

    def stop(self) -> MonitorResult:
        """Stop sampling, take a last snapshot, and compute summary and series."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            self._sample(time.monotonic())
        result = MonitorResult(errors=dict(self._errors))
        for monitor in self.monitors:
            snaps = self._decoded(monitor, result)
            result.summary.update({f"{monitor.name}.{k}": v
                                   for k, v in monitor.summary(snaps).items()})
            result.series[monitor.name] = monitor.series(snaps)
            result.samples = max(result.samples, len(snaps))
            monitor.close()
        self._active.clear()
        result.seconds = time.monotonic() - self._t0
        return result


def vcpu_thread_ids(qmp_cpus: Sequence[dict[str, Any]]) -> set[int]:
    """Thread ids from QMP ``query-cpus-fast``."""
    return {int(c["thread-id"]) for c in qmp_cpus}


def backing_device(path: Path) -> str | None:
    """The block device of ``path`` or None when it has none (tmpfs)."""
    try:
        return device_for_path(path)
    except (HostError, OSError):
        return None
