"""Seed 001's storage paths end to end, each a reduced run of its shipped example: a
loop device given whole to a TCG guest and measured natively ("phy"; a mounted one is
refused first), an NBD export of a lab host read through QEMU's NBD client and
natively through fio's, buffered dd over 2 x RAM with the native side in a memory
cgroup of the guest's RAM, and an ATA over Ethernet export attached by the guest."""

from __future__ import annotations

import contextlib
import hashlib
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from hvbench.errors import HostError
from hvbench.image.builder import GuestImage
from hvbench.model.aoe import guest_attach_argv, guest_device
from hvbench.model.lab import LabHostSpec, LabSpec
from hvbench.model.spec import NicSpec, VmSpec
from hvbench.model.study import parse_study
from hvbench.netlab.lab import NetLab
from hvbench.platforms.qemu import QemuPlatform
from hvbench.run.runner import MEMORY_CGROUP_KIND, run_study
from hvbench.store.database import Store
from hvbench.workloads.aoe import AoeServer

pytestmark = pytest.mark.integration
SEEDS = Path(__file__).resolve().parents[2] / "examples" / "seeds"
HOST_RAM = 24 << 30


def _run(name: str, changes: list[str], tmp_path: Path
         ) -> tuple[dict[tuple[str, str, str], float], str]:
    """Run the example ``name`` with the ``--set`` ``changes`` (its reduced form);
    every repetition must succeed. ((platform, phase, metric) -> value of the one
    repetition, the run id)."""
    study = parse_study((SEEDS / name).read_text(), str(SEEDS / name), HOST_RAM, changes)
    assert study.study.repetitions == 1
    store = Store(tmp_path / "r.db")
    try:
        outcome = run_study(study, store)
        assert outcome.failures == 0, store.failures(outcome.run_id)
        rows = store.measurements(outcome.run_id)
    finally:
        store.close()
    return {(r.platform, r.phase, r.metric): r.value for r in rows}, outcome.run_id


@contextlib.contextmanager
def loop_device(backing: Path, size: str = "64M") -> Iterator[str]:
    """A loop device over a new sparse file ``backing``, detached afterwards."""
    subprocess.run(["truncate", "-s", size, str(backing)], check=True)
    done = subprocess.run(["losetup", "--find", "--show", str(backing)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"no loop device here: {done.stderr.strip()}")
    device = done.stdout.strip()
    try:
        yield device
    finally:
        subprocess.run(["losetup", "-d", device], check=False)


def _mtu(interface: str) -> int:
    return int((Path("/sys/class/net") / interface / "mtu").read_text())


@contextlib.contextmanager
def mounted(device: str, where: Path) -> Iterator[None]:
    subprocess.run(["mkfs.ext4", "-q", "-F", device], check=True)
    where.mkdir()
    subprocess.run(["mount", device, str(where)], check=True)
    try:
        yield
    finally:
        subprocess.run(["umount", str(where)], check=False)
        where.rmdir()


def test_phy_loop_device_natively_and_in_a_tcg_guest(image: GuestImage, tmp_path: Path,
                                                     ) -> None:
    with loop_device(tmp_path / "phy.img") as device:
        changes = ["study.repetitions=1", "workload.dd.file_size=16M",
                   "platform.phy.disk.bus=lsi-scsi", "platform.file.disk.bus=lsi-scsi",
                   f"platform.native-phy.disk.source={device}",
                   f"platform.phy.disk.source={device}"]
        # Mounted, the device is refused before anything starts: one line naming the
        # file, the field and the device.
        study = SEEDS / "001-phy.toml"
        with mounted(device, tmp_path / "mnt"):
            store = Store(tmp_path / "refused.db")
            try:
                with pytest.raises(HostError) as refused:
                    run_study(parse_study(study.read_text(), str(study), HOST_RAM, changes),
                              store)
            finally:
                store.close()
        message = str(refused.value)
        assert "\n" not in message
        assert message.startswith(f"{study}: platform native-phy: disk.source: {device} is "
                                  "mounted")
        values, _ = _run("001-phy.toml", changes, tmp_path)
    for platform in ("native-phy", "phy", "file"):
        for phase in ("write", "read"):
            assert values[(platform, phase, "mb_s")] > 0
    # The host's iostat follows the device the study names, not the work directory's;
    # the image-file guest's stays on the filesystem holding its image.
    loop = Path(device).name
    for platform in ("native-phy", "phy"):
        assert values[(platform, "write", f"host.disk.{loop}.w_mb_s")] > 0
    assert not [m for (p, _, m) in values if p == "file" and f".{loop}." in m]


def test_nbd_export_of_a_lab_host_host_and_guest_initiator(image: GuestImage,
                                                           tmp_path: Path) -> None:
    """001-nbd.toml reduced: NBD through QEMU's client and the guest's nbd-client, and
    AoE through the guest's aoe driver (the study's aoe:storage, resolved by the
    run's lab), each writing and reading with dd; the native side over NBD."""
    values, _ = _run("001-nbd.toml", [
        "study.repetitions=1", "workload.dd.file_size=16M", "platform.nbd.disk.size=32M",
        'platform.nbd.exclude=[{ initiator = "guest", bus = "lsi-scsi" }, '
        '{ initiator = "host", bus = "virtio-blk" }]'], tmp_path)
    for platform in ("native-nbd", "nbd.lsi-scsi-host", "nbd.virtio-blk-guest", "aoe"):
        for phase in ("write", "read"):
            assert values[(platform, phase, "mb_s")] > 0
    # The shaped 1 Gbit/s link bounds both sides (125 MB/s, with a margin for bursts).
    assert values[("native-nbd", "read", "mb_s")] < 160


def test_buffered_dd_over_2x_ram_native_in_a_memory_cgroup(image: GuestImage,
                                                          tmp_path: Path) -> None:
    # The example's sizes (256 MiB of RAM, 512 MiB files): a 128 MiB guest cannot map
    # fio's shared libraries next to a full page cache.
    values, run_id = _run("001-buffered.toml", [
        "study.repetitions=1", "platform.vm.disk.bus=lsi-scsi"], tmp_path)
    for platform in ("native", "vm"):
        for phase in ("write", "read"):
            assert values[(platform, phase, "mb_s")] > 0
    store = Store(tmp_path / "r.db")
    try:
        kept = [json.loads(raw.content)
                for raw in store.raw_outputs(run_id, kind=MEMORY_CGROUP_KIND)]
    finally:
        store.close()
    assert kept, "the native repetition keeps its memory cgroup"
    assert kept[0]["limit_bytes"] == 256 << 20
    # The page cache of a 512 MiB file stayed within the 256 MiB limit.
    assert 0 < kept[0]["peak_bytes"] <= 256 << 20
    # Its block I/O is accounted in a cgroup of its own (explain's attribution): a read
    # over 2 x its RAM misses the cache, and the misses are charged to the reader.
    assert kept[0]["io_stat"], "the native side's cgroup accounts its block I/O"
    assert values[("native", "read", "cgroup.io.read_kb_s")] > 0


def test_aoe_export_of_a_lab_host_attached_by_the_guest(image: GuestImage,
                                                        tmp_path: Path) -> None:
    """vblade on the lab host `storage`, a TCG guest on the lab bridge: the guest's aoe
    module finds e0.0, dd writes 4 MiB to it and reads it back, and the frames crossed
    the storage host's veth (AoE is Ethernet: nothing else carries them). The lab runs
    jumbo frames (seed 001's 9000-byte MTU): bridge, veth, tap and the guest's NIC all
    take it, so AoE carries 8 KiB per frame where 1500 bytes allow 1 KiB."""
    lab_spec = LabSpec(hosts=(LabHostSpec(name="storage", rate="1gbit"),), mtu=9000)
    with NetLab(lab_spec) as lab, \
            AoeServer(lab.host("storage"), tmp_path, 16 << 20) as server:
        nic = NicSpec(model="virtio-net", backend="tap", bridge=lab.bridge,
                      address=f"{lab.allocate_address()}/{lab.prefix_len}")
        veth = lab.host("storage").veth
        stats = Path("/sys/class/net") / veth / "statistics"
        with QemuPlatform(VmSpec(accel="tcg", nics=(nic,)), image=image) as guest:
            tap = guest.tap_names[0]
            assert tap is not None
            assert _mtu(lab.bridge) == _mtu(veth) == _mtu(tap) == 9000
            inside = guest.exec(["cat", "/sys/class/net/eth0/mtu"], timeout=30)
            assert inside.text().strip() == "9000", inside.stderr
            attached = guest.exec(guest_attach_argv(netif="eth0", shelf=0, slot=0),
                                  timeout=60)
            assert attached.ok, attached.stderr
            rx0 = int((stats / "rx_bytes").read_text())
            device = guest_device(0, 0)
            wrote = guest.exec(["dd", "if=/dev/urandom", f"of={device}", "bs=64k",
                                "count=64", "oflag=direct"], timeout=120)
            assert wrote.ok, wrote.stderr
            frames0 = int((stats / "rx_packets").read_text())
            sums = guest.exec(["sh", "-c", f"dd if={device} bs=64k count=64 iflag=direct "
                               "2>/dev/null | sha256sum"], timeout=120)
            rx1 = int((stats / "rx_bytes").read_text())
            frames = int((stats / "rx_packets").read_text()) - frames0
        assert server.image is not None
        served = hashlib.sha256(server.image.read_bytes()[:4 << 20]).hexdigest()
    assert sums.ok and sums.text().split()[0] == served
    # The read's 4 MiB came back over the storage host's veth (rx: what it sent).
    assert rx1 - rx0 >= 4 << 20
    # Jumbo frames carried the read: at a 1500-byte MTU AoE moves 1 KiB per frame (4096
    # frames for 4 MiB); under half of that needs frames over 2 KiB.
    assert 0 < frames < 2048, frames
    assert not list(tmp_path.glob("aoe-*")), "the export's directory is removed"
