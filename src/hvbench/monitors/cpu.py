"""Per-thread CPU accounting of a (QEMU) process by thread class, and host CPU.

Pure functions only (no I/O); :mod:`hvbench.monitors.readers` reads the files.

Threads. For each thread ``/proc/PID/task/TID/stat`` gives its name (comm), start time
and utime+stime (clock ticks); ``/proc/PID/task/TID/schedstat`` gives the time it ran
(ns), the time it waited on a run queue while runnable (ns) and its timeslices (how
many times it was put on a CPU). The comm is taken from ``stat`` (the same
``task->comm`` as the ``comm`` file, so one read fewer per thread).

Classes (:func:`classify`), for QEMU started with ``-name NAME,debug-threads=on``:

- ``vcpu``: a thread id QMP ``query-cpus-fast`` reported, or a comm ``CPU <n>/<accel>``
- ``main``: the thread whose id is the process id (QEMU's main loop, which also moves
  the packets of tap and user-mode NICs when vhost-net is not used: it is the host-side
  network thread of such a guest)
- ``iothread``: comm ``IO <id>`` for an ``-object iothread,id=<id>`` (except
  ``IO mon_iothread``, the monitor's own thread, which is ``other``), or a thread id
  QMP ``query-iothreads`` reported (``qemu-storage-daemon`` does not name its threads;
  its other threads are ``main`` and ``other``)
- ``worker``: comm ``worker``, the thread pool that runs ``aio=threads`` requests
- ``vhost``: comm ``vhost-<pid>``, the vhost-net workers that move a virtio-net NIC's
  packets in the kernel (Linux >= 6.4 runs them as threads of the QEMU process; older
  kernels as kernel threads outside it, which this sampler does not see)
- ``other``: the rest (``call_rcu``, ``IO mon_iothread``, ...)

Metrics of a group of threads over an interval of ``T`` seconds (:func:`group_metrics`):

- ``cpu_pct``: Δ(utime+stime) / T x 100, in % of one core (sums over the group)
- ``run_pct``: Δrun (schedstat) / T x 100, the same from the scheduler's ns clock
- ``wait_pct``: Δrun-queue wait / T x 100 (runnable, but another task had the CPU)
- ``max_runnable_pct``: the most runnable thread's (Δrun + Δwait) / its alive time x
  100: a vCPU at 100 always had guest work (never halted), whatever share of a core
  the host gave it
- ``blocked_pct``: 100 - (Δrun + Δwait) / alive x 100, floored at 0, where ``alive`` is
  the sum over the group of each thread's lifetime within the interval; for one thread
  alive throughout it is ``100 - run_pct - wait_pct`` (XenMon's "blocked": neither
  running nor runnable, i.e. waiting for I/O or an event); for a group it is the
  average thread's blocked share
- ``exec_per_s``: Δtimeslices / T; ``cpu_ms_per_exec``: Δrun / Δtimeslices in ms
- ``vol_cs_per_s``, ``invol_cs_per_s``: Δ``voluntary_ctxt_switches`` / T (the thread
  gave up the CPU: it blocked or slept) and Δ``nonvoluntary_ctxt_switches`` / T (it
  was preempted while runnable) from ``/proc/PID/task/TID/status``; ``cs_per_s`` is
  their sum
- ``wakeups_per_s``: Δ``nr_wakeups`` / T from ``/proc/PID/task/TID/sched``, only when
  the kernel keeps it (CONFIG_SCHEDSTATS and ``kernel.sched_schedstats = 1``; without
  them the line is absent and the metric is left out rather than reported as 0; the
  thread sampler's summary says which with ``total.wakeups_known``, 1 or 0)

When the host is itself a VM, time its hypervisor steals from a vCPU is neither run nor
run-queue wait to the host's scheduler, so it shows up as ``blocked``: read
``blocked_pct`` together with the host's ``steal_pct``. The scheduler updates a running
thread's run time at ticks and switches, so intervals much shorter than a tick (the
last series row can be one) are noisy; whole-window summaries are not.
- ``threads``: how many distinct threads of the group were seen in the interval

Threads come and go (the worker pool grows on demand and idles out). A thread absent
from the interval's first snapshot counts from zero only if it started after that
snapshot (its start time says so), otherwise it existed unseen and is left out of that
interval; a thread that vanished counts up to its last observation
(:func:`thread_deltas`). A thread id reused by a new thread is told apart by its start
time.

Host CPU (:func:`host_cpu_metrics`) from /proc/stat, for all CPUs (no prefix) and each
CPU (``cpu0.``, ``cpu1.``...): ``busy_pct`` (100 - idle - iowait), ``user_pct``
(user+nice), ``system_pct``, ``irq_pct`` (irq+softirq), ``iowait_pct``, ``steal_pct``,
``idle_pct``. Guest time is already part of user time and is not added again.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from hvbench.host.cgroups import is_vcpu_name

#: Clock ticks per second of the utime/stime/starttime fields (USER_HZ, 100 on Linux).
CLK_TCK: int = os.sysconf("SC_CLK_TCK")
CLASSES = ("vcpu", "iothread", "worker", "vhost", "main", "other")
GROUP_METRICS = ("cpu_pct", "max_cpu_pct", "run_pct", "wait_pct", "max_wait_pct",
                 "max_runnable_pct", "blocked_pct", "exec_per_s",
                 "cpu_ms_per_exec", "vol_cs_per_s", "invol_cs_per_s", "cs_per_s",
                 "wakeups_per_s", "threads")
HOST_CPU_METRICS = ("busy_pct", "user_pct", "system_pct", "irq_pct", "iowait_pct",
                    "steal_pct", "idle_pct")

# Positions in the fields after "(comm) " of stat(5): state is field 3 there, so
# field N is at index N - 3.
_UTIME, _STIME, _STARTTIME = 14 - 3, 15 - 3, 22 - 3


@dataclass(frozen=True, slots=True)
class TaskSample:
    """One thread's counters at one instant."""

    tid: int
    comm: str
    start_ticks: int
    cpu_ticks: int
    run_ns: int
    wait_ns: int
    slices: int
    #: voluntary / nonvoluntary context switches (status), nr_wakeups (sched; None
    #: when the kernel does not expose it).
    vol_cs: int = 0
    invol_cs: int = 0
    wakeups: int | None = None


@dataclass(frozen=True, slots=True)
class TaskSnapshot:
    """Every thread of a process at ``boot_s`` (CLOCK_BOOTTIME seconds, the clock of
    the start times in /proc)."""

    boot_s: float
    tasks: Mapping[int, TaskSample]


@dataclass(frozen=True, slots=True)
class ThreadDelta:
    """What one thread did within an interval."""

    tid: int
    comm: str
    cls: str
    cpu_s: float
    run_s: float
    wait_s: float
    slices: int
    alive_s: float
    vol_cs: int = 0
    invol_cs: int = 0
    wakeups: int | None = None


def parse_task_stat(text: str) -> tuple[str, int, int]:
    """(comm, utime+stime ticks, start time ticks) of a /proc/.../stat line.

    The comm may hold spaces and parentheses, so it ends at the LAST ')'. Raises
    ValueError when the text is not a stat line (e.g. empty: the thread exited).
    """
    left, right = text.find("("), text.rfind(")")
    if left < 0 or right < left:
        raise ValueError(f"not a /proc stat line: {text[:80]!r}")
    fields = text[right + 2:].split()
    if len(fields) <= _STARTTIME:
        raise ValueError(f"truncated /proc stat line: {text[:80]!r}")
    ticks = int(fields[_UTIME]) + int(fields[_STIME])
    return text[left + 1:right], ticks, int(fields[_STARTTIME])


def parse_schedstat(text: str) -> tuple[int, int, int]:
    """(run ns, run-queue wait ns, timeslices) of a schedstat line (ValueError if not)."""
    fields = text.split()
    if len(fields) < 3:
        raise ValueError(f"not a schedstat line: {text[:80]!r}")
    return int(fields[0]), int(fields[1]), int(fields[2])


def parse_task_status(text: str) -> tuple[int, int]:
    """(voluntary, nonvoluntary context switches) of a /proc/.../status text, or of
    its tail from the ``voluntary_ctxt_switches`` line on. Raises ValueError when
    either line is missing (the text was cut short: the thread exited)."""
    found: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"):
            found[key] = int(value)
    if len(found) != 2:
        raise ValueError(f"no context switch lines in status text: {text[:80]!r}")
    return found["voluntary_ctxt_switches"], found["nonvoluntary_ctxt_switches"]


def parse_task_sched(text: str) -> int | None:
    """``nr_wakeups`` of a /proc/.../sched text; None when the kernel does not keep
    it (no schedstats). Kernels before 5.19 name it ``se.statistics.nr_wakeups``."""
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip().removeprefix("se.statistics.") == "nr_wakeups":
            return int(value)
    return None


def parse_task(tid: int, stat_text: str, schedstat_text: str, status_text: str = "",
               sched_text: str = "") -> TaskSample:
    """One thread's :class:`TaskSample` from its stat, schedstat and (when given)
    status and sched text. Raises ValueError when a given text is not what it should
    be; an empty ``status_text`` leaves the context switches at 0."""
    comm, ticks, start = parse_task_stat(stat_text)
    run, wait, slices = parse_schedstat(schedstat_text)
    vol, invol = parse_task_status(status_text) if status_text else (0, 0)
    return TaskSample(tid, comm, start, ticks, run, wait, slices, vol, invol,
                      parse_task_sched(sched_text))


def classify(tid: int, pid: int, comm: str, vcpu_tids: Collection[int] = (),
             iothread_tids: Collection[int] = ()) -> str:
    """The class of one QEMU (or storage daemon) thread (see the module docstring)."""
    if tid in vcpu_tids or is_vcpu_name(comm):
        return "vcpu"
    if tid == pid:
        return "main"
    if tid in iothread_tids or (comm.startswith("IO ") and comm != "IO mon_iothread"):
        return "iothread"
    if comm == "worker":
        return "worker"
    if comm.startswith("vhost-"):
        return "vhost"
    return "other"


def latest_per_thread(snapshots: Sequence[TaskSnapshot]) -> list[tuple[TaskSample, float]]:
    """Each thread's last observation in ``snapshots`` with its time, so a thread that
    exited inside a window still counts up to its last sample. Threads are told apart
    by (tid, start time): a reused tid is another thread."""
    last: dict[tuple[int, int], tuple[TaskSample, float]] = {}
    for snap in snapshots:
        for task in snap.tasks.values():
            last[(task.tid, task.start_ticks)] = (task, snap.boot_s)
    return list(last.values())


def _baseline(first: TaskSnapshot, task: TaskSample,
              clk_tck: int) -> tuple[TaskSample, float] | None:
    """(counters to subtract from ``task``, when its interval began): its values at
    ``first``; zeros and its start time if it started after ``first``; None if it
    existed then but was not seen, so how much it did inside the interval is unknown."""
    before = first.tasks.get(task.tid)
    if before is not None and before.start_ticks == task.start_ticks:
        return before, first.boot_s
    # Start times are truncated to a tick: allow one tick before the snapshot.
    if task.start_ticks >= first.boot_s * clk_tck - 1:
        zero = TaskSample(task.tid, task.comm, task.start_ticks, 0, 0, 0, 0, 0, 0,
                          None if task.wakeups is None else 0)
        return zero, max(first.boot_s, task.start_ticks / clk_tck)
    return None


def thread_deltas(first: TaskSnapshot, ends: Iterable[tuple[TaskSample, float]], pid: int,
                  vcpu_tids: Collection[int] = (), clk_tck: int = CLK_TCK, *,
                  iothread_tids: Collection[int] = ()) -> list[ThreadDelta]:
    """Per-thread deltas from ``first`` to each thread's end observation ``(sample,
    boot_s)`` (a later snapshot's tasks, or :func:`latest_per_thread`). Threads that
    existed unseen at ``first``, or were not seen after it, are left out."""
    out: list[ThreadDelta] = []
    for task, end_s in ends:
        if end_s <= first.boot_s:
            continue  # last seen at the start (it exited right after): nothing inside
        found = _baseline(first, task, clk_tck)
        if found is None:
            continue
        base, born_s = found
        out.append(ThreadDelta(
            tid=task.tid, comm=task.comm, cls=classify(task.tid, pid, task.comm, vcpu_tids,
                                                      iothread_tids),
            cpu_s=max(0, task.cpu_ticks - base.cpu_ticks) / clk_tck,
            run_s=max(0, task.run_ns - base.run_ns) / 1e9,
            wait_s=max(0, task.wait_ns - base.wait_ns) / 1e9,
            slices=max(0, task.slices - base.slices),
            alive_s=max(0.0, end_s - born_s),
            vol_cs=max(0, task.vol_cs - base.vol_cs),
            invol_cs=max(0, task.invol_cs - base.invol_cs),
            wakeups=(None if task.wakeups is None or base.wakeups is None
                     else max(0, task.wakeups - base.wakeups))))
    return out


def snapshot_ends(snap: TaskSnapshot) -> list[tuple[TaskSample, float]]:
    """A snapshot's threads as end observations for :func:`thread_deltas`."""
    return [(task, snap.boot_s) for task in snap.tasks.values()]


def _runnable_pct(delta: ThreadDelta) -> float:
    """The share of its time alive a thread was running or waiting for a core, in %
    (100 - its own blocked share): a vCPU at 100 never halted."""
    if delta.alive_s <= 0:
        return 0.0
    return min(100.0, (delta.run_s + delta.wait_s) / delta.alive_s * 100.0)


def group_metrics(deltas: Iterable[ThreadDelta], seconds: float) -> dict[str, float]:
    """The metrics of a group of threads over ``seconds`` (zeros if ``seconds`` <= 0);
    ``wakeups_per_s`` only when every thread of the group has its wake-ups.
    ``max_cpu_pct`` and ``max_wait_pct`` are the busiest and the longest-waiting
    thread's: a group's sum or mean hides one saturated or starved vCPU among idle
    ones."""
    group = list(deltas)
    cpu = sum(d.cpu_s for d in group)
    run = sum(d.run_s for d in group)
    wait = sum(d.wait_s for d in group)
    slices = sum(d.slices for d in group)
    alive = sum(d.alive_s for d in group)
    vol = sum(d.vol_cs for d in group)
    invol = sum(d.invol_cs for d in group)
    per_s = 1.0 / seconds if seconds > 0 else 0.0
    blocked = max(0.0, 100.0 - (run + wait) / alive * 100.0) if alive > 0 else 0.0
    out = {
        "cpu_pct": cpu * per_s * 100.0,
        "max_cpu_pct": max((d.cpu_s for d in group), default=0.0) * per_s * 100.0,
        "run_pct": run * per_s * 100.0,
        "wait_pct": wait * per_s * 100.0,
        "max_wait_pct": max((d.wait_s for d in group), default=0.0) * per_s * 100.0,
        "max_runnable_pct": max((_runnable_pct(d) for d in group), default=0.0),
        "blocked_pct": blocked,
        "exec_per_s": slices * per_s,
        "cpu_ms_per_exec": run * 1000.0 / slices if slices else 0.0,
        "vol_cs_per_s": vol * per_s,
        "invol_cs_per_s": invol * per_s,
        "cs_per_s": (vol + invol) * per_s,
        "threads": float(len(group)),
    }
    wakeups = [d.wakeups for d in group]
    if group and all(w is not None for w in wakeups):
        out["wakeups_per_s"] = sum(w or 0 for w in wakeups) * per_s
    return out


def class_metrics(deltas: Sequence[ThreadDelta], seconds: float) -> dict[str, float]:
    """``<class>.<metric>`` for every class with threads, and ``total.<metric>``."""
    out: dict[str, float] = {}
    for cls in CLASSES:
        members = [d for d in deltas if d.cls == cls]
        if members:
            out |= {f"{cls}.{k}": v for k, v in group_metrics(members, seconds).items()}
    out |= {f"total.{k}": v for k, v in group_metrics(deltas, seconds).items()}
    return out


def parse_proc_stat(text: str) -> dict[str, tuple[int, ...]]:
    """The ``cpu`` lines of /proc/stat: ``{"cpu": all, "cpu0": ..., ...}`` with user,
    nice, system, idle, iowait, irq, softirq, steal (ticks). Raises ValueError when
    there is no ``cpu`` line."""
    out: dict[str, tuple[int, ...]] = {}
    for line in text.splitlines():
        if not line.startswith("cpu"):
            break  # the cpu lines come first; the rest (intr, ctxt...) is not needed
        fields = line.split()
        # Fields 9-10 (guest, guest_nice) are already included in user and nice.
        values = tuple(int(v) for v in fields[1:9])
        out[fields[0]] = values + (0,) * (8 - len(values))
    if "cpu" not in out:
        raise ValueError("no aggregate cpu line in /proc/stat text")
    return out


def cpu_time_metrics(a: Sequence[int], b: Sequence[int]) -> dict[str, float]:
    """The shares of one CPU line's ticks between two snapshots (all 0 if no tick)."""
    # iowait and idle can step back on NO_HZ kernels: clamp each delta at 0.
    user, nice, system, idle, iowait, irq, softirq, steal = (
        max(0, y - x) for x, y in zip(a, b, strict=True))
    total = user + nice + system + idle + iowait + irq + softirq + steal
    scale = 100.0 / total if total else 0.0
    return {
        "busy_pct": (total - idle - iowait) * scale,
        "user_pct": (user + nice) * scale,
        "system_pct": system * scale,
        "irq_pct": (irq + softirq) * scale,
        "iowait_pct": iowait * scale,
        "steal_pct": steal * scale,
        "idle_pct": idle * scale,
    }


def host_cpu_metrics(a: Mapping[str, Sequence[int]],
                     b: Mapping[str, Sequence[int]]) -> dict[str, float]:
    """All-CPU metrics without prefix and ``cpuN.<metric>`` per CPU in both snapshots
    (a CPU that went offline in between is left out)."""
    out: dict[str, float] = {}
    for name, now in b.items():
        if name not in a:
            continue
        prefix = "" if name == "cpu" else f"{name}."
        out |= {prefix + k: v for k, v in cpu_time_metrics(a[name], now).items()}
    return out
