"""SocketDaemon: a host daemon that serves a guest over a vhost-user unix socket.

The one process class behind :class:`~hvbench.platforms.storage_daemon.StorageDaemon`
(qemu-storage-daemon) and :class:`~hvbench.platforms.virtiofsd.Virtiofsd`: ``__init__``
only stores; ``start()`` spawns the program through
:class:`~hvbench.platforms.process.BackgroundProcess` (its own session,
``PR_SET_PDEATHSIG=SIGKILL``, so even ``kill -9`` of hvbench takes it down), registers
the daemon itself in the process registry and waits until its socket exists;
``stop()`` goes soft to hard (SIGTERM to its process group, then SIGKILL), unregisters
it and removes the socket. Safe twice; a context manager.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
from abc import abstractmethod
from collections.abc import Iterable
from pathlib import Path

from hvbench.errors import HostError
from hvbench.host.started import StartStop
from hvbench.platforms.process import BackgroundProcess
from hvbench.platforms.registry import REGISTRY, ProcessRegistry

#: How long start() waits for the daemon's socket, seconds.
START_TIMEOUT_S = 15.0


def is_socket(path: Path) -> bool:
    """Whether ``path`` is a unix socket (False when missing)."""
    try:
        return stat.S_ISSOCK(path.stat().st_mode)
    except OSError:
        return False


class SocketDaemon(StartStop):
    """A daemon named ``name`` listening on ``socket``; subclasses give its argv."""

    def __init__(self, socket: Path, *, name: str,
                 registry: ProcessRegistry = REGISTRY) -> None:
        self.name = name
        self.socket = socket
        self._registry = registry
        self._process: BackgroundProcess | None = None

    @property
    @abstractmethod
    def argv(self) -> list[str]:
        """The daemon's command line."""

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def is_running(self) -> bool:
        return self._process is not None and self._process.is_running()

    def log_tail(self) -> str:
        """The daemon's last output lines ("" once stopped)."""
        return self._process.log_tail() if self._process is not None else ""

    def _check(self) -> None:
        """What must hold before the daemon starts (raise :class:`HostError`)."""

    def _started(self) -> None:
        """What to note once the socket exists (the process is running)."""

    def start(self) -> None:
        """Start the daemon and wait (up to :data:`START_TIMEOUT_S` s) for its socket.
        Raises :class:`CommandError` with the daemon's own words when it exits or is not
        ready in time, :class:`ToolMissingError` when the program is missing,
        :class:`HostError` when already started or its inputs are missing. Nothing is
        left behind on error."""
        if self._process is not None:
            raise HostError(f"{self.name} is already running")
        self._check()
        # The daemon, not its BackgroundProcess, is what the registry tracks (its stop
        # also removes the socket): the process gets a registry of its own.
        self._process = BackgroundProcess(self.argv, name=self.name,
                                          registry=ProcessRegistry())
        self._registry.add(self)
        try:
            self._process.start(ready=lambda: is_socket(self.socket),
                                timeout=START_TIMEOUT_S)
            self._started()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """SIGTERM, then SIGKILL, to its process group (see
        :meth:`BackgroundProcess.stop`); unregister; remove the socket. Safe twice;
        never raises for a daemon that is already gone."""
        process, self._process = self._process, None
        try:
            if process is not None:
                process.stop()
        finally:
            self._registry.discard(self)
            with contextlib.suppress(FileNotFoundError):
                self.socket.unlink()


#: The daemons and guests hvbench starts: program name -> (what a report calls it, the
#: argv option part that names its socket; a guest's is its QMP socket).
DAEMON_SOCKETS: dict[str, tuple[str, str]] = {
    "qemu-storage-daemon": ("storage daemon", "addr.path="),
    "virtiofsd": ("virtiofsd", "--socket-path="),
    "qemu-system-x86_64": ("guest", "unix:"),
}


def _argv_of(proc: Path) -> list[str]:
    try:
        return (proc / "cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def _socket_in(argv: list[str], option: str, directories: list[Path]) -> str | None:
    """The socket path ``argv`` names with ``option`` when it lies in ``directories``."""
    for part in (p for arg in argv for p in arg.split(",")):
        path = part.removeprefix(option)
        if part.startswith(option) and any(path.startswith(f"{d}/") for d in directories):
            return path
    return None


def kill_orphaned_daemons(directories: Iterable[Path]) -> list[str]:
    """SIGKILL every qemu-storage-daemon, virtiofsd and QEMU guest whose socket lies in
    one of ``directories`` (socket directories of an hvbench that died); one ``storage
    daemon PID (SOCKET)`` / ``virtiofsd PID (SOCKET)`` / ``guest PID (SOCKET)`` per
    process killed. A process whose socket is elsewhere (an operator's VM, anything not
    hvbench's) is never touched. Normally there is none: each dies with hvbench
    (PR_SET_PDEATHSIG); this catches one that outlived it."""
    dirs = list(directories)
    killed = []
    for proc in Path("/proc").iterdir() if dirs else []:
        argv = _argv_of(proc) if proc.name.isdigit() else []
        known = DAEMON_SOCKETS.get(Path(argv[0]).name) if argv else None
        socket = _socket_in(argv, known[1], dirs) if known else None
        if known is None or socket is None:
            continue
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(proc.name), signal.SIGKILL)
            killed.append(f"{known[0]} {proc.name} ({socket})")
    return killed
