"""ATA over Ethernet storage from a net-lab host: seed 001's EBS protocol itself.

:class:`AoeServer` makes one raw image file and exports it with ``vblade`` on the lab
host's ``eth0`` (inside its namespace), so the AoE frames cross that host's shaped
veth and the lab bridge. AoE is plain Ethernet (EtherType 0x88a2), not IP: the
initiator must sit on the same bridge, which a guest with a tap NIC on the lab bridge
does. This host's kernel has no ``aoe`` module, so the initiator is always the guest
(the bundled image carries Debian's ``aoe.ko`` and aoetools' ``aoe-discover``):
:func:`hvbench.model.aoe.guest_attach_argv` is the guest's command that loads the
module, triggers a discovery and waits for ``/dev/etherd/e<shelf>.<slot>``.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

from hvbench.errors import HostError
from hvbench.host.commands import require_tool
from hvbench.host.paths import make_owned_dir
from hvbench.host.started import StartStop
from hvbench.model.aoe import guest_device
from hvbench.netlab.lab import LabHost
from hvbench.platforms.process import BackgroundProcess

#: Seconds vblade gets to open the file and its raw socket.
READY_S = 15.0
#: The lab host's interface inside its namespace (hvbench.netlab.lab's topology).
LAB_NETIF = "eth0"
#: AoE addresses: shelf 0-65534, slot 0-255 (the protocol's major and minor fields).
MAX_SHELF, MAX_SLOT = 65534, 255


def vblade_argv(*, shelf: int, slot: int, netif: str, path: str) -> list[str]:
    """vblade exporting ``path`` as ``e<shelf>.<slot>`` on ``netif``, in the
    foreground, read-write, through the page cache (as the NBD export is served)."""
    if not (0 <= shelf <= MAX_SHELF and 0 <= slot <= MAX_SLOT):
        raise ValueError(f"AoE address e{shelf}.{slot}: shelf 0-{MAX_SHELF}, "
                         f"slot 0-{MAX_SLOT}")
    return ["vblade", str(shelf), str(slot), netif, path]


def vblade_ready(output: str, shelf: int, slot: int) -> bool:
    """Whether vblade's output announces the export (``pid N: e0.0, N sectors``): it
    prints that once the file is open and its raw socket bound."""
    return re.search(rf"pid \d+: e{shelf}\.{slot}, \d+ sectors", output) is not None


class AoeServer(StartStop):
    """One AoE export on one lab host: a raw image of ``size`` bytes in a private
    directory under ``parent`` (preallocated, as the paper's EBS volume), and vblade
    serving it as ``e<shelf>.<slot>``.

    ``start()`` creates the image and starts vblade in the host's namespace, ready once
    it announces the export (:data:`READY_S` s); raises :class:`CommandError` (vblade's
    own words) when it exits or stays silent, :class:`ToolMissingError` without vblade,
    :class:`HostError` when the image cannot be made; leaves nothing behind.
    ``stop()`` stops vblade (SIGTERM, then SIGKILL after 3 s) and removes the image and
    its directory; safe twice. A context manager; vblade is in the process registry
    (``BackgroundProcess``) while it runs."""

    def __init__(self, host: LabHost, parent: Path, size: int, *, shelf: int = 0,
                 slot: int = 0) -> None:
        self.host = host
        self.size = size
        self.shelf = shelf
        self.slot = slot
        self._parent = parent
        self._dir: Path | None = None
        self._process: BackgroundProcess | None = None
        self.argv: list[str] = []
        #: The exported file while the server runs.
        self.image: Path | None = None

    def is_running(self) -> bool:
        return self._process is not None and self._process.is_running()

    def start(self) -> None:
        if self._process is not None:
            raise HostError(f"the AoE server on {self.host.name} is already running")
        require_tool("vblade")
        try:
            self._parent.mkdir(parents=True, exist_ok=True)
            self._dir = make_owned_dir(self._parent, f"aoe-{self.host.name}-")
            image = self._dir / "export.raw"
            _preallocate(image, self.size)
            self.image = image
            self.argv = vblade_argv(shelf=self.shelf, slot=self.slot, netif=LAB_NETIF,
                                    path=str(image))
            process = BackgroundProcess(self.argv, name=f"aoe-{self.host.name}",
                                        netns=self.host.netns,
                                        output=self._dir / "vblade.log")
            self._process = process
            process.start(ready=lambda: vblade_ready(process.log_tail(), self.shelf,
                                                     self.slot), timeout=READY_S)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        process, self._process = self._process, None
        try:
            if process is not None:
                process.stop()
        finally:
            directory, self._dir, self.image = self._dir, None, None
            if directory is not None:
                shutil.rmtree(directory, ignore_errors=True)

    def describe(self) -> dict[str, Any]:
        return {"kind": "aoe", "host": self.host.name, "argv": self.argv,
                "address": f"e{self.shelf}.{self.slot}", "size": self.size,
                "device": guest_device(self.shelf, self.slot)}


def _preallocate(path: Path, size: int) -> None:
    """A file of ``size`` bytes with every block allocated. Raises :class:`HostError`."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.posix_fallocate(fd, 0, size)
        finally:
            os.close(fd)
    except OSError as exc:
        raise HostError(f"creating the AoE export {path} ({size} bytes): {exc}") from exc
