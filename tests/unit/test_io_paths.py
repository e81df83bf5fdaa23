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
        macs=tuple(f"52:54:00:00:00:0{i}" for i in range(len(spec.nics)))))


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
