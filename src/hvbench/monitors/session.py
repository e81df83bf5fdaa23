"""The monitors of one platform, started and stopped around each measured phase.

For every platform: the block device holding its benchmark storage (a device the study
names in ``disk.source``, the filesystem of its image file or scratch directory, else
the work directory's: :func:`host_device`) and host CPU; for a guest also its QEMU
process by thread class, with vCPU threads identified through QMP
``query-cpus-fast``; for network and web workloads the lab's interfaces and the
guests' taps (/proc/net/dev). Inside a guest, unless turned off, the guest's own view
of its benchmark disk, CPU and (for network and web workloads) NICs
(:mod:`hvbench.monitors.guest`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from hvbench.errors import HostError, HvbenchError
from hvbench.host import interrupt
from hvbench.host.hostconfig import io_stat_file
from hvbench.host.paths import work_dir
from hvbench.monitors.devices import device_number
from hvbench.monitors.guest import (
    DEFAULT_GUEST_HZ,
    GuestSampler,
    GuestWindow,
    guest_disk_name,
)
from hvbench.monitors.guest import RAW_KIND as GUEST_RAW_KIND
from hvbench.monitors.sampler import (
    DEFAULT_HZ,
    CgroupIoSampler,
    DiskStatsSampler,
    HostCpuSampler,
    Monitor,
    MonitorResult,
    MonitorSet,
    NetDevSampler,
    ProcessIoSampler,
    ThreadCpuSampler,
    backing_device,
    whole_disk,
)
from hvbench.platforms.base import HelperProcesses, HostStorage, IoCgroup, Platform

#: Makes the guest sampler of one window (a fresh one per phase).
GuestSamplerFactory = Callable[[], GuestSampler]


class PhaseMonitors:
    """A fresh :class:`MonitorSet` per phase: ``start()``, then ``stop()`` or ``abort()``.

    With ``guest`` also a :class:`GuestSampler` per phase, started before the host
    monitors and stopped after them, so its samples cover the host window; its
    metrics, series and raw lines are merged into the phase's :class:`MonitorResult`.
    A sampler that fails is an error of the result (``errors["guest"]``), as a host
    monitor's is, never a failed phase.
    """

    def __init__(self, monitors: list[Monitor], hz: float = DEFAULT_HZ,
                 guest: GuestSamplerFactory | None = None) -> None:
        self._monitors = monitors
        self.hz = hz
        self.guest = guest
        self._set: MonitorSet | None = None
        self._sampler: GuestSampler | None = None

    @property
    def monitors(self) -> list[Monitor]:
        """The monitors each phase samples (a scenario adds its neighbours' to them)."""
        return list(self._monitors)

    def start(self) -> None:
        """Start the guest sampler (when there is one), then the host monitors. Raises
        :class:`InterruptedRun` when a stop was requested meanwhile."""
        self.abort()
        if self.guest is not None:
            self._sampler = self.guest()
            try:
                self._sampler.start()
            except HvbenchError as exc:
                interrupt.check(exc)
                self._sampler.fail(exc)
        self._set = MonitorSet(self._monitors, self.hz)
        self._set.start()

    def stop(self, focus: tuple[float, float] | None = None) -> MonitorResult:
        """The phase's result; an empty result if sampling never started. With
        ``focus`` (monotonic start, end) the host and guest summaries cover that
        interval of the window (see :meth:`MonitorSet.stop`)."""
        if self._set is None:
            self._stop_guest()
            return MonitorResult()
        result = self._set.stop(focus)
        self._set = None
        sampler = self._stop_guest()
        if sampler is not None and sampler.window is not None:
            merge_guest(result, sampler.window, result.t0, sampler.name, focus)
        return result

    def _stop_guest(self) -> GuestSampler | None:
        sampler, self._sampler = self._sampler, None
        if sampler is not None:
            sampler.stop()
        return sampler

    def abort(self) -> None:
        """Stop sampling and discard (after a failed phase). Safe to call any time."""
        try:
            if self._set is not None:
                self._set.stop()
                self._set = None
        finally:
            self._stop_guest()


def merge_guest(result: MonitorResult, window: GuestWindow, t0: float, name: str,
                focus: tuple[float, float] | None = None) -> None:
    """Add the guest sampler's window to a host window's ``result`` (in place): each
    guest monitor's summary (``guest.disk.vdb.avgqu_sz``; with ``focus``, over that
    monotonic interval), series and error, and the raw lines under
    :data:`~hvbench.monitors.guest.RAW_KIND`."""
    reports = window.reports(t0, t0 + result.seconds)
    summaries = reports if focus is None else window.reports(*focus)
    for monitor, report in summaries.items():
        result.summary |= {f"{monitor}.{k}": v for k, v in report.summary.items()}
    for monitor, report in reports.items():
        if report.series:
            result.series[monitor] = report.series
        if report.error:
            result.errors[monitor] = report.error
    if window.raw:
        result.raw[GUEST_RAW_KIND] = window.raw
    elif "guest" not in result.errors:
        result.errors["guest"] = f"{name}: no samples came back"


def monitors_for(platform: Platform, hz: float = DEFAULT_HZ,
                 interfaces: Mapping[str, str] | None = None, *,
                 guest: bool = True) -> PhaseMonitors:
    """The monitors for workloads on ``platform``; with ``interfaces`` (root-namespace
    network devices: the lab's bridge and veths, the guests' taps, each mapped to the
    label its metrics carry) their traffic instead of the work directory's disk (a
    network workload does no disk I/O worth reporting). A guest behind a remote
    hypervisor gets no host monitors: this machine's figures would be recorded under
    its name. A guest gets the guest sampler unless ``guest`` is False: its benchmark
    disk (when it has one) or, with ``interfaces``, its NICs, and its CPU."""
    monitors: list[Monitor] = []
    sampler = guest_sampler(platform, net=bool(interfaces)) if guest else None
    if not platform.on_this_host:
        return PhaseMonitors(monitors, hz, sampler)
    device = host_device(platform)
    if interfaces:
        monitors.append(NetDevSampler(interfaces))
    elif device is not None:
        monitors.append(DiskStatsSampler(device))
    monitors.append(HostCpuSampler())
    pid = platform.pid  # a guest's hypervisor process; None natively
    if pid is not None:
        vcpus = set(platform.vcpu_threads().values())
        monitors.append(ThreadCpuSampler(pid, vcpus))
        if isinstance(platform, HelperProcesses):
            # Each storage daemon's threads as their own monitor (``qsd0.iothread.*``),
            # beside QEMU's.
            monitors += [ThreadCpuSampler(helper_pid, name=name, iothread_tids=iothreads)
                         for name, (helper_pid, iothreads)
                         in platform.helper_processes().items()]
        if not interfaces and device is not None:
            # QEMU's own share of the device's bytes (hvbench explain's attribution).
            monitors.append(ProcessIoSampler(pid))
    if not interfaces and device is not None:
        cgroup_io = cgroup_io_monitor(platform, device)
        if cgroup_io is not None:
            monitors.append(cgroup_io)
    return PhaseMonitors(monitors, hz, sampler)


def host_device(platform: Platform) -> str | None:
    """The block device the host's disk monitor samples for ``platform``: the one
    holding its benchmark storage (:class:`~hvbench.platforms.base.HostStorage`: a
    device a study names in ``disk.source`` is itself, an image file on another
    filesystem that filesystem's), else the work directory's (where a lab host's NBD
    or AoE export file lives); None when that path has no block device (tmpfs)."""
    path = platform.host_storage() if isinstance(platform, HostStorage) else None
    return backing_device(path or work_dir())


def cgroup_io_monitor(platform: Platform, device: str) -> CgroupIoSampler | None:
    """The I/O of the cgroup hvbench runs ``platform``'s workload in, on the whole disk
    under ``device`` (cgroups count per disk, not per partition): the native side's
    memory cgroup, or the hvbench cgroup a guest's QEMU was moved into (a scenario's
    weights). None when there is none or the host does not account it."""
    stat: Path | None
    if isinstance(platform, IoCgroup):
        stat = platform.io_stat_file()
    else:
        stat = io_stat_file(platform.pid) if platform.pid is not None else None
    if stat is None:
        return None
    try:
        return CgroupIoSampler(stat, device_number(whole_disk(device)))
    except HostError:
        return None


def guest_sampler(platform: Platform, *, net: bool,
                  hz: float = DEFAULT_GUEST_HZ) -> GuestSamplerFactory | None:
    """The guest sampler factory of ``platform`` (None natively). A disk workload's
    guest samples its benchmark disk; a network or web workload's (``net``) its NICs."""
    if not platform.is_guest:
        return None
    disk = None if net else guest_disk_name(platform)
    return lambda: GuestSampler(platform, disk, net, hz)
