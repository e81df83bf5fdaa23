"""The I/O paths of issue 28 in real TCG guests: an NVMe controller, a virtio-blk disk
with a polling iothread, queue sizes, discard and zero detection, a multiqueue
virtio-scsi disk, a vhost-user-blk disk served by its own qemu-storage-daemon, and a
multiqueue virtio-net on a tap and a host directory shared over virtio-fs, all in ONE
guest (one boot for every path); each disk
measured by a 1 s fio job. Then kill -9 of an hvbench holding a vhost-user guest, and
``hvbench cleanup``: no daemon (storage daemon, virtiofsd), socket or memfd outlives
it."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hvbench.image.builder import GuestImage
from hvbench.kinds.disk import driver as disk
from hvbench.kinds.disk.spec import DiskWorkloadSpec
from hvbench.model.qemu_argv import DISK_DRIVERS
from hvbench.model.spec import VmSpec, vm_spec_from_mapping
from hvbench.monitors.session import monitors_for
from hvbench.platforms.native import NativePlatform
from hvbench.platforms.qemu import QemuPlatform
from hvbench.workloads.fio import FioJob, run_fio
from tests.integration.conftest import hvbench, shared
from tests.integration.test_guest_devices import guest_drivers
from tests.unit.test_share_target import study_text

pytestmark = pytest.mark.integration
HVBENCH = [sys.executable, "-m", "hvbench.cli.main"]

#: Every path in one guest: disk index -> what it is.
SPEC: VmSpec = vm_spec_from_mapping({
    "accel": "tcg", "vcpus": 2, "memory_mib": 384,
    "disks": [
        {"bus": "nvme", "queues": 2, "size": "32M"},
        {"bus": "virtio-blk", "iothread": True, "poll_max_ns": 0, "queue_size": 128,
         "queues": 2, "discard": True, "detect_zeroes": "unmap", "size": "32M"},
        {"bus": "virtio-scsi", "queues": 2, "queue_size": 128, "iothread": True,
         "poll_max_ns": 65536, "size": "32M"},
        {"backend": "vhost-user", "queues": 2, "poll_max_ns": 0, "size": "32M"},
    ],
    "nics": [{"backend": "tap", "queues": 2}],
    "filesystems": [{"cache": "auto"}],
}, "test_io_paths")
#: The guest driver each disk index binds (vhost-user-blk is virtio-blk to the guest).
DRIVERS = {0: DISK_DRIVERS["nvme"], 1: "virtio_blk", 2: "virtio_scsi", 3: "virtio_blk"}


@pytest.fixture(scope="module")
def guest(image: GuestImage) -> Iterator[QemuPlatform]:
    with QemuPlatform(SPEC, image=image) as booted, \
            shared(booted, *booted.storage_daemons):
        yield booted


def _fio(guest: QemuPlatform, index: int) -> float:
    job = FioJob(name=f"d{index}", rw="randread", filename=guest.disk_device(index),
                 size=16 << 20, bs=4096, iodepth=8, ioengine="libaio", runtime_s=1)
    (result,), _ = run_fio(guest, job)
    return result.iops


@pytest.mark.parametrize("index", sorted(DRIVERS))
def test_each_disk_path_is_found_bound_and_measured(guest: QemuPlatform, index: int) -> None:
    device = guest.disk_device(index)
    name = device.removeprefix("/dev/")
    assert DRIVERS[index] in guest_drivers(guest, f"/sys/block/{name}"), device
    if index == 0:
        assert name.startswith("nvme") and name.endswith("n1"), device
    iops = _fio(guest, index)
    assert iops > 0
    print(f"io-paths: disk {index} {SPEC.disks[index].label()} {device}: "
          f"{iops:.0f} IOPS (4k randread, iodepth 8, 1 s, TCG)")


def test_queue_and_polling_settings_reach_qemu_and_the_guest(guest: QemuPlatform) -> None:
    # QEMU's own view of the iothreads' polling (QMP, JSON).
    polls = {t["id"]: t["poll-max-ns"] for t in guest.qmp("query-iothreads")}
    assert polls == {"iothread1": 0, "iothread2": 65536}
    # The guest sees several request queues on the NVMe and virtio-blk disks and the
    # NIC's two queue pairs.
    for index in (0, 1):
        name = guest.disk_device(index).removeprefix("/dev/")
        mq = guest.exec(["ls", f"/sys/block/{name}/mq"], timeout=30).text().split()
        assert len(mq) >= 2, (index, mq)
    # The NIC's receive queues (lo has no device link).
    queues = guest.exec(["sh", "-c", "for n in /sys/class/net/*; do [ -e $n/device ] && "
                         "ls $n/queues; done | grep -c rx-"], timeout=30).text().strip()
    assert queues == "2"
    discard = guest.exec(["cat", "/sys/block/"
                          + guest.disk_device(1).removeprefix("/dev/")
                          + "/queue/discard_max_bytes"], timeout=30).text().strip()
    assert int(discard) > 0


def _nspids(pid: int) -> list[int]:
    status = Path(f"/proc/{pid}/status").read_text()
    (line,) = [x for x in status.splitlines() if x.startswith("NSpid:")]
    return [int(w) for w in line.split()[1:]]


def test_daemon_threads_are_sampled_beside_qemus(guest: QemuPlatform) -> None:
    """The storage daemon's threads (its iothread told apart) and virtiofsd's sandboxed
    child's (in a PID namespace of its own: sampled by its host pid) as monitors of
    their own, beside QEMU's."""
    helpers = guest.helper_processes()
    assert sorted(helpers) == ["qsd3", "vfs0"]
    pid, iothreads = helpers["qsd3"]
    assert iothreads and all(Path(f"/proc/{pid}/task/{t}").exists() for t in iothreads)
    worker, _ = helpers["vfs0"]
    (virtiofsd,) = [d for d in guest.storage_daemons if d.socket.name == "vfs0.sock"]
    assert worker != virtiofsd.pid
    # Its own PID namespace: pid 1 there, our pid here.
    assert _nspids(worker)[0] == worker and _nspids(worker)[-1] == 1
    monitors = monitors_for(guest, guest=False)
    monitors.start()
    try:
        _fio(guest, 3)
        wrote = guest.exec(["dd", "if=/dev/zero", f"of={guest.guest_share(0)}/vfs-load",
                            "bs=64k", "count=128", "conv=fsync"], timeout=120)
    finally:
        result = monitors.stop()
    guest.host_share(0).joinpath("vfs-load").unlink(missing_ok=True)
    assert wrote.ok, wrote.stderr
    assert result.summary["qsd3.iothread.cpu_pct"] > 0, result.summary
    assert result.summary["qsd3.iothread.exec_per_s"] > 0
    # virtiofsd's work is small next to TCG's: the scheduler's ns clock (run_pct)
    # shows it where tick-based cpu_pct rounds to 0. Its request threads are "other".
    vfs = {k: v for k, v in result.summary.items() if k.startswith("vfs0.")}
    assert vfs["vfs0.total.run_pct"] > 0 and vfs["vfs0.other.exec_per_s"] > 0, vfs
    assert vfs["vfs0.main.threads"] == 1 and vfs["vfs0.other.threads"] >= 1, vfs
    assert result.summary["qemu.vcpu.cpu_pct"] > 0
    print(f"io-paths: qsd3 iothread {result.summary['qsd3.iothread.cpu_pct']:.1f} % CPU, "
          f"virtiofsd {vfs['vfs0.total.run_pct']:.2f} % running, "
          f"{vfs['vfs0.total.exec_per_s']:.0f} executions/s over "
          f"{vfs['vfs0.total.threads']:.0f} threads, "
          f"QEMU vCPUs {result.summary['qemu.vcpu.cpu_pct']:.1f} %")


def test_virtio_fs_share_is_a_disk_target_in_the_guest_and_natively(
        guest: QemuPlatform) -> None:
    """``target = "filesystem"``: the dd profile's phases run through the disk
    workload's own target code on the guest's share and natively on the same host
    directory, each in a fresh directory of it that is removed afterwards."""
    host_dir = guest.host_share(0)
    (host_dir / "hello").write_text("from the host\n")
    seen = guest.exec(["cat", f"{guest.guest_share(0)}/hello"], timeout=30)
    assert seen.ok and seen.text() == "from the host\n"
    mounts = guest.exec(["cat", "/proc/mounts"], timeout=30).text()
    assert f"hvbfs0 {guest.guest_share(0)} virtiofs" in mounts
    # Buffered: virtio-fs with cache=auto takes no O_DIRECT.
    spec = DiskWorkloadSpec.model_validate({
        "profile": "dd", "target": "filesystem", "file_size": "8M", "allow_cached": True})
    rates: dict[str, dict[str, float]] = {}
    with NativePlatform() as native:
        for name, platform, native_dir in (("guest", guest, None),
                                           ("native", native, str(host_dir))):
            target = disk.prepare_target(platform, spec, native_dir)
            try:
                made = host_dir / Path(target.directory).name
                assert made.is_dir(), (name, target.directory)  # the same host directory
                for phase in spec.phase_list():
                    disk.before_phase(platform, spec, phase, target)
                    outcome = disk.run_phase(platform, spec, phase, target)
                    rates.setdefault(name, {})[phase] = outcome.metrics["mb_s"][0]
                assert (made / "hvbench.dat").stat().st_size == 8 << 20
            finally:
                disk.release_target(platform, target)
            assert not made.exists()
    assert all(v > 0 for side in rates.values() for v in side.values()), rates
    assert sorted(p.name for p in host_dir.iterdir()) == ["hello"]
    (host_dir / "hello").unlink()
    print("io-paths: virtio-fs dd (64k, 8 MiB, buffered) "
          + ", ".join(f"{side} {phase} {mb:.1f} MB/s" for side, phases in rates.items()
                      for phase, mb in phases.items()))


#: A child hvbench holding a vhost-user guest until killed: it prints its socket
#: directory once QEMU answers QMP (the boot itself is not needed for the leftovers).
CHILD = """
import sys
from hvbench.model.spec import vm_spec_from_mapping
from hvbench.platforms.qemu import QemuPlatform
spec = vm_spec_from_mapping({"accel": "tcg", "memory_mib": 256,
                             "disks": [{"backend": "vhost-user", "size": "16M"}],
                             "filesystems": [{}]})
guest = QemuPlatform(spec, await_agent=False)
guest.start()
print(*(d.pid for d in guest.storage_daemons), guest.pid, flush=True)
sys.stdin.read()
"""


def _memfd_holders(pids: set[int]) -> list[str]:
    held = []
    for pid in pids:
        with contextlib.suppress(OSError):
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                with contextlib.suppress(OSError):
                    target = str(fd.readlink())
                    if "memfd:" in target:
                        held.append(f"{pid}: {target}")
    return held


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_kill_9_then_cleanup_leaves_no_daemon_socket_or_memfd() -> None:
    tmp = Path(tempfile.gettempdir())
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        daemon, virtiofsd, qemu = (int(w) for w in child.stdout.readline().split())
        assert _memfd_holders({qemu}), "QEMU should hold the shared guest memory (memfd)"
        for socket in ("vhu0.sock", "vfs0.sock"):
            assert len(list(tmp.glob(f"hvb-*.hvb{child.pid}/{socket}"))) == 1, socket
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    # A daemon that outlives its hvbench (started by hand here, so PR_SET_PDEATHSIG
    # does not end it) in a dead hvbench's socket directory: cleanup must end it too.
    orphan = Path(tempfile.mkdtemp(prefix="hvb-", suffix=f".hvb{child.pid}", dir=tmp))
    image = orphan / "d.raw"
    subprocess.run(["qemu-img", "create", "-q", "-f", "raw", str(image), "1M"], check=True)
    stray = subprocess.Popen(
        ["qemu-storage-daemon", "--blockdev",
         f"driver=file,node-name=f,filename={image}", "--export",
         f"type=vhost-user-blk,id=e,node-name=f,addr.type=unix,addr.path={orphan}/vhu9.sock"],
        start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not (orphan / "vhu9.sock").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        done = subprocess.run([*HVBENCH, "cleanup"], capture_output=True, text=True,
                              timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        stray.wait(timeout=10)
    finally:
        if stray.poll() is None:
            stray.kill()
            stray.wait()
    assert f"removed storage daemon {stray.pid}" in done.stdout, done.stdout
    assert stray.returncode == -signal.SIGKILL
    assert not _alive(daemon) and not _alive(virtiofsd) and not _alive(qemu)
    leftover = subprocess.run(["pgrep", "-f", f".hvb{child.pid}/"], capture_output=True,
                              text=True, check=False).stdout.split()
    assert leftover == [], f"processes of the killed hvbench still run: {leftover}"
    assert not list(tmp.glob(f"hvb-*.hvb{child.pid}")), "socket directories left"
    assert _memfd_holders({daemon, qemu, stray.pid}) == []


def test_the_io_paths_example_runs_and_is_explained(image: GuestImage,
                                                     tmp_path: Path) -> None:
    """examples/io-paths.toml reduced (1 repetition, native and vhost-user-blk, 3 s per
    fio job instead of 5: still the three whole seconds of series explain reads a
    limiter's flatness from) through the runner: every planned cell stored, the storage
    daemon's threads sampled as their own class, and `hvbench explain` gives every guest
    cell a verdict."""
    import json
    import sqlite3

    example = Path(__file__).parents[2] / "examples" / "io-paths.toml"
    db = tmp_path / "r.db"
    done = subprocess.run(
        [*HVBENCH, "run", str(example), "--set", "study.repetitions=1",
         "--set", "workload.io-paths.runtime=3", "--only", "native/*",
         "--only", "vhost-user-blk/*", "--db", str(db)],
        capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    with sqlite3.connect(db) as con:
        metrics = {m for (m,) in con.execute("SELECT DISTINCT metric FROM measurements")}
        (run_id,) = [r for (r,) in con.execute("SELECT id FROM runs")]
    assert any(m.startswith("qsd") and m.endswith(".cpu_pct") for m in metrics), \
        sorted(metrics)[:40]
    explained = hvbench("explain", run_id, "--db", str(db), "--format", "json")
    assert explained.returncode == 0, explained.stderr
    verdicts = json.loads(explained.stdout)["verdicts"]
    guest = {v["phase"] for v in verdicts
             if v["platform"] == "vhost-user-blk" and v["phase"] != "boot"}
    assert guest == {"randread-4k-qd32", "seqread-128k"}
    assert all(v["outcome"] in ("cause", "unexplained", "near-native",
                                "not-a-device-measurement") for v in verdicts
               if v["platform"] == "vhost-user-blk")


def test_a_filesystem_target_study_runs_natively_in_the_guests_share(
        tmp_path: Path) -> None:
    """The study syntax through the runner, without a boot: ``--only native/*`` runs
    the native side of a ``target = "filesystem"`` workload, in a fresh directory of
    the ``source`` the study's guest shares (the guest side runs in
    test_virtio_fs_share_is_a_disk_target_in_the_guest_and_natively), which is left as
    it was found."""
    import json
    import sqlite3

    share = tmp_path / "share"
    share.mkdir()
    (share / "theirs").write_text("kept\n")
    study = tmp_path / "fs.toml"
    study.write_text(study_text(
        '[[platform]]\nkind = "native"\n[[platform]]\nkind = "qemu"\nname = "virtio-fs"\n'
        f'memory_mib = 256\nfilesystem = {{ source = "{share}", cache = "auto" }}\n'))
    db = tmp_path / "r.db"
    done = subprocess.run([*HVBENCH, "run", str(study), "--only", "native/*", "--db",
                           str(db)], capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    with sqlite3.connect(db) as con:
        outputs = [c for (c,) in con.execute(
            "SELECT content FROM raw_outputs WHERE kind = 'fio-json'")]
    names = {job["job options"]["filename"] for text in outputs
             for job in json.loads(text)["jobs"]}
    assert len(names) == 1, names
    (used,) = names
    assert Path(used).parent.parent == share and Path(used).parent.name.startswith(
        "hvbench-"), used
    assert sorted(p.name for p in share.iterdir()) == ["theirs"]
