"""The network kind's slice of the metric catalogue: what iperf3 stores."""

from __future__ import annotations

from hvbench.analysis.metrics import MetricSpec
from hvbench.analysis.metrics import latency_spec as _latency
from hvbench.analysis.metrics import metric_spec as _m


def network_metrics() -> list[MetricSpec]:
    """Every metric a network cell's iperf3 stores."""
    return [
        # -- iperf3 (network workloads) ---------------------------------------------------
        _m("mbit_s", "Mbit/s", "Mbit/s", "higher", "iperf3", vs_native=True, main=2),
        _m("sender_mbit_s", "Mbit/s", "sender Mbit/s", "neutral", "iperf3"),
        _m("bytes", "B", "bytes received", "neutral", "iperf3"),
        _m("cpu_platform_pct", "%", "iperf3 CPU % on the platform", "neutral", "iperf3", detail=5),
        _m("cpu_peer_pct", "%", "iperf3 CPU % on the peer", "neutral", "iperf3", detail=6,
           host_load=True),
        _m("retransmits", "count", "TCP retransmits", "lower", "iperf3", detail=3),
        _m("lost_pct", "%", "UDP loss %", "lower", "iperf3", detail=4),
        _latency("jitter_ms", "UDP jitter ms", "iperf3"),
    ]
