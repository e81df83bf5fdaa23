"""StorageDaemon: the ``qemu-storage-daemon`` that serves one vhost-user disk.

``__init__`` only stores; ``start()`` spawns the daemon (through
:class:`~hvbench.platforms.process.BackgroundProcess`: its own session,
``PR_SET_PDEATHSIG=SIGKILL`` so even ``kill -9`` of hvbench takes it down, tracked in
the process registry), waits until its vhost-user socket exists and asks its QMP
monitor for its iothread's thread id (the thread sampler's ``iothread`` class);
``stop()`` goes soft to hard (SIGTERM to its process group, then SIGKILL) and removes
both sockets. Safe twice; a context manager.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
from collections.abc import Iterable
from pathlib import Path

from qemu.qmp import QMPError
from qemu.qmp.legacy import QEMUMonitorProtocol

from hvbench.errors import CommandError, HostError
from hvbench.host.started import StartStop
from hvbench.model.spec import DiskSpec
from hvbench.model.storage_daemon import STORAGE_DAEMON, DaemonPlan, storage_daemon_argv
from hvbench.platforms.process import BackgroundProcess
from hvbench.platforms.registry import REGISTRY, ProcessRegistry

#: How long start() waits for the daemon's export socket, seconds.
START_TIMEOUT_S = 15.0
#: Timeout of the one QMP question start() asks, seconds.
QMP_TIMEOUT_S = 5.0


def _is_socket(path: Path) -> bool:
    try:
        return stat.S_ISSOCK(path.stat().st_mode)
    except OSError:
        return False


class StorageDaemon(StartStop):
    """The storage daemon of benchmark disk ``index`` (``backend = "vhost-user"``):
    ``image`` is the file or host block device it opens, ``socket_dir`` a private
    directory (short path: unix socket names are limited to 108 bytes) for its
    vhost-user socket ``vhu<index>.sock`` and QMP socket ``qsd<index>.sock``."""

    def __init__(self, disk: DiskSpec, index: int, image: str, socket_dir: Path, *,
                 name: str, registry: ProcessRegistry = REGISTRY) -> None:
        self.disk = disk
        self.index = index
        self.name = name
        self.socket = socket_dir / f"vhu{index}.sock"
        self.monitor = socket_dir / f"qsd{index}.sock"
        self._plan = DaemonPlan(disk=disk, index=index, image=image, socket=str(self.socket),
                                monitor=str(self.monitor))
        self._registry = registry
        self._process: BackgroundProcess | None = None
        #: Host thread ids of the daemon's iothread (from QMP ``query-iothreads``).
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
        self._process = BackgroundProcess(self.argv, name=self.name, registry=self._registry)
        try:
            self._process.start(ready=lambda: _is_socket(self.socket), timeout=START_TIMEOUT_S)
            self.iothread_tids = self._query_iothreads()
        except BaseException:
            self.stop()
            raise

    def _query_iothreads(self) -> frozenset[int]:
        qmp = QEMUMonitorProtocol(str(self.monitor))
        qmp.settimeout(QMP_TIMEOUT_S)
        try:
            qmp.connect()
            found = qmp.cmd("query-iothreads")
        except (QMPError, OSError) as exc:
            raise CommandError(self.argv, None, self._log(), f"asking {self.name} for its "
                               f"iothread over QMP: {exc}") from exc
        finally:
            with contextlib.suppress(Exception):
                qmp.close()
        threads = found.get("return", []) if isinstance(found, dict) else []
        return frozenset(int(t["thread-id"]) for t in threads if "thread-id" in t)

    def _log(self) -> str:
        return self._process.log_tail() if self._process is not None else ""

    def log_tail(self) -> str:
        """The daemon's last output lines ("" once stopped)."""
        return self._log()

    def stop(self) -> None:
        """SIGTERM, then SIGKILL (see :meth:`BackgroundProcess.stop`); remove both
        sockets. Safe twice; never raises for a daemon that is already gone."""
        process, self._process = self._process, None
        try:
            if process is not None:
                process.stop()
        finally:
            for path in (self.socket, self.monitor):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()


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
