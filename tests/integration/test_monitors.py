"""Monitors against the real thing: iostat -x over the same interval, a busy process,
and QEMU's threads identified through QMP."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from hvbench.host.paths import work_dir
from hvbench.image.builder import GuestImage
from hvbench.model.spec import VmSpec
from hvbench.monitors.diskstats import device_for_path
from hvbench.monitors.sampler import DiskStatsSampler, MonitorSet, ThreadCpuSampler
from hvbench.monitors.session import monitors_for
from hvbench.platforms.qemu import QemuPlatform

pytestmark = pytest.mark.integration

# Our names -> iostat's JSON keys.
IOSTAT_KEYS = {"w_s": "w/s", "w_await_ms": "w_await", "wareq_sz_kb": "wareq-sz",
               "avgqu_sz": "aqu-sz", "util_pct": "util"}


def _window(snaps: list[tuple[float, object]], start: float, end: float,
            sampler: DiskStatsSampler) -> dict[str, float]:
    """Our metrics between the snapshots nearest to ``start`` and ``end``."""
    first = min(snaps, key=lambda s: abs(s[0] - start))
    last = min(snaps, key=lambda s: abs(s[0] - end))
    return sampler.metrics(first[1], last[1], last[0] - first[0])


def test_disk_sampler_agrees_with_iostat(tmp_path: Path) -> None:
    directory = work_dir()
    device = device_for_path(directory)
    target = directory / f"hvbench-iostat-{time.monotonic_ns()}.dat"
    # A steady, rate-limited load: both tools then see the same rates even if their
    # interval boundaries differ by a few milliseconds.
    fio = subprocess.Popen(
        ["fio", "--name=steady", "--rw=write", "--bs=64k", "--direct=1", "--size=2G",
         f"--filename={target}", "--rate_iops=300", "--time_based", "--runtime=12",
         "--ioengine=psync"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sampler = DiskStatsSampler(device)
    monitors = MonitorSet([sampler], hz=20)
    try:
        time.sleep(2)  # let fio reach its rate
        monitors.start()
        t0 = time.monotonic()
        out = subprocess.run(["iostat", "-x", "-d", "-o", "JSON", "-y", device, "4", "1"],
                             capture_output=True, text=True, timeout=30, check=True).stdout
        elapsed = time.monotonic() - t0
        snaps = list(monitors._snaps[sampler.name])
        monitors.stop()
    finally:
        fio.kill()
        fio.wait()
        target.unlink(missing_ok=True)
    stats = json.loads(out)["sysstat"]["hosts"][0]["statistics"][0]["disk"][0]
    # iostat's interval is its last 4 s; it exits right after its second read.
    ours = _window(snaps, elapsed - 4.0, elapsed, sampler)
    assert stats["w/s"] > 100, stats
    for name, key in IOSTAT_KEYS.items():
        theirs = float(stats[key])
        # 2 %, or iostat's print precision (two decimals) for small values.
        assert abs(ours[name] - theirs) <= max(0.02 * abs(theirs), 0.011), (name, ours, stats)
    assert ours["w_mb_s"] * 1e6 / 1024 == pytest.approx(float(stats["wkB/s"]), rel=0.02)


def test_thread_sampler_on_a_busy_thread() -> None:
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            pass

    worker = threading.Thread(target=spin, name="spinner")
    worker.start()
    sampler = ThreadCpuSampler(os.getpid(), name="self")
    monitors = MonitorSet([sampler], hz=10)
    try:
        monitors.start()
        time.sleep(2)
        result = monitors.stop()
    finally:
        stop.set()
        worker.join()
    # The spinning thread holds the GIL most of the time: the process uses about one
    # core (less if the other tests' load makes it wait, which wait_pct then shows).
    total = result.summary["self.total.cpu_pct"] + result.summary["self.total.wait_pct"]
    assert 80.0 <= total <= 210.0, result.summary
    assert result.summary["self.total.exec_per_s"] > 0
    assert len(result.series["self"]) >= 15


def test_qemu_threads_by_class(image: GuestImage) -> None:
    spec = VmSpec(accel="tcg", vcpus=2)
    with QemuPlatform(spec, image=image) as guest:
        phase = monitors_for(guest, hz=20)
        phase.start()
        guest.exec(["sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"], timeout=60)
        result = phase.stop()
    summary = result.summary
    assert summary["qemu.vcpu.threads"] == 2
    assert summary["qemu.main.threads"] == 1
    assert summary["qemu.vcpu.cpu_pct"] > 10
    assert any(k.startswith("host.disk.") and k.endswith(".util_pct") for k in summary)
    assert "host.cpu.busy_pct" in summary and not result.errors
