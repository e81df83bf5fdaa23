"""VmSpec validation: values, combinations, error messages."""

from __future__ import annotations

import pytest

from hvbench.errors import SpecError
from hvbench.model.spec import (
    DiskSpec,
    NicSpec,
    VmSpec,
    format_size,
    parse_size,
    vm_spec_from_mapping,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1G", 1 << 30), ("512M", 512 << 20), ("4KiB", 4096), ("100", 100), (7, 7), ("1.5G", 3 << 29)],
)
def test_parse_size(text: str | int, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("bad", ["1X", "", "G", True, None, "-1G"])
def test_parse_size_rejects(bad: object) -> None:
    with pytest.raises(ValueError, match="expected a size"):
        parse_size(bad)


def test_format_size_round_trips() -> None:
    for size in (1 << 30, 512 << 20, 4096, 1000):
        assert parse_size(format_size(size)) == size


def test_defaults_are_a_valid_guest() -> None:
    spec = VmSpec()
    assert (spec.machine, spec.vcpus, spec.memory_mib, spec.accel) == ("q35", 1, 512, "auto")
    assert spec.label() == "q35_1cpu_512M"


def test_native_aio_needs_direct_cache() -> None:
    with pytest.raises(ValueError, match="aio=native needs cache=none or cache=directsync"):
        DiskSpec(aio="native", cache="writeback")
    assert DiskSpec(aio="native", cache="directsync").aio == "native"


def test_iothread_only_on_virtio() -> None:
    with pytest.raises(ValueError, match="iothread=true needs bus virtio-blk or virtio-scsi"):
        DiskSpec(bus="ahci", iothread=True)


@pytest.mark.parametrize("bus", ["ide", "ahci", "lsi-scsi"])
def test_microvm_rejects_emulated_disks(bus: str) -> None:
    with pytest.raises(SpecError, match=f"microvm cannot carry bus={bus}"):
        vm_spec_from_mapping({"machine": "microvm", "disks": [{"bus": bus}]})


def test_microvm_rejects_emulated_nics() -> None:
    with pytest.raises(SpecError, match="microvm cannot carry NIC model=e1000"):
        vm_spec_from_mapping({"machine": "microvm", "nics": [{"model": "e1000"}]})


def test_bus_capacity() -> None:
    with pytest.raises(SpecError, match="5 disks on bus ide: one controller takes 4"):
        vm_spec_from_mapping({"disks": [{"bus": "ide"}] * 5})


def test_error_names_source_field_and_expectation() -> None:
    with pytest.raises(SpecError) as info:
        vm_spec_from_mapping({"disks": [{"bus": "virtio-blk"}, {"cache": "sometimes"}]}, "x.toml")
    message = str(info.value)
    assert message.startswith("x.toml: disks[1].cache:")
    assert "'none', 'writeback', 'writethrough', 'directsync' or 'unsafe'" in message


def test_unknown_field_is_rejected() -> None:
    with pytest.raises(SpecError,
                       match=r"x: disks\[0\]\.buss: unknown field \(did you mean 'bus'\?\)"):
        vm_spec_from_mapping({"disks": [{"buss": "ide"}]}, "x")


def test_nic_rules() -> None:
    with pytest.raises(ValueError, match="bridge is only valid with backend=tap"):
        NicSpec(bridge="br0")
    with pytest.raises(ValueError, match="expected tcp:HOSTPORT:GUESTPORT"):
        NicSpec(forwards=("tcp:80",))
    with pytest.raises(ValueError, match="forwards are only valid with backend=user"):
        NicSpec(backend="tap", forwards=("tcp:8080:80",))
    with pytest.raises(ValueError, match="expected IPv4/PREFIX"):
        NicSpec(address="10.0.0.1")


def test_labels_derive_from_values() -> None:
    spec = VmSpec(
        disks=(DiskSpec(bus="virtio-scsi", cache="writeback", format="qcow2", iothread=True),),
        nics=(NicSpec(model="e1000"),),
    )
    assert spec.label() == "q35_1cpu_512M_virtio-scsi-writeback-qcow2-sparse-iothread_e1000-user"
