"""A guest's lifecycle: commands, files, stop, failures that carry the console."""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

import pytest

from hvbench.errors import GuestBootError, GuestTimeoutError
from hvbench.image.builder import GuestImage
from hvbench.model.qemu_argv import CURRENT_CLOCKSOURCE
from hvbench.model.spec import DiskSpec, VmSpec
from hvbench.platforms.qemu import QemuPlatform
from hvbench.platforms.registry import REGISTRY

pytestmark = pytest.mark.integration


def test_exec_files_and_double_stop(image: GuestImage) -> None:
    guest = QemuPlatform(VmSpec(accel="tcg", vcpus=2), image=image)
    guest.launch()
    try:
        assert guest in REGISTRY.live()
        assert guest.accel == "tcg"
        assert len(guest.vcpu_threads()) == 2
        result = guest.exec(["sh", "-c", "echo out; echo err >&2; exit 7"], timeout=30)
        assert (result.exit_code, result.stdout, result.stderr) == (7, b"out\n", b"err\n")
        echoed = guest.exec(["cat"], timeout=30, stdin=b"\x00binary\xff")
        assert echoed.stdout == b"\x00binary\xff"
        env = guest.exec(["sh", "-c", "echo $HVB_X"], timeout=30, env={"HVB_X": "42"})
        assert env.stdout == b"42\n"
        payload = os.urandom(3 << 20)
        guest.write_file("/tmp/blob", payload)
        assert guest.read_file("/tmp/blob") == payload
        release = guest.exec(["uname", "-r"], timeout=30).text().strip()
        assert release == image.kernel_release
        # clocksource = "auto" under TCG is the TSC (tsc-early until the kernel's
        # refined calibration switches to tsc), as in every earlier run.
        assert guest.read_file(CURRENT_CLOCKSOURCE).strip() in (b"tsc", b"tsc-early")
        pid = guest.pid
    finally:
        guest.stop()
    guest.stop()  # a second stop is harmless
    assert pid is not None and not Path(f"/proc/{pid}").exists()
    assert not guest.is_running()


def test_guest_command_timeout(image: GuestImage) -> None:
    with QemuPlatform(VmSpec(accel="tcg"), image=image) as guest:
        started = time.monotonic()
        with pytest.raises(GuestTimeoutError):
            guest.exec(["sleep", "30"], timeout=1)
        assert time.monotonic() - started < 10
        # The agent still works afterwards.
        assert guest.exec(["true"], timeout=30).ok


def test_broken_initrd_fails_with_console_log(image: GuestImage, tmp_path: Path) -> None:
    broken = tmp_path / "broken.initrd"
    broken.write_bytes(b"this is not a cpio archive" * 100)
    bad = dataclasses.replace(image, initrd=broken)
    started = time.monotonic()
    with pytest.raises(GuestBootError) as info:
        QemuPlatform(VmSpec(accel="tcg"), image=bad, boot_timeout=60).launch()
    message = str(info.value)
    assert "Kernel panic" in message or "VFS" in message, message
    assert "QEMU argv: qemu-system-x86_64" in message
    assert "QEMU exit status: " in message
    # panic=-1 and -no-reboot make QEMU exit at once rather than at the timeout.
    assert time.monotonic() - started < 50
    broken.unlink()


def test_agent_never_answering_times_out(image: GuestImage) -> None:
    started = time.monotonic()
    with pytest.raises(GuestBootError, match="did not boot") as info:
        QemuPlatform(VmSpec(accel="tcg"), image=image, boot_timeout=0.5).launch()
    assert time.monotonic() - started < 5
    assert "still running" in str(info.value) or "exit status" in str(info.value)


def test_microvm_boots(image: GuestImage) -> None:
    # microvm has no HPET or PM timer: without the host's TSC rate on its command line a
    # TCG guest whose PIT calibration fails stops in early timer set-up (5 boots in 8
    # here); bench/boot.py --machine microvm --boots 20 counts such hangs.
    spec = VmSpec(machine="microvm", accel="tcg", disks=(DiskSpec(size=32 << 20),))
    with QemuPlatform(spec, image=image, boot_timeout=60) as guest:
        assert guest.disk_device(0).startswith("/dev/vd")
        assert guest.exec(["uname", "-r"], timeout=30).ok
        cmdline = guest.exec(["cat", "/proc/cmdline"], timeout=30).text()
        assert "tsc_early_khz=" in cmdline, cmdline


def test_qcow2_preallocated_and_native_aio(image: GuestImage) -> None:
    disks = (
        DiskSpec(format="qcow2", allocation="preallocated", size=32 << 20),
        DiskSpec(aio="native", cache="none", allocation="preallocated", size=32 << 20),
    )
    # The declared clocksource reaches the guest's kernel (hpet: a stock TCG guest's).
    spec = VmSpec(accel="tcg", disks=disks, clocksource="hpet")
    with QemuPlatform(spec, image=image) as guest:
        assert guest.read_file(CURRENT_CLOCKSOURCE).strip() == b"hpet"
        raw = Path(guest.disk_images[1])
        # falloc preallocation reserves every block up front.
        assert raw.stat().st_blocks * 512 >= 32 << 20
        for index in range(2):
            device = guest.disk_device(index)
            ok = guest.exec(
                ["dd", "if=/dev/zero", f"of={device}", "bs=64k", "count=8", "oflag=direct"],
                timeout=60,
            )
            assert ok.ok, ok.stderr
