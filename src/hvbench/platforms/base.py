"""What every platform offers: run a command, move files, describe itself."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from hvbench.model.spec import NicSpec


@dataclass(frozen=True)
class ExecResult:
    """The outcome of one command on a platform."""

    argv: tuple[str, ...]
    exit_code: int
    stdout: bytes
    stderr: bytes
    seconds: float

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def text(self) -> str:
        """stdout decoded as UTF-8 (invalid bytes replaced)."""
        return self.stdout.decode(errors="replace")


class Platform(Protocol):
    """A place where a workload runs: the host itself or a guest.

    Everything the runner, the lab session and the monitors ask of a platform is here,
    so a new platform kind (libvirt, a remote host) is one new class plus the kind
    package that registers how to build it
    (:func:`hvbench.platforms.kinds.register_platform_kind`); callers never test its type.
    """

    name: str
    kind: str

    @property
    def is_guest(self) -> bool:
        """True for a virtual machine (its boot is a measurement, it sits on the lab
        through its own NICs); False for the host itself."""
        ...

    @property
    def on_this_host(self) -> bool:
        """True when what runs the workload (the host itself, or the guest's QEMU) runs
        on this machine, so this machine's disk, CPU and NIC samplers measure it; False
        for a guest behind a remote hypervisor URI, whose host-side metrics are then not
        recorded at all (rather than this machine's figures under its name)."""
        ...

    @property
    def accel(self) -> str | None:
        """The accelerator a guest runs under (``kvm``, ``tcg``); None natively."""
        ...

    @property
    def argv(self) -> list[str] | None:
        """The command line of a guest's hypervisor process; None natively."""
        ...

    @property
    def pid(self) -> int | None:
        """The host process that runs the platform (QEMU's), for thread sampling."""
        ...

    @property
    def tap_names(self) -> tuple[str | None, ...]:
        """Per NIC, the host tap device (None for a NIC without one); empty natively."""
        ...

    @property
    def nics(self) -> tuple[NicSpec, ...]:
        """The platform's own NICs as wired (a guest's); empty natively."""
        ...

    @property
    def vhost(self) -> bool | None:
        """Whether tap NICs use the in-kernel vhost-net backend; None natively."""
        ...

    def is_running(self) -> bool:
        """False once a started platform died (a guest's QEMU exited)."""
        ...

    def console_tail(self, lines: int = 40) -> str | None:
        """The last lines of a guest's console and hypervisor output; None natively."""
        ...

    def vcpu_threads(self) -> dict[int, int]:
        """vCPU index -> host thread id of a started guest; empty natively."""
        ...

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def exec(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        stdin: bytes | None = None,
        env: Mapping[str, str] | None = None,
    ) -> ExecResult: ...

    def write_file(self, path: str, data: bytes) -> None: ...

    def read_file(self, path: str) -> bytes: ...

    def scratch_dir(self) -> str:
        """A directory on this platform for a workload's small files (job files)."""
        ...

    def describe(self) -> dict[str, Any]:
        """A JSON-ready record of this platform: kind, spec, accelerator, argv."""
        ...


@runtime_checkable
class BenchDisk(Protocol):
    """A guest with a benchmark disk that disk workloads format and measure."""

    def bench_disk(self) -> str | None:
        """The guest's device node of the benchmark disk (``/dev/vdb``); None when the
        workloads run in a directory instead (an existing domain's ``path``). Raises
        :class:`GuestError` when the guest does not show the disk."""
        ...


@runtime_checkable
class SharedDirs(Protocol):
    """A guest with host directories shared over virtio-fs and mounted in it."""

    def shared_dirs(self) -> tuple[tuple[str, Path], ...]:
        """(mount point in the guest, host directory) of each shared directory, in
        declaration order (while running)."""
        ...


@runtime_checkable
class FailureEvidence(Protocol):
    """A guest that can still be read after a repetition failed in it: what its kernel
    logged and the state of its devices, kept beside the console tail."""

    def failure_evidence(self) -> str:
        """The guest's kernel warnings and its NICs' queue state as text; empty when
        the guest is no longer running. Bounded in time (each read has its own
        timeout) and never raises for a read that fails: the failure is the text."""
        ...


@runtime_checkable
class HostStorage(Protocol):
    """A platform that knows where on this host its benchmark I/O lands, so the host's
    disk monitor samples that device rather than the work directory's."""

    def host_storage(self) -> str | None:
        """The host path the benchmark storage lives on (while running): the block
        device a study named (``disk.source = "/dev/..."``), the image file or
        directory hvbench made for it (on whatever filesystem holds it); None when its
        blocks cross the network (an NBD or AoE export, whose file a lab host serves
        from the work directory) or there is no benchmark storage."""
        ...


@runtime_checkable
class HelperProcesses(Protocol):
    """A guest whose I/O is also served by host processes besides its hypervisor (the
    storage daemons of vhost-user disks, virtiofsd), sampled as thread classes of
    their own."""

    def helper_processes(self) -> dict[str, tuple[int, frozenset[int]]]:
        """Monitor name (``qsd0``, ``vfs0``) -> (host pid, its iothreads' thread ids)."""
        ...


@runtime_checkable
class IoCgroup(Protocol):
    """A platform that runs its workloads in a cgroup hvbench created, whose I/O
    statistics attribute the device's totals to the cell (the native side with a
    memory limit)."""

    def io_stat_file(self) -> Path | None:
        """The cgroup's I/O statistics file; None when not accounted."""
        ...
