"""The cpu kind's slice of the metric catalogue: what stress-ng's report gives."""

from __future__ import annotations

from hvbench.analysis.metrics import MetricSpec
from hvbench.analysis.metrics import metric_spec as _m


def cpu_metrics() -> list[MetricSpec]:
    """Every metric a cpu cell stores (stress-ng's bogo operations: comparable between
    platforms running the same stressor and method, not between methods)."""
    return [
        # After boot_s (5): a cpu phase stores no boot time, so it heads its phase.
        _m("bogo_ops_s", "ops/s", "bogo ops/s", "higher", "stress-ng", vs_native=True,
           main=6),
        _m("bogo_ops_s_cpu", "ops/s", "bogo ops/s of CPU time", "higher", "stress-ng",
           detail=50),
        _m("bogo_ops", "count", "bogo ops", "neutral", "stress-ng"),
        _m("stress_cpu_pct", "%", "CPU % per stress-ng worker", "neutral", "stress-ng",
           detail=51),
    ]
