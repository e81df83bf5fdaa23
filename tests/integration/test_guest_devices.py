"""Real TCG guests with each disk bus and NIC model: the device and its driver are there
(three guests carry them all, shared by the tests)."""

from __future__ import annotations

import contextlib
import http.server
import threading
from collections.abc import Iterator

import pytest

from hvbench.image.builder import GuestImage
from hvbench.model.qemu_argv import DISK_DRIVERS, NIC_DRIVERS
from hvbench.model.spec import DiskSpec, NicSpec, VmSpec
from hvbench.platforms.qemu import QemuPlatform
from tests.integration.conftest import shared

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


#: Three guests carry every device the tests below check (one guest per device booted
#: ten): each has several disk buses and one NIC model (user networking: eth0).
def _disks(bus_sizes: tuple[tuple[str, int], ...], cache: str | None) -> tuple[DiskSpec, ...]:
    extra = {} if cache is None else {"cache": cache}
    return tuple(DiskSpec(bus=b, size=s << 20, **extra)  # type: ignore[arg-type]
                 for b, s in bus_sizes)


GUESTS = {
    "q35": VmSpec(machine="q35", accel="tcg", nics=(NicSpec(model="virtio-net"),),
                  disks=_disks((("virtio-blk", 64), ("virtio-scsi", 64), ("ide", 64),
                                ("ahci", 64)), "none")),
    "pc": VmSpec(machine="pc", accel="tcg", nics=(NicSpec(model="e1000"),),
                 disks=_disks((("ide", 64), ("lsi-scsi", 64)), "none")),
    # The default machine with three buses of distinct sizes (each found at its index).
    "mixed": VmSpec(accel="tcg", nics=(NicSpec(model="rtl8139"),),
                    disks=_disks((("virtio-blk", 32), ("ahci", 40), ("virtio-scsi", 48)),
                                 None)),
}
#: (machine, bus) of each disk test -> (guest, disk index).
DISK_PLACES = {("q35", "virtio-blk"): ("q35", 0), ("q35", "virtio-scsi"): ("q35", 1),
               ("q35", "ide"): ("q35", 2), ("q35", "ahci"): ("q35", 3),
               ("pc", "ide"): ("pc", 0), ("pc", "lsi-scsi"): ("pc", 1)}
#: NIC model -> the guest that has it.
NIC_PLACES = {"virtio-net": "q35", "e1000": "pc", "rtl8139": "mixed"}


@pytest.fixture(scope="module")
def guests(image: GuestImage) -> Iterator[dict[str, QemuPlatform]]:
    """The :data:`GUESTS`, booted once for this module's tests (which only read and
    write their own disks and fetch a page: nothing to reset between them)."""
    with contextlib.ExitStack() as stack:
        booted = {name: stack.enter_context(QemuPlatform(spec, image=image))
                  for name, spec in GUESTS.items()}
        with shared(*booted.values()):
            yield booted


@pytest.mark.parametrize(("machine", "bus"), list(DISK_PLACES))
def test_disk_bus(guests: dict[str, QemuPlatform], machine: str, bus: str) -> None:
    name_of, index = DISK_PLACES[(machine, bus)]
    guest = guests[name_of]
    assert guest.spec.machine == machine and guest.spec.disks[index].bus == bus
    device = guest.disk_device(index)
    name = device.removeprefix("/dev/")
    assert DISK_DRIVERS[bus] in guest_drivers(guest, f"/sys/block/{name}")
    size = guest.exec(["cat", f"/sys/block/{name}/size"], timeout=30).text().strip()
    assert int(size) * 512 == 64 << 20
    write = guest.exec(
        ["dd", "if=/dev/zero", f"of={device}", "bs=64k", "count=16", "oflag=direct"], timeout=60
    )
    assert write.ok, write.stderr


def test_several_buses_in_one_guest(guests: dict[str, QemuPlatform]) -> None:
    guest = guests["mixed"]
    disks = guest.spec.disks
    assert [d.bus for d in disks] == ["virtio-blk", "ahci", "virtio-scsi"]
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


@pytest.mark.parametrize("model", list(NIC_PLACES))
def test_nic_model(guests: dict[str, QemuPlatform], host_http: int, model: str) -> None:
    guest = guests[NIC_PLACES[model]]
    assert [n.model for n in guest.spec.nics] == [model]
    expected = NIC_DRIVERS[model]
    drivers = guest_drivers(guest, "/sys/class/net/eth0/device")
    wanted = expected if isinstance(expected, tuple) else (expected,)
    assert set(wanted) & set(drivers), drivers
    addr = guest.exec(["ip", "-4", "-o", "addr", "show", "eth0"], timeout=30).text()
    assert "10.0.2.15/24" in addr
    fetched = guest.exec(["wget", "-q", "-O", "-", f"http://10.0.2.2:{host_http}/"], timeout=60)
    assert fetched.stdout == b"hello from the host\n", fetched.stderr
