"""The web kind's section of the HTML report: httperf's mean reply and transfer times
next to the wrk pass's percentiles, per phase and platform."""

from __future__ import annotations

from collections.abc import Sequence

from hvbench.analysis.metrics import short_label
from hvbench.analysis.summaries import PhaseStats
from hvbench.report.html import escape, platforms_of, table
from hvbench.report.text import mean_ci_text

#: The web latency table: httperf's means, then the wrk pass's numbers (metric names).
WEB_LATENCY_METRICS = ("reply_ms", "transfer_ms", "wrk_lat_p50_ms", "wrk_lat_p90_ms",
                       "wrk_lat_p99_ms", "wrk_lat_p999_ms", "wrk_lat_p9999_ms",
                       "wrk_lat_mean_ms", "wrk_rps", "wrk_corrected_pct")
WEB_LATENCY_NOTE = ("Mean ± 95 % CI over the repetitions. httperf: open loop at the "
                    "workload's rate, reply = request sent to first byte, transfer = first "
                    "to last byte. wrk: closed loop (its connections each wait for their "
                    "reply), latency = request written to last byte, percentiles as wrk "
                    "reports them, i.e. with its coordinated-omission correction, which "
                    "added the last column's share of the samples.")


def web_latency_rows(items: Sequence[PhaseStats], native: str | None) -> list[list[str]]:
    """Rows of the web latency table: phase, platform (native first), then
    :data:`WEB_LATENCY_METRICS` as mean ± 95 % CI; only phases with a wrk pass."""
    rows = []
    for item in items:
        if "wrk_lat_p50_ms" not in item.metrics:
            continue
        for platform in platforms_of([item], native):
            cells = [item.phase, platform]
            for metric in WEB_LATENCY_METRICS:
                per = item.metrics.get(metric, {})
                cells.append(mean_ci_text(per[platform]) if platform in per else "-")
            rows.append(cells)
    return rows


def web_latency_section(items: Sequence[PhaseStats], native: str | None) -> list[str]:
    """The web latency table of a workload's phases, with its note (nothing without a
    wrk pass)."""
    web = web_latency_rows(items, native)
    if not web:
        return []
    return ["<h3>Web latency: httperf's means and wrk's percentiles (ms)</h3>",
            table(["phase", "platform", *(short_label(m) for m in WEB_LATENCY_METRICS)],
                  web, left=2),
            f"<p><small>{escape(WEB_LATENCY_NOTE)}</small></p>"]
