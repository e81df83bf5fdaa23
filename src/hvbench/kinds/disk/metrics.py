"""The disk kind's slice of the metric catalogue: what fio stores besides the rate
(``mb_s``, which the core declares: other kinds store it too)."""

from __future__ import annotations

from hvbench.analysis.metrics import MetricSpec
from hvbench.analysis.metrics import latency_spec as _latency
from hvbench.analysis.metrics import metric_spec as _m


def disk_metrics() -> list[MetricSpec]:
    """Every metric a disk cell's fio stores but ``mb_s``."""
    return [
        # -- fio (disk workloads) ---------------------------------------------------------
        _m("ops_s", "ops/s", "ops/s", "higher", "fio", vs_native=True, main=1),
        _m("iops", "IOPS", "IOPS", "higher", "fio", detail=0),
        _latency("lat_mean_ms", "mean latency ms", "fio"),
        _latency("lat_p50_ms", "p50 latency ms", "fio"),
        _latency("lat_p99_ms", "p99 latency ms", "fio", detail=1, vs_alone=3),
        _latency("lat_p999_ms", "p99.9 latency ms", "fio"),
        _latency("lat_p90_ms", "p90 latency ms", "fio"),
        _latency("lat_p9999_ms", "p99.99 latency ms", "fio"),
        _m("cpu_pct", "%", "workload CPU % (fio usr+sys)", "neutral", "fio", detail=2),
        _m("cpu_usr_pct", "%", "fio usr CPU %", "neutral", "fio"),
        _m("cpu_sys_pct", "%", "fio sys CPU %", "neutral", "fio"),
        _m("depth_mean", "requests", "fio requests in flight (mean iodepth)", "neutral", "fio",
           short="fio depth"),
        _m("slat_mean_us", "us", "fio mean submission latency µs", "lower", "fio",
           short="slat µs"),
        _m("clat_mean_us", "us", "fio mean completion latency µs", "lower", "fio",
           short="clat µs"),
    ]
