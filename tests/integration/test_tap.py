"""The tap backend: QEMU's tap on a bridge the test creates, traffic to the host end."""

from __future__ import annotations

import http.server
import os
import subprocess
import threading
from collections.abc import Iterator

import pytest

from hvbench.image.builder import GuestImage
from hvbench.model.spec import NicSpec, VmSpec
from hvbench.platforms.qemu import QemuPlatform

from .test_guest_devices import _Hello

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="tap networking needs root"),
]
HOST_ADDR, GUEST_ADDR = "192.168.213.1", "192.168.213.2"


@pytest.fixture
def bridge() -> Iterator[str]:
    name = f"hvbtestbr{os.getpid() % 10000}"
    subprocess.run(["ip", "link", "add", name, "type", "bridge"], check=True)
    try:
        subprocess.run(["ip", "addr", "add", f"{HOST_ADDR}/24", "dev", name], check=True)
        subprocess.run(["ip", "link", "set", name, "up"], check=True)
        yield name
    finally:
        subprocess.run(["ip", "link", "del", name], check=True)


@pytest.fixture
def bridge_http(bridge: str) -> Iterator[int]:
    server = http.server.ThreadingHTTPServer((HOST_ADDR, 0), _Hello)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("model", ["virtio-net", "e1000"])
def test_tap_on_bridge(image: GuestImage, bridge: str, bridge_http: int, model: str) -> None:
    nic = NicSpec(
        model=model,  # type: ignore[arg-type]
        backend="tap",
        bridge=bridge,
        address=f"{GUEST_ADDR}/24",
    )
    with QemuPlatform(VmSpec(accel="tcg", nics=(nic,)), image=image) as guest:
        tap = guest.argv[guest.argv.index("-netdev") + 1].split("ifname=")[1].split(",")[0]
        master = subprocess.run(
            ["ip", "-o", "link", "show", tap], capture_output=True, text=True, check=True
        ).stdout
        assert f"master {bridge}" in master and "UP" in master
        fetched = guest.exec(
            ["wget", "-q", "-O", "-", f"http://{HOST_ADDR}:{bridge_http}/"], timeout=60
        )
        assert fetched.stdout == b"hello from the host\n", fetched.stderr
    # QEMU created the tap itself (non-persistent), so it vanished with QEMU.
    gone = subprocess.run(["ip", "link", "show", tap], capture_output=True, check=False)
    assert gone.returncode != 0
