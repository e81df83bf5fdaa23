"""Virtiofsd: the ``virtiofsd`` that shares one host directory with a guest (virtio-fs),
a :class:`~hvbench.platforms.socket_daemon.SocketDaemon`. SIGTERM to its process group
also ends the child it sandboxes itself in."""

from __future__ import annotations

import contextlib
from pathlib import Path

from hvbench.errors import HostError
from hvbench.model.spec import SharedDirSpec
from hvbench.platforms.registry import REGISTRY, ProcessRegistry
from hvbench.platforms.socket_daemon import SocketDaemon

#: Debian 12 keeps QEMU's C virtiofsd beside QEMU's firmware, not on PATH.
VIRTIOFSD = "/usr/lib/qemu/virtiofsd"


def virtiofsd_argv(share: SharedDirSpec, directory: str, socket: str,
                   binary: str = VIRTIOFSD) -> list[str]:
    """The daemon's argv (pure): the share's cache mode, the directory as its root
    (sandboxed in namespaces of its own, virtiofsd's default)."""
    return [binary, f"--socket-path={socket}", "-o", f"source={directory}",
            "-o", f"cache={share.cache}", "-o", "log_level=warn"]


def sandbox_child(pid: int, proc: Path = Path("/proc")) -> int | None:
    """The host pid of the process virtiofsd ``pid`` forked into its own PID (and
    mount, network) namespace once QEMU connected: that child serves the share, the
    parent only waits for it. None before the connection (no child yet) or when
    ``pid`` is gone. ``/proc/PID/task/PID/children`` names the children by their host
    pids; a kernel without it (``CONFIG_PROC_CHILDREN``) is answered by the ``PPid``
    of every process in ``proc``."""
    with contextlib.suppress(OSError):
        listed = (proc / str(pid) / "task" / str(pid) / "children").read_text().split()
        return int(listed[0]) if listed else None
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            status = (entry / "status").read_text()
            if f"\nPPid:\t{pid}\n" in status:
                return int(entry.name)
    return None


class Virtiofsd(SocketDaemon):
    """The virtiofsd of shared directory ``index``: ``directory`` on the host, its
    socket ``vfs<index>.sock`` in ``socket_dir``."""

    def __init__(self, share: SharedDirSpec, index: int, directory: Path, socket_dir: Path,
                 *, name: str, registry: ProcessRegistry = REGISTRY) -> None:
        super().__init__(socket_dir / f"vfs{index}.sock", name=name, registry=registry)
        self.share = share
        self.index = index
        self.directory = directory

    def worker_pid(self) -> int | None:
        """The host pid of the sandboxed child that serves the share (see
        :func:`sandbox_child`); None while not running or before QEMU connected."""
        return None if self.pid is None else sandbox_child(self.pid)

    @property
    def argv(self) -> list[str]:
        return virtiofsd_argv(self.share, str(self.directory), str(self.socket))

    def _check(self) -> None:
        if not self.directory.is_dir():
            raise HostError(f"{self.name}: shared directory {self.directory} does not exist")
