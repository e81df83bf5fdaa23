"""The lifecycle kind's section of the HTML report (seed 003 Fig. 13).

A workload with at least two of ``create`` ... ``exit`` carrying a duration: its steps
are stacked per cell, ``create``'s duration against the image size (the variant's size
token, else ``size_bytes``) gets trend lines per (platform, method), and an ``idle``
phase's metrics are tabled.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from hvbench.analysis.stats import summarize
from hvbench.analysis.summaries import Row
from hvbench.analysis.trends import fits_for
from hvbench.kinds.lifecycle.analysis import lifecycle_series, lifecycle_workloads
from hvbench.kinds.lifecycle.driver import LIFECYCLE_PHASES
from hvbench.report.fits import FIT_HEADERS, fit_rows
from hvbench.report.html import RunSection, blocks, figure, phase_segments, table, trend_figure
from hvbench.report.plots import stacked_bars
from hvbench.report.text import mean_ci_text

#: Metrics of the lifecycle's ``idle`` phase, in the table's order (others follow).
IDLE_METRICS = ("guests", "idle_guests", "host_busy_pct", "host_cpu_pct", "qemu_cpu_pct",
                "qemu_cpu_pct_per_guest", "qemu_vcpu_pct", "qemu_run_pct", "host_cpus",
                "window_s")


def lifecycle_idle_rows(rows: Sequence[Row], workloads: Sequence[str]
                        ) -> tuple[list[str], list[list[str]]]:
    """(headers, one row per cell) of the ``idle`` phase's metrics, mean ± 95 % CI."""
    values: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        if row.workload in workloads and row.phase == "idle":
            values[row.cell][row.metric].append(row.value)
    present = {m for metrics in values.values() for m in metrics}
    order = [m for m in IDLE_METRICS if m in present] + sorted(present - set(IDLE_METRICS))
    out = [[cell, *(mean_ci_text(summarize(metrics[m])) if m in metrics else "-" for m in order)]
           for cell, metrics in values.items()]
    return ["cell", *order], out


def lifecycle_section(rows: Sequence[Row]) -> str:
    """The Lifecycle section of a run's report ("" without lifecycle workloads)."""
    workloads = lifecycle_workloads(rows)
    if not workloads:
        return ""
    parts = ['<h2 id="lifecycle">Lifecycle</h2>']
    bars, segments, values = phase_segments(rows, workloads, LIFECYCLE_PHASES)
    title = "time per lifecycle step (mean over repetitions)"
    parts.append(figure(stacked_bars(title, "s", bars, segments, values), title,
                        "One bar per cell, stacked from create, qemu, kernel, agent, "
                        "shutdown and exit."))
    series = lifecycle_series(rows, workloads)
    if any(fits_for(s.points) for s in series):
        parts.append(trend_figure(
            "create time against image size, with least-squares trends",
            "image size (bytes)", series, (),
            "One series per platform and create method (seed 003 Fig. 13)."))
        parts.append(table((*FIT_HEADERS[:-1], "intercept: fixed cost s"), fit_rows(series),
                           left=3))
    headers, idle = lifecycle_idle_rows(rows, workloads)
    if idle:
        parts += ["<h3>Idle guests: host CPU they use</h3>", table(headers, idle)]
    return blocks(parts)


#: The section as the report registry takes it.
SECTION = RunSection("lifecycle", "Lifecycle", lifecycle_section)
