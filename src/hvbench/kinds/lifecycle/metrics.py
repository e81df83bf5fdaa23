"""The lifecycle kind's slice of the metric catalogue: its steps' extras and what its
``idle`` phase measures of the idle guests (each step's ``duration_s`` and the image's
``size_bytes`` are the core's: every self-timed phase stores them)."""

from __future__ import annotations

from hvbench.analysis.metrics import MetricSpec
from hvbench.analysis.metrics import metric_spec as _m


def lifecycle_metrics() -> list[MetricSpec]:
    """Every metric a lifecycle cell stores besides the core's."""
    return [
        _m("prepare_s", "s", "QEMU prepare s", "neutral", "lifecycle"),
        _m("guest_uptime_s", "s", "guest uptime at init s", "neutral", "lifecycle"),
        _m("qmp_event", "flag", "QMP SHUTDOWN event seen", "neutral", "lifecycle"),
        _m("host_busy_pct", "%", "host CPU busy %", "neutral", "lifecycle"),
        _m("qemu_cpu_pct", "%", "idle guests' QEMU CPU %", "neutral", "lifecycle"),
        _m("qemu_cpu_pct_per_guest", "%", "QEMU CPU % per idle guest", "neutral", "lifecycle"),
        _m("qemu_vcpu_pct", "%", "idle guests' vCPU %", "neutral", "lifecycle"),
        _m("qemu_run_pct", "%", "idle guests' on-CPU %", "neutral", "lifecycle"),
        _m("host_cpus", "count", "host CPUs", "neutral", "lifecycle"),
        _m("guests", "count", "idle guests", "neutral", "lifecycle"),
        _m("window_s", "s", "idle window s", "neutral", "lifecycle"),
    ]
