"""Monitor arithmetic on stored /proc snapshots (hand-computed expectations)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hvbench.monitors.cpu import (
    CLK_TCK,
    ThreadSample,
    class_metrics,
    classify,
    host_cpu_metrics,
    parse_proc_stat,
    parse_schedstat,
    parse_task_stat,
    thread_deltas,
)
from hvbench.monitors.diskstats import iostat_metrics, parse_diskstats
from hvbench.monitors.sampler import MonitorSet, ThreadCpuSampler

FIXTURES = Path(__file__).parent.parent / "fixtures" / "monitors"


def test_iostat_metrics_match_sysstat_definitions() -> None:
    a = parse_diskstats((FIXTURES / "diskstats-a.txt").read_text())["vda"]
    b = parse_diskstats((FIXTURES / "diskstats-b.txt").read_text())["vda"]
    m = iostat_metrics(a, b, 0.5)
    assert m["r_s"] == pytest.approx(6.0) and m["w_s"] == pytest.approx(400.0)
    assert m["w_mb_s"] == pytest.approx(25600 * 512 / 1e6 / 0.5)
    assert m["w_await_ms"] == pytest.approx(27 / 200)
    assert m["r_await_ms"] == 0.0
    assert m["wareq_sz_kb"] == pytest.approx(64.0)
    assert m["rareq_sz_kb"] == pytest.approx(184 / 3 / 2)
    assert m["avgrq_sz"] == pytest.approx((184 + 25600) / 203)
    assert m["avgqu_sz"] == pytest.approx(27 / 500)
    assert m["util_pct"] == pytest.approx(28 / 500 * 100)


def test_idle_interval_has_no_division_by_zero() -> None:
    a = parse_diskstats((FIXTURES / "diskstats-a.txt").read_text())["vda"]
    m = iostat_metrics(a, a, 0.1)
    assert m["r_await_ms"] == m["w_await_ms"] == m["avgrq_sz"] == m["util_pct"] == 0.0


def test_util_is_capped() -> None:
    a = parse_diskstats("254 0 vda 0 0 0 0 0 0 0 0 0 0 0")["vda"]
    b = parse_diskstats("254 0 vda 0 0 0 0 0 0 0 0 0 150 0")["vda"]
    assert iostat_metrics(a, b, 0.1)["util_pct"] == 100.0


def test_task_stat_comm_with_spaces_and_parens() -> None:
    line = "4242 (CPU 0/TCG) (x)) R 1 2 3 0 -1 0 0 0 0 0 250 30 0 0 20 0 1 0 1 2 3\n"
    comm, ticks = parse_task_stat(line)
    assert comm == "CPU 0/TCG) (x)" and ticks == 280
    assert parse_schedstat("1000000000 250000000 42\n") == (1_000_000_000, 250_000_000, 42)


@pytest.mark.parametrize(
    ("tid", "comm", "expected"),
    [(10, "qemu-system-x86", "main"), (11, "CPU 0/KVM", "vcpu"), (12, "IO iothread0", "iothread"),
     (13, "worker", "worker"), (14, "call_rcu", "other"), (15, "whatever", "vcpu")],
)
def test_classify(tid: int, comm: str, expected: str) -> None:
    assert classify(tid, 10, comm, {15}) == expected


def test_thread_metrics_with_threads_born_and_gone() -> None:
    hz = CLK_TCK
    a = {1: ThreadSample("main", 0, 0, 0, 0), 2: ThreadSample("CPU 0/TCG", 0, 0, 0, 0),
         3: ThreadSample("worker", 0, 0, 0, 0)}
    b = {1: ThreadSample("main", hz // 10, 100_000_000, 0, 10),
         2: ThreadSample("CPU 0/TCG", hz, 1_000_000_000, 500_000_000, 100),
         4: ThreadSample("worker", hz // 5, 200_000_000, 0, 4)}  # 3 gone, 4 born
    classes = {1: "main", 2: "vcpu", 3: "worker", 4: "worker"}
    m = class_metrics(thread_deltas(a, b, 2.0, classes), 2.0)
    assert m["vcpu.cpu_pct"] == pytest.approx(50.0)
    assert m["vcpu.wait_pct"] == pytest.approx(25.0)
    assert m["vcpu.blocked_pct"] == pytest.approx(25.0)
    assert m["vcpu.exec_per_s"] == pytest.approx(50.0)
    assert m["vcpu.cpu_ms_per_exec"] == pytest.approx(10.0)
    assert m["worker.cpu_pct"] == pytest.approx(10.0) and m["worker.threads"] == 1
    assert m["total.cpu_pct"] == pytest.approx(65.0) and m["total.threads"] == 3


def test_host_cpu() -> None:
    a = parse_proc_stat("cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3\n")
    b = parse_proc_stat("cpu  160 0 70 900 70 0 0 0 0 0\n")
    m = host_cpu_metrics(a, b)
    assert m["busy_pct"] == pytest.approx(40.0) and m["iowait_pct"] == pytest.approx(10.0)
    assert m["user_pct"] == pytest.approx(30.0) and m["system_pct"] == pytest.approx(10.0)


def test_a_monitor_whose_process_is_gone_is_dropped_with_its_error() -> None:
    monitors = MonitorSet([ThreadCpuSampler(2**22 + 7)], hz=50)
    monitors.start()
    result = monitors.stop()
    assert "qemu" in result.errors and "gone" in result.errors["qemu"]
    assert result.summary == {}
