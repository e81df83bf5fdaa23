"""The CLI end to end: guest exec, interruption mid-boot, kill -9, doctor."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hvbench.host import proctree, trace
from hvbench.image.builder import GuestImage

pytestmark = pytest.mark.integration
HVBENCH = str(Path(sys.executable).parent / "hvbench")


def test_guest_exec_passes_output_and_exit_code(image: GuestImage, tmp_path: Path) -> None:
    # Its own trace file (make test's, if set, is not this test's to read).
    traced = tmp_path / "trace.jsonl"
    done = subprocess.run(
        [
            HVBENCH,
            "guest",
            "exec",
            "--accel",
            "tcg",
            "--disk",
            "bus=ahci,size=32M",
            "--",
            "sh",
            "-c",
            "uname -r; echo oops >&2; exit 3",
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        env={**os.environ, trace.TRACE_ENV: str(traced)},
    )
    assert done.returncode == 3, done.stderr
    assert done.stdout.strip() == image.kernel_release
    assert "oops" in done.stderr
    assert "boot=" in done.stderr and "accel=tcg" in done.stderr
    assert "TCG (software emulation)" in done.stderr
    # The trace has the boot hvbench printed and the command, tagged with this test.
    lines = [json.loads(line) for line in traced.read_text().splitlines()]
    [boot] = [line for line in lines if line["event"] == "boot"]
    printed = re.search(r"boot=([0-9.]+)", done.stderr)
    assert printed is not None, done.stderr
    assert boot["program"] == "qemu-system-x86_64"
    assert boot["seconds"] == pytest.approx(float(printed.group(1)), abs=0.06)
    assert {(line["event"], line["program"]) for line in lines} >= {("guest-exec", "sh")}
    assert {line["tag"] for line in lines} == {os.environ[trace.TAG_ENV]}


def test_bad_option_is_one_line_exit_2() -> None:
    done = subprocess.run(
        [HVBENCH, "guest", "exec", "--disk", "bus=floppy", "--", "true"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "disks[0].bus" in done.stderr and "virtio-blk" in done.stderr


def _qemu_children(name_prefix: str = "hvbench-") -> list[int]:
    out = subprocess.run(
        ["pgrep", "-f", "qemu-system-x86_64 -name " + name_prefix],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    return [int(p) for p in out.split()]


def _wait_for_qemu(proc: subprocess.Popen[str] | subprocess.Popen[bytes], before: set[int]) -> int:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        # Only a QEMU that ``proc`` started: another hvbench on a shared machine boots
        # guests of the same name prefix at any time.
        mine = {p.pid for p in proctree.descendants(proc.pid)}
        fresh = [q for q in set(_qemu_children()) - before if q in mine]
        if fresh:
            return fresh[0]
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError("QEMU never started")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_mid_boot_stops_everything(
    image: GuestImage, no_leaks: Path, sig: signal.Signals
) -> None:
    before = set(_qemu_children())
    proc = subprocess.Popen(
        [HVBENCH, "guest", "exec", "--accel", "tcg", "--disk", "size=32M", "--", "true"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )
    qemu = _wait_for_qemu(proc, before)
    time.sleep(0.3)  # the guest is booting now: its agent cannot answer yet
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 128 + sig, stderr
    assert "Traceback" not in stderr
    assert not Path(f"/proc/{qemu}").exists()
    # no_leaks then checks the work dir (disk images, console logs) and TMPDIR (sockets).


def test_kill_9_takes_qemu_down(image: GuestImage) -> None:
    before = set(_qemu_children())
    proc = subprocess.Popen(
        [HVBENCH, "guest", "exec", "--accel", "tcg", "--", "sleep", "60"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    qemu = _wait_for_qemu(proc, before)
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 10
    while Path(f"/proc/{qemu}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    state = (
        Path(f"/proc/{qemu}/stat").read_text().split()[2]
        if Path(f"/proc/{qemu}").exists()
        else "gone"
    )
    assert state in ("gone", "Z"), "QEMU survived kill -9 of hvbench"
    # kill -9 leaves no chance to delete files: the test's own work dir is cleaned here
    # (`hvbench cleanup`, for the net lab, arrives with the network issue).
    for leftover in Path(os.environ["HVBENCH_WORKDIR"]).iterdir():
        subprocess.run(["rm", "-rf", str(leftover)], check=True)
    for leftover in Path(os.environ["TMPDIR"]).iterdir():
        subprocess.run(["rm", "-rf", str(leftover)], check=True)


def test_doctor_json_reports_kvm_verdict_within_timeout(image: GuestImage) -> None:
    timeout = 10.0
    started = time.monotonic()
    done = subprocess.run(
        [HVBENCH, "doctor", "--format", "json", "--refresh", "--timeout", str(timeout)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    kvm = report["kvm"]
    # A verdict (the image is built: the probe ran), never usable without a /dev/kvm
    # (this machine's opens but cannot run a guest: the branch below).
    assert isinstance(kvm["usable"], bool) and isinstance(kvm["present"], bool)
    assert kvm["present"] <= Path("/dev/kvm").exists()
    assert kvm["usable"] <= kvm["present"]
    assert report["accelerator"] == ("kvm" if kvm["usable"] else "tcg")
    if kvm["present"] and not kvm["usable"]:
        # This CI machine: /dev/kvm opens but a KVM guest cannot run: with -cpu host
        # QEMU aborts on an MSR the nested hypervisor refuses; other CPU models hang
        # after the kernel starts. Either way the verdict names what happened.
        assert f"within {timeout:g} s" in kvm["reason"] or "exited with status" in kvm["reason"]
        assert kvm["probe_seconds"] < timeout + 8
    assert elapsed < timeout + 40
    assert report["qemu"]["version"] and report["tools"]["fio"]["version"]
    assert report["guest_image"]["built"] is True
    # A second call is served from the cache for this boot; the former spelling --json
    # still works, and says it is deprecated.
    second = subprocess.run([HVBENCH, "doctor", "--json"], capture_output=True, text=True,
                            timeout=60, check=True)
    assert "--json is deprecated; use --format json" in second.stderr
    again = json.loads(second.stdout)
    assert again["kvm"]["cached"] is True and again["kvm"]["usable"] == kvm["usable"]
