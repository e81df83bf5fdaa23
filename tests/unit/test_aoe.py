"""AoE export and guest attach (hvbench.workloads.aoe): argv, readiness, addresses."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from pydantic import ValidationError

from hvbench.errors import CommandError
from hvbench.kinds.native.spec import NativeDiskSpec
from hvbench.model.aoe import guest_attach_argv, guest_device
from hvbench.model.lab import LabHostSpec
from hvbench.model.spec import DiskSpec, aoe_address, aoe_address_parts, source_kind
from hvbench.netlab.lab import LabHost
from hvbench.workloads.aoe import AoeServer, vblade_argv, vblade_ready


def test_vblade_exports_the_file_on_the_lab_interface() -> None:
    assert vblade_argv(shelf=3, slot=1, netif="eth0", path="/w/aoe/export.raw") == [
        "vblade", "3", "1", "eth0", "/w/aoe/export.raw"]
    for shelf, slot in ((-1, 0), (65535, 0), (0, 256)):
        with pytest.raises(ValueError, match="shelf 0-65534, slot 0-255"):
            vblade_argv(shelf=shelf, slot=slot, netif="eth0", path="/x")


def test_vblade_is_ready_when_it_announces_its_own_address() -> None:
    said = "pid 16934: e0.0, 16384 sectors O_RDWR\n"
    assert vblade_ready(said, 0, 0)
    assert not vblade_ready(said, 1, 0) and not vblade_ready(said, 0, 10)
    assert not vblade_ready("", 0, 0)
    assert not vblade_ready("open: No such file or directory\n", 0, 0)


def test_guest_attach_loads_aoe_on_one_nic_and_waits_for_the_device() -> None:
    argv = guest_attach_argv(netif="eth0", shelf=0, slot=1, wait_s=7)
    assert argv[:2] == ["sh", "-c"]
    script = argv[2]
    assert 'modprobe aoe ${1:+aoe_iflist="$1"}' in script and "aoe-discover" in script
    assert argv[3:] == ["aoe-attach", "eth0", "7", "/dev/etherd/e0.1"]
    # Without a NIC name the driver listens on every interface.
    assert guest_attach_argv(shelf=2, slot=0)[3:5] == ["aoe-attach", ""]
    assert guest_device(12, 3) == "/dev/etherd/e12.3"


def test_aoe_sources_are_guest_initiated_raw_lab_exports() -> None:
    disk = DiskSpec(source="aoe:storage", initiator="guest", bus="virtio-blk")
    assert source_kind("aoe:storage") == "aoe-host" and disk.guest_attached
    assert disk.label().startswith("virtio-blk-none-aoe-storage-raw")
    resolved = disk.model_copy(update={"source": aoe_address("storage", 1, 0)})
    assert resolved.source == "aoe://storage/e1.0" and resolved.label() == disk.label()
    assert aoe_address_parts("aoe://storage/e1.0") == ("storage", 1, 0)
    with pytest.raises(ValueError, match="not a resolved AoE export"):
        aoe_address_parts("aoe:storage")
    with pytest.raises(ValidationError, match="set initiator = \"guest\""):
        DiskSpec(source="aoe:storage")
    with pytest.raises(ValidationError, match="vblade exports a raw file"):
        DiskSpec(source="aoe:storage", initiator="guest", format="qcow2")
    with pytest.raises(ValidationError, match="no aoe module"):
        NativeDiskSpec(source="aoe:storage")
    with pytest.raises(ValueError, match=r"aoe:HOST"):
        source_kind("aoe://storage")


@pytest.mark.skipif(shutil.which("vblade") is None, reason="vblade is not installed")
def test_a_failed_start_leaves_nothing(tmp_path: Path) -> None:
    # No such namespace: `ip netns exec` fails before vblade runs.
    host = LabHost(LabHostSpec(name="storage"), netns="hvb-nosuch-storage",
                   address="10.213.7.10", veth="hvb-vnosuch0", scratch=tmp_path / "s")
    server = AoeServer(host, tmp_path / "work", 1 << 20)
    with pytest.raises(CommandError, match="aoe-storage"):
        server.start()
    assert not server.is_running() and list((tmp_path / "work").iterdir()) == []
    server.stop()
    server.stop()  # safe twice
