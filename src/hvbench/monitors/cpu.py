"""Per-thread CPU accounting of a QEMU process, by thread class, and host CPU.

For each thread ``/proc/PID/task/TID/stat`` gives user+system ticks and
``/proc/PID/task/TID/schedstat`` gives run ns, run-queue wait ns and timeslices. Over an
interval, per class (``vcpu``, ``iothread``, ``worker``, ``main``, ``other``, ``total``):

- ``cpu_pct``: CPU time / wall time x 100 (of one core; sums over the class's threads)
- ``wait_pct``: run-queue wait / wall x 100 (runnable but not running)
- ``blocked_pct``: 100 - (run + wait) / thread-time x 100, thread-time being the sum
  over the class's threads of the time each was alive (XenMon's "blocked": neither
  running nor waiting for a CPU, i.e. waiting for I/O or an event)
- ``exec_per_s``: timeslices per second (times the threads were put on a CPU)
- ``cpu_ms_per_exec``: run time per timeslice in ms

Host ``/proc/stat``: ``busy_pct``, ``user_pct``, ``system_pct``, ``iowait_pct``,
``steal_pct`` of all CPUs together.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass

CLK_TCK = os.sysconf("SC_CLK_TCK")
CLASSES = ("vcpu", "iothread", "worker", "main", "other")


@dataclass(frozen=True)
class ThreadSample:
    comm: str
    cpu_ticks: int
    run_ns: int
    wait_ns: int
    slices: int


def parse_task_stat(text: str) -> tuple[str, int]:
    """(comm, utime+stime ticks) of a /proc/.../stat line; comm may hold spaces and ')'."""
    left, right = text.find("("), text.rfind(")")
    fields = text[right + 2:].split()
    # After ")": state is field 3 of stat(5); utime and stime are fields 14 and 15.
    return text[left + 1:right], int(fields[11]) + int(fields[12])


def parse_schedstat(text: str) -> tuple[int, int, int]:
    """(run ns, run-queue wait ns, timeslices) of a schedstat line."""
    run, wait, slices = text.split()[:3]
    return int(run), int(wait), int(slices)


def classify(tid: int, pid: int, comm: str, vcpu_tids: Collection[int]) -> str:
    """The class of one QEMU thread (names from ``-name ...,debug-threads=on``)."""
    if tid in vcpu_tids or (comm.startswith("CPU ") and "/" in comm):
        return "vcpu"
    if comm.startswith("IO iothread"):
        return "iothread"
    if comm == "worker":
        return "worker"
    if tid == pid:
        return "main"
    return "other"


def _zero() -> ThreadSample:
    return ThreadSample("", 0, 0, 0, 0)


@dataclass
class ClassTotals:
    """Accumulated deltas of one thread class over one or more intervals."""

    cpu_s: float = 0.0
    run_s: float = 0.0
    wait_s: float = 0.0
    slices: int = 0
    #: Thread-seconds: each interval adds (threads alive) x (interval length).
    thread_s: float = 0.0
    max_threads: int = 0

    def add(self, other: ClassTotals) -> None:
        self.cpu_s += other.cpu_s
        self.run_s += other.run_s
        self.wait_s += other.wait_s
        self.slices += other.slices
        self.thread_s += other.thread_s
        self.max_threads = max(self.max_threads, other.max_threads)


def thread_deltas(a: Mapping[int, ThreadSample], b: Mapping[int, ThreadSample],
                  seconds: float, classes: Mapping[int, str]) -> dict[str, ClassTotals]:
    """Per-class deltas between two snapshots. A thread born in between counts from
    zero; one that died in between is dropped from this interval only."""
    out: dict[str, ClassTotals] = {}
    for tid, now in b.items():
        before = a.get(tid, _zero())
        for name in (classes.get(tid, "other"), "total"):
            acc = out.setdefault(name, ClassTotals())
            acc.cpu_s += (now.cpu_ticks - before.cpu_ticks) / CLK_TCK
            acc.run_s += (now.run_ns - before.run_ns) / 1e9
            acc.wait_s += (now.wait_ns - before.wait_ns) / 1e9
            acc.slices += now.slices - before.slices
            acc.thread_s += seconds
            acc.max_threads += 1
    return out


def class_metrics(totals: Mapping[str, ClassTotals], seconds: float) -> dict[str, float]:
    """The documented metrics of every class from its accumulated deltas."""
    out: dict[str, float] = {}
    for name, acc in totals.items():
        if seconds <= 0 or acc.thread_s <= 0:
            continue
        out[f"{name}.cpu_pct"] = acc.cpu_s / seconds * 100.0
        out[f"{name}.wait_pct"] = acc.wait_s / seconds * 100.0
        busy = (acc.run_s + acc.wait_s) / acc.thread_s * 100.0
        out[f"{name}.blocked_pct"] = max(0.0, 100.0 - busy)
        out[f"{name}.exec_per_s"] = acc.slices / seconds
        out[f"{name}.cpu_ms_per_exec"] = acc.run_s * 1000.0 / acc.slices if acc.slices else 0.0
        out[f"{name}.threads"] = float(acc.max_threads)
    return out


def parse_proc_stat(text: str) -> tuple[int, ...]:
    """The aggregate ``cpu`` line of /proc/stat: user nice system idle iowait irq
    softirq steal (jiffies)."""
    fields = text.split("\n", 1)[0].split()
    return tuple(int(v) for v in fields[1:9])


def host_cpu_metrics(a: tuple[int, ...], b: tuple[int, ...]) -> dict[str, float]:
    delta = [y - x for x, y in zip(a, b, strict=True)]
    total = sum(delta) or 1
    user, nice, system, idle, iowait, irq, softirq, steal = delta
    return {
        "busy_pct": 100.0 * (total - idle - iowait) / total,
        "user_pct": 100.0 * (user + nice) / total,
        "system_pct": 100.0 * (system + irq + softirq) / total,
        "iowait_pct": 100.0 * iowait / total,
        "steal_pct": 100.0 * steal / total,
    }
