"""Real TCG guests with each disk bus and NIC model: the device and its driver are there."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import pytest

from hvbench.image.builder import GuestImage
from hvbench.model.qemu_argv import DISK_DRIVERS, NIC_DRIVERS
from hvbench.model.spec import DiskSpec, NicSpec, VmSpec
from hvbench.platforms.qemu import QemuPlatform

pytestmark = pytest.mark.integration

# Prints the driver of every ancestor of a sysfs path that has one.
DRIVERS_OF = (
    'p=$(readlink -f "$1"); while [ "$p" != /sys ] && [ -n "$p" ]; do '
    '[ -e "$p/driver" ] && basename "$(readlink "$p/driver")"; p=${p%/*}; done'
)


def guest_drivers(guest: QemuPlatform, sysfs_path: str) -> list[str]:
    result = guest.exec(["sh", "-c", DRIVERS_OF, "drivers", sysfs_path], timeout=30)
    assert result.ok, result.stderr
    return result.text().split()


@pytest.mark.parametrize(
    ("machine", "bus"),
    [
        ("q35", "virtio-blk"),
        ("q35", "virtio-scsi"),
        ("pc", "ide"),
        ("q35", "ide"),
        ("q35", "ahci"),
        ("pc", "lsi-scsi"),
    ],
)
def test_disk_bus(image: GuestImage, machine: str, bus: str) -> None:
    disk = DiskSpec(bus=bus, size=64 << 20, cache="none")  # type: ignore[arg-type]
    spec = VmSpec(machine=machine, accel="tcg", disks=(disk,))  # type: ignore[arg-type]
    with QemuPlatform(spec, image=image) as guest:
        device = guest.disk_device(0)
        name = device.removeprefix("/dev/")
        assert DISK_DRIVERS[bus] in guest_drivers(guest, f"/sys/block/{name}")
        size = guest.exec(["cat", f"/sys/block/{name}/size"], timeout=30).text().strip()
        assert int(size) * 512 == 64 << 20
        write = guest.exec(
            ["dd", "if=/dev/zero", f"of={device}", "bs=64k", "count=16", "oflag=direct"], timeout=60
        )
        assert write.ok, write.stderr


def test_several_buses_in_one_guest(image: GuestImage) -> None:
    disks = tuple(
        DiskSpec(bus=b, size=(32 + 8 * i) << 20)  # type: ignore[arg-type]
        for i, b in enumerate(("virtio-blk", "ahci", "virtio-scsi"))
    )
    with QemuPlatform(VmSpec(accel="tcg", disks=disks), image=image) as guest:
        for index, disk in enumerate(disks):
            name = guest.disk_device(index).removeprefix("/dev/")
            size = guest.exec(["cat", f"/sys/block/{name}/size"], timeout=30).text().strip()
            assert int(size) * 512 == disk.size


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"hello from the host\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def host_http() -> Iterator[int]:
    """A web server on the host's loopback; slirp's 10.0.2.2 reaches it from the guest."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("model", ["virtio-net", "e1000", "rtl8139"])
def test_nic_model(image: GuestImage, host_http: int, model: str) -> None:
    spec = VmSpec(accel="tcg", nics=(NicSpec(model=model),))  # type: ignore[arg-type]
    with QemuPlatform(spec, image=image) as guest:
        expected = NIC_DRIVERS[model]
        drivers = guest_drivers(guest, "/sys/class/net/eth0/device")
        wanted = expected if isinstance(expected, tuple) else (expected,)
        assert set(wanted) & set(drivers), drivers
        addr = guest.exec(["ip", "-4", "-o", "addr", "show", "eth0"], timeout=30).text()
        assert "10.0.2.15/24" in addr
        fetched = guest.exec(["wget", "-q", "-O", "-", f"http://10.0.2.2:{host_http}/"], timeout=60)
        assert fetched.stdout == b"hello from the host\n", fetched.stderr
