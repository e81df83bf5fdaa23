"""NVMe, queues, polling, discard and multiqueue NICs: validation, QEMU argv, libvirt XML."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from hvbench.errors import SpecError
from hvbench.model.libvirt_xml import DomainPlan, build_domain_xml, check_libvirt_spec
from hvbench.model.qemu_argv import LaunchPlan, build_qemu_argv, driver_cmdline
from hvbench.model.spec import VmSpec, vm_spec_from_mapping


def _argv(data: dict[str, object]) -> list[str]:
    spec = vm_spec_from_mapping(data)
    return build_qemu_argv(LaunchPlan(
        spec=spec, accel="tcg", name="g", kernel="/k", initrd="/i", kernel_cmdline="",
        qmp_socket="/s/q", agent_socket="/s/a", console_log="/r/c",
        disk_images=tuple(f"/r/d{i}" for i in range(len(spec.disks))),
        tap_names=tuple("hvb-t0" if n.backend == "tap" else None for n in spec.nics),
        macs=tuple(f"52:54:00:00:00:0{i}" for i in range(len(spec.nics))),
        vhost_user_sockets=tuple(f"/s/vhu{i}.sock" if d.backend == "vhost-user" else None
                                 for i, d in enumerate(spec.disks))))


def _options(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == flag]


def _xml(data: dict[str, object]) -> str:
    spec = vm_spec_from_mapping(data)
    check_libvirt_spec(spec)
    return build_domain_xml(DomainPlan(
        spec=spec, accel="tcg", name="hvbench-1-g", owner_pid=1, kernel="/k", initrd="/i",
        kernel_cmdline="", root_disk="/r/root", console_log="/r/c",
        disk_images=tuple(f"/r/d{i}" for i in range(len(spec.disks))),
        tap_names=tuple("hvb-t0" if n.backend == "tap" else None for n in spec.nics),
        macs=tuple(f"52:54:00:00:00:0{i}" for i in range(len(spec.nics)))))


def test_nvme_is_a_controller_with_the_serial_and_its_queue_pairs() -> None:
    argv = _argv({"disks": [{"bus": "nvme", "queues": 4}, {"bus": "nvme"}]})
    assert "nvme,id=nvme0,drive=drive0,serial=hvb-d0,max_ioqpairs=4" in _options(argv, "-device")
    assert "nvme,id=nvme1,drive=drive1,serial=hvb-d1" in _options(argv, "-device")
    assert "hvbench.drivers=nvme" in driver_cmdline(vm_spec_from_mapping(
        {"disks": [{"bus": "nvme"}]}))


def test_polling_queue_size_discard_and_detect_zeroes() -> None:
    argv = _argv({"disks": [
        {"bus": "virtio-blk", "iothread": True, "poll_max_ns": 0, "queue_size": 128,
         "queues": 2, "discard": True, "detect_zeroes": "unmap"},
        {"bus": "virtio-scsi", "iothread": True, "poll_max_ns": 50000, "queue_size": 512}]})
    assert "iothread,id=iothread0,poll-max-ns=0" in _options(argv, "-object")
    assert "iothread,id=iothread1,poll-max-ns=50000" in _options(argv, "-object")
    assert _options(argv, "-drive")[0].endswith(",discard=unmap,detect-zeroes=unmap")
    devices = _options(argv, "-device")
    assert "virtio-blk-pci,drive=drive0,serial=hvb-d0,iothread=iothread0,num-queues=2," \
           "queue-size=128" in devices
    assert "virtio-scsi-pci,id=vscsi1,iothread=iothread1,virtqueue_size=512" in devices
    label = vm_spec_from_mapping({"disks": [{"iothread": True, "poll_max_ns": 0,
                                             "discard": True}]}).label()
    assert label.endswith("iothread-poll0-discard")


def test_multiqueue_virtio_net_on_a_tap() -> None:
    argv = _argv({"vcpus": 2, "nics": [{"backend": "tap", "queues": 2}]})
    assert _options(argv, "-netdev")[0].endswith(",queues=2")
    assert _options(argv, "-device")[-1].endswith(",mq=on,vectors=6")
    assert vm_spec_from_mapping({"vcpus": 2, "nics": [{"backend": "tap", "queues": 2}]}
                                ).label().endswith("virtio-net-tap-q2")


@pytest.mark.parametrize(("data", "expected"), [
    ({"disks": [{"bus": "ide", "queues": 2}]}, "queues needs bus virtio-blk, virtio-scsi or nvme"),
    ({"disks": [{"bus": "nvme", "iothread": True}]}, "iothread=true needs bus virtio-blk"),
    ({"disks": [{"poll_max_ns": 0}]}, "poll_max_ns needs iothread = true"),
    ({"disks": [{"queue_size": 100}]}, "queue_size 100: expected a power of two"),
    ({"disks": [{"bus": "nvme", "queue_size": 64}]}, "queue_size needs bus virtio-blk"),
    ({"disks": [{"detect_zeroes": "unmap"}]}, "detect_zeroes = \"unmap\" needs discard = true"),
    ({"nics": [{"backend": "tap", "queues": 2}]}, "nic queues = 2 needs vcpus >= 2"),
    ({"vcpus": 2, "nics": [{"queues": 2}]}, "queues needs model virtio-net on backend tap"),
    ({"machine": "microvm", "disks": [{"bus": "nvme"}]}, "machine=microvm cannot carry bus=nvme"),
])
def test_impossible_combinations_are_one_line_errors(data: dict[str, object],
                                                     expected: str) -> None:
    with pytest.raises(SpecError) as info:
        vm_spec_from_mapping(data, "study.toml")
    message = str(info.value)
    assert expected in message and "\n" not in message and message.startswith("study.toml: ")


@pytest.mark.parametrize(("data", "expected"), [
    ({"disks": [{"bus": "nvme"}]}, "bus nvme: libvirt 9 has no emulated NVMe"),
    ({"disks": [{"iothread": True, "poll_max_ns": 0}]}, "poll_max_ns: libvirt 9"),
    ({"disks": [{"bus": "virtio-scsi", "queue_size": 64}]}, "queue_size: libvirt 9"),
])
def test_libvirt_refuses_what_it_cannot_express(data: dict[str, object],
                                                expected: str) -> None:
    with pytest.raises(SpecError, match=expected):
        _xml(data)


@pytest.mark.skipif(shutil.which("virt-xml-validate") is None,
                    reason="virt-xml-validate (libvirt-clients) is not installed")
def test_libvirt_xml_of_the_new_settings_validates(tmp_path: Path) -> None:
    text = _xml({"vcpus": 2, "disks": [
        {"iothread": True, "queues": 2, "queue_size": 128, "discard": True,
         "detect_zeroes": "unmap"}],
        "nics": [{"backend": "tap", "bridge": "hvb-b0", "queues": 2}]})
    assert 'queue_size="128"' in text and 'discard="unmap"' in text
    assert 'detect_zeroes="unmap"' in text and '<driver name="qemu" queues="2"' in text
    path = tmp_path / "d.xml"
    path.write_text(text)
    done = subprocess.run(["virt-xml-validate", str(path), "domain"], capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_spec_round_trip_keeps_the_new_fields() -> None:
    spec = VmSpec.model_validate({"vcpus": 2, "disks": [{"bus": "nvme", "queues": 2}],
                                  "nics": [{"backend": "tap", "queues": 2}]})
    assert VmSpec.model_validate(spec.model_dump()) == spec


def test_vhost_user_disk_shares_memory_and_connects_to_the_daemon() -> None:
    argv = _argv({"memory_mib": 256, "disks": [
        {"bus": "virtio-blk"}, {"backend": "vhost-user", "queues": 2, "queue_size": 128}]})
    assert "memory-backend-memfd,id=mem0,size=256M,share=on" in _options(argv, "-object")
    assert _options(argv, "-machine") == ["q35,memory-backend=mem0"]
    assert "socket,id=vhu1,path=/s/vhu1.sock" in _options(argv, "-chardev")
    assert "vhost-user-blk-pci,id=vhu-blk1,chardev=vhu1,addr=0x19,num-queues=2," \
           "queue-size=128" in _options(argv, "-device")
    # Only the QEMU-served disk has a -drive (besides the root disk).
    assert [d for d in _options(argv, "-drive") if "id=drive" in d] == [
        d for d in _options(argv, "-drive") if "id=drive0" in d]
    # Without queues: as many as vCPUs, on the device as on the daemon's export.
    default = _argv({"vcpus": 2, "disks": [{"backend": "vhost-user"}]})
    assert any(d.startswith("vhost-user-blk-pci,") and d.endswith(",num-queues=2")
               for d in _options(default, "-device"))
    plain = _argv({"disks": [{"bus": "virtio-blk"}]})
    assert not any("memory-backend" in a for a in plain)


def test_storage_daemon_argv_carries_aio_cache_polling_and_queues() -> None:
    from hvbench.model.storage_daemon import DaemonPlan, guest_pci_address, storage_daemon_argv
    disk = vm_spec_from_mapping({"disks": [{
        "backend": "vhost-user", "cache": "directsync", "aio": "native", "poll_max_ns": 0,
        "queues": 2, "format": "qcow2", "discard": True, "detect_zeroes": "unmap"}]}).disks[0]
    argv = storage_daemon_argv(DaemonPlan(disk=disk, index=1, image="/r/d1.qcow2",
                                          socket="/s/vhu1.sock", queues=2))
    assert argv[0] == "qemu-storage-daemon"
    assert "iothread,id=iothread1,poll-max-ns=0" in _options(argv, "--object")
    assert _options(argv, "--blockdev") == [
        "driver=file,node-name=file1,filename=/r/d1.qcow2,aio=native,cache.direct=on,"
        "cache.no-flush=off,discard=unmap",
        "driver=qcow2,node-name=disk1,file=file1,discard=unmap,detect-zeroes=unmap"]
    assert _options(argv, "--export") == [
        "type=vhost-user-blk,id=export1,node-name=disk1,addr.type=unix,"
        "addr.path=/s/vhu1.sock,writable=on,iothread=iothread1,writethrough=on,num-queues=2"]
    assert guest_pci_address(1) == "0000:00:19.0"


@pytest.mark.parametrize(("disk", "expected"), [
    ({"backend": "vhost-user", "bus": "virtio-scsi"}, "backend = \"vhost-user\" needs bus"),
    ({"backend": "vhost-user", "iothread": True}, "storage daemon's own iothread"),
    ({"backend": "vhost-user", "bps_limit": "10M"}, "bps_limit is QEMU's throttling"),
    ({"backend": "vhost-user", "source": "nbd:store"}, "not an NBD source"),
])
def test_impossible_vhost_user_disks(disk: dict[str, object], expected: str) -> None:
    with pytest.raises(SpecError, match=expected):
        vm_spec_from_mapping({"disks": [disk]}, "s.toml")


def test_vhost_user_is_refused_on_microvm_and_libvirt() -> None:
    with pytest.raises(SpecError, match="microvm cannot carry a vhost-user disk"):
        vm_spec_from_mapping({"machine": "microvm", "disks": [{"backend": "vhost-user"}]})
    with pytest.raises(SpecError, match="backend vhost-user: hvbench starts"):
        _xml({"disks": [{"backend": "vhost-user"}]})


def test_daemon_iothread_is_classified_by_its_thread_id() -> None:
    from hvbench.monitors.cpu import classify
    assert classify(11, 10, "qemu-storage-da", iothread_tids={11}) == "iothread"
    assert classify(10, 10, "qemu-storage-da", iothread_tids={11}) == "main"
    assert classify(12, 10, "qemu-storage-da", iothread_tids={11}) == "other"
    from hvbench.platforms.storage_daemon import iothread_of
    assert iothread_of(10, [10, 12, 13]) == {13}
    # Worker threads already there (or a missing one): no guess.
    assert iothread_of(10, [10, 12, 13, 14]) == frozenset()
    assert iothread_of(10, [10, 12]) == frozenset()


def test_virtio_fs_share_argv_modules_and_refusals() -> None:
    from hvbench.model.qemu_argv import LaunchPlan as Plan
    spec = vm_spec_from_mapping({"memory_mib": 256, "filesystems": [{"cache": "none"}]})
    argv = build_qemu_argv(Plan(
        spec=spec, accel="tcg", name="g", kernel="/k", initrd="/i", kernel_cmdline="",
        qmp_socket="/s/q", agent_socket="/s/a", console_log="/r/c", disk_images=(),
        tap_names=(), macs=(), virtiofs_sockets=("/s/vfs0.sock",)))
    assert "socket,id=vfs0,path=/s/vfs0.sock" in _options(argv, "-chardev")
    assert "vhost-user-fs-pci,chardev=vfs0,tag=hvbfs0" in _options(argv, "-device")
    assert "memory-backend-memfd,id=mem0,size=256M,share=on" in _options(argv, "-object")
    assert driver_cmdline(spec) == " hvbench.drivers=virtiofs"
    assert spec.label().endswith("fs-none")
    with pytest.raises(SpecError, match="virtio-fs shares"):
        _xml({"filesystems": [{}]})
    with pytest.raises(SpecError, match=r"filesystems\[0\]\.source"):
        vm_spec_from_mapping({"filesystems": [{"source": "relative/dir"}]})


def test_virtiofsd_argv_and_orphan_sockets() -> None:
    from hvbench.model.spec import SharedDirSpec
    from hvbench.platforms.socket_daemon import _socket_in
    from hvbench.platforms.virtiofsd import virtiofsd_argv
    argv = virtiofsd_argv(SharedDirSpec(cache="always"), "/srv/x", "/tmp/h.hvb1/vfs0.sock")
    assert argv == ["/usr/lib/qemu/virtiofsd", "--socket-path=/tmp/h.hvb1/vfs0.sock", "-o",
                    "source=/srv/x", "-o", "cache=always", "-o", "log_level=warn"]
    dead = [Path("/tmp/h.hvb1")]
    assert _socket_in(argv, "--socket-path=", dead) == "/tmp/h.hvb1/vfs0.sock"
    assert _socket_in(argv, "--socket-path=", [Path("/tmp/h.hvb")]) is None
    qsd = ["qemu-storage-daemon", "--export",
           "type=vhost-user-blk,id=e,addr.type=unix,addr.path=/tmp/h.hvb1/vhu0.sock"]
    assert _socket_in(qsd, "addr.path=", dead) == "/tmp/h.hvb1/vhu0.sock"


def test_every_disk_bus_makes_the_guest_load_ext4() -> None:
    # The guest's init loads ext4 with a disk driver (the host mounts without -t): a
    # bus whose first module is missing from that list cannot be formatted and mounted.
    from hvbench.image.builder import init_script
    from hvbench.model.qemu_argv import BUS_MODULES
    case = next(line for line in init_script().decode().splitlines() if "fs=ext4 ;;" in line)
    listed = {word.strip() for word in case.split(")")[0].split("|")}
    assert {modules[0] for modules in BUS_MODULES.values()} <= listed


def test_virtiofsd_sandbox_child_is_found_by_its_host_pid(tmp_path: Path) -> None:
    """The child that serves the share is found from the parent's pid: through
    /proc/PID/task/PID/children on this kernel (a real shell and its child here), and
    through the PPid of every process where that file is missing."""
    from hvbench.platforms.virtiofsd import sandbox_child
    parent = subprocess.Popen(["sh", "-c", "sleep 30 & echo $!; wait"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert sandbox_child(parent.pid) == child
        assert sandbox_child(child) is None  # sleep has no child
    finally:
        parent.kill()
        parent.wait()
        subprocess.run(["kill", str(child)], check=False)
    proc = tmp_path / "proc"
    for pid, ppid in ((40, 1), (41, 40), (7, 2)):
        (proc / str(pid)).mkdir(parents=True)
        (proc / str(pid) / "status").write_text(f"Name:\tx\nPid:\t{pid}\nPPid:\t{ppid}\n")
    (proc / "self").mkdir()
    assert sandbox_child(40, proc) == 41
    assert sandbox_child(41, proc) is None
