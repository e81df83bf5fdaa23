"""StorageDaemon: the ``qemu-storage-daemon`` that serves one vhost-user disk, a
:class:`~hvbench.platforms.socket_daemon.SocketDaemon` (started, registered and stopped
as every daemon is) that also notes its iothread's thread id once its socket exists
(the thread sampler's ``iothread`` class; see :func:`iothread_of`)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from hvbench.model.spec import DiskSpec
from hvbench.model.storage_daemon import DaemonPlan, storage_daemon_argv
from hvbench.platforms.registry import REGISTRY, ProcessRegistry
from hvbench.platforms.socket_daemon import SocketDaemon


class StorageDaemon(SocketDaemon):
    """The storage daemon of benchmark disk ``index`` (``backend = "vhost-user"``):
    ``image`` is the file or host block device it opens, ``socket_dir`` a private
    directory (short path: unix socket names are limited to 108 bytes) for its
    vhost-user socket ``vhu<index>.sock``; ``queues`` the export's queue count (see
    :func:`~hvbench.model.storage_daemon.vhost_user_queues`)."""

    def __init__(self, disk: DiskSpec, index: int, image: str, socket_dir: Path, *,
                 name: str, queues: int, registry: ProcessRegistry = REGISTRY) -> None:
        super().__init__(socket_dir / f"vhu{index}.sock", name=name, registry=registry)
        self.disk = disk
        self.index = index
        self._plan = DaemonPlan(disk=disk, index=index, image=image, socket=str(self.socket),
                                queues=queues)
        #: Host thread id of the daemon's iothread (empty when it could not be told).
        self.iothread_tids: frozenset[int] = frozenset()

    @property
    def argv(self) -> list[str]:
        return storage_daemon_argv(self._plan)

    def _started(self) -> None:
        pid = self.pid
        self.iothread_tids = iothread_of(pid, _task_ids(pid)) if pid else frozenset()


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
