"""The monitors that read /proc: a block device, host CPU, a process's threads.

Sampling is built to cost little (it runs 10 times a second next to the workload):
every file is opened once and re-read with ``os.pread(fd, n, 0)`` (procfs regenerates
the text on each read at offset 0), only the bytes needed are kept, no subprocess, no
regex, and parsing waits until :meth:`report`, after the measured window.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Collection, Mapping, Sequence
from itertools import pairwise
from pathlib import Path
from typing import Generic, TypeVar

from hvbench.errors import HostError, SpecError
from hvbench.monitors.base import MonitorReport, Sample, SeriesRow, ThreadReport
from hvbench.monitors.cpu import (
    TaskSample,
    TaskSnapshot,
    class_metrics,
    group_metrics,
    host_cpu_metrics,
    latest_per_thread,
    parse_proc_stat,
    parse_task,
    snapshot_ends,
    thread_deltas,
)
from hvbench.monitors.devices import device_for_path, whole_disk
from hvbench.monitors.diskstats import DiskCounters, iostat_metrics, parse_diskstats_line
from hvbench.monitors.netdev import (
    NetDevCounters,
    NetSnapshot,
    absent_interfaces,
    parse_net_dev,
    window_metrics,
)

C = TypeVar("C")
_OPEN_FLAGS = os.O_RDONLY | os.O_CLOEXEC


class _ProcFile:
    """One /proc file kept open and re-read whole from offset 0."""

    def __init__(self, path: str, size: int = 4096) -> None:
        self.path = path
        self._size = size
        self._fd: int | None = os.open(path, _OPEN_FLAGS)

    def read(self) -> bytes:
        """The file's current text. Raises OSError (ESRCH once a task has exited)."""
        if self._fd is None:
            raise OSError(f"{self.path} is closed")
        while True:
            data = os.pread(self._fd, self._size, 0)
            if len(data) < self._size:
                return data
            self._size *= 2  # the text did not fit: grow once and for all, and re-read

    def close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None


class _CounterMonitor(Generic[C]):
    """A monitor whose counters only grow, read from one /proc file: the summary is
    last minus first."""

    name = ""
    source = ""
    _file: _ProcFile | None = None

    def open(self) -> None:
        """Open the source file (HostError if it cannot be read: no procfs)."""
        self.close()
        try:
            self._file = _ProcFile(self.source)
        except OSError as exc:
            raise HostError(f"cannot read {self.source}: {exc}") from exc

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def _read_whole(self, gone: str) -> bytes:
        """The source's whole text; HostError saying ``gone`` when it vanished."""
        if self._file is None:
            raise HostError(f"{self.name}: sampled before open()")
        try:
            return self._file.read()
        except OSError as exc:
            raise HostError(f"{self.source}: {exc} ({gone})") from exc

    def decode(self, raw: bytes) -> C:
        raise NotImplementedError

    def metrics(self, a: C, b: C, seconds: float) -> dict[str, float]:
        raise NotImplementedError

    def report(self, samples: Sequence[Sample], t0: float) -> MonitorReport:
        """Summary from the first and last sample, one series row per interval."""
        out = MonitorReport()
        decoded: list[tuple[float, C]] = []
        for t, raw in samples:
            try:
                decoded.append((t, self.decode(raw)))
            except ValueError as exc:
                out.error = f"{self.name}: undecodable sample at {t - t0:.3f} s: {exc}"
                break
        if len(decoded) >= 2:
            (ta, a), (tb, b) = decoded[0], decoded[-1]
            out.summary = self.metrics(a, b, tb - ta)
        out.series = [(tb - t0, self.metrics(a, b, tb - ta))
                      for (ta, a), (tb, b) in pairwise(decoded) if tb > ta]
        return out


class DiskStatsSampler(_CounterMonitor[DiskCounters]):
    """The ``iostat -x`` metrics of one block device (see
    :mod:`hvbench.monitors.diskstats`), from /proc/diskstats. Metric names are prefixed
    ``host.disk.<device>.``. ``source`` is for tests (a stored diskstats file)."""

    def __init__(self, device: str, source: str = "/proc/diskstats") -> None:
        self.device = device
        self.source = source
        self.name = f"host.disk.{device}"
        # Names are the third column, between spaces; no other column holds letters.
        self._key = f" {device} ".encode()
        self._file: _ProcFile | None = None

    @classmethod
    def for_path(cls, path: Path | str, *, parent_disk: bool = False) -> DiskStatsSampler:
        """The sampler of the device holding ``path`` (its partition, or with
        ``parent_disk`` the whole disk). Raises HostError if there is no block device."""
        device = device_for_path(path)
        return cls(whole_disk(device) if parent_disk else device)

    def open(self) -> None:
        """Open /proc/diskstats. Raises HostError if the device is not listed."""
        super().open()
        self.sample()

    def sample(self) -> bytes:
        """The device's /proc/diskstats line. Raises HostError if the device vanished."""
        if self._file is None:
            raise HostError(f"{self.name}: sampled before open()")
        data = self._file.read()
        at = data.find(self._key)
        if at < 0:
            raise HostError(f"block device {self.device!r} is not in {self.source} "
                            "(removed, or never existed)")
        end = data.find(b"\n", at)
        return data[data.rfind(b"\n", 0, at) + 1:end if end >= 0 else len(data)]

    def decode(self, raw: bytes) -> DiskCounters:
        parsed = parse_diskstats_line(raw.decode())
        if parsed is None:
            raise ValueError(f"no extended statistics for {self.device}: {raw!r}")
        return parsed[1]

    def metrics(self, a: DiskCounters, b: DiskCounters, seconds: float) -> dict[str, float]:
        return iostat_metrics(a, b, seconds)


class HostCpuSampler(_CounterMonitor[dict[str, tuple[int, ...]]]):
    """Host CPU shares from /proc/stat, all CPUs and each (see
    :mod:`hvbench.monitors.cpu`). Metric names are prefixed ``host.cpu.``. ``source``
    is for tests (a stored /proc/stat file)."""

    def __init__(self, name: str = "host.cpu", source: str = "/proc/stat") -> None:
        self.name = name
        self.source = source
        self._file: _ProcFile | None = None

    def sample(self) -> bytes:
        """The cpu lines of /proc/stat (the interrupt counts after them are dropped)."""
        if self._file is None:
            raise HostError(f"{self.name}: sampled before open()")
        data = self._file.read()
        end = data.find(b"\nintr")
        return data if end < 0 else data[:end]

    def decode(self, raw: bytes) -> dict[str, tuple[int, ...]]:
        return parse_proc_stat(raw.decode())

    def metrics(self, a: dict[str, tuple[int, ...]], b: dict[str, tuple[int, ...]],
                seconds: float) -> dict[str, float]:
        return host_cpu_metrics(a, b)


def parse_proc_io(text: str) -> tuple[int, int]:
    """(read_bytes, write_bytes) of a /proc/PID/io text: the bytes the process caused
    to be read from and written to block devices (its threads and AIO workers too).
    Raises ValueError when either is missing."""
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    try:
        return int(fields["read_bytes"]), int(fields["write_bytes"])
    except (KeyError, ValueError) as exc:
        raise ValueError(f"no read_bytes/write_bytes in {text[:80]!r}") from exc


class ProcessIoSampler(_CounterMonitor[tuple[int, int]]):
    """A process's own block I/O from /proc/PID/io (``qemu.io.read_kb_s``,
    ``write_kb_s``, in the kB of iostat's ``r_kb_s``: 1024 bytes), to attribute the
    device's totals to the cell. ``source`` is for tests."""

    def __init__(self, pid: int, name: str = "qemu.io", source: str | None = None) -> None:
        self.name = name
        self.source = source or f"/proc/{pid}/io"
        self._file: _ProcFile | None = None

    def sample(self) -> bytes:
        """The /proc/PID/io text. Raises HostError once the process has exited."""
        return self._read_whole("the process exited")

    def decode(self, raw: bytes) -> tuple[int, int]:
        return parse_proc_io(raw.decode())

    def metrics(self, a: tuple[int, int], b: tuple[int, int], seconds: float
                ) -> dict[str, float]:
        if seconds <= 0:
            return {}
        return {"read_kb_s": (b[0] - a[0]) / 1024.0 / seconds,
                "write_kb_s": (b[1] - a[1]) / 1024.0 / seconds}


#: A cgroup's block I/O counters on one device: (read bytes, write bytes, read
#: requests, write requests); the request counts are -1 where the file has none (v1).
IoCounters = tuple[int, int, int, int]
_V2_KEYS = ("rbytes", "wbytes", "rios", "wios")


def parse_io_stat(text: str) -> dict[str, IoCounters]:
    """``MAJ:MIN`` -> counters of a cgroup v2 ``io.stat`` text (lines such as
    ``254:0 rbytes=1 wbytes=2 rios=3 wios=4 dbytes=0 dios=0``). Lines without the four
    keys are left out."""
    out: dict[str, IoCounters] = {}
    for line in text.splitlines():
        device, _, rest = line.partition(" ")
        fields = dict(item.split("=", 1) for item in rest.split() if "=" in item)
        if all(key in fields for key in _V2_KEYS):
            rb, wb, ri, wi = (int(fields[key]) for key in _V2_KEYS)
            out[device] = (rb, wb, ri, wi)
    return out


def parse_blkio_bytes(text: str) -> dict[str, IoCounters]:
    """``MAJ:MIN`` -> counters of a cgroup v1 ``blkio.throttle.io_service_bytes*`` text
    (``254:0 Read 4096`` lines; the request counts are -1: they live in another
    file). The throttle files count every bio the group issued, whatever the scheduler,
    unlike ``blkio.io_service_bytes`` of CFQ/BFQ."""
    found: dict[str, dict[str, int]] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 3 and fields[1] in ("Read", "Write") and fields[2].isdigit():
            found.setdefault(fields[0], {})[fields[1]] = int(fields[2])
    return {dev: (kinds.get("Read", 0), kinds.get("Write", 0), -1, -1)
            for dev, kinds in found.items()}


class CgroupIoSampler(_CounterMonitor[IoCounters]):
    """The block I/O of one cgroup on one device (``cgroup.io.read_kb_s``,
    ``write_kb_s``, in iostat's kB of 1024 bytes; with v2 also ``r_s`` and ``w_s``),
    from v2 ``io.stat`` or v1 ``blkio.throttle.io_service_bytes_recursive``: what
    everything in the cell's cgroup moved, child processes and kernel writeback
    charged to it included, to attribute the device's totals to the cell.

    ``stat_file`` is the cgroup's statistics file, ``device`` the ``MAJ:MIN`` of the
    whole disk whose diskstats are sampled. A device the group has not touched yet
    counts as zeros (the kernel lists a device only once the group used it)."""

    def __init__(self, stat_file: Path, device: str, name: str = "cgroup.io") -> None:
        self.name = name
        self.source = str(stat_file)
        self.device = device
        self.v2 = stat_file.name == "io.stat"
        self._file: _ProcFile | None = None

    def sample(self) -> bytes:
        """The statistics file's text. Raises HostError once the cgroup is removed."""
        return self._read_whole("the cgroup was removed")

    def decode(self, raw: bytes) -> IoCounters:
        text = raw.decode()
        parsed = parse_io_stat(text) if self.v2 else parse_blkio_bytes(text)
        return parsed.get(self.device, (0, 0, 0 if self.v2 else -1, 0 if self.v2 else -1))

    def metrics(self, a: IoCounters, b: IoCounters, seconds: float) -> dict[str, float]:
        if seconds <= 0:
            return {}
        out = {"read_kb_s": (b[0] - a[0]) / 1024.0 / seconds,
               "write_kb_s": (b[1] - a[1]) / 1024.0 / seconds}
        if a[2] >= 0 and b[2] >= 0:
            out |= {"r_s": (b[2] - a[2]) / seconds, "w_s": (b[3] - a[3]) / seconds}
        return out


#: Raw thread sample: (CLOCK_BOOTTIME s, ((tid, stat, schedstat, status tail, sched
#: nr_wakeups line or b""), ...)), all bytes.
RawThreads = tuple[float, tuple[tuple[int, bytes, bytes, bytes, bytes], ...]]
_CTXT_LINE = b"\nvoluntary_ctxt_switches"


def _wakeups_line(data: bytes) -> bytes:
    """The ``nr_wakeups`` line of a /proc sched text (``se.statistics.nr_wakeups``
    before Linux 5.19), or b"" when the kernel keeps no schedstats."""
    for line in data.split(b"\n"):
        key = line.partition(b":")[0].strip()
        if key in (b"nr_wakeups", b"se.statistics.nr_wakeups"):
            return line
    return b""


class ThreadCpuSampler:
    """A process's threads by class (see :mod:`hvbench.monitors.cpu`), from
    ``/proc/PID/task/*/{stat,schedstat,status}`` and, when the kernel keeps
    ``nr_wakeups`` there, ``sched``. Metric names are ``<name>.<class>.<metric>``;
    the summary's ``total.wakeups_known`` (1 or 0) says whether wake-ups were read.

    ``vcpu_tids`` are the vCPU thread ids from QMP ``query-cpus-fast`` (the comm
    ``CPU n/...`` is the fallback); ``iothread_tids`` those of ``query-iothreads``
    (needed for a process that does not name its threads: a storage daemon). Each
    thread's files stay open; the task list is re-read every ``relist_every`` samples
    and whenever a thread's read fails, so pool threads born in between are found
    within ``relist_every`` samples.
    """

    def __init__(self, pid: int, vcpu_tids: Collection[int] = (), name: str = "qemu",
                 relist_every: int = 5, iothread_tids: Collection[int] = ()) -> None:
        self.pid = pid
        self.vcpu_tids = frozenset(vcpu_tids)
        self.iothread_tids = frozenset(iothread_tids)
        self.name = name
        self.relist_every = max(1, relist_every)
        self._files: dict[int, tuple[_ProcFile, ...]] = {}
        self._count = 0
        #: Whether the kernel keeps nr_wakeups in /proc/PID/sched (decided at open():
        #: it is a kernel-wide setting, and sched is a long text not worth reading
        #: 10 times a second for nothing).
        self.wakeups = False

    def open(self) -> None:
        """List the threads and open their files. Raises HostError if there is no such
        process."""
        self.close()
        try:
            self.wakeups = bool(_wakeups_line(Path(f"/proc/{self.pid}/sched").read_bytes()))
        except OSError:
            self.wakeups = False  # no CONFIG_SCHED_DEBUG: no sched file at all
        self._relist()

    def _exited(self) -> HostError:
        return HostError(f"{self.name}: process {self.pid} exited")

    def _relist(self) -> None:
        try:
            with os.scandir(f"/proc/{self.pid}/task") as entries:
                tids = {int(entry.name) for entry in entries}
        except OSError as exc:
            raise self._exited() from exc
        for tid in set(self._files) - tids:
            self._forget(tid)
        names = [("stat", 1024), ("schedstat", 128), ("status", 2048)]
        if self.wakeups:
            names.append(("sched", 4096))
        for tid in tids - set(self._files):
            base = f"/proc/{self.pid}/task/{tid}"
            opened: list[_ProcFile] = []
            try:
                for name, size in names:
                    opened.append(_ProcFile(f"{base}/{name}", size))
            except OSError:
                for f in opened:
                    f.close()  # the thread exited while we listed
                continue
            self._files[tid] = tuple(opened)
        if set(self._files) <= {self.pid} and self._leader_is_zombie():
            raise self._exited()

    def _leader_is_zombie(self) -> bool:
        """True once the process exited but is not yet reaped (only its leader is left,
        as a zombie)."""
        try:
            text = Path(f"/proc/{self.pid}/stat").read_bytes()
        except OSError:
            return True
        state = text[text.rfind(b")") + 2:text.rfind(b")") + 3]
        return state in (b"Z", b"X")

    def sample(self) -> RawThreads:
        """Each live thread's raw stat, schedstat, the context switch lines of its
        status and its nr_wakeups line. Raises HostError once the process has
        exited."""
        self._count += 1
        if self._count % self.relist_every == 0:
            self._relist()
        boot_s = time.clock_gettime(time.CLOCK_BOOTTIME)
        rows: list[tuple[int, bytes, bytes, bytes, bytes]] = []
        stale = False
        for tid, files in self._files.items():
            try:
                status = files[2].read()
                wakeups = _wakeups_line(files[3].read()) if len(files) > 3 else b""
                # Keep only the tail of status: the context switches are its last lines.
                at = status.find(_CTXT_LINE)
                rows.append((tid, files[0].read(), files[1].read(),
                             status[at:] if at >= 0 else status, wakeups))
            except OSError:
                stale = True  # ESRCH: the thread exited
        if stale:
            self._relist()
        if not rows:
            raise self._exited()
        return boot_s, tuple(rows)

    def _forget(self, tid: int) -> None:
        for f in self._files.pop(tid, ()):
            f.close()

    def close(self) -> None:
        for tid in list(self._files):
            self._forget(tid)

    @staticmethod
    def decode(raw: RawThreads) -> TaskSnapshot:
        """The snapshot of a raw sample; threads whose text is cut short (they exited
        between the two reads) are left out."""
        boot_s, rows = raw
        tasks: dict[int, TaskSample] = {}
        for tid, stat, schedstat, status, sched in rows:
            with contextlib.suppress(ValueError):
                tasks[tid] = parse_task(tid, stat.decode(errors="replace"), schedstat.decode(),
                                        status.decode(errors="replace"), sched.decode())
        return TaskSnapshot(boot_s, tasks)

    def _series(self, samples: Sequence[Sample], snaps: Sequence[TaskSnapshot],
                t0: float) -> list[SeriesRow]:
        rows: list[SeriesRow] = []
        for i, (a, b) in enumerate(pairwise(snaps), start=1):
            seconds = b.boot_s - a.boot_s
            if seconds > 0:
                deltas = thread_deltas(a, snapshot_ends(b), self.pid, self.vcpu_tids,
                                       iothread_tids=self.iothread_tids)
                rows.append((samples[i][0] - t0, class_metrics(deltas, seconds)))
        return rows

    def report(self, samples: Sequence[Sample], t0: float) -> MonitorReport:
        """Per-class summary over the whole window (each thread from its first to its
        last observation), per-class series per interval, per-thread summaries."""
        snaps = [self.decode(raw) for _, raw in samples]
        out = MonitorReport(series=self._series(samples, snaps, t0))
        if len(snaps) < 2 or snaps[-1].boot_s <= snaps[0].boot_s:
            return out
        seconds = snaps[-1].boot_s - snaps[0].boot_s
        deltas = thread_deltas(snaps[0], latest_per_thread(snaps), self.pid, self.vcpu_tids,
                               iothread_tids=self.iothread_tids)
        out.summary = class_metrics(deltas, seconds)
        # The stored note on wake-ups: 0 means "not measured", not "none happened".
        out.summary["total.wakeups_known"] = float("total.wakeups_per_s" in out.summary)
        out.threads = [ThreadReport(d.tid, d.comm, d.cls, group_metrics([d], seconds))
                       for d in sorted(deltas, key=lambda d: (d.cls, d.tid))]
        return out


class NetDevSampler(_CounterMonitor[dict[str, NetDevCounters]]):
    """Bytes, packets, errors and drops of network interfaces from /proc/net/dev of
    hvbench's (root) namespace (see :mod:`hvbench.monitors.netdev`).

    ``interfaces`` is a list of names, or a mapping name -> label whose labels then
    name the metrics: ``<name>.<label>.<metric>``, monitor name ``net`` by default. An
    interface that vanishes mid-window keeps the numbers of its lifetime and is noted
    in the report's ``error``; the others are unaffected. ``source`` is for tests (a
    stored file). Raises :class:`SpecError` if two interfaces share a label.
    """

    def __init__(self, interfaces: Sequence[str] | Mapping[str, str], name: str = "net",
                 source: str = "/proc/net/dev") -> None:
        labels = (dict(interfaces) if isinstance(interfaces, Mapping)
                  else {i: i for i in interfaces})
        if len(set(labels.values())) != len(labels):
            raise SpecError(f"{name}: interface labels must be unique, got {labels}")
        self.labels = labels
        self.interfaces = list(labels)
        self.name = name
        self.source = source
        self._file: _ProcFile | None = None

    def open(self) -> None:
        """Open /proc/net/dev. Raises HostError if none of the interfaces exists."""
        super().open()
        present = self.decode(self.sample())
        if not present:
            self.close()
            raise HostError(f"{self.name}: none of the interfaces {self.interfaces} "
                            f"is in {self.source}")

    def sample(self) -> bytes:
        """The whole /proc/net/dev text (parsed only in :meth:`report`)."""
        if self._file is None:
            raise HostError(f"{self.name}: sampled before open()")
        return self._file.read()

    def decode(self, raw: bytes) -> dict[str, NetDevCounters]:
        return parse_net_dev(raw.decode(errors="replace"), self.labels)

    def metrics(self, a: dict[str, NetDevCounters], b: dict[str, NetDevCounters],
                seconds: float) -> dict[str, float]:
        return window_metrics([(0.0, a), (seconds, b)], self.labels)

    def report(self, samples: Sequence[Sample], t0: float) -> MonitorReport:
        """Summary per interface over the samples it appears in; one series row per
        interval; ``error`` notes interfaces that were missing or vanished."""
        out = MonitorReport()
        snaps: list[NetSnapshot] = []
        for t, raw in samples:
            try:
                snaps.append((t, self.decode(raw)))
            except ValueError as exc:
                out.error = f"{self.name}: undecodable sample at {t - t0:.3f} s: {exc}"
                break
        out.summary = window_metrics(snaps, self.labels)
        out.series = [(b[0] - t0, window_metrics([a, b], self.labels))
                      for a, b in pairwise(snaps) if b[0] > a[0]]
        notes = absent_interfaces(snaps, self.interfaces, t0)
        if notes and out.error is None:
            out.error = f"{self.name}: " + "; ".join(notes)
        return out
