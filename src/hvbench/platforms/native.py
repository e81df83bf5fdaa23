"""NativePlatform: the bare host, the baseline every guest is compared against.

Its scratch directory lives in the same work directory as the guests' disk images, so a
native workload's data file sits on the same filesystem (and device) as theirs.

Two settings make it the counterpart of a particular guest: ``disk_source``, the
storage a guest is given (a host block device, checked free before use, or a lab host's
resolved NBD export, which fio reads through its own NBD client: this host's kernel has
no ``nbd`` module to load), and ``memory_mib``, a memory cgroup every command runs in
so the host's page cache for the test is no larger than the guest's RAM.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hvbench.errors import HostError
from hvbench.host import facts
from hvbench.host.blockdev import require_free_device
from hvbench.host.cgroups import MemoryCgroup
from hvbench.host.paths import make_owned_dir, work_dir
from hvbench.host.started import StartStop
from hvbench.model.spec import NicSpec, source_kind
from hvbench.platforms.base import ExecResult
from hvbench.platforms.process import run_in_group


class NativePlatform(StartStop):
    """Runs commands directly on the host, in a private scratch directory.

    ``start()`` creates the scratch directory under the work directory (and the memory
    cgroup of ``memory_mib``, checking a ``disk_source`` device is free); ``stop()``
    removes both (safe to call twice). ``start()`` raises :class:`HostError` for a
    device in use, or a cgroup that cannot be made (no memory controller, not root).
    """

    kind = "native"
    is_guest = False
    on_this_host = True

    def __init__(self, *, name: str = "native", base_dir: Path | None = None,
                 disk_source: str | None = None, memory_mib: int | None = None) -> None:
        self.name = name
        self._base_dir = base_dir
        self._scratch: Path | None = None
        self.disk_source = disk_source
        self.memory_mib = memory_mib
        self._cgroup: MemoryCgroup | None = None

    def start(self) -> None:
        if self._scratch is not None:
            return
        try:
            if self.disk_source is not None and source_kind(self.disk_source) == "device":
                require_free_device(self.disk_source, f"platform {self.name}: disk.source")
            if self.disk_source is not None and source_kind(self.disk_source) == "nbd-host":
                raise HostError(f"platform {self.name}: disk.source {self.disk_source}: no "
                                "lab serves this export")
            base = self._base_dir or work_dir()
            self._scratch = make_owned_dir(base, "native-")
            if self.memory_mib is not None:
                self._cgroup = MemoryCgroup(f"native-{os.getpid()}-{secrets.token_hex(2)}",
                                            self.memory_mib << 20)
                self._cgroup.start()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        try:
            if self._cgroup is not None:
                self._cgroup.stop()
        finally:
            self._cgroup = None
            if self._scratch is not None:
                shutil.rmtree(self._scratch, ignore_errors=True)
                self._scratch = None

    def io_stat_file(self) -> Path | None:
        """The I/O statistics file of the cgroup hvbench runs the commands in (with
        ``memory_mib``), None when there is none or the host does not account it."""
        return self._cgroup.io_stat if self._cgroup is not None else None

    def host_storage(self) -> str | None:
        """Where the host's test files land (see
        :class:`~hvbench.platforms.base.HostStorage`): the block device of its
        ``disk_source``, else its scratch directory (while running); None for an
        NBD export (fio's NBD engine: the blocks cross the lab's link)."""
        if self.disk_source is not None:
            return self.disk_source if source_kind(self.disk_source) == "device" else None
        return str(self._scratch) if self._scratch is not None else None

    def bench_disk(self) -> str | None:
        """The storage the study gave the host (a device path or a resolved nbd://
        export), None for a scratch file."""
        return self.disk_source

    # -- what a guest has and the host lacks (see the Platform protocol) -------------
    @property
    def accel(self) -> str | None:
        return None

    @property
    def argv(self) -> list[str] | None:
        return None

    @property
    def pid(self) -> int | None:
        return None

    @property
    def tap_names(self) -> tuple[str | None, ...]:
        return ()

    @property
    def nics(self) -> tuple[NicSpec, ...]:
        return ()

    @property
    def vhost(self) -> bool | None:
        return None

    def is_running(self) -> bool:
        """True while started: the host itself cannot die under a workload."""
        return self._scratch is not None

    def console_tail(self, lines: int = 40) -> str | None:
        return None

    def vcpu_threads(self) -> dict[int, int]:
        return {}

    def scratch_dir(self) -> str:
        if self._scratch is None:
            raise HostError("NativePlatform is not started")
        return str(self._scratch)

    def exec(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        stdin: bytes | None = None,
        env: Mapping[str, str] | None = None,
    ) -> ExecResult:
        """Run ``argv`` on the host in the scratch directory (with PR_SET_PDEATHSIG, so
        it dies with hvbench).

        On timeout the whole process group is killed and :class:`GuestTimeoutError`
        raised (the same error a guest command raises, so workloads treat both alike).
        """
        cgroup = self._cgroup.procs_files if self._cgroup is not None else None
        return run_in_group(argv, timeout=timeout, stdin=stdin, env=env, cwd=self._scratch,
                            what="native command", cgroup_procs=cgroup)

    def write_file(self, path: str, data: bytes) -> None:
        Path(path).write_bytes(data)

    def read_file(self, path: str) -> bytes:
        return Path(path).read_bytes()

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind, "name": self.name, "label": "native",
            "scratch_dir": str(self._scratch) if self._scratch else None,
            "disk_source": self.disk_source, "memory_mib": self.memory_mib,
            "memory_cgroup": self._cgroup.describe() if self._cgroup is not None else None,
            "work_dir_fs": facts.free_disk(self._base_dir or work_dir()).get("filesystem"),
        }
