"""Thread and host CPU arithmetic on /proc snapshots stored from this host.

tasks-a.json / tasks-b.json hold /proc/PID/task/*/{stat,schedstat} of a Python process
(pid 5725) whose threads were renamed like QEMU's, taken 1.005460754 s apart
(CLOCK_BOOTTIME 5526.043383027 -> 5527.048843781). Deltas by hand (ticks are 1/100 s):

    tid   comm          ticks  run ns      wait ns    slices  note
    5725  python        2->3   2749665     3050673    26      main (tid == pid)
    5726  CPU 0/TCG     39->124  841575682  64803841   1158    spinning
    5727  CPU 1/TCG     0->0   219133      3285972    21      sleeping
    5728  IO iothread0  0->0   6666073     14350337   411     2 ms sleeps
    5729  x) (y z       0->0   726249      49963185   65      comm with ") ("
    5730  worker        gone in b                              dropped
    5733  worker        0->8   87182045    29725301   150     born at tick 552616
                                                              (5526.16 s, after a)
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from hvbench.analysis.metrics import is_known
from hvbench.monitors.cpu import (
    TaskSample,
    TaskSnapshot,
    class_metrics,
    classify,
    cpu_time_metrics,
    host_cpu_metrics,
    latest_per_thread,
    parse_proc_stat,
    parse_schedstat,
    parse_task_sched,
    parse_task_stat,
    parse_task_status,
    snapshot_ends,
    thread_deltas,
)
from hvbench.monitors.readers import HostCpuSampler, RawThreads, ThreadCpuSampler, _wakeups_line

FIXTURES = Path(__file__).parent.parent / "fixtures" / "monitors"
PID = 5725
T = 5527.048843781 - 5526.043383027


def _load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    return data


def _raw(name: str) -> RawThreads:
    data = _load(name)
    # tasks-a/b predate the status and sched files: their context switches read as 0.
    rows = tuple((int(tid), f["stat"].encode(), f["schedstat"].encode(),
                  f.get("status", "").encode(), f.get("sched", "").encode())
                 for tid, f in data["tasks"].items())
    return float(data["boot_s"]), rows


def _snap(name: str) -> TaskSnapshot:
    return ThreadCpuSampler.decode(_raw(name))


def test_stat_comm_with_spaces_and_parentheses() -> None:
    line = "4242 (CPU 0/TCG) (x)) R 1 2 3 0 -1 0 0 0 0 0 250 30 0 0 20 0 1 0 777 2 3\n"
    assert parse_task_stat(line) == ("CPU 0/TCG) (x)", 280, 777)
    snap = _snap("tasks-a.json")
    assert snap.tasks[5729].comm == "x) (y z"
    assert snap.tasks[5729].start_ticks == 552550
    assert snap.tasks[5726] == TaskSample(5726, "CPU 0/TCG", 552548, 39, 403623129,
                                          60863598, 321)


def test_garbage_and_empty_reads_are_rejected() -> None:
    for bad in ("", "4242 no parens", "4242 (x) R 1 2"):
        with pytest.raises(ValueError, match="stat line"):
            parse_task_stat(bad)
    with pytest.raises(ValueError, match="schedstat"):
        parse_schedstat("12 34\n")
    assert parse_schedstat("1000000000 250000000 42\n") == (1_000_000_000, 250_000_000, 42)
    # A thread that exited between its two reads is left out of the snapshot.
    snap = ThreadCpuSampler.decode((1.0, (
        (1, b"", b"", b"", b""),
        (2, b"2 (a) S" + b" 0" * 30, b"1 2 3\n", b"", b""),
        # status cut short before the context switch lines
        (3, b"3 (a) S" + b" 0" * 30, b"1 2 3\n", b"Name:\ta\n", b""))))
    assert list(snap.tasks) == [2]


@pytest.mark.parametrize(
    ("tid", "comm", "expected"),
    [(10, "qemu-system-x86", "main"), (11, "CPU 0/KVM", "vcpu"), (12, "CPU 13/TCG", "vcpu"),
     (13, "IO iothread0", "iothread"), (14, "IO disk-io", "iothread"),
     (15, "IO mon_iothread", "other"), (16, "worker", "worker"), (17, "call_rcu", "other"),
     (18, "CPU x/KVM", "other"), (19, "whatever", "vcpu"), (20, "vhost-10", "vhost")],
)
def test_classify(tid: int, comm: str, expected: str) -> None:
    assert classify(tid, 10, comm, {19}) == expected


def test_class_metrics_with_a_thread_born_and_one_gone() -> None:
    a, b = _snap("tasks-a.json"), _snap("tasks-b.json")
    deltas = thread_deltas(a, snapshot_ends(b), PID)
    assert sorted(d.tid for d in deltas) == [5725, 5726, 5727, 5728, 5729, 5733]
    m = class_metrics(deltas, T)
    vcpu_run, vcpu_wait = (841575682 + 219133) / 1e9, (64803841 + 3285972) / 1e9
    assert m["vcpu.threads"] == 2
    assert m["vcpu.cpu_pct"] == pytest.approx(0.85 / T * 100)
    # One vCPU did all of it, the other none: the busiest thread keeps what the sum
    # over two threads halves when read per vCPU.
    assert m["vcpu.max_cpu_pct"] == pytest.approx(0.85 / T * 100)
    assert m["total.max_cpu_pct"] == pytest.approx(0.85 / T * 100)
    assert m["main.max_cpu_pct"] == pytest.approx(0.01 / T * 100)
    assert m["vcpu.max_wait_pct"] == pytest.approx(64803841 / 1e9 / T * 100)
    # The most runnable vCPU is the busy one, read against its own time alive.
    assert m["vcpu.max_runnable_pct"] == pytest.approx((841575682 + 64803841) / 1e9 / T * 100)
    assert m["vcpu.run_pct"] == pytest.approx(vcpu_run / T * 100)
    assert m["vcpu.wait_pct"] == pytest.approx(vcpu_wait / T * 100)
    assert m["vcpu.blocked_pct"] == pytest.approx(100 - (vcpu_run + vcpu_wait) / (2 * T) * 100)
    assert m["vcpu.exec_per_s"] == pytest.approx(1179 / T)
    assert m["vcpu.cpu_ms_per_exec"] == pytest.approx(vcpu_run * 1000 / 1179)
    # The new worker counts from zero and was alive from its start (5526.16 s) only.
    alive = 5527.048843781 - 5526.16
    assert m["worker.threads"] == 1 and m["worker.cpu_pct"] == pytest.approx(0.08 / T * 100)
    assert m["worker.blocked_pct"] == pytest.approx(
        100 - (87182045 + 29725301) / 1e9 / alive * 100)
    assert m["main.cpu_pct"] == pytest.approx(0.01 / T * 100)
    assert m["iothread.exec_per_s"] == pytest.approx(411 / T)
    assert m["other.wait_pct"] == pytest.approx(49963185 / 1e9 / T * 100)
    assert m["total.cpu_pct"] == pytest.approx((0.01 + 0.85 + 0.08) / T * 100)
    assert m["total.threads"] == 6


def test_a_single_thread_blocked_is_100_minus_run_minus_wait() -> None:
    a, b = _snap("tasks-a.json"), _snap("tasks-b.json")
    (cpu1,) = [d for d in thread_deltas(a, snapshot_ends(b), PID) if d.tid == 5727]
    m = class_metrics([cpu1], T)
    assert m["vcpu.blocked_pct"] == pytest.approx(
        100 - m["vcpu.run_pct"] - m["vcpu.wait_pct"])


def test_unseen_old_threads_are_skipped_and_reused_tids_start_from_zero() -> None:
    a = TaskSnapshot(100.0, {1: TaskSample(1, "worker", 5000, 10, 10, 10, 1)})
    b = TaskSnapshot(101.0, {
        1: TaskSample(1, "worker", 10050, 3, 30_000_000, 0, 3),  # tid 1 reused at 100.5 s
        2: TaskSample(2, "worker", 9000, 50, 50, 50, 5)})        # started at 90 s, unseen
    (reused,) = thread_deltas(a, snapshot_ends(b), pid=99, clk_tck=100)
    assert (reused.tid, reused.cpu_s, reused.slices) == (1, 0.03, 3)
    assert reused.alive_s == pytest.approx(0.5)


def test_whole_window_counts_threads_that_exit_up_to_their_last_sample() -> None:
    first = TaskSnapshot(10.0, {1: TaskSample(1, "m", 0, 0, 0, 0, 0),
                                2: TaskSample(2, "worker", 0, 0, 0, 0, 0)})
    mid = TaskSnapshot(11.0, {1: TaskSample(1, "m", 0, 10, 10**8, 0, 10),
                              2: TaskSample(2, "worker", 0, 50, 5 * 10**8, 0, 20)})
    last = TaskSnapshot(12.0, {1: TaskSample(1, "m", 0, 20, 2 * 10**8, 0, 20)})
    deltas = thread_deltas(first, latest_per_thread([first, mid, last]), pid=1, clk_tck=100)
    m = class_metrics(deltas, 2.0)
    assert m["worker.cpu_pct"] == pytest.approx(25.0)      # 0.5 s over 2 s
    assert m["worker.blocked_pct"] == pytest.approx(50.0)  # ran 0.5 of its 1 s seen
    assert m["main.cpu_pct"] == pytest.approx(10.0)
    assert m["total.cpu_pct"] == pytest.approx(35.0)


def test_sampler_report_from_raw_fixture_samples() -> None:
    sampler = ThreadCpuSampler(PID, vcpu_tids={5726, 5727})
    report = sampler.report([(50.0, _raw("tasks-a.json")), (51.0, _raw("tasks-b.json"))],
                            t0=49.0)
    assert report.summary["vcpu.cpu_pct"] == pytest.approx(0.85 / T * 100)
    (t, values), = report.series
    summary = {k: v for k, v in report.summary.items() if k != "total.wakeups_known"}
    assert t == 2.0 and values == pytest.approx(summary)
    by_tid = {t.tid: t for t in report.threads}
    assert by_tid[5729].cls == "other" and by_tid[5729].comm == "x) (y z"
    assert by_tid[5726].metrics["cpu_pct"] == pytest.approx(0.85 / T * 100)
    assert 5730 not in by_tid


def test_host_cpu_from_stored_proc_stat() -> None:
    a = parse_proc_stat((FIXTURES / "proc-stat-a.txt").read_text())
    b = parse_proc_stat((FIXTURES / "proc-stat-b.txt").read_text())
    assert set(a) == {"cpu", "cpu0", "cpu1"}
    m = host_cpu_metrics(a, b)
    # all: user 181, system 10, idle 2, softirq 0, steal 6 -> 199 ticks
    assert m["busy_pct"] == pytest.approx(197 / 199 * 100)
    assert m["user_pct"] == pytest.approx(181 / 199 * 100)
    assert m["system_pct"] == pytest.approx(10 / 199 * 100)
    assert m["steal_pct"] == pytest.approx(6 / 199 * 100)
    assert m["idle_pct"] == pytest.approx(2 / 199 * 100) and m["iowait_pct"] == 0.0
    # cpu1: user 94, system 2, idle 1, softirq 1, steal 3 -> 101 ticks
    assert m["cpu1.busy_pct"] == pytest.approx(100 / 101 * 100)
    assert m["cpu1.irq_pct"] == pytest.approx(1 / 101 * 100)
    assert m["cpu0.busy_pct"] == pytest.approx(98 / 99 * 100)


def test_host_cpu_edge_cases() -> None:
    same = (1, 2, 3, 4, 5, 6, 7, 8)
    assert set(cpu_time_metrics(same, same).values()) == {0.0}
    # iowait stepping back (NO_HZ accounting) is clamped, not negative.
    m = cpu_time_metrics((0, 0, 0, 0, 10, 0, 0, 0), (0, 0, 10, 10, 5, 0, 0, 0))
    assert m["iowait_pct"] == 0.0 and m["busy_pct"] == 50.0
    with pytest.raises(ValueError, match="no aggregate cpu line"):
        parse_proc_stat("intr 1 2 3\n")
    # An old kernel's 7-field cpu line is padded with steal 0.
    assert parse_proc_stat("cpu 1 2 3 4 5 6 7\n")["cpu"] == (1, 2, 3, 4, 5, 6, 7, 0)


def test_host_cpu_sampler_drops_the_interrupt_lines(tmp_path: Path) -> None:
    source = tmp_path / "stat"
    source.write_text((FIXTURES / "proc-stat-a.txt").read_text())
    sampler = HostCpuSampler(source=str(source))
    sampler.open()
    raw = sampler.sample()
    sampler.close()
    assert raw.startswith(b"cpu  240361 ") and b"intr" not in raw
    assert raw.count(b"\n") == 2


# -- context switches and wake-ups -----------------------------------------------------------
# tasks-cs-a.json / tasks-cs-b.json: /proc/PID/task/*/{stat,schedstat,status,sched} of a
# Python process (pid 16445) with threads renamed like QEMU's, taken 1.194378 s apart on
# this host (Linux 6.18 without schedstats: sched has no nr_wakeups line). By hand:
#
#    tid    comm          voluntary  nonvoluntary
#    16445  python3       92->126    22->33        main
#    16504  CPU 0/TCG     83->212    113->419      spinning: preempted
#    16505  CPU 1/TCG     31->94     8->17         50 ms sleeps
#    16506  IO iothread0  208->620   13->24        2 ms sleeps
CS_PID = 16445
CS_T = 2339.986464257 - 2338.79208635


def test_status_context_switches_from_real_text() -> None:
    status = _load("tasks-cs-a.json")["tasks"]["16504"]["status"]
    assert parse_task_status(status) == (83, 113)
    # The sampler keeps only the tail from the voluntary line on: same result.
    assert parse_task_status(status[status.index("voluntary_ctxt"):]) == (83, 113)
    with pytest.raises(ValueError, match="context switch"):
        parse_task_status(status[:status.index("voluntary_ctxt")])


def test_sched_without_schedstats_abstains() -> None:
    sched = _load("tasks-cs-a.json")["tasks"]["16504"]["sched"]
    assert "nr_voluntary_switches" in sched and parse_task_sched(sched) is None
    # The lines a kernel with CONFIG_SCHEDSTATS and kernel.sched_schedstats=1 adds
    # (printed "%-45s:%21Ld"; before 5.19 under se.statistics.), inserted into this
    # host's real text: nr_wakeups is read, the nr_wakeups_* variants are not.
    lines = sched.splitlines(keepends=True)
    for key in ("nr_wakeups_sync", "nr_wakeups", "nr_wakeups_migrate"):
        lines.insert(4, f"{key:<45s}:{len(key):>21d}\n")
    assert parse_task_sched("".join(lines)) == len("nr_wakeups")
    old = f"{'se.statistics.nr_wakeups':<45s}:{77:>21d}\n"
    assert parse_task_sched(sched + old) == 77
    assert _wakeups_line(("".join(lines)).encode()).split(b":")[1].strip() == b"10"
    assert _wakeups_line(sched.encode()) == b""


def test_context_switch_rates_per_class() -> None:
    a, b = _snap("tasks-cs-a.json"), _snap("tasks-cs-b.json")
    deltas = thread_deltas(a, snapshot_ends(b), CS_PID, {16504, 16505})
    m = class_metrics(deltas, CS_T)
    assert m["vcpu.vol_cs_per_s"] == pytest.approx((129 + 63) / CS_T)
    assert m["vcpu.invol_cs_per_s"] == pytest.approx((306 + 9) / CS_T)
    assert m["vcpu.cs_per_s"] == pytest.approx((129 + 63 + 306 + 9) / CS_T)
    assert m["iothread.vol_cs_per_s"] == pytest.approx(412 / CS_T)
    assert m["main.invol_cs_per_s"] == pytest.approx(11 / CS_T)
    assert m["total.cs_per_s"] == pytest.approx((34 + 11 + 507 + 412 + 11) / CS_T)
    # This kernel keeps no nr_wakeups: left out, not 0.
    assert not any(k.endswith("wakeups_per_s") for k in m)


def test_wakeups_only_when_every_thread_has_them() -> None:
    def snap(t: float, w1: int | None, w2: int | None) -> TaskSnapshot:
        return TaskSnapshot(t, {1: TaskSample(1, "m", 0, 0, 0, 0, 0, 0, 0, w1),
                                2: TaskSample(2, "worker", 0, 0, 0, 0, 0, 0, 0, w2)})
    deltas = thread_deltas(snap(10.0, 5, 100), snapshot_ends(snap(12.0, 25, 300)), pid=1,
                           clk_tck=100)
    m = class_metrics(deltas, 2.0)
    assert m["main.wakeups_per_s"] == 10.0 and m["worker.wakeups_per_s"] == 100.0
    assert m["total.wakeups_per_s"] == 110.0
    deltas = thread_deltas(snap(10.0, 5, None), snapshot_ends(snap(12.0, 25, None)), pid=1,
                           clk_tck=100)
    m = class_metrics(deltas, 2.0)
    assert "main.wakeups_per_s" in m and "total.wakeups_per_s" not in m


def test_sampler_summary_notes_whether_wakeups_were_read() -> None:
    sampler = ThreadCpuSampler(CS_PID, vcpu_tids={16504, 16505})
    report = sampler.report([(50.0, _raw("tasks-cs-a.json")), (51.0, _raw("tasks-cs-b.json"))],
                            t0=49.0)
    assert report.summary["total.wakeups_known"] == 0.0
    assert report.summary["vcpu.invol_cs_per_s"] == pytest.approx(315 / CS_T)
    by_tid = {t.tid: t for t in report.threads}
    assert by_tid[16504].metrics["invol_cs_per_s"] == pytest.approx(306 / CS_T)
    assert all(is_known(f"nb0.{k}") for k in report.summary)


def test_live_sampler_reads_its_own_context_switches() -> None:
    sampler = ThreadCpuSampler(os.getpid(), name="self")
    sampler.open()
    try:
        first = sampler.sample()
        time.sleep(0.05)
        last = sampler.sample()
    finally:
        sampler.close()
    report = sampler.report([(1.0, first), (2.0, last)], t0=0.0)
    assert report.summary["main.vol_cs_per_s"] > 0  # it slept: at least one switch
    assert report.summary["total.wakeups_known"] == float(sampler.wakeups)
