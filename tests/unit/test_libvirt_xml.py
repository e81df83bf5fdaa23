"""The libvirt platform's pure parts: the domain XML (golden, and valid by libvirt's own
schema), the refusals, the owner mark, the I/O facts read back from a domain's XML,
and ``kind = "libvirt"`` in study files."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from hvbench.errors import SpecError
from hvbench.kinds.libvirt.spec import LibvirtPlatformSpec
from hvbench.model.libvirt_xml import (
    DomainPlan,
    build_domain_xml,
    io_lines,
    io_settings,
    owner_pid,
)
from hvbench.model.spec import VmSpec
from hvbench.model.study import parse_study
from hvbench.monitors.session import monitors_for
from hvbench.platforms.kinds import platform_kind
from hvbench.platforms.libvirt import LibvirtPlatform, is_local

GOLDEN = Path(__file__).parent.parent / "fixtures" / "libvirt" / "domain.golden.xml"
HOST_RAM = 24 << 30


def _plan(spec: dict[str, object], **changes: object) -> DomainPlan:
    vm = VmSpec.model_validate(spec)
    fields: dict[str, object] = {
        "spec": vm, "accel": "tcg", "name": "hvbench-42-guest", "owner_pid": 42,
        "kernel": "/img/vmlinux", "initrd": "/img/initrd.img", "kernel_cmdline": "quiet",
        "root_disk": "/img/rootfs.img", "console_log": "/img/console.log",
        "disk_images": tuple(f"/img/disk{i}.raw" for i in range(len(vm.disks))),
        "tap_names": tuple("hvb-l00000" if n.backend == "tap" else None for n in vm.nics),
        "macs": tuple(f"52:54:01:00:00:0{i}" for i in range(len(vm.nics))),
    }
    fields.update(changes)
    return DomainPlan(**fields)  # type: ignore[arg-type]


FULL: dict[str, object] = {
    "machine": "pc", "vcpus": 2, "memory_mib": 256,
    "disks": [
        {"bus": "virtio-blk", "cache": "none", "aio": "native", "iothread": True,
         "bps_limit": "40M"},
        {"bus": "virtio-scsi", "cache": "writeback", "format": "qcow2", "iothread": True},
        {"bus": "ide", "cache": "writethrough"},
        {"bus": "ahci", "cache": "directsync"},
        {"bus": "lsi-scsi", "cache": "unsafe"},
    ],
    "nics": [{"model": "e1000"},
             {"model": "virtio-net", "backend": "tap", "bridge": "hvb-b1",
              "address": "10.9.0.2/24"}],
}


def test_domain_xml_matches_the_golden_file() -> None:
    assert build_domain_xml(_plan(FULL)) == GOLDEN.read_text()


@pytest.mark.skipif(shutil.which("virt-xml-validate") is None,
                    reason="virt-xml-validate (libvirt-clients) is not installed")
def test_domain_xml_is_valid_by_libvirts_schema(tmp_path: Path) -> None:
    specs: list[dict[str, object]] = [FULL, {"machine": "q35"}, {"disks": [{"bus": "ahci"}]}]
    for spec in specs:
        path = tmp_path / "domain.xml"
        path.write_text(build_domain_xml(_plan(spec)))
        done = subprocess.run(["virt-xml-validate", str(path), "domain"],
                              capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stdout + done.stderr


def test_accelerator_picks_the_domain_type_and_cpu() -> None:
    tcg = build_domain_xml(_plan({}))
    assert "<domain" in tcg and 'type="qemu"' in tcg and "qemu64" in tcg
    kvm = build_domain_xml(_plan({}, accel="kvm"))
    assert 'type="kvm"' in kvm and 'mode="host-passthrough"' in kvm


@pytest.mark.parametrize(("spec", "words"), [
    ({"machine": "microvm"}, "libvirt has no microvm"),
    ({"machine": "q35", "disks": [{"bus": "ide"}]}, "IDE on machine pc only"),
    ({"nics": [{"backend": "tap"}]}, "needs bridge"),
    ({"nics": [{"forwards": ["tcp:8080:80"]}]}, "no port forwards"),
])
def test_what_libvirt_cannot_express_is_refused(spec: dict[str, object], words: str) -> None:
    with pytest.raises(SpecError, match=words):
        build_domain_xml(_plan(spec))


def test_the_owner_mark_is_read_back_and_absent_elsewhere() -> None:
    xml = build_domain_xml(_plan({}))
    assert owner_pid(xml) == 42
    assert owner_pid("<domain type='kvm'><name>user</name></domain>") is None
    assert owner_pid("<domain><metadata><x:owner xmlns:x='urn:other' pid='42'/></metadata>"
                     "</domain>") is None
    assert owner_pid("not xml") is None


def test_io_settings_of_a_users_domain() -> None:
    xml = """<domain type='kvm'><name>web</name><iothreads>1</iothreads>
      <os><type arch='x86_64' machine='pc-q35-7.2'>hvm</type></os><devices>
      <disk type='file' device='disk'><driver name='qemu' type='qcow2' cache='none'
        io='native' iothread='1'/><source file='/var/lib/libvirt/images/web.qcow2'/>
        <target dev='vda' bus='virtio'/></disk>
      <disk type='block' device='disk'><driver name='qemu' type='raw'/>
        <source dev='/dev/sdb'/><target dev='vdb' bus='virtio'/><serial>data</serial></disk>
      <disk type='file' device='cdrom'><target dev='sda' bus='sata'/><readonly/></disk>
      <interface type='network'><source network='default'/><model type='virtio'/></interface>
    </devices></domain>"""
    facts = io_settings(xml)
    assert facts["machine"] == "pc-q35-7.2" and facts["iothreads"] == 1
    assert facts["disks"][1]["source"] == "/dev/sdb" and facts["disks"][1]["serial"] == "data"
    assert io_lines(facts) == [
        "disk vda: bus=virtio format=qcow2 cache=none io=native iothread=1",
        "disk vdb: bus=virtio format=raw cache=default io=default iothread=-",
        "nic: type=network model=virtio source=default",
    ]
    with pytest.raises(SpecError, match="does not parse"):
        io_settings("<domain>")


STUDY = """
[study]
name = "lv"
[[platform]]
kind = "libvirt"
name = "{name}"
{body}
[[workload]]
name = "dd"
profile = "dd"
target = "device"
file_size = "64M"
direct = true
"""


def _platform(body: str, name: str = "p") -> LibvirtPlatformSpec:
    study = parse_study(STUDY.format(name=name, body=body), "s.toml", HOST_RAM)
    spec = study.platforms[0].spec
    assert isinstance(spec, LibvirtPlatformSpec)
    return spec


def test_study_declares_a_libvirt_guest_or_an_existing_domain() -> None:
    defined = _platform('machine = "pc"\ndisk = { bus = "virtio-blk", cache = "none" }')
    assert defined.uri == "qemu:///system" and defined.vm is not None
    assert defined.vm.disks[0].cache == "none" and not defined.existing
    existing = _platform('uri = "qemu+ssh://root@lab/system"\ndomain = "web"\ndisk = "vdb"')
    assert existing.existing and existing.disk == "vdb" and existing.vm is None
    assert _platform('domain = "web"\npath = "/srv/bench"').path == "/srv/bench"
    assert not existing.destroy_contents
    assert _platform('domain = "web"\ndisk = "vdb"\ndestroy_contents = true').destroy_contents
    assert platform_kind(existing).kind == "libvirt"


@pytest.mark.parametrize(("body", "words"), [
    ('domain = "web"\nmachine = "pc"', "machine"),
    ('domain = "web"\ndisk = "vdb"\npath = "/x"', "not both"),
    ('disk = "vdb"', "disk"),
    ('uri = "not a uri"', "uri"),
    ('domain = "web"\ndisk = "/dev/vdb"', "disk"),
    ('domain = "web"\npath = "/x"\ndestroy_contents = true', "destroy_contents.*disk"),
])
def test_bad_libvirt_platforms_are_refused(body: str, words: str) -> None:
    with pytest.raises(SpecError, match=words):
        _platform(body)


def test_local_and_remote_uris() -> None:
    assert is_local("qemu:///system") and is_local("qemu+unix:///system")
    assert not is_local("qemu+ssh://root@host/system")
    assert not is_local("qemu+tcp://host/system")


def test_a_remote_domain_says_which_host_metrics_are_missing() -> None:
    remote = LibvirtPlatform(LibvirtPlatformSpec(uri="qemu+ssh://h/system", domain="web"),
                             name="x")
    missing = remote.missing_metrics()
    assert set(missing) == {"qemu_threads", "host_disk", "host_nic"}
    assert all("remote host" in why for why in missing.values())
    # ... and this machine's samplers are not run for it at all.
    assert not remote.on_this_host and monitors_for(remote).monitors == []
    local = LibvirtPlatform(LibvirtPlatformSpec(domain="web"), name="x")
    assert local.on_this_host
    assert local.missing_metrics() == {} and local.name == "web"
    # Not started: nothing to sample or tell.
    assert (local.pid, local.argv, local.tap_names, local.vcpu_threads()) == (
        None, None, (), {})
    assert not local.is_running() and local.describe()["kind"] == "libvirt"


def test_guest_kernel_settings_reach_the_domain_cmdline() -> None:
    xml = build_domain_xml(_plan({"mitigations": False, "kernel_args": ["nokaslr"]}))
    assert "<cmdline>quiet " in xml and " mitigations=off nokaslr</cmdline>" in xml


def test_the_clocksource_reaches_the_domain_cmdline() -> None:
    # The same words as QEMU's -append (one function builds both).
    assert " clocksource=tsc tsc=reliable" in build_domain_xml(_plan({}))
    assert "clocksource" not in build_domain_xml(_plan({}, accel="kvm"))
    xml = build_domain_xml(_plan({"clocksource": "hpet"}))
    assert " clocksource=hpet " in xml and "tsc=reliable" not in xml
