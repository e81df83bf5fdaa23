"""The propagation kind's slice of the metric catalogue: what an image's journey
stores besides each phase's ``duration_s`` and the image's ``size_bytes`` (the core's:
every self-timed phase stores them)."""

from __future__ import annotations

from hvbench.analysis.metrics import MetricSpec
from hvbench.analysis.metrics import metric_spec as _m


def propagation_metrics() -> list[MetricSpec]:
    """Every metric a propagation cell stores besides the core's."""
    return [
        _m("bytes_on_wire", "bytes", "bytes on the wire", "neutral", "propagation"),
        _m("bytes_to_repo", "bytes", "bytes to the repository", "neutral", "propagation"),
        _m("link_rate_bits", "bit/s", "repository link rate", "neutral", "propagation"),
        _m("link_share_pct", "%", "share of the link rate", "neutral", "propagation"),
        _m("cache_hit", "flag", "image cache hit", "neutral", "propagation"),
        _m("verify_s", "s", "checksum s", "neutral", "propagation"),
        _m("setup_s", "s", "image set-up s", "neutral", "propagation"),
    ]
