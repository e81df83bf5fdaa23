"""The tap backend: QEMU's tap on a bridge the test creates, traffic to the host end."""

from __future__ import annotations

import http.server
import os
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from hvbench.image.builder import GuestImage
from hvbench.model.spec import NicSpec, VmSpec
from hvbench.platforms.qemu import QemuPlatform
from tests.integration.conftest import free_test_subnet

from .test_guest_devices import _Hello

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="tap networking needs root"),
]


@dataclass(frozen=True)
class Bridge:
    """A bridge of the test's own on a free /24 (see free_test_subnet): the host's
    address on it and the guest's."""

    name: str
    host: str
    guest: str


@pytest.fixture
def bridge() -> Iterator[Bridge]:
    name = f"hvbtestbr{os.getpid() % 10000}"
    hosts = free_test_subnet().hosts()
    made = Bridge(name, str(next(hosts)), str(next(hosts)))
    subprocess.run(["ip", "link", "add", name, "type", "bridge"], check=True)
    try:
        subprocess.run(["ip", "addr", "add", f"{made.host}/24", "dev", name], check=True)
        subprocess.run(["ip", "link", "set", name, "up"], check=True)
        yield made
    finally:
        subprocess.run(["ip", "link", "del", name], check=True)


@pytest.fixture
def bridge_http(bridge: Bridge) -> Iterator[int]:
    server = http.server.ThreadingHTTPServer((bridge.host, 0), _Hello)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("model", ["virtio-net", "e1000"])
def test_tap_on_bridge(image: GuestImage, bridge: Bridge, bridge_http: int, model: str
                      ) -> None:
    nic = NicSpec(
        model=model,  # type: ignore[arg-type]
        backend="tap",
        bridge=bridge.name,
        address=f"{bridge.guest}/24",
    )
    with QemuPlatform(VmSpec(accel="tcg", nics=(nic,)), image=image) as guest:
        tap = guest.argv[guest.argv.index("-netdev") + 1].split("ifname=")[1].split(",")[0]
        master = subprocess.run(
            ["ip", "-o", "link", "show", tap], capture_output=True, text=True, check=True
        ).stdout
        assert f"master {bridge.name}" in master and "UP" in master
        fetched = guest.exec(
            ["wget", "-q", "-O", "-", f"http://{bridge.host}:{bridge_http}/"], timeout=60
        )
        assert fetched.stdout == b"hello from the host\n", fetched.stderr
    # QEMU created the tap itself (non-persistent), so it vanished with QEMU.
    gone = subprocess.run(["ip", "link", "show", tap], capture_output=True, check=False)
    assert gone.returncode != 0
