"""Network block storage from a net-lab host: seed 001's EBS, as an NBD export.

:class:`NbdServer` makes one image file (the declared size, format and allocation)
and serves it with ``qemu-nbd`` inside a lab host's namespace, so every byte between
an initiator on this host (QEMU's own NBD client for a guest, fio's NBD engine for the
native side) and the storage crosses that host's shaped veth, as the paper's
network storage crossed the data-centre network. The export is named after the lab
host; :func:`export_uri` is what a study's ``nbd:HOST`` source resolves to.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from hvbench.errors import HostError
from hvbench.host.commands import require_tool, run
from hvbench.host.paths import make_owned_dir
from hvbench.host.started import StartStop
from hvbench.model.spec import PREALLOCATION, DiskSpec
from hvbench.netlab.lab import LabHost
from hvbench.workloads.endpoints import ServerHandle, lab_endpoint, start_server

#: IANA's NBD port; every lab host has its own namespace, so each can use it.
NBD_PORT = 10809
#: Seconds qemu-nbd gets to listen, and ``qemu-img create`` to make the image.
READY_S = 15.0
CREATE_S = 600.0
#: Clients that may be connected at once (a guest's QEMU and the native fio in turn,
#: fio's jobs, a reconnect after a guest's restart).
SHARED = 8


def export_uri(address: str, host: str, port: int = NBD_PORT) -> str:
    """The ``nbd://ADDRESS:PORT/EXPORT`` of lab host ``host``'s export."""
    return f"nbd://{address}:{port}/{host}"


def qemu_nbd_argv(host: LabHost, image: Path, disk: DiskSpec, port: int = NBD_PORT,
                  ) -> list[str]:
    """qemu-nbd serving ``image`` (pure). The server keeps the host page cache
    (``--cache=writeback``, as a storage server would): the disk cells drop the host's
    caches before every cold phase, which empties it too."""
    return ["qemu-nbd", "--persistent", f"--shared={SHARED}", f"--format={disk.format}",
            f"--export-name={host.name}", f"--bind={host.address}", f"--port={port}",
            "--cache=writeback", "--aio=threads", str(image)]


class NbdServer(StartStop):
    """One export on one lab host: its image in a private directory under ``parent``,
    and qemu-nbd serving it.

    ``start()`` creates the image (``qemu-img create``, up to :data:`CREATE_S` s) and
    starts the server, ready once it listens (:data:`READY_S` s); it raises
    :class:`CommandError` (the server's log) when qemu-nbd exits or does not listen,
    :class:`ToolMissingError` without qemu-nbd or qemu-img, and leaves nothing behind.
    ``stop()`` stops the server (SIGTERM, then SIGKILL after 3 s) and removes the image
    and its directory; safe twice. A context manager; the process is in the registry
    (``BackgroundProcess``) while it runs.
    """

    def __init__(self, host: LabHost, disk: DiskSpec, parent: Path) -> None:
        self.host = host
        self.disk = disk
        self._parent = parent
        self._dir: Path | None = None
        self._handle: ServerHandle | None = None
        self.argv: list[str] = []

    @property
    def uri(self) -> str:
        return export_uri(self.host.address, self.host.name)

    def is_running(self) -> bool:
        return self._handle is not None and self._handle.is_running()

    def start(self) -> None:
        if self._handle is not None:
            raise HostError(f"the NBD server on {self.host.name} is already running")
        require_tool("qemu-nbd")
        try:
            self._dir = make_owned_dir(self._parent, f"nbd-{self.host.name}-")
            image = self._dir / f"export.{self.disk.format}"
            run(["qemu-img", "create", "-q", "-f", self.disk.format, "-o",
                 f"preallocation={PREALLOCATION[self.disk.allocation]}", str(image),
                 str(self.disk.size)], timeout=CREATE_S,
                what=f"creating the NBD export of {self.host.name}")
            self.argv = qemu_nbd_argv(self.host, image, self.disk)
            self._handle = start_server(lab_endpoint(self.host), self.argv,
                                        name=f"nbd-{self.host.name}", port=NBD_PORT,
                                        timeout=READY_S)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        handle, self._handle = self._handle, None
        try:
            if handle is not None:
                handle.stop()
        finally:
            directory, self._dir = self._dir, None
            if directory is not None:
                shutil.rmtree(directory, ignore_errors=True)

    def describe(self) -> dict[str, Any]:
        return {"kind": "nbd", "host": self.host.name, "uri": self.uri, "argv": self.argv,
                "size": self.disk.size, "format": self.disk.format,
                "allocation": self.disk.allocation}
