"""The web workload kind (``kind = "web"``): an HTTP server on the platform, httperf
(and wrk for latency) on a lab host."""

from __future__ import annotations


def register() -> None:
    """Register the web kind into the core's registries."""
