"""StorageDaemon: the ``qemu-storage-daemon`` that serves one vhost-user disk.

``__init__`` only stores; ``start()`` spawns the daemon (through
:class:`~hvbench.platforms.process.BackgroundProcess`: its own session,
``PR_SET_PDEATHSIG=SIGKILL`` so even ``kill -9`` of hvbench takes it down, tracked in
the process registry), waits until its vhost-user socket exists and notes its
iothread's thread id (the thread sampler's ``iothread`` class; see
:func:`iothread_of`); ``stop()`` goes soft to hard (SIGTERM to its process group,
then SIGKILL) and removes the socket. Safe twice; a context manager.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
from collections.abc import Iterable
from pathlib import Path

from hvbench.errors import HostError
from hvbench.host.started import StartStop
from hvbench.model.spec import DiskSpec
from hvbench.model.storage_daemon import STORAGE_DAEMON, DaemonPlan, storage_daemon_argv
from hvbench.platforms.process import BackgroundProcess
from hvbench.platforms.registry import REGISTRY, ProcessRegistry

#: How long start() waits for the daemon's export socket, seconds.
START_TIMEOUT_S = 15.0


def _is_socket(path: Path) -> bool:
    try:
        return stat.S_ISSOCK(path.stat().st_mode)
    except OSError:
        return False


class StorageDaemon(StartStop):
    """The storage daemon of benchmark disk ``index`` (``backend = "vhost-user"``):
    ``image`` is the file or host block device it opens, ``socket_dir`` a private
    directory (short path: unix socket names are limited to 108 bytes) for its
    vhost-user socket ``vhu<index>.sock``."""

    def __init__(self, disk: DiskSpec, index: int, image: str, socket_dir: Path, *,
                 name: str, registry: ProcessRegistry = REGISTRY) -> None:
        self.disk = disk
        self.index = index
        self.name = name
        self.socket = socket_dir / f"vhu{index}.sock"
        self._plan = DaemonPlan(disk=disk, index=index, image=image, socket=str(self.socket))
        self._registry = registry
        self._process: BackgroundProcess | None = None
        #: Host thread id of the daemon's iothread (empty when it could not be told).
        self.iothread_tids: frozenset[int] = frozenset()

    @property
    def argv(self) -> list[str]:
        return storage_daemon_argv(self._plan)

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def is_running(self) -> bool:
        return self._process is not None and self._process.is_running()

    def start(self) -> None:
        """Start the daemon and wait (up to :data:`START_TIMEOUT_S` s) for its export
        socket. Raises :class:`CommandError` with the daemon's own words when it exits
        or is not ready in time (e.g. an image it cannot open with the declared
        ``aio``/``cache``), :class:`ToolMissingError` without qemu-storage-daemon,
        :class:`HostError` when already started. Nothing is left behind on error."""
        if self._process is not None:
            raise HostError(f"{self.name} is already running")
        # The daemon, not its BackgroundProcess, is what the registry tracks (its stop
        # also removes the socket): the process gets a registry of its own.
        self._process = BackgroundProcess(self.argv, name=self.name,
                                          registry=ProcessRegistry())
        self._registry.add(self)
        try:
            self._process.start(ready=lambda: _is_socket(self.socket), timeout=START_TIMEOUT_S)
            pid = self._process.pid
            self.iothread_tids = iothread_of(pid, _task_ids(pid)) if pid else frozenset()
        except BaseException:
            self.stop()
            raise

    def _log(self) -> str:
        return self._process.log_tail() if self._process is not None else ""

    def log_tail(self) -> str:
        """The daemon's last output lines ("" once stopped)."""
        return self._log()

    def stop(self) -> None:
        """SIGTERM, then SIGKILL (see :meth:`BackgroundProcess.stop`); remove the
        socket. Safe twice; never raises for a daemon that is already gone."""
        process, self._process = self._process, None
        try:
            if process is not None:
                process.stop()
        finally:
            self._registry.discard(self)
            with contextlib.suppress(FileNotFoundError):
                self.socket.unlink()


def _task_ids(pid: int) -> list[int]:
    try:
        return [int(p.name) for p in Path(f"/proc/{pid}/task").iterdir()]
    except OSError:
        return []


def iothread_of(pid: int, tids: Iterable[int]) -> frozenset[int]:
    """The daemon's iothread among its threads ``tids`` right after its export socket
    appeared (pure). qemu-storage-daemon names no thread and has no QMP command that
    gives an iothread's thread id (QEMU's query-iothreads is not in it); but before any
    I/O it has exactly three: its main thread (``pid``), call_rcu (started before
    main()) and the iothread (created by ``--object``, before the export): the newest,
    i.e. the higher thread id (ids grow until they wrap at pid_max). Any other count:
    empty (its threads are then sampled as ``other``)."""
    others = sorted(t for t in tids if t != pid)
    return frozenset(others[1:]) if len(others) == 2 else frozenset()


def _argv_of(pid: str) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def kill_orphaned_daemons(directories: Iterable[Path]) -> list[str]:
    """SIGKILL every ``qemu-storage-daemon`` whose export socket lies in one of
    ``directories`` (socket directories of an hvbench that died); one ``storage daemon
    PID (SOCKET)`` per daemon killed. A daemon whose socket is elsewhere (not
    hvbench's) is never touched. Normally there is none: the daemon dies with hvbench
    (PR_SET_PDEATHSIG); this catches one that outlived it anyway."""
    prefixes = [f"addr.path={d}/" for d in directories]
    killed = []
    for proc in Path("/proc").iterdir() if prefixes else []:
        entry = proc.name
        if not entry.isdigit():
            continue
        argv = _argv_of(entry)
        if not argv or Path(argv[0]).name != STORAGE_DAEMON:
            continue
        export = next((a for a in argv if any(p in a for p in prefixes)), None)
        if export is None:
            continue
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(entry), signal.SIGKILL)
            socket = next(p for p in export.split(",") if p.startswith("addr.path="))
            killed.append(f"storage daemon {entry} ({socket.removeprefix('addr.path=')})")
    return killed
