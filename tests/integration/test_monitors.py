"""Monitors against the real thing: ``iostat -x`` over the same interval, a busy
process checked against its own /proc/PID/stat, QEMU's threads identified through QMP.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hvbench.host import proctree
from hvbench.image.builder import GuestImage
from hvbench.model.spec import VmSpec
from hvbench.monitors.cpu import CLK_TCK
from hvbench.monitors.devices import device_for_path
from hvbench.monitors.readers import DiskStatsSampler, HostCpuSampler, ThreadCpuSampler
from hvbench.monitors.sampler import MonitorSet, vcpu_thread_ids
from hvbench.monitors.session import monitors_for
from hvbench.platforms.qemu import QemuPlatform

pytestmark = pytest.mark.integration

IOSTAT_INTERVAL = 5
# Our metric -> iostat's JSON key; wMB/s is checked through wkB/s (MB = 1024 kB).
IOSTAT_KEYS = {"w_s": "w/s", "w_kb_s": "wkB/s", "avgqu_sz": "aqu-sz", "util_pct": "util",
               "w_await_ms": "w_await", "wareq_sz_kb": "wareq-sz"}


#: Bytes fio (its job process) has written when its writes count as under way.
WRITES_UNDER_WAY = 16 << 20


def _written(pid: int) -> int:
    """Bytes that ``pid`` and its descendants sent to storage (/proc/PID/io)."""
    total = 0
    for p in [pid, *(d.pid for d in proctree.descendants(pid))]:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{p}/io").read_text().splitlines():
                if line.startswith("write_bytes:"):
                    total += int(line.split()[1])
    return total


def _wait_for_writes(fio: subprocess.Popen[bytes], at_least: int) -> None:
    """Wait (up to 60 s) until ``fio`` has written ``at_least`` bytes."""
    deadline = time.monotonic() + 60
    while _written(fio.pid) < at_least:
        if fio.poll() is not None:
            pytest.fail(f"fio exited early with {fio.returncode}")
        if time.monotonic() > deadline:
            pytest.fail(f"fio wrote {_written(fio.pid)} bytes in 60 s")
        time.sleep(0.05)


@contextlib.contextmanager
def _steady_writer(seconds: int) -> Iterator[str]:
    """fio writing 64 KiB O_DIRECT blocks to /var/tmp for ``seconds``; yields the
    device. The file and its directory are removed afterwards."""
    directory = Path("/var/tmp") / f"hvbench-mon-test-{os.getpid()}"
    directory.mkdir(exist_ok=True)
    fio = subprocess.Popen(
        ["fio", "--name=x", "--rw=write", "--bs=64k", "--size=256M", "--direct=1",
         f"--filename={directory / 'f'}", "--ioengine=psync", "--time_based",
         f"--runtime={seconds}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for_writes(fio, WRITES_UNDER_WAY)
        yield device_for_path(directory)
    finally:
        fio.kill()
        fio.wait()
        shutil.rmtree(directory, ignore_errors=True)


def _close_enough(ours: float, theirs: float) -> bool:
    """Within 2 %, or iostat's print precision (2 decimals) for small values."""
    return abs(ours - theirs) <= max(0.02 * abs(theirs), 0.015)


def test_disk_sampler_agrees_with_iostat() -> None:
    with _steady_writer(seconds=IOSTAT_INTERVAL + 6) as device:
        monitors = MonitorSet([DiskStatsSampler(device)], hz=100)
        monitors.start()
        try:
            # The first report covers the time since boot; the second covers the
            # interval from iostat's first read (just after launch) to its second
            # read (just before it exits).
            out = subprocess.run(
                ["iostat", "-x", "-d", "-o", "JSON", device, str(IOSTAT_INTERVAL), "2"],
                capture_output=True, text=True, timeout=30, check=True).stdout
            ended = time.monotonic()
        finally:
            monitors.stop()
    stats = json.loads(out)["sysstat"]["hosts"][0]["statistics"][1]["disk"][0]
    # At 100 Hz the nearest samples are within 5 ms of iostat's reads (0.1 % of the
    # interval); the load is steady, so that small misalignment barely matters.
    ours = monitors.between(f"host.disk.{device}", ended - IOSTAT_INTERVAL, ended)
    table = {name: (round(ours[name], 3), stats[key]) for name, key in IOSTAT_KEYS.items()}
    print(f"\nours vs iostat ({device}, {IOSTAT_INTERVAL} s): {table}")
    assert stats["w/s"] > 50, stats
    for name, key in IOSTAT_KEYS.items():
        assert _close_enough(ours[name], float(stats[key])), (name, table)
    assert _close_enough(ours["w_mb_s"] * 1024, float(stats["wkB/s"])), table


# The threads burn CPU in hashlib, which releases the GIL while it hashes a large
# buffer: they do not queue for the GIL (which would count as blocked), so the spinner
# is always runnable, as a busy vCPU thread is. The worker hashes one big buffer in a
# single call (one GIL hand-over), then idles before it exits.
CHILD = """
import hashlib, threading, time
CHUNK, BIG = bytes(8 << 20), bytes(160 << 20)
def name(n):
    with open(f"/proc/self/task/{threading.get_native_id()}/comm", "w") as f:
        f.write(n)
def spin():
    name("spinner")
    end = time.monotonic() + 5.0
    while time.monotonic() < end:
        hashlib.sha256(CHUNK)
def worker():
    name("worker")
    hashlib.sha256(BIG)
    time.sleep(1.5)  # idle (and seen by a relist) before exiting: no CPU time is lost
def sleeper():
    name("sleeper")
    time.sleep(5.0)
threads = [threading.Thread(target=spin), threading.Thread(target=sleeper)]
for t in threads:
    t.start()
print("ready", flush=True)
time.sleep(1.0)
threading.Thread(target=worker).start()
for t in threads:
    t.join()
"""


def _process_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def test_thread_sampler_on_a_busy_process() -> None:
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
        before, t_before = _process_ticks(child.pid), time.monotonic()
        monitors = MonitorSet([ThreadCpuSampler(child.pid, name="p"), HostCpuSampler()],
                              hz=10)
        monitors.start()
        time.sleep(3.0)
        result = monitors.stop()
        after, t_after = _process_ticks(child.pid), time.monotonic()
    finally:
        child.kill()
        child.wait()
    assert result.errors == {}, result.errors
    summary = result.summary
    by_comm = {t.comm: t for t in result.threads["p"]}
    # The machine may be loaded: the spinner is always runnable, so running or waiting
    # for a CPU makes ~100 % of its time whatever the load; the sleeper is blocked.
    # Except that when this host is itself a VM, time the hypervisor steals from the
    # vCPU is neither run nor wait for the guest's scheduler: allow for host steal.
    spinner = by_comm["spinner"].metrics
    stolen = summary["host.cpu.steal_pct"] * (os.cpu_count() or 1)
    print(f"\nspinner {spinner}\nhost steal {stolen:.1f} % of one core")
    assert 92.0 - stolen <= spinner["run_pct"] + spinner["wait_pct"] <= 103.0, spinner
    assert spinner["blocked_pct"] < 8.0 + stolen and spinner["exec_per_s"] > 0
    assert by_comm["sleeper"].metrics["blocked_pct"] > 98.0
    # The worker was born inside the window and exited before its end (it lived longer
    # than the task-list refresh period, so it must have been seen).
    assert by_comm["worker"].cls == "worker" and by_comm["worker"].metrics["cpu_pct"] > 3
    # Our sum over the threads matches the kernel's per-process total (which keeps the
    # exited worker's time) within a few ticks. Each is a rate over its own window: the
    # kernel's ticks over the wall time between its two reads, which also hold the
    # sampler's start and stop (slow on a loaded host), ours over first to last sample.
    own = (after - before) / CLK_TCK / (t_after - t_before) * 100.0
    print(f"total {summary['p.total.cpu_pct']:.1f} % vs /proc/PID/stat {own:.1f} %")
    assert abs(summary["p.total.cpu_pct"] - own) <= 4.0, (summary["p.total.cpu_pct"], own)
    assert len(result.series["p"]) >= 25


def test_a_process_that_exits_mid_window_is_reported() -> None:
    child = subprocess.Popen(["sleep", "0.5"])
    try:
        monitors = MonitorSet([ThreadCpuSampler(child.pid, name="p")], hz=20)
        monitors.start()
        time.sleep(1.5)  # sleep exits; unreaped, it stays a zombie until wait()
        result = monitors.stop()
    finally:
        child.kill()
        child.wait()
    assert result.errors["p"] == f"HostError: p: process {child.pid} exited"
    assert result.summary["p.main.threads"] == 1  # the window up to the exit


def _qmp(sock_path: Path, command: str) -> Any:
    """Run one QMP command on a fresh connection (greeting, capabilities, command)."""
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(10)
        sock.connect(str(sock_path))
        stream = sock.makefile("rw")
        json.loads(stream.readline())  # the greeting
        replies: list[Any] = []
        for execute in ("qmp_capabilities", command):
            stream.write(json.dumps({"execute": execute}) + "\n")
            stream.flush()
            reply = json.loads(stream.readline())
            while "event" in reply:  # events may come before the reply
                reply = json.loads(stream.readline())
            replies.append(reply["return"])
        return replies[-1]


def _wait_for(path: Path, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        if time.monotonic() > deadline:
            pytest.fail(f"{path} did not appear within {seconds} s")
        time.sleep(0.05)


def test_qemu_threads_by_class() -> None:
    scratch = Path(tempfile.mkdtemp(prefix="hvb-mon-", dir="/tmp"))
    sock_path = scratch / "q.sock"
    qemu = subprocess.Popen(
        ["qemu-system-x86_64", "-name", "t,debug-threads=on", "-machine", "q35", "-accel",
         "tcg", "-smp", "2", "-nodefaults", "-display", "none", "-S",
         "-qmp", f"unix:{sock_path},server=on,wait=off", "-object", "iothread,id=iothread0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _wait_for(sock_path, 20)
        vcpus = vcpu_thread_ids(_qmp(sock_path, "query-cpus-fast"))
        by_tid = MonitorSet([ThreadCpuSampler(qemu.pid, vcpus)], hz=20)
        by_name = MonitorSet([ThreadCpuSampler(qemu.pid)], hz=20)  # comm fallback
        by_tid.start()
        by_name.start()
        time.sleep(0.5)
        results = [by_tid.stop(), by_name.stop()]
    finally:
        qemu.kill()
        qemu.wait()
        shutil.rmtree(scratch, ignore_errors=True)
    assert len(vcpus) == 2
    for result in results:
        assert result.errors == {}
        threads = result.threads["qemu"]
        classes = sorted(t.cls for t in threads)
        assert classes.count("vcpu") == 2 and classes.count("iothread") == 1, threads
        assert [t.tid for t in threads if t.cls == "main"] == [qemu.pid]
        assert {t.tid for t in threads if t.cls == "vcpu"} == vcpus
        assert result.summary["qemu.vcpu.threads"] == 2
        assert result.summary["qemu.iothread.threads"] == 1


def test_monitors_of_a_real_guest_phase(image: GuestImage) -> None:
    """What the runner samples around a phase: disk, host CPU, QEMU threads by class,
    the vCPUs found through QMP, QEMU's own block I/O."""
    spec = VmSpec(accel="tcg", vcpus=2)
    with QemuPlatform(spec, image=image) as guest:
        phase = monitors_for(guest, hz=20)
        for _ in range(2):  # a phase's monitors start afresh for every phase
            phase.start()
            guest.exec(["sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"],
                       timeout=60)
            result = phase.stop()
            summary = result.summary
            assert summary["qemu.vcpu.threads"] == 2, summary
            assert summary["qemu.main.threads"] == 1
            assert summary["qemu.vcpu.cpu_pct"] > 10
            assert any(k.startswith("host.disk.") and k.endswith(".util_pct") for k in summary)
            assert "host.cpu.busy_pct" in summary and not result.errors
            # QEMU's own block I/O (/proc/PID/io): explain's attribution of the device.
            assert summary["qemu.io.read_kb_s"] >= 0 and summary["qemu.io.write_kb_s"] >= 0
