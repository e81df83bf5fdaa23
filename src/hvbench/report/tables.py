"""Turning stored measurements into what people read: tables, CSV, JSON.

Pure: every function takes rows and returns a table, lines or a string; the CLI prints.
One table per workload phase with the platforms as columns (as the seeds' Figures 5-10
put bars side by side); with more than :data:`MAX_COLUMNS` platforms the table turns so
that platforms are rows, which a terminal can still show.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from rich import box
from rich.table import Table

from hvbench.analysis.stats import Summary, percent_of_summary, stability_warnings, summarize
from hvbench.analysis.trends import Row as FitRow
from hvbench.analysis.trends import propagation_fit_rows
from hvbench.model.study import LIFECYCLE_PHASES, PROFILE_PHASES, PROPAGATION_PHASES

MAX_COLUMNS = 5
THROUGHPUT_METRICS = ("mb_s", "ops_s", "mbit_s", "max_rate_rps", "replies_s", "boot_s")
MAIN_LABELS = {"mb_s": "MB/s", "ops_s": "ops/s", "mbit_s": "Mbit/s",
               "max_rate_rps": "max sustained req/s", "replies_s": "replies/s",
               "boot_s": "boot s"}
#: Metrics that are compared with the native platform (a boot time has no native).
RELATIVE_METRICS = ("mb_s", "ops_s", "mbit_s", "max_rate_rps", "replies_s")
#: Rows shown under the throughput, in order: (metric suffix, label). Disk metrics
#: first, then network (iperf3) and web (httperf), then the host's view: the disk's
#: iostat columns, the lab bridge and guest tap, QEMU's threads (seed 003's set).
DETAIL_ROWS = (
    ("iops", "IOPS"),
    ("lat_p99_ms", "p99 latency ms"),
    ("cpu_pct", "workload CPU % (fio usr+sys)"),
    ("retransmits", "TCP retransmits"),
    ("lost_pct", "UDP loss %"),
    ("cpu_platform_pct", "iperf3 CPU % on the platform"),
    ("cpu_peer_pct", "iperf3 CPU % on the peer"),
    ("reply_ms", "reply time ms (first byte)"),
    ("transfer_ms", "transfer time ms"),
    ("connect_ms", "connect time ms"),
    ("error_pct", "httperf errors %"),
    ("client_cpu_pct", "httperf client CPU %"),
    ("avgrq_sz", "host avgrq-sz (sectors)"),
    ("avgqu_sz", "host avgqu-sz"),
    ("util_pct", "host %util"),
    ("net.guest-tap0.rx_mbit_s", "host tap rx Mbit/s (guest sends)"),
    ("net.guest-tap0.tx_mbit_s", "host tap tx Mbit/s (guest receives)"),
    ("qemu.vcpu.cpu_pct", "QEMU vCPU threads CPU %"),
    ("qemu.vcpu.wait_pct", "QEMU vCPU run-queue wait %"),
    ("qemu.vcpu.blocked_pct", "QEMU vCPU blocked %"),
    ("qemu.vcpu.exec_per_s", "QEMU vCPU executions/s"),
    ("qemu.vcpu.cpu_ms_per_exec", "QEMU vCPU ms per execution"),
    ("qemu.main.cpu_pct", "QEMU main loop CPU %"),
    ("qemu.vhost.cpu_pct", "vhost-net threads CPU %"),
    ("qemu.total.cpu_pct", "QEMU process CPU %"),
)
#: The rows kept (with their short column names) when platforms become rows.
COMPACT_ROWS = {"% of native": "% native", "CoV %": "CoV%", "host avgrq-sz": "avgrq-sz",
                "host avgqu-sz": "avgqu-sz", "host %util": "%util", "n": "n"}
TCG_BANNER = (
    "TCG (software emulation): guest numbers measure emulation, not virtualization"
)
#: Phases in the order a reader expects them: the profiles' (write before read), then
#: propagation's and the lifecycle's steps in the order they happen. ``shutdown`` ends
#: both, so it goes after the lifecycle's ``agent`` (propagation's ``terminal`` comes
#: before ``create`` anyway, and the two kinds never share a workload).
_KNOWN_PHASES = tuple(dict.fromkeys(
    [p for phases in PROFILE_PHASES.values() for p in phases]
    + [p for p in PROPAGATION_PHASES if p != "shutdown"] + list(LIFECYCLE_PHASES)
    + ["idle"]))
_SIZE_PHASE = re.compile(r"^(\d+)kB$")


class Row(FitRow, Protocol):
    """One stored measurement with its dimensions (the store's MeasurementRow)."""

    @property
    def unit(self) -> str: ...


@dataclass
class PhaseStats:
    """Summaries of every metric of one workload phase, per platform."""

    workload: str
    phase: str
    platforms: list[str]
    metrics: dict[str, dict[str, Summary]] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)

    def throughput_metric(self) -> str | None:
        return next((m for m in THROUGHPUT_METRICS if m in self.metrics), None)


def phase_stats(rows: Iterable[Row]) -> list[PhaseStats]:
    """Group rows by (workload, phase) and summarise each metric per platform."""
    values: dict[tuple[str, str], dict[str, dict[str, list[float]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list)))
    units: dict[str, str] = {}
    order: dict[tuple[str, str], list[str]] = defaultdict(list)
    for row in rows:
        key = (row.workload, row.phase)
        values[key][row.metric][row.platform].append(row.value)
        units[row.metric] = row.unit
        if row.platform not in order[key]:
            order[key].append(row.platform)
    out = []
    for (workload, phase), metrics in values.items():
        stats = PhaseStats(workload, phase, order[(workload, phase)])
        for metric, per_platform in metrics.items():
            stats.metrics[metric] = {p: summarize(v) for p, v in per_platform.items()}
            stats.units[metric] = units[metric]
        out.append(stats)
    return out


def _find_metric(stats: PhaseStats, suffix: str) -> str | None:
    if suffix in stats.metrics:
        return suffix
    return next((m for m in sorted(stats.metrics) if m.endswith(f".{suffix}")
                 and m.startswith("host.disk.")), None)


def phase_key(phase: str) -> tuple[int, int, str]:
    """Profiles' phase order (write before read), web sizes by size, others by name."""
    if phase in _KNOWN_PHASES:
        return (1, _KNOWN_PHASES.index(phase), phase)
    match = _SIZE_PHASE.match(phase)
    if match:
        return (2, int(match.group(1)), phase)
    return (0 if phase == "boot" else 3, 0, phase)


def fmt_value(value: float) -> str:
    """A number as the tables print it: whole above 1000, else 3 significant digits."""
    return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.3g}"




def mean_ci_text(summary: Summary, unit: str = "") -> str:
    """``mean ± half-width`` of the 95 % CI; the mean alone for a single repetition
    (a CI of ± 0 would claim a precision one value cannot give)."""
    tail = f" {unit}" if unit else ""
    if summary.n < 2:
        return f"{fmt_value(summary.mean)}{tail}"
    half = summary.ci95_half_width
    # Equal values leave rounding noise (1e-14) in the sd: print it as the 0 it is.
    if half <= 1e-9 * abs(summary.mean):
        half = 0.0
    return f"{fmt_value(summary.mean)} ± {fmt_value(half)}{tail}"


def _cells(stats: PhaseStats, native: str | None) -> list[tuple[str, list[str]]]:
    """Label and one text per platform, for every row of the table."""
    rows: list[tuple[str, list[str]]] = []
    main = stats.throughput_metric()
    if main:
        per = stats.metrics[main]
        rows.append((f"{MAIN_LABELS[main]} mean ± 95% CI", [
            f"{fmt_value(per[p].mean)} ± {fmt_value(per[p].ci95_half_width)}" if p in per else "-"
            for p in stats.platforms]))
        if native and native in per and main in RELATIVE_METRICS:
            rows.append(("% of native", [_pct(per, p, native) for p in stats.platforms]))
        rows.append(("CoV %", [_cov(per.get(p)) for p in stats.platforms]))
    for suffix, label in DETAIL_ROWS:
        metric = _find_metric(stats, suffix)
        if metric:
            per = stats.metrics[metric]
            rows.append((label, [fmt_value(per[p].mean) if p in per else "-"
                                 for p in stats.platforms]))
    if main:
        rows.append(("n", [str(stats.metrics[main][p].n) if p in stats.metrics[main] else "0"
                           for p in stats.platforms]))
    return rows


def _pct(per: Mapping[str, Summary], platform: str, native: str) -> str:
    if platform not in per or per[native].mean == 0:
        return "-"
    pct, low, high = percent_of_summary(per[platform], per[native])
    if low is None or high is None:
        return f"{pct:.1f} %"
    # The delta-method interval is symmetric; a ratio of throughputs is never negative.
    return f"{pct:.1f} % [{max(low, 0.0):.0f}-{high:.0f}]"


def _cov(summary: Summary | None) -> str:
    if summary is None or summary.cov_pct is None:
        return "-"
    return f"{summary.cov_pct:.1f}"


def phase_table(stats: PhaseStats, native: str | None) -> Table:
    """One phase as a rich Table: platforms as columns, or as rows when there are many."""
    rows = _cells(stats, native)
    title = f"{stats.workload} / {stats.phase}"
    if len(stats.platforms) <= MAX_COLUMNS:
        table = Table(title=title, title_justify="left")
        table.add_column("")
        for platform in stats.platforms:
            table.add_column(platform, justify="right", overflow="fold")
        for label, texts in rows:
            table.add_row(label, *texts)
        return table
    # Many platforms: one row each, with only the columns a terminal can hold.
    rows = [(label, texts) for label, texts in rows if label.split(" (")[0] in COMPACT_ROWS
            or label.endswith("95% CI")]
    table = Table(title=title, title_justify="left")
    table.add_column("platform", overflow="fold")
    for label, _ in rows:
        header = COMPACT_ROWS.get(label.split(" (")[0], label.replace(" mean ± 95% CI", " ±CI"))
        table.add_column(header, justify="right", overflow="fold")
    for index, platform in enumerate(stats.platforms):
        table.add_row(platform, *(texts[index] for _, texts in rows))
    return table


PROPAGATION_FIT_TITLE = ("propagation: total time against image size, least-squares fits "
                         "(seed 000 Fig. 3)")
#: The columns of :func:`hvbench.analysis.trends.fit_rows`, short enough for an 80-column terminal.
PROPAGATION_FIT_HEADERS = ("platform", "method", "fit", "equation (y s, x bytes)", "R²",
                           "overhead s")
PROPAGATION_FIT_NOTE = ("y = initial + transfer + terminal seconds of a repetition, x = the "
                        "image size in bytes (size_bytes moved, else the variant's size); "
                        "overhead = the intercept, the time at size 0: what the manager "
                        "spends besides moving bytes; the theoretical NIC needs "
                        "x·8 / link_rate_bits seconds.")


def propagation_fit_table(rows: Sequence[Row]) -> Table | None:
    """The propagation fits for the terminal, as the HTML report's table: per
    (platform, method) the linear and quadratic least-squares equation, R² and
    intercept (:func:`hvbench.analysis.trends.fit_rows`), then the theoretical NIC line of each
    stored ``link_rate_bits``; None when the run has no propagation workload."""
    found = propagation_fit_rows(rows)
    if not found:
        return None
    # No vertical rules and a wide enough equation column: a linear equation stays
    # on one line in 80 columns.
    table = Table(title=PROPAGATION_FIT_TITLE, title_justify="left",
                  caption=PROPAGATION_FIT_NOTE, caption_justify="left", box=box.SIMPLE_HEAD)
    width = min(32, max(len(texts[3]) for texts in found if texts[2] != "quadratic"))
    for index, header in enumerate(PROPAGATION_FIT_HEADERS):
        table.add_column(header, justify="left" if index < 4 else "right", overflow="fold",
                         min_width=width if index == 3 else None)
    for texts in found:
        table.add_row(*texts)
    return table


def warnings_for(stats: Sequence[PhaseStats]) -> list[str]:
    """Stability warnings of every throughput metric, prefixed with where they apply."""
    out = []
    for phase in stats:
        metric = phase.throughput_metric()
        if metric is None:
            continue
        for platform, summary in phase.metrics[metric].items():
            for warning in stability_warnings(summary, metric=metric):
                out.append(f"{phase.workload}/{phase.phase} on {platform}: {warning}")
    return out


def rows_csv(rows: Iterable[Row], run_id: str) -> str:
    """One CSV line per measurement with all its dimensions."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["run", "cell", "platform", "workload", "repetition", "phase", "metric",
                     "value", "unit"])
    for r in rows:
        writer.writerow([run_id, r.cell, r.platform, r.workload, r.repetition, r.phase,
                         r.metric, repr(r.value), r.unit])
    return buffer.getvalue()


def summary_json(stats: Sequence[PhaseStats], natives: Mapping[str, str | None],
                 run: Mapping[str, Any], extra: Mapping[str, Any] | None = None) -> str:
    """Every summary with its % of native, plus the run's environment and, under their
    own keys, ``extra`` sections (the scenario tables)."""
    phases = []
    for phase in stats:
        native = natives.get(phase.workload)
        metrics: dict[str, Any] = {}
        for metric, per in phase.metrics.items():
            metrics[metric] = {p: _summary_dict(s, per, native, p) for p, s in per.items()}
        phases.append({"workload": phase.workload, "phase": phase.phase,
                       "platforms": phase.platforms, "metrics": metrics})
    return json.dumps({"run": run, "phases": phases, **(extra or {})}, indent=2)


def _summary_dict(summary: Summary, per: Mapping[str, Summary], native: str | None,
                  platform: str) -> dict[str, Any]:
    data: dict[str, Any] = dict(summary.__dict__)
    if native and native in per and per[native].mean:
        pct, low, high = percent_of_summary(summary, per[native])
        data.update(pct_of_native=pct, pct_of_native_ci95=[low, high])
    data["platform"] = platform
    return data
