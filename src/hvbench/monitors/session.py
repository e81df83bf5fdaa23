"""The monitors of one platform, started and stopped around each measured phase.

For every platform: the block device under the work directory (where native test files
and guest images live) and host CPU; for a guest also its QEMU process by thread class,
with vCPU threads identified through QMP ``query-cpus-fast``; for network and web
workloads the lab's interfaces and the guests' taps (/proc/net/dev).
"""

from __future__ import annotations

from collections.abc import Mapping

from hvbench.host.paths import work_dir
from hvbench.monitors.sampler import (
    DEFAULT_HZ,
    DiskStatsSampler,
    HostCpuSampler,
    Monitor,
    MonitorResult,
    MonitorSet,
    NetDevSampler,
    ProcessIoSampler,
    ThreadCpuSampler,
    backing_device,
)
from hvbench.platforms.base import Platform


class PhaseMonitors:
    """A fresh :class:`MonitorSet` per phase: ``start()``, then ``stop()`` or ``abort()``."""

    def __init__(self, monitors: list[Monitor], hz: float = DEFAULT_HZ) -> None:
        self._monitors = monitors
        self.hz = hz
        self._set: MonitorSet | None = None

    @property
    def monitors(self) -> list[Monitor]:
        """The monitors each phase samples (a scenario adds its neighbours' to them)."""
        return list(self._monitors)

    def start(self) -> None:
        self.abort()
        self._set = MonitorSet(self._monitors, self.hz)
        self._set.start()

    def stop(self) -> MonitorResult:
        """The phase's result; an empty result if sampling never started."""
        if self._set is None:
            return MonitorResult()
        result = self._set.stop()
        self._set = None
        return result

    def abort(self) -> None:
        """Stop sampling and discard (after a failed phase). Safe to call any time."""
        if self._set is not None:
            self._set.stop()
            self._set = None


def monitors_for(platform: Platform, hz: float = DEFAULT_HZ,
                 interfaces: Mapping[str, str] | None = None) -> PhaseMonitors:
    """The monitors for workloads on ``platform``; with ``interfaces`` (root-namespace
    network devices: the lab's bridge and veths, the guests' taps, each mapped to the
    label its metrics carry) their traffic instead of the work directory's disk (a
    network workload does no disk I/O worth reporting). A guest behind a remote
    hypervisor gets none: this machine's figures would be recorded under its name."""
    monitors: list[Monitor] = []
    if not platform.on_this_host:
        return PhaseMonitors(monitors, hz)
    device = backing_device(work_dir())
    if interfaces:
        monitors.append(NetDevSampler(interfaces))
    elif device is not None:
        monitors.append(DiskStatsSampler(device))
    monitors.append(HostCpuSampler())
    pid = platform.pid  # a guest's hypervisor process; None natively
    if pid is not None:
        vcpus = set(platform.vcpu_threads().values())
        monitors.append(ThreadCpuSampler(pid, vcpus))
        if not interfaces and device is not None:
            # QEMU's own share of the device's bytes (hvbench explain's attribution).
            monitors.append(ProcessIoSampler(pid))
    return PhaseMonitors(monitors, hz)
