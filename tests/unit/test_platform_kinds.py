"""Platform kinds and the Platform protocol: every platform spec kind has a factory,
the host answers what a guest would, and the accelerator is chosen before a guest is
built (qemu.py never imports the KVM probe)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hvbench.errors import HostError, HvbenchError, SpecError
from hvbench.kinds.libvirt.spec import LibvirtPlatformSpec
from hvbench.kinds.native.spec import NativeDiskSpec, NativePlatformSpec
from hvbench.kinds.qemu.spec import QemuPlatformSpec
from hvbench.model.platform import platform_spec_kinds, register_platform_spec
from hvbench.model.spec import NicSpec, VmSpec
from hvbench.monitors.sampler import ThreadCpuSampler
from hvbench.monitors.session import monitors_for
from hvbench.platforms import accel
from hvbench.platforms.base import Platform
from hvbench.platforms.kinds import platform_kind, platform_kinds
from hvbench.platforms.kvm_probe import KvmStatus
from hvbench.platforms.native import NativePlatform
from hvbench.platforms.qemu import AccelChoice, QemuPlatform, fixed_accel

SRC = Path(__file__).parent.parent.parent / "src"


def test_every_platform_spec_kind_has_a_factory() -> None:
    specs = platform_spec_kinds()
    assert list(specs) == list(platform_kinds()) == ["native", "qemu", "libvirt"]
    for name, kind in specs.items():
        assert kind.spec.model_fields["kind"].default == name
        assert platform_kinds()[name].kind == name


def test_a_platform_kind_claimed_twice_is_refused() -> None:
    taken = platform_spec_kinds()["native"]
    register_platform_spec(taken)  # the same registration again: nothing changes
    other = dataclasses.replace(taken, default_name="host")
    with pytest.raises(HvbenchError, match="platform kind 'native' is registered twice"):
        register_platform_spec(other)
    assert platform_spec_kinds()["native"] is taken


def test_native_builds_the_host_under_its_variant_name() -> None:
    kind = platform_kind(NativePlatformSpec())
    assert not kind.is_guest and NativePlatformSpec().guest_vm() is None
    name = kind.instance_name("native", "native")
    platform = kind.build(NativePlatformSpec(), name=name)
    assert isinstance(platform, NativePlatform) and platform.name == "native"


def test_qemu_builds_a_wired_guest_with_a_concrete_accelerator() -> None:
    spec = QemuPlatformSpec(vm=VmSpec(accel="tcg", nics=(NicSpec(backend="user"),)))
    kind = platform_kind(spec)
    assert kind.is_guest and spec.guest_vm() == spec.vm
    name = kind.instance_name("vm", "vm@busy")
    assert name == f"hvbench-{os.getpid()}-vm@busy"
    wired = NicSpec(backend="user", forwards=("tcp:1:2",))
    guest = kind.build(spec, name=name, wire=lambda vm: vm.model_copy(
        update={"nics": (wired,)}))
    assert isinstance(guest, QemuPlatform) and guest.name == name
    assert guest.nics == (wired,)
    # Not started: nothing to sample, tell, or run.
    assert (guest.pid, guest.argv, guest.tap_names, guest.accel) == (None, [], (), None)
    assert not guest.is_running() and guest.console_tail() == ""


def test_an_unknown_platform_kind_is_refused() -> None:
    other = NativePlatformSpec.model_construct(kind="xen")  # as a newer study has it
    with pytest.raises(SpecError, match=r"'xen'.*native, qemu, libvirt"):
        platform_kind(other)


def test_the_host_answers_what_callers_ask_a_guest(tmp_path: Path) -> None:
    host: Platform = NativePlatform(base_dir=tmp_path)
    assert (host.is_guest, host.accel, host.argv, host.pid, host.vhost) == (
        False, None, None, None, None)
    assert (host.tap_names, host.nics, host.vcpu_threads()) == ((), (), {})
    assert host.console_tail(200) is None
    assert not host.is_running()
    host.start()
    try:
        assert host.is_running()
        samplers = monitors_for(host).monitors
        assert not any(isinstance(m, ThreadCpuSampler) for m in samplers)
    finally:
        host.stop()


def test_fixed_accelerators_need_no_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    assert fixed_accel(VmSpec(accel="tcg")) == AccelChoice("tcg", "requested accel=tcg")
    assert fixed_accel(VmSpec(accel="auto")) is None
    monkeypatch.setattr("hvbench.host.facts.kvm_present", lambda: (False, "no /dev/kvm"))
    with pytest.raises(HostError, match="no /dev/kvm"):
        fixed_accel(VmSpec(accel="kvm"))


def _status(usable: bool | None, reason: str) -> KvmStatus:
    return KvmStatus(True, "", usable, reason, None, "boot", "now")


def test_auto_asks_the_probe_and_falls_back_to_tcg(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(accel, "kvm_status", lambda: _status(True, "ok"))
    assert accel.choose_accel(VmSpec()) == AccelChoice("kvm", "auto: KVM probe booted a guest")
    monkeypatch.setattr(accel, "kvm_status", lambda: _status(False, "hangs"))
    assert accel.choose_accel(VmSpec()) == AccelChoice(
        "tcg", "auto: KVM unusable (hangs); falling back to TCG")
    assert accel.choose_accel(VmSpec(accel="tcg")).reason == "requested accel=tcg"


def test_a_guest_with_accel_auto_needs_a_choice(monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    monkeypatch.setattr("hvbench.platforms.qemu.require_tool", lambda name: None)
    monkeypatch.setattr("hvbench.platforms.qemu.find_image", object)
    guest = QemuPlatform(VmSpec(), name="t", base_dir=tmp_path)
    with pytest.raises(HostError, match="accel=auto was not decided"):
        guest.launch()


def test_qemu_does_not_import_the_kvm_probe() -> None:
    code = ("import sys, hvbench.platforms.qemu; "
            "sys.exit('hvbench.platforms.kvm_probe' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ,
                          "PYTHONPATH": str(SRC)}, check=False, timeout=60)
    assert done.returncode == 0


def test_each_platform_spec_answers_the_core_without_its_class_being_tested() -> None:
    host = NativePlatformSpec(memory_mib=256, disk=NativeDiskSpec(source="/dev/sdz"))
    assert (host.IS_HOST, host.guest_vm(), host.attached(), host.memory_limit_mib(),
            host.host_device()) == (True, None, False, 256, "/dev/sdz")
    assert host.disk_sources() == [("disk.source", None, "/dev/sdz")]
    with pytest.raises(SpecError, match="a native platform declares no guest"):
        host.with_vm(VmSpec())
    vm, other = VmSpec(), VmSpec(vcpus=2)
    guest = QemuPlatformSpec(vm=vm)
    assert (guest.IS_HOST, guest.HOSTS_SCENARIOS, guest.SERVES_SHARES,
            guest.RERUNS_WITH_FIX, guest.SETS_NIC_MTU) == (False, True, True, True, True)
    assert (guest.guest_vm(), guest.memory_limit_mib(), guest.host_device()) == (vm, None, None)
    assert guest.with_vm(other) == QemuPlatformSpec(vm=other)
    assert guest.location_fields() == {} and guest.disk_sources() == []


def test_a_libvirt_spec_is_attached_only_to_an_existing_domain() -> None:
    existing = LibvirtPlatformSpec(domain="db", path="/data")
    assert (existing.attached(), existing.attached_path(), existing.guest_vm()) == (
        True, "/data", None)
    defined = LibvirtPlatformSpec(uri="qemu+ssh://far/system", vm=VmSpec())
    assert (defined.attached(), defined.attached_path()) == (False, None)
    assert (defined.HOSTS_SCENARIOS, defined.SERVES_SHARES, defined.RERUNS_WITH_FIX,
            defined.SETS_NIC_MTU) == (False, False, False, False)
    moved = defined.with_vm(VmSpec(vcpus=2))
    assert isinstance(moved, LibvirtPlatformSpec) and moved.uri == defined.uri
    assert moved.guest_vm() == VmSpec(vcpus=2)
    assert defined.location_fields() == {"uri": "qemu+ssh://far/system"}
