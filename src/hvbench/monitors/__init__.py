"""Host-side monitors sampled while a workload runs.

Modules: :mod:`~hvbench.monitors.diskstats` and :mod:`~hvbench.monitors.cpu` are pure
parsing and arithmetic on /proc text (unit-tested on stored snapshots);
:mod:`~hvbench.monitors.readers` reads the files; :mod:`~hvbench.monitors.sampler`
samples them in one background thread (:class:`MonitorSet`, default 10 Hz).

Metric names in :attr:`MonitorResult.summary` (computed from the first and last
sample of the window, not as a mean of intervals); the series use the same names
without the monitor prefix (``host.disk.vda``, ``host.cpu``, ``qemu``):

Block device ``<dev>`` (:class:`DiskStatsSampler`, sysstat 12.6 ``iostat -x``)
    ``host.disk.<dev>.`` + ``r_s``, ``w_s``, ``d_s``, ``f_s`` (requests/s);
    ``r_kb_s``, ``w_kb_s``, ``d_kb_s`` (kB/s, kB = 1024 B); ``r_mb_s``, ``w_mb_s``
    (MB/s as ``iostat -m``: 1024 kB); ``rrqm_s``, ``wrqm_s``, ``drqm_s`` (merges/s);
    ``rrqm_pct``, ``wrqm_pct``, ``drqm_pct``; ``r_await_ms``, ``w_await_ms``,
    ``d_await_ms``, ``f_await_ms``; ``rareq_sz_kb``, ``wareq_sz_kb``, ``dareq_sz_kb``;
    ``avgrq_sz`` (classic, 512-byte sectors per read+write request); ``avgqu_sz`` and
    ``aqu_sz`` (the same average queue length); ``util_pct`` (capped at 100).

Host CPU (:class:`HostCpuSampler`, /proc/stat), % of all CPUs' time
    ``host.cpu.`` + ``busy_pct``, ``user_pct``, ``system_pct``, ``irq_pct``,
    ``iowait_pct``, ``steal_pct``, ``idle_pct``; per CPU ``host.cpu.cpu<N>.<same>``.

QEMU threads (:class:`ThreadCpuSampler`, monitor name ``qemu`` by default)
    ``qemu.<class>.`` + ``cpu_pct``, ``run_pct``, ``wait_pct`` (% of one core),
    ``blocked_pct`` (% of the class's thread lifetime), ``exec_per_s``,
    ``cpu_ms_per_exec``, ``threads``, for the classes present among ``vcpu``,
    ``iothread``, ``worker``, ``main``, ``other``, and always ``qemu.total.``.
    Per-thread values are in :attr:`MonitorResult.threads`.

Network interfaces (:class:`NetDevSampler`, /proc/net/dev, monitor name ``net``)
    ``net.<if>.`` + ``rx_mbit_s``, ``tx_mbit_s``, ``rx_pps``, ``tx_pps``,
    ``rx_drop_s``, ``tx_drop_s``, ``rx_err_s``, ``tx_err_s``; totals ``rx_bytes``,
    ``tx_bytes`` (see :mod:`hvbench.monitors.netdev`).

Definitions are in the docstrings of :mod:`hvbench.monitors.diskstats` and
:mod:`hvbench.monitors.cpu`.
"""

from hvbench.monitors.base import Monitor, MonitorReport, ThreadReport
from hvbench.monitors.devices import backing_device, device_for_path, whole_disk
from hvbench.monitors.readers import (
    DiskStatsSampler,
    HostCpuSampler,
    NetDevSampler,
    ThreadCpuSampler,
)
from hvbench.monitors.sampler import DEFAULT_HZ, MonitorResult, MonitorSet, vcpu_thread_ids

__all__ = [
    "DEFAULT_HZ",
    "DiskStatsSampler",
    "HostCpuSampler",
    "Monitor",
    "MonitorReport",
    "MonitorResult",
    "MonitorSet",
    "NetDevSampler",
    "ThreadCpuSampler",
    "ThreadReport",
    "backing_device",
    "device_for_path",
    "vcpu_thread_ids",
    "whole_disk",
]
