"""The web kind's slice of the metric catalogue: what httperf and wrk store."""

from __future__ import annotations

from hvbench.analysis.metrics import MetricSpec
from hvbench.analysis.metrics import latency_spec as _latency
from hvbench.analysis.metrics import metric_spec as _m

#: httperf's error kinds (``err.<kind>``).
HTTPERF_ERRORS = (
    "client-timo",
    "socket-timo",
    "connrefused",
    "connreset",
    "fd-unavail",
    "addrunavail",
    "ftab-full",
    "other",
    "non-2xx",
)


def web_metrics() -> list[MetricSpec]:
    """Every metric a web cell stores: httperf's, then its wrk latency pass's."""
    return [
        # -- httperf (web workloads) ------------------------------------------------------
        _m(
            "max_rate_rps",
            "req/s",
            "max sustained req/s",
            "higher",
            "httperf",
            vs_native=True,
            main=3,
        ),
        _m("replies_s", "replies/s", "replies/s", "higher", "httperf", vs_native=True, main=4),
        _m("offered_rps", "req/s", "offered req/s", "neutral", "httperf"),
        _m("rate_ref_rps", "req/s", "max req/s a relative rate is a share of", "neutral",
           "httperf"),
        _m("achieved_ratio", "ratio", "achieved / offered rate", "neutral", "httperf"),
        _latency(
            "reply_ms",
            "reply time ms (first byte)",
            "httperf",
            short="reply ms",
            detail=7,
            vs_alone=0,
        ),
        _latency(
            "transfer_ms", "transfer time ms", "httperf", short="transfer ms", detail=8, vs_alone=1
        ),
        _latency(
            "connect_ms", "connect time ms", "httperf", short="connect ms", detail=9, vs_alone=2
        ),
        _latency("conn_ms", "connection lifetime ms", "httperf"),
        _m("max_concurrent", "count", "max concurrent connections", "neutral", "httperf"),
        _m("errors", "count", "httperf errors", "neutral", "httperf"),
        _m("error_pct", "%", "httperf errors %", "lower", "httperf", detail=13),
        *(
            _m(f"err.{kind}", "count", f"httperf {kind} errors", "neutral", "httperf")
            for kind in HTTPERF_ERRORS
        ),
        _m("client_cpu_pct", "%", "httperf client CPU %", "neutral", "httperf", detail=14,
           host_load=True),
        _m("net_mbit_s", "Mbit/s", "httperf net Mbit/s", "neutral", "httperf"),
        _m("steps", "count", "max-rate steps", "neutral", "httperf"),
        # -- wrk (the web workload's latency pass) ----------------------------------------
        *wrk_metrics(),
    ]


#: wrk's error kinds (its summary's names).
WRK_ERRORS = ("connect", "read", "write", "status", "timeout")


def wrk_metrics() -> list[MetricSpec]:
    """The latency pass's metrics: wrk's percentiles (as wrk reports them, corrected
    for coordinated omission), its mean, stdev and max, and its request rate. p50 and
    p99 and the rate sit under httperf's reply, transfer and connect times."""
    return [
        _latency("wrk_lat_p50_ms", "wrk p50 latency ms", "wrk", short="wrk p50 ms", detail=10),
        _latency("wrk_lat_p90_ms", "wrk p90 latency ms", "wrk", short="wrk p90 ms"),
        _latency("wrk_lat_p99_ms", "wrk p99 latency ms", "wrk", short="wrk p99 ms", detail=11),
        _latency("wrk_lat_p999_ms", "wrk p99.9 latency ms", "wrk", short="wrk p99.9 ms"),
        _latency("wrk_lat_p9999_ms", "wrk p99.99 latency ms", "wrk", short="wrk p99.99 ms"),
        _latency("wrk_lat_mean_ms", "wrk mean latency ms", "wrk", short="wrk mean ms"),
        _latency("wrk_lat_max_ms", "wrk max latency ms", "wrk", short="wrk max ms"),
        # A spread, not a delay: neither direction is better in itself.
        _m("wrk_lat_stdev_ms", "ms", "wrk latency stdev ms", "neutral", "wrk"),
        _m("wrk_rps", "req/s", "wrk req/s (closed loop)", "higher", "wrk", short="wrk req/s",
           vs_native=True, detail=12),
        _m("wrk_requests", "count", "wrk requests completed", "neutral", "wrk"),
        _m("wrk_errors", "count", "wrk errors", "neutral", "wrk"),
        *(_m(f"wrk_err.{kind}", "count", f"wrk {kind} errors", "neutral", "wrk")
          for kind in WRK_ERRORS),
        _m("wrk_corrected_pct", "%", "wrk latency samples added by its coordinated-omission "
           "correction %", "neutral", "wrk", short="wrk CO-added %"),
    ]
