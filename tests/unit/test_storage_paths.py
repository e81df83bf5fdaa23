"""Storage paths of seed 001: a whole host block device ("phy"), an NBD export of a lab
host (host initiator), the native side's disk source and memory cgroup. The pure parts:
spec validation, the QEMU argv and libvirt XML, study checks, the fio job of an NBD
target, the device-in-use checks on fake inputs and the memory cgroup on a fake tree."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from hvbench.errors import HostError, SpecError
from hvbench.host import blockdev
from hvbench.host.cgroups import MemoryCgroup, cleanup_orphaned_cgroups, detect_memory_root
from hvbench.kinds.disk.driver import DiskTarget, phase_job
from hvbench.kinds.disk.spec import DiskWorkloadSpec, check_cache_rule
from hvbench.kinds.native.spec import NativePlatformSpec
from hvbench.model.libvirt_xml import DomainPlan, build_domain_xml, io_settings
from hvbench.model.qemu_argv import LaunchPlan, build_qemu_argv
from hvbench.model.spec import (
    DiskSpec,
    NicSpec,
    VmSpec,
    nbd_host,
    nbd_uri_parts,
    source_kind,
)
from hvbench.model.study import nbd_exports, parse_study, raw_file_sizes
from hvbench.netlab.lab import LabHost
from hvbench.workloads.nbd import export_uri, qemu_nbd_argv

HOST_RAM = 24 << 30
URI = "nbd://10.99.0.10:10809/storage"


def _argv(*disks: DiskSpec, images: tuple[str, ...]) -> list[str]:
    plan = LaunchPlan(
        spec=VmSpec(machine="pc", disks=disks), accel="tcg", name="g", kernel="/k",
        initrd="/i", kernel_cmdline="console=ttyS0", qmp_socket="/s/q", agent_socket="/s/a",
        console_log="/r/c.log", disk_images=images, tap_names=(), macs=())
    return build_qemu_argv(plan)


def _drives(argv: list[str]) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == "-drive"][-1:]


# -- spec ------------------------------------------------------------------------------
@pytest.mark.parametrize(("source", "kind"), [
    (None, "image"), ("/dev/loop3", "device"), ("/dev/mapper/vg-lv", "device"),
    ("nbd:storage", "nbd-host"), (URI, "nbd-uri"),
])
def test_source_kinds(source: str | None, kind: str) -> None:
    assert source_kind(source) == kind


@pytest.mark.parametrize("source", ["/tmp/x.img", "/dev/../etc/passwd", "nbd:", "nbd:UP",
                                    "iscsi://x", "dev/sda", "/dev/sda b"])
def test_bad_sources_are_refused(source: str) -> None:
    with pytest.raises(ValueError, match="expected a host block device"):
        DiskSpec(source=source)


@pytest.mark.parametrize(("fields", "words"), [
    ({"source": "/dev/loop0", "format": "qcow2"}, "given to the guest raw"),
    ({"initiator": "guest"}, "only valid with an NBD or AoE source"),
    ({"source": "nbd:storage", "aio": "native"}, "network socket"),
])
def test_bad_combinations_say_why(fields: dict[str, object], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        DiskSpec.model_validate(fields)


def test_a_guest_initiator_needs_a_nic_and_gets_no_qemu_drive() -> None:
    disk = DiskSpec(bus="lsi-scsi", source="nbd:storage", initiator="guest")
    assert disk.guest_attached and disk.label().endswith("-guest-initiator")
    with pytest.raises(ValueError, match="needs a NIC for the guest's initiator"):
        VmSpec(disks=(disk,))
    spec = VmSpec(machine="pc", disks=(disk.model_copy(update={"source": URI}),),
                  nics=(NicSpec(backend="tap", bridge="br0", address="10.99.0.20/24"),))
    plan = LaunchPlan(spec=spec, accel="tcg", name="g", kernel="/k", initrd="/i",
                      kernel_cmdline="c", qmp_socket="/q", agent_socket="/a",
                      console_log="/c", disk_images=(URI,), tap_names=("hvb-t0",),
                      macs=("52:54:00:00:00:01",))
    argv = build_qemu_argv(plan)
    text = " ".join(argv)
    assert "nbd" not in text.replace("hvbench.net", "")
    assert "lsi53c895a" not in text and "sym53c8xx" not in text
    assert " hvbench.drivers=virtio_net " in text
    assert not DiskSpec(source="nbd:storage").guest_attached


def test_labels_name_the_source() -> None:
    assert DiskSpec(bus="lsi-scsi", source="/dev/loop0").label() == "lsi-scsi-none-phy-loop0"
    nbd = DiskSpec(source="nbd:storage", allocation="full")
    assert nbd.label() == "virtio-blk-none-nbd-storage-raw-full"
    # The run resolves nbd:storage to its address; the label stays the same.
    assert nbd.model_copy(update={"source": URI}).label() == nbd.label()
    assert DiskSpec().label() == "virtio-blk-none-raw-sparse"
    assert nbd_host("nbd:storage") == "storage" and nbd_host("/dev/sda") is None
    assert nbd_uri_parts(URI) == ("10.99.0.10", 10809, "storage")


# -- QEMU argv and libvirt XML -----------------------------------------------------------
def test_phy_drive_uses_the_host_device_protocol() -> None:
    argv = _argv(DiskSpec(bus="lsi-scsi", source="/dev/loop7"), images=("/dev/loop7",))
    assert _drives(argv) == [
        "driver=raw,file.driver=host_device,file.filename=/dev/loop7,if=none,id=drive0,"
        "cache=none,aio=threads"]
    assert "scsi-hd,bus=lsi0.0,scsi-id=0,drive=drive0,serial=hvb-d0" in argv


def test_nbd_drive_is_qemus_own_client() -> None:
    argv = _argv(DiskSpec(source=URI, cache="writeback"), images=(URI,))
    assert _drives(argv) == [
        "driver=raw,file.driver=nbd,file.server.type=inet,file.server.host=10.99.0.10,"
        "file.server.port=10809,file.export=storage,if=none,id=drive0,cache=writeback,"
        "aio=threads"]


def test_an_unresolved_nbd_source_never_reaches_qemu() -> None:
    with pytest.raises(ValueError, match="not resolved"):
        _argv(DiskSpec(source="nbd:storage"), images=("nbd:storage",))


def test_image_drives_are_unchanged() -> None:
    assert _drives(_argv(DiskSpec(), images=("/r/d.raw",))) == [
        "file=/r/d.raw,if=none,id=drive0,format=raw,cache=none,aio=threads"]


def _domain(disk: DiskSpec, image: str) -> ET.Element:
    plan = DomainPlan(spec=VmSpec(machine="pc", disks=(disk,)), accel="tcg", name="hvbench-1",
                      owner_pid=1, kernel="/k", initrd="/i", kernel_cmdline="quiet",
                      root_disk="/r.img", console_log="/c.log", disk_images=(image,),
                      tap_names=(), macs=())
    xml = build_domain_xml(plan)
    disks = ET.fromstring(xml).findall("./devices/disk")  # noqa: S314 - built just above
    assert io_settings(xml)["disks"][-1]["source"] == (image if "nbd" not in image
                                                      else "storage")
    return disks[-1]


def test_libvirt_block_disk() -> None:
    disk = _domain(DiskSpec(bus="lsi-scsi", source="/dev/loop7"), "/dev/loop7")
    assert disk.get("type") == "block"
    assert disk.find("source").attrib == {"dev": "/dev/loop7"}  # type: ignore[union-attr]


def test_libvirt_network_disk() -> None:
    disk = _domain(DiskSpec(source=URI), URI)
    assert disk.get("type") == "network"
    source = disk.find("source")
    assert source is not None and source.attrib == {"protocol": "nbd", "name": "storage"}
    host = source.find("host")
    assert host is not None and host.attrib == {"name": "10.99.0.10", "port": "10809"}


# -- studies -----------------------------------------------------------------------------
STUDY = """
[study]
name = "s"
repetitions = 1
{lab}
[[platform]]
kind = "native"
{native}

[[platform]]
kind = "qemu"
name = "vm"
memory_mib = 256
disk = {{ bus = "lsi-scsi", source = "{source}", size = "96M" }}

[[workload]]
name = "dd"
profile = "dd"
target = "{target}"
file_size = "{size}"
direct = {direct}
"""
LAB = '[lab]\n[[lab.host]]\nname = "storage"\nrate = "1gbit"\n'


def _study(*, lab: str = "", native: str = "", source: str = "/dev/loop0",
           target: str = "device", size: str = "16M", direct: str = "true") -> str:
    return STUDY.format(lab=lab, native=native, source=source, target=target, size=size,
                        direct=direct)


def test_a_phy_study_parses_and_the_native_side_names_the_device() -> None:
    study = parse_study(_study(native='disk = { source = "/dev/loop0" }'), "s.toml", HOST_RAM)
    native = study.platforms[0].spec
    assert isinstance(native, NativePlatformSpec) and native.disk is not None
    assert native.disk.source == "/dev/loop0"
    assert raw_file_sizes(study, "native") == [("dd", 16 << 20)]


def test_nbd_needs_its_lab_host() -> None:
    with pytest.raises(SpecError, match=r"s.toml: platform vm: disk.source nbd:storage: no "
                                        r"\[\[lab.host\]\] is named 'storage'"):
        parse_study(_study(source="nbd:storage"), "s.toml", HOST_RAM)
    study = parse_study(_study(lab=LAB, source="nbd:storage",
                               native='disk = { source = "nbd:storage" }'), "s.toml", HOST_RAM)
    exports = nbd_exports(study.platforms)
    assert list(exports) == ["storage"] and exports["storage"].size == 96 << 20


def test_guests_on_one_export_must_agree_on_it() -> None:
    text = _study(lab=LAB, source="nbd:storage") + (
        '\n[[platform]]\nkind = "qemu"\nname = "vm2"\n'
        'disk = { source = "nbd:storage", size = "128M" }\n')
    with pytest.raises(SpecError, match=r"platform vm2: disk\.source nbd:storage: size"):
        parse_study(text, "s.toml", HOST_RAM)


def test_the_host_measures_its_device_raw_only() -> None:
    with pytest.raises(SpecError, match=r"cell native/dd: disk.source /dev/loop0: the host "
                                        r"measures its device raw"):
        parse_study(_study(native='disk = { source = "/dev/loop0" }', target="file",
                           size="1G"), "s.toml", HOST_RAM)


@pytest.mark.parametrize(("native", "words"), [
    ("memory_mib = 16", "greater than or equal to 64"),
    ('disk = { source = "/tmp/f" }', "expected a host block device"),
    ("cpus = 2", "takes no fields besides kind, name, memory_mib and disk"),
])
def test_bad_native_fields(native: str, words: str) -> None:
    with pytest.raises(SpecError, match=words):
        parse_study(_study(native=native), "s.toml", HOST_RAM)


def test_the_2x_ram_rule_applies_to_the_native_memory_cgroup() -> None:
    # 512 MiB buffered: 2 x the guest's 256 MiB, and 2 x the native cgroup's 256 MiB.
    ok = parse_study(_study(native="memory_mib = 256", size="512M", direct="false"),
                     "s.toml", HOST_RAM)
    assert {c.name for c in ok.cells} == {"native/dd", "vm/dd"}
    with pytest.raises(SpecError, match=r"cell native/dd: file_size 512M is smaller than "
                                        r"2 x the platform's RAM \(512M\)"):
        parse_study(_study(native="memory_mib = 512", size="512M", direct="false"),
                    "s.toml", HOST_RAM)
    # Without memory_mib the host's own RAM counts, as before.
    with pytest.raises(SpecError, match=r"cell native/dd: .* RAM \(24G\)"):
        parse_study(_study(size="512M", direct="false"), "s.toml", HOST_RAM)
    cell = next(c for c in ok.cells if c.name == "native/dd")
    check_cache_rule(cell, 1 << 40)  # the host's RAM no longer matters


# -- workloads ---------------------------------------------------------------------------
def test_the_native_nbd_client_is_fios_nbd_engine() -> None:
    spec = DiskWorkloadSpec(profile="dd", target="device", file_size=16 << 20, direct=True)
    job = phase_job(spec, "write", DiskTarget(URI, "/scratch", URI, raw=True))
    argv = job.argv()
    assert "--ioengine=nbd" in argv and f"--uri={URI}" in argv
    assert not any(a.startswith("--filename") for a in argv)
    assert "--direct=0" in argv and "--end_fsync=1" in argv


def test_qemu_nbd_argv(tmp_path: Path) -> None:
    host = LabHost.__new__(LabHost)
    host.name, host.address = "storage", "10.99.0.10"
    argv = qemu_nbd_argv(host, tmp_path / "export.raw", DiskSpec(allocation="full"))
    assert argv == ["qemu-nbd", "--persistent", "--shared=8", "--format=raw",
                    "--export-name=storage", "--bind=10.99.0.10", "--port=10809",
                    "--cache=writeback", "--aio=threads", str(tmp_path / "export.raw")]
    assert export_uri("10.99.0.10", "storage") == URI
    assert source_kind(export_uri("10.99.0.10", "storage")) == "nbd-uri"


# -- devices in use ------------------------------------------------------------------------
MOUNTINFO = """\
22 1 253:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
40 22 7:3 / /mnt/data rw,relatime shared:2 - ext4 /dev/loop3 rw
41 22 259:5 / /srv rw,relatime shared:3 - xfs /dev/loop4p1 rw
"""


def test_mounts_of_a_device_and_its_partitions() -> None:
    assert blockdev._mounts_of({"7:3"}, MOUNTINFO) == ["/mnt/data"]
    assert blockdev._mounts_of({"7:4", "259:5"}, MOUNTINFO) == ["/srv"]
    assert blockdev._mounts_of({"7:5"}, MOUNTINFO) == []


def test_what_is_not_a_free_block_device(tmp_path: Path) -> None:
    plain = tmp_path / "f"
    plain.write_text("")
    assert blockdev.device_problem(str(plain)) == "is not a block device"
    assert "cannot be opened" in (blockdev.device_problem(str(tmp_path / "none")) or "")
    with pytest.raises(HostError, match=r"^s.toml: platform vm: disk.source: .*/f is not a "
                                        r"block device; hvbench refuses a device in use$"):
        blockdev.require_free_device(str(plain), "s.toml: platform vm: disk.source")


# -- the native side's memory cgroup -------------------------------------------------------
V1_MOUNTS = "cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0\n"
V2_MOUNTS = "cgroup2 /sys/fs/cgroup cgroup2 rw,relatime 0 0\n"


def test_memory_root_v1_and_v2(tmp_path: Path) -> None:
    assert detect_memory_root(V1_MOUNTS, tmp_path) == (1, tmp_path / "sys/fs/cgroup/memory")
    root = tmp_path / "sys/fs/cgroup"
    root.mkdir(parents=True)
    (root / "cgroup.controllers").write_text("cpu io\n")
    assert detect_memory_root(V2_MOUNTS, tmp_path) is None
    (root / "cgroup.controllers").write_text("cpu io memory\n")
    assert detect_memory_root(V2_MOUNTS, tmp_path) == (2, root)


def test_memory_cgroup_on_a_fake_v1_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         ) -> None:
    root = tmp_path / "sys/fs/cgroup/memory"
    root.mkdir(parents=True)
    # cgroupfs removes a group's control files with it; a plain directory needs help.
    monkeypatch.setattr("hvbench.host.cgroups._rmdir", _rm_tree)
    records = tmp_path / "records"
    records.mkdir()
    group = MemoryCgroup("native-t", 256 << 20, registry_dir=records, mounts_text=V1_MOUNTS,
                         fs_root=tmp_path)
    with group:
        path = root / "hvbench-native-t"
        assert (path / "memory.limit_in_bytes").read_text() == str(256 << 20)
        assert group.procs_file == path / "cgroup.procs"
        assert (records / "cgroups-native-t.json").is_file()
        assert group.describe()["limit_bytes"] == 256 << 20
    assert not path.exists() and list(records.iterdir()) == []
    group.stop()  # safe twice
    with pytest.raises(HostError, match="not started"):
        _ = group.procs_file
    assert cleanup_orphaned_cgroups(records) == []


def test_memory_cgroup_without_a_controller(tmp_path: Path) -> None:
    group = MemoryCgroup("native-t", 1 << 20, registry_dir=tmp_path, mounts_text="",
                         fs_root=tmp_path)
    with pytest.raises(HostError, match="needs the memory cgroup controller"):
        group.start()
    assert list(tmp_path.iterdir()) == []


def _rm_tree(path: Path) -> None:
    for child in path.iterdir():
        child.unlink()
    path.rmdir()
