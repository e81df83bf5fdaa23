"""The HTML report: one self-contained file people read in a browser.

Pure: :func:`render_html` takes a :class:`ReportInput` (what the store holds about one
run) and returns the document as text; the CLI reads the store and writes the file.
Every figure is an SVG made by :mod:`hvbench.report.plots`, embedded as a ``data:`` image; a
Content-Security-Policy meta tag forbids every other source, so opening the file
requests nothing, offline or not.

What it shows, top to bottom: the environment (host, QEMU, accelerator) with a red
banner when guests ran under TCG; stability warnings and failed repetitions; per
workload, grouped bars of the throughput metric (platforms x phases, 95 % CI error bars,
seed 000 Figs. 5-10), the same as % of native, a summary table and the host disk table
(iostat -x columns, seed 001 Tables 1-2); time series from the monitors, one panel per
cell and phase; the scenarios (:mod:`hvbench.analysis.scenarios`: % of alone, degradation,
aggregated throughput ratio, guests started on demand with seed 003 Fig. 14's
normalized throughput, CPU weights, CoV); the kinds' own sections; for a fleet run's
host run, the Fleet section (its hosts and the host-to-host table); the study file.

A workload kind adds its own parts: under each workload's summary table
(:func:`register_workload_section`: web's latency table) and after the scenarios
(:func:`register_run_section`: the lifecycle's and propagation's sections, in their
packages of :mod:`hvbench.kinds`).
"""
from __future__ import annotations

import base64
import dataclasses
import fnmatch
import html
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hvbench.analysis.metrics import main_metrics, short_label
from hvbench.analysis.scenarios import (
    Degradation,
    OnDemandSeries,
    SampleLike,
    ScenarioReport,
    build_scenario_report,
    ondemand_series,
)
from hvbench.analysis.stages import StageWindow, stage_rows, stage_windows
from hvbench.analysis.stats import Summary, percent_of_summary, summarize
from hvbench.analysis.summaries import (
    PhaseStats,
    Row,
    compared_to_native,
    fmt_value,
    phase_key,
    phase_stats,
    warnings_for,
)
from hvbench.analysis.trends import (
    ReferenceLine,
    SizeSeries,
    duration_metric,
)
from hvbench.errors import SpecError
from hvbench.model.overrides import STUDY_OVERRIDES
from hvbench.model.registry import register_once
from hvbench.report.diagnosis import DIAGNOSIS_NOTE, CellBlock, FixGroup
from hvbench.report.plots import (
    BarChart,
    Interval,
    LatencyCurve,
    Line,
    Panel,
    TrendSeries,
    VLine,
    grouped_bars,
    latency_cdf,
    platform_colors,
    time_series_grid,
    trend_lines,
)
from hvbench.report.scenarios import cov_tables, scenario_tables
from hvbench.report.stages import stage_tables
from hvbench.report.tables import (
    MAX_COLUMNS,
    TCG_BANNER,
)
from hvbench.report.text import (
    TextTable,
    cov_text,
    grouped_warnings,
    mean_ci_text,
    pct_of_native_text,
)

__all__ = [
    "AUTO_SERIES",
    "CSP",
    "HOST_DISK_COLUMNS",
    "SCENARIO_MONITORS",
    "ReportInput",
    "RunSection",
    "SeriesChoice",
    "WorkloadSection",
    "bar_charts",
    "cell_name_html",
    "escape",
    "fleet_section",
    "grouped_warnings",
    "host_disk_rows",
    "ondemand_figures",
    "parse_series_choice",
    "phase_key",
    "phase_segments",
    "platforms_of",
    "register_run_section",
    "register_workload_section",
    "render_fleet_html",
    "render_html",
    "scenario_charts",
    "series_figures",
    "size_trend",
    "stage_figures",
    "table",
    "trend_figure",
]

#: The only sources the page may use: inline styles and data: images.
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
#: Host disk columns (iostat -x names) of the disk table: (metric suffix, header).
HOST_DISK_COLUMNS = (
    ("r_s", "r/s"), ("w_s", "w/s"), ("r_mb_s", "rMB/s"), ("w_mb_s", "wMB/s"),
    ("rrqm_s", "rrqm/s"), ("wrqm_s", "wrqm/s"), ("avgrq_sz", "avgrq-sz"),
    ("avgqu_sz", "avgqu-sz"), ("r_await_ms", "r_await ms"), ("w_await_ms", "w_await ms"),
    ("util_pct", "%util"),
)
ENV_FIELDS = (
    ("hostname", "host"), ("kernel", "kernel"), ("cpu_model", "CPU"), ("cpus", "CPUs"),
    ("memory_bytes", "memory"), ("qemu_version", "QEMU"), ("qemu_package", "QEMU package"),
    ("accelerator", "accelerator"), ("hvbench_version", "hvbench"),
    ("git_commit", "git commit"), ("work_dir", "work directory"), ("vhost_net", "vhost-net"),
)


@dataclass(frozen=True)
class SeriesChoice:
    """Which time series to draw: a monitor name (fnmatch pattern) and the value keys
    summed per point, e.g. ``host.disk.*`` and ``("r_mb_s", "w_mb_s")``."""

    monitor: str
    keys: tuple[str, ...]
    label: str


#: Monitors (fnmatch patterns) the Scenarios section reads: the target's 1 s throughput,
#: NICs, host CPU and the QEMU thread monitors of the target and its neighbours.
SCENARIO_MONITORS = ("throughput", "net", "host.cpu", "qemu", "nb[0-9]*")

#: Tried in order for each phase when no series is chosen: the first with samples wins.
AUTO_SERIES = (
    SeriesChoice("iperf3", ("mbit_s",), "iperf3 Mbit/s (per interval)"),
    SeriesChoice("host.disk.*", ("r_mb_s", "w_mb_s"), "host disk MB/s (read + write)"),
    SeriesChoice("host.cpu", ("busy_pct",), "host CPU busy %"),
)


@dataclass(frozen=True)
class ReportInput:
    """Everything the report shows about one run."""

    run_id: str
    study_name: str
    status: str
    created_at: str
    finished_at: str | None
    env: Mapping[str, Any]
    study_text: str
    rows: Sequence[Row]
    natives: Mapping[str, str | None]
    samples: Sequence[SampleLike] = ()
    #: None: :data:`AUTO_SERIES`.
    series: SeriesChoice | None = None
    #: (cell, repetition, first line of the error) of failed repetitions.
    failures: Sequence[tuple[str, int, str]] = ()
    #: cell -> (platform, workload), for samples of cells without measurements.
    cells: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    #: platform name -> its stored definition (a scenario's ``scenario`` key gives
    #: the CPU weights of the weights table).
    platforms: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: How the guests' kernels were booted (mitigations, extra words), one line each.
    guest_kernel: Sequence[str] = ()
    #: The verdicts of ``hvbench explain`` grouped by fix (empty: nothing diagnosed).
    diagnosis: Sequence[FixGroup] = ()
    #: The one-sentence summary at the top (None: no guest compared with native).
    headline: str | None = None
    #: (workload, phase) -> platform -> its completion-latency CDF (ms, share) from
    #: fio's histograms; empty for runs without them.
    latency: Mapping[tuple[str, str], Mapping[str, Sequence[tuple[float, float]]]] = field(
        default_factory=dict)
    #: The seed papers' findings next to this run (None: not asked for).
    findings: TextTable | None = None
    #: The latency of guest disk cells by layer (None: no guest-side evidence).
    layers: TextTable | None = None
    #: The ranked "% of native" tables (:mod:`hvbench.report.leaderboard`).
    leaderboard: tuple[TextTable, ...] = ()
    #: The tuning section of a tuning run (``hvbench tune``), HTML; empty otherwise.
    tuning: str = ""
    #: A fleet run's host run: the fleet's tables (:func:`hvbench.report.fleet.
    #: fleet_tables`); empty otherwise.
    fleet: Sequence[TextTable] = ()
    #: The report's warnings (None: those of the summaries alone).
    warnings: Sequence[str] | None = None


def _overrides_note(env: Mapping[str, Any]) -> str:
    """The ``--set`` changes the run applied to the study file shown above, if any."""
    changes = env.get(STUDY_OVERRIDES) or []
    if not changes:
        return ""
    return ("<p>Run with these changes to the file (<code>--set</code>): "
            + ", ".join(f"<code>{_e(str(c))}</code>" for c in changes) + "</p>")


def parse_series_choice(text: str) -> SeriesChoice:
    """``MONITOR:KEY[+KEY...]``, e.g. ``host.disk.*:util_pct`` or ``qemu:vcpu.cpu_pct``.

    Raises:
        SpecError: the text has no ``:`` or an empty monitor or key.
    """
    monitor, sep, keys = text.partition(":")
    parts = tuple(k.strip() for k in keys.split("+"))
    if not sep or not monitor.strip() or not all(parts):
        raise SpecError(f"--series {text!r}: expected MONITOR:KEY[+KEY...], e.g. "
                        "host.disk.*:util_pct, host.cpu:busy_pct or iperf3:mbit_s")
    return SeriesChoice(monitor.strip(), parts, f"{monitor.strip()} {' + '.join(parts)}")


# -- ordering ------------------------------------------------------------------------------
def _by_workload(stats: Iterable[PhaseStats]) -> dict[str, list[PhaseStats]]:
    out: dict[str, list[PhaseStats]] = defaultdict(list)
    for item in stats:
        out[item.workload].append(item)
    return {w: sorted(items, key=lambda s: phase_key(s.phase)) for w, items in out.items()}


def _platforms(items: Sequence[PhaseStats], native: str | None = None) -> list[str]:
    """Platforms in order of appearance, the native baseline first."""
    seen = list(dict.fromkeys(p for item in items for p in item.platforms))
    return sorted(seen, key=lambda p: p != native)


# -- bar charts ----------------------------------------------------------------------------
def _interval(summary: Summary) -> Interval:
    if summary.n < 2:
        return Interval(summary.mean)
    return Interval(summary.mean, summary.ci95_low, summary.ci95_high)


def _pct_interval(cell: Summary, native: Summary) -> Interval | None:
    if native.mean == 0:
        return None
    pct, low, high = percent_of_summary(cell, native)
    return Interval(pct, None if low is None else max(low, 0.0), high)


def _chart(title: str, ylabel: str, platforms: Sequence[str], phases: Sequence[str],
           values: Mapping[tuple[str, str], Interval], *, reference: float | None = None
           ) -> BarChart:
    """Phases as groups and platforms as bars, or the other way round when there are
    more platforms than a reader can tell apart by colour (as the tables turn)."""
    present = {platform for _, platform in values}
    platforms = [p for p in platforms if p in present]
    if len(platforms) <= MAX_COLUMNS:
        return BarChart(title, ylabel, list(phases), list(platforms), dict(values), reference)
    turned = {(platform, phase): v for (phase, platform), v in values.items()}
    return BarChart(title, ylabel, list(platforms), list(phases), turned, reference)


def bar_charts(stats: Sequence[PhaseStats], natives: Mapping[str, str | None]
               ) -> list[tuple[str, BarChart]]:
    """Per workload and throughput metric: the means with 95 % CIs and, for metrics
    compared with native, the % of native (dashed line at 100). Keyed by workload."""
    out: list[tuple[str, BarChart]] = []
    for workload, items in _by_workload(stats).items():
        native = natives.get(workload)
        platforms = _platforms(items, native)
        by_metric: dict[str, list[PhaseStats]] = defaultdict(list)
        for item in items:
            metric = item.throughput_metric()
            if metric:
                by_metric[metric].append(item)
        # The headline metrics' figures first, boot time's last: a reader opens the
        # report for the workload's numbers (issue 29: the first figure was boot time).
        for metric, phases in sorted(by_metric.items(),
                                     key=lambda pair: all(p.phase == "boot" for p in pair[1])):
            label = short_label(metric)
            values = {(p.phase, platform): _interval(s) for p in phases
                      for platform, s in p.metrics[metric].items()}
            out.append((workload, _chart(f"{workload}: {label}, mean with 95 % CI", label,
                                         platforms, [p.phase for p in phases], values)))
            if native and compared_to_native(metric):
                pct = _pct_values(phases, metric, native)
                if pct:
                    out.append((workload, _chart(
                        f"{workload}: {label} in % of {native}", "% of native",
                        [p for p in platforms if p != native],
                        [p.phase for p in phases], pct, reference=100.0)))
    return out


def _pct_values(phases: Sequence[PhaseStats], metric: str, native: str
                ) -> dict[tuple[str, str], Interval]:
    out: dict[tuple[str, str], Interval] = {}
    for item in phases:
        per = item.metrics[metric]
        if native not in per:
            continue
        for platform, summary in per.items():
            interval = _pct_interval(summary, per[native]) if platform != native else None
            if interval is not None:
                out[(item.phase, platform)] = interval
    return out


# -- tables --------------------------------------------------------------------------------


def _disk_metric(item: PhaseStats, suffix: str) -> str | None:
    return next((m for m in sorted(item.metrics)
                 if m.startswith("host.disk.") and m.endswith(f".{suffix}")), None)


def host_disk_rows(items: Sequence[PhaseStats], native: str | None = None
                   ) -> list[list[str]]:
    """Rows of the host disk table: phase, platform (the native one first), then
    :data:`HOST_DISK_COLUMNS` (means over the repetitions); phases without host disk
    metrics are left out."""
    rows = []
    for item in items:
        metrics = [_disk_metric(item, suffix) for suffix, _ in HOST_DISK_COLUMNS]
        if not any(metrics):
            continue
        for platform in _platforms([item], native):
            cells = [item.phase, platform]
            for metric in metrics:
                per = item.metrics.get(metric or "", {})
                cells.append(fmt_value(per[platform].mean) if platform in per else "-")
            rows.append(cells)
    return rows


SUMMARY_HEADERS = ("phase", "platform", "mean ± 95 % CI", "% of native [95 % CI]", "CoV %",
                   "n", "IOPS", "p99 latency ms", "workload CPU %")


def summary_rows(items: Sequence[PhaseStats], native: str | None) -> list[list[str]]:
    """Rows of the summary table (the terminal report's main rows, one per platform)."""
    rows = []
    for item in items:
        metric = item.throughput_metric()
        if metric is None:
            continue
        per = item.metrics[metric]
        for platform in _platforms([item], native):
            if platform not in per:
                continue
            s = per[platform]
            rows.append([item.phase, platform,
                         mean_ci_text(s, short_label(metric)),
                         _pct_text(per, platform, native, metric),
                         cov_text(s), str(s.n),
                         *(_mean_text(item, m, platform)
                           for m in ("iops", "lat_p99_ms", "cpu_pct"))])
    return rows


#: A workload kind's own HTML under a workload's summary table: its phases' stats and
#: the native platform (or None) in, HTML parts out (none when the phases have nothing
#: of that kind). Registered by a kind package with :func:`register_workload_section`.
WorkloadSection = Callable[[Sequence[PhaseStats], str | None], list[str]]
_WORKLOAD_SECTIONS: list[WorkloadSection] = []


def register_workload_section(section: WorkloadSection) -> None:
    """Add ``section`` to every workload's part of the report (once; in order)."""
    if section not in _WORKLOAD_SECTIONS:
        _WORKLOAD_SECTIONS.append(section)


@dataclass(frozen=True)
class RunSection:
    """A workload kind's own section of a run's report, after the scenarios: its
    ``anchor`` (the ``id`` of its ``<h2>`` and its link), the link's ``title``, and
    ``render``, the section's HTML from every stored row of the run ("" when the run
    has nothing of that kind). Registered by a kind package with
    :func:`register_run_section`."""

    anchor: str
    title: str
    render: Callable[[Sequence[Row]], str]


_RUN_SECTIONS: dict[str, RunSection] = {}


def register_run_section(section: RunSection) -> None:
    """Add ``section`` to every run's report, after the sections registered before it.
    Raises :class:`HvbenchError` when another section claims its anchor."""
    register_once(_RUN_SECTIONS, section.anchor, section, "report section")


def platforms_of(items: Sequence[PhaseStats], native: str | None = None) -> list[str]:
    """Platforms in order of appearance, the native baseline first."""
    return _platforms(items, native)


def _pct_text(per: Mapping[str, Summary], platform: str, native: str | None,
              metric: str) -> str:
    if not native or not compared_to_native(metric):
        return "-"
    return pct_of_native_text(per, platform, native)


def _mean_text(item: PhaseStats, metric: str, platform: str) -> str:
    per = item.metrics.get(metric, {})
    return fmt_value(per[platform].mean) if platform in per else "-"


# -- time series ---------------------------------------------------------------------------
def _series_points(samples: Sequence[SampleLike], choice: SeriesChoice
                   ) -> dict[int, tuple[list[float], list[float]]]:
    """Per repetition: times and summed values of the first matching monitor."""
    monitors = sorted({s.monitor for s in samples
                       if fnmatch.fnmatchcase(s.monitor, choice.monitor)
                       and any(k in s.values for k in choice.keys)})
    out: dict[int, tuple[list[float], list[float]]] = {}
    for sample in samples:
        if not monitors or sample.monitor != monitors[0]:
            continue
        present = [float(sample.values[k]) for k in choice.keys if k in sample.values]
        if present:
            xs, ys = out.setdefault(sample.repetition, ([], []))
            xs.append(sample.t)
            ys.append(sum(present))
    return out


def _choose(samples: Sequence[SampleLike], choice: SeriesChoice | None) -> SeriesChoice | None:
    candidates = (choice,) if choice else AUTO_SERIES
    return next((c for c in candidates if _series_points(samples, c)), None)


def series_figures(samples: Sequence[SampleLike], cells: Mapping[str, tuple[str, str]],
                   choice: SeriesChoice | None = None
                   ) -> list[tuple[str, str, SeriesChoice, list[Panel]]]:
    """(workload, phase, the series drawn, one panel per cell with one line per
    repetition), phases in profile order. Cells missing from ``cells`` are skipped."""
    grouped: dict[tuple[str, str], dict[str, list[SampleLike]]] = defaultdict(
        lambda: defaultdict(list))
    for sample in samples:
        if sample.cell in cells:
            grouped[(cells[sample.cell][1], sample.phase)][sample.cell].append(sample)
    out = []
    for (workload, phase), per_cell in sorted(grouped.items(),
                                               key=lambda kv: (kv[0][0], phase_key(kv[0][1]))):
        chosen = _choose([s for group in per_cell.values() for s in group], choice)
        if chosen is None:
            continue
        panels = []
        for cell, cell_samples in per_cell.items():
            points = _series_points(cell_samples, chosen)
            lines = [Line(f"rep {rep + 1}", xs, ys) for rep, (xs, ys) in sorted(points.items())]
            if lines:
                panels.append(Panel(cells[cell][0], lines))
        out.append((workload, phase, chosen, panels))
    return out


# -- stacked phases and size trends (the self-timed kinds' sections) -----------------------
def phase_segments(rows: Sequence[Row], workloads: Sequence[str], phases: Sequence[str]
                   ) -> tuple[list[str], list[str], dict[tuple[str, str], float]]:
    """(bars = the cells of the workloads, segments = the phases present in order, mean
    duration per (cell, phase)): the input of a stacked bar chart."""
    values: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(
        lambda: defaultdict(list))
    for row in rows:
        if row.workload in workloads and row.phase in phases:
            values[(row.cell, row.phase)][row.metric].append(row.value)
    bars, means = [], {}
    for (cell, phase), metrics in values.items():
        metric = duration_metric(set(metrics))
        if metric:
            means[(cell, phase)] = summarize(metrics[metric]).mean
            bars.append(cell)
    segments = [p for p in phases if any(k[1] == p for k in means)]
    return list(dict.fromkeys(bars)), segments, means


def size_trend(series: SizeSeries) -> TrendSeries:
    """A size series as a trend series: its label, its points sorted by size."""
    return TrendSeries(series.label, sorted(series.points))


# -- scenarios -----------------------------------------------------------------------------
def scenario_charts(items: Sequence[Degradation]) -> list[BarChart]:
    """Per workload: each scenario's throughput in % of its base platform alone
    (delta-method whiskers, dashed line at 100), phases as groups."""
    by_workload: dict[str, dict[tuple[str, str], Interval]] = defaultdict(dict)
    labels: dict[str, str] = {}
    for d in items:
        if d.alone is None or d.metric not in main_metrics() or d.alone.mean == 0:
            continue
        interval = _pct_interval(d.other, d.alone)
        if interval is not None:
            by_workload[d.workload][(d.phase, d.measured)] = interval
            labels[d.workload] = short_label(d.metric)
    charts = []
    for workload, values in by_workload.items():
        phases = sorted({p for p, _ in values}, key=phase_key)
        platforms = list(dict.fromkeys(p for _, p in values))
        charts.append(_chart(f"{workload}: {labels[workload]} in % of alone", "% of alone",
                             platforms, phases, values, reference=100.0))
    return charts


def ondemand_figures(series: Sequence[OnDemandSeries]
                     ) -> list[tuple[str, str, list[Panel]]]:
    """(workload, phase, one panel per cell with one line per repetition) of the
    normalized throughput; dashed: a guest asked for, dotted: that guest ready."""
    grouped: dict[tuple[str, str], dict[str, list[OnDemandSeries]]] = defaultdict(
        lambda: defaultdict(list))
    for item in series:
        grouped[(item.workload, item.phase)][item.platform].append(item)
    out = []
    for (workload, phase), per_platform in sorted(
            grouped.items(), key=lambda kv: (kv[0][0], phase_key(kv[0][1]))):
        panels = []
        for platform, reps in per_platform.items():
            lines = [Line(f"rep {r.repetition + 1}", r.xs, r.ys) for r in reps]
            marks = sorted({VLine(x) for r in reps for x in r.asked_at}
                           | {VLine(x, dotted=True) for r in reps for x in r.ready_at},
                           key=lambda v: (v.x, v.dotted))
            panels.append(Panel(platform, lines, marks))
        out.append((workload, phase, panels))
    return out


def stage_figures(windows: Sequence[StageWindow]
                  ) -> list[tuple[str, str, list[Panel], list[Panel], list[Panel]]]:
    """(workload, phase, host panels, guest panels, traffic panels): one panel per cell
    and repetition, the host's per-core busy % (and the whole host's) in the first, each
    guest's vCPU % in the second, each guest's and the guests' summed Mbit/s in the
    third (empty without a NIC series); dashed: a stage began (a neighbour's load
    started)."""
    grouped: dict[tuple[str, str], tuple[list[Panel], list[Panel], list[Panel]]] = \
        defaultdict(lambda: ([], [], []))
    for w in windows:
        marks = [VLine(stage.start) for stage in w.stages[1:]]
        title = f"{w.platform} rep {w.repetition + 1}"
        for panels, suffix in zip(grouped[(w.workload, w.phase)],
                                  (" busy %", " vCPU %", " Mbit/s"), strict=True):
            lines = [Line(column.removesuffix(" %"), [t for t, _ in points],
                          [v for _, v in points])
                     for column, points in w.series.items() if column.endswith(suffix)]
            if lines:
                panels.append(Panel(title, lines, marks))
    return [(workload, phase, *panels) for (workload, phase), panels
            in sorted(grouped.items(), key=lambda kv: (kv[0][0], phase_key(kv[0][1])))]


_STAGE_CAPTION = ("Dashed: a stage began (a neighbour's load started: stress-ng or "
                  "iperf3, the stored nb<i>.<role>.started_at_s); before the first: idle.")


def _stage_parts(windows: Sequence[StageWindow]) -> list[str]:
    parts = []
    for workload, phase, host, guests, traffic in stage_figures(windows):
        for panels, what, ylabel in ((host, "host CPU busy % per core", "busy %"),
                                     (guests, "each guest's vCPU %", "vCPU %"),
                                     (traffic, "each guest's bandwidth", "Mbit/s")):
            if not panels:
                continue
            title = f"{workload} / {phase}: {what} per stage"
            parts.append(figure(time_series_grid(
                title, ylabel, panels, 2, xlabel="seconds since the window started",
                panel_size=(6.0, 2.6)), title, _STAGE_CAPTION))
    return parts + [_text_table(t) for t in stage_tables(stage_rows(windows))]


# -- HTML ----------------------------------------------------------------------------------
_STYLE = """
body{font-family:DejaVu Sans,Verdana,sans-serif;margin:1.5em auto;max-width:1400px;
color:#222;padding:0 1em}
h1{font-size:1.5em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;margin:.6em 0;font-size:.85em}
td,th{border:1px solid #ccc;padding:.2em .5em;text-align:right}
th{background:#f2f2f2}td.l,th.l{text-align:left}
.tw{overflow-x:auto;max-width:100%}
.banner{background:#c00;color:#fff;font-weight:bold;padding:.7em 1em;margin:1em 0;
font-size:1.1em}
.warn{background:#fff6d6;border-left:4px solid #e0a800;padding:.4em 1em}
.fail{background:#fde8e8;border-left:4px solid #c00;padding:.4em 1em}
.figs{display:flex;flex-wrap:wrap;align-items:flex-start;gap:1em 1.5em;margin:1em 0}
figure{margin:0;max-width:100%}figure img{width:100%;height:auto;display:block}
figcaption{font-size:.85em;color:#555}pre{background:#f7f7f7;padding:1em;overflow:auto}
nav a{margin-right:1em}details{display:inline}summary{cursor:pointer;color:#555}
.headline{font-size:1.15em;font-weight:bold;margin:.8em 0}
.fixgroup{margin:1em 0}.fix{margin:.3em 0}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(24em,1fr));gap:.6em}
.card{border:1px solid #ccc;border-radius:4px;padding:.3em .7em;text-align:left;
font-size:.85em}.card h3{font-size:1em;margin:.2em 0}.card .pct{font-weight:normal;
white-space:nowrap;color:#555}
.card dl{display:grid;grid-template-columns:max-content 1fr;gap:.1em .6em;margin:.3em 0}
.card dt{color:#555}.card dd{margin:0}.nw{white-space:nowrap}
"""


_HEADER_BREAK = re.compile(r"([:.])(?=[A-Za-z_])")


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def escape(value: object) -> str:
    """``value`` as HTML text (quotes escaped too)."""
    return _e(value)


def _img(svg: str, alt: str) -> str:
    data = base64.b64encode(svg.encode()).decode("ascii")
    return f'<img alt="{_e(alt)}" src="data:image/svg+xml;base64,{data}">'


#: Every figure is shown at this multiple of its own size (matplotlib's 10 pt text then
#: matches the page's 16 px text), and at most as wide as the page: figures of one
#: report keep one text size, and narrow ones sit side by side across the page.
FIGURE_SCALE = 1.2
_SVG_WIDTH = re.compile(r'<svg[^>]*?\swidth="([0-9.]+)pt"')


def _natural_px(svg: str) -> float | None:
    """The width (CSS px) that matplotlib gave the SVG, None when it names none."""
    match = _SVG_WIDTH.search(svg[:2000])
    return float(match.group(1)) * 4 / 3 if match else None


def figure(svg: str, alt: str, caption: str | None = None) -> str:
    """One figure of a figure row (see :func:`blocks`), at :data:`FIGURE_SCALE` times its
    own size, at most the page's width."""
    text = f"<figcaption>{_e(caption)}</figcaption>" if caption else ""
    px = _natural_px(svg)
    size = f' style="width:{px * FIGURE_SCALE:.0f}px"' if px is not None else ""
    return f"<figure{size}>{_img(svg, alt)}{text}</figure>"


def blocks(parts: Sequence[str]) -> str:
    """``parts`` one after the other, each run of consecutive figures in one row that wraps
    at the page's width: narrow figures side by side, a wide one on a row of its own."""
    out: list[str] = []
    run: list[str] = []
    for part in [*parts, None]:
        if part is not None and part.startswith("<figure"):
            run.append(part)
            continue
        if run:
            out.append('<div class="figs">' + "".join(run) + "</div>")
            run = []
        if part is not None:
            out.append(part)
    return "\n".join(out)


def _header_cell(text: str) -> str:
    """A header that may wrap after ``:`` and ``.`` inside a name (``qemu:<wbr>vcpu.<wbr>
    blocked_pct``), as well as at spaces."""
    return _HEADER_BREAK.sub(r"\1<wbr>", _e(text))


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1) -> str:
    head = "".join(f'<th class="{"l" if i < left else ""}">{_header_cell(h)}</th>'
                   for i, h in enumerate(headers))
    body = "".join("<tr>" + "".join(f'<td class="{"l" if i < left else ""}">{_e(c)}</td>'
                                    for i, c in enumerate(row)) + "</tr>" for row in rows)
    # A table wider than the page (the CoV's, one column per series) scrolls inside it.
    return (f'<div class="tw"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody>'
            "</table></div>")


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1) -> str:
    """An HTML table as every section of the report draws it; the first ``left``
    columns are left-aligned."""
    return _table(headers, rows, left)


def _env_value(key: str, value: Any) -> str:
    if value is None:
        return "-"
    if key == "memory_bytes" and isinstance(value, int):
        return f"{value / (1 << 30):.1f} GiB"
    if key == "work_dir" and isinstance(value, Mapping):
        free = value.get("free_bytes")
        gib = f", {free / (1 << 30):.0f} GiB free" if isinstance(free, int) else ""
        return f"{value.get('path')} ({value.get('filesystem')}{gib})"
    return str(value)


def _header(data: ReportInput) -> str:
    meta = [("run", data.run_id), ("study", data.study_name), ("status", data.status),
            ("started", data.created_at), ("finished", data.finished_at or "-")]
    env = [(label, _env_value(key, data.env.get(key))) for key, label in ENV_FIELDS
           if key in data.env]
    env += [("guest kernel", line) for line in data.guest_kernel]
    parts = [f"<h1>hvbench report: {_e(data.study_name)}</h1>"]
    if data.headline:
        parts.append(f'<p class="headline">{_e(data.headline[0].upper())}'
                     f"{_e(data.headline[1:])}.</p>")
    parts.append(_table(["", ""], meta, left=2))
    if data.env.get("accelerator") == "tcg":
        parts.append(f'<div class="banner" role="alert">{_e(TCG_BANNER)}</div>')
    parts += ['<h2 id="environment">Environment</h2>', _table(["", ""], env, left=2)]
    return blocks(parts)


def _warning_item(message: str, places: Sequence[str]) -> str:
    if len(places) == 1:
        return f"<li>{_e(places[0])}: {_e(message)}</li>"
    return (f"<li>{_e(message)} <details><summary>{len(places)} places</summary>"
            f"{_e(', '.join(places))}</details></li>")


def _problems(stats: Sequence[PhaseStats], failures: Sequence[tuple[str, int, str]],
              found: Sequence[str] | None = None) -> str:
    """The warnings (``found``: the report's; None: those of ``stats`` alone) and the
    failed repetitions."""
    warnings = grouped_warnings(warnings_for(stats) if found is None else found)
    parts = ['<h2 id="warnings">Stability warnings</h2>']
    if warnings:
        parts.append('<div class="warn"><ul>' + "".join(_warning_item(message, places)
                                                         for message, places in warnings)
                     + "</ul></div>")
    else:
        parts.append("<p>None: every throughput metric has the repetitions planned (at "
                     "least 3 for a CoV) and a CoV within 10 %.</p>")
    if failures:
        parts.append('<div class="fail"><p>Failed repetitions (not in the numbers):</p><ul>'
                     + "".join(f"<li>{_e(c)} rep {r + 1}: {_e(err)}</li>"
                               for c, r, err in failures) + "</ul></div>")
    return blocks(parts)


def _workload_section(workload: str, items: Sequence[PhaseStats],
                      charts: Sequence[BarChart], native: str | None) -> str:
    parts = [f'<h2 id="{_anchor("w", workload)}">Workload {_e(workload)}</h2>']
    parts += [figure(grouped_bars(chart), chart.title,
                      _PCT_CAPTION if chart.reference else _CAPTION) for chart in charts]
    parts += ["<h3>Summary</h3>", _table(SUMMARY_HEADERS, summary_rows(items, native), left=2)]
    for section in _WORKLOAD_SECTIONS:
        parts += section(items, native)
    disk = host_disk_rows(items, native)
    if disk:
        parts += ["<h3>Host disk (iostat -x of the device holding the benchmark storage)</h3>",
                  _table(["phase", "platform", *(h for _, h in HOST_DISK_COLUMNS)], disk,
                         left=2)]
    return blocks(parts)


_CAPTION = ("Bars: means over the repetitions; whiskers: 95 % confidence intervals of "
            "the mean (Student t), none with a single repetition.")
_PCT_CAPTION = ("Bars: mean in % of the native mean; whiskers: 95 % interval of the ratio "
                "(delta method); dashed line: native.")


def _anchor(prefix: str, name: str) -> str:
    return f"{prefix}-" + re.sub(r"[^A-Za-z0-9_-]+", "-", name)


def _series_section(data: ReportInput, cells: Mapping[str, tuple[str, str]]) -> str:
    figures = series_figures(data.samples, cells, data.series)
    if not figures:
        return ""
    parts = ['<h2 id="series">Time series</h2>',
             "<p>One panel per cell, one line per repetition; 10 Hz monitor samples "
             "(iperf3: its own per-second intervals).</p>"]
    for workload, phase, chosen, panels in figures:
        if panels:
            title = f"{workload} / {phase}: {chosen.label}"
            parts.append(figure(time_series_grid(title, chosen.label, panels), title,
                                 f"{title}; one panel per cell, one line per repetition."))
    return blocks(parts)


def trend_figure(title: str, xlabel: str, series: Sequence[SizeSeries],
                 references: Sequence[ReferenceLine], caption: str) -> str:
    """Seconds against bytes with the series' fits and the reference lines."""
    return figure(trend_lines(title, xlabel, "s", [size_trend(s) for s in series],
                              references), title, caption)


def _latency_section(latency: Mapping[tuple[str, str], Mapping[str, Sequence[
        tuple[float, float]]]], natives: Mapping[str, str | None],
        palette: Mapping[str, str], web: Iterable[str] = ()) -> str:
    """One CDF and tail plot per disk phase, and per web phase with a wrk pass
    (workloads in ``web``), each platform in its ``palette`` colour, native dashed
    (seed 001 reads latency per request; the whole distribution shows where a mean
    hides a mode)."""
    if not latency:
        return ""
    web = set(web)
    parts = ['<h2 id="latency">Latency distributions</h2><p>Completion latency of every '
             "I/O, all repetitions together, from fio's histograms (web workloads: of "
             "every request of wrk's latency pass, from its report, with wrk's "
             "coordinated-omission correction): left the share completed by a latency, "
             "right the share still slower (the tail, log scale).</p>"]
    for (workload, phase), curves in latency.items():
        native = natives.get(workload)
        order = sorted(curves, key=lambda name: (name != native, name))
        lines = [LatencyCurve(name, curves[name], native=name == native,
                              color=palette.get(name)) for name in order]
        title = f"{workload} / {phase}" + (" (wrk)" if workload in web else "")
        items = "requests" if workload in web else "I/Os"
        parts.append(figure(latency_cdf(title, lines, items),
                             f"latency CDF and tail of {title} per platform"))
    return blocks(parts)


def _text_table(table: TextTable) -> str:
    note = f"<p><small>{_e(table.note)}</small></p>" if table.note else ""
    return (f"<h3>{_e(table.title)}</h3>"
            + _table(table.headers, table.rows, left=table.left) + note)


_ONDEMAND_CAPTION = ("Normalized throughput: the target's traffic per 1 s bucket divided by "
                     "dip.baseline (the median before the first start); one line per "
                     "repetition; dashed: a guest asked for; dotted: that guest's agent "
                     "answered.")


def _scenario_section(data: ReportInput, report: ScenarioReport,
                      cells: Mapping[str, tuple[str, str]]) -> str:
    windows = stage_windows(data.rows, data.samples, cells)
    if not report.degradation and not report.ondemand and not report.weights and not windows:
        return ""
    parts = ['<h2 id="scenarios">Scenarios</h2>',
             "<p>Each qemu platform measured alone and in each scenario "
             "(<code>platform@scenario</code>).</p>"]
    palette = report_palette(data)
    parts += [figure(grouped_bars(dataclasses.replace(chart, colors=palette)), chart.title,
                     "Bars: the scenario's mean in % of the platform alone; whiskers: "
                     "delta-method 95 % interval; dashed: alone.")
              for chart in scenario_charts(report.degradation)]
    parts += [_text_table(t) for t in scenario_tables(report)]
    for workload, phase, panels in ondemand_figures(ondemand_series(data.rows, data.samples,
                                                                    cells)):
        title = f"{workload} / {phase}: normalized throughput, guests started on demand"
        # Few cells, each worth reading closely (seed 003 Fig. 14): larger panels.
        parts.append(figure(time_series_grid(
            title, "throughput / baseline", panels, 2, xlabel="seconds since the window "
            "started", reference=1.0, panel_size=(6.0, 2.8)), title, _ONDEMAND_CAPTION))
    parts += _stage_parts(windows)
    parts += [_text_table(t) for t in cov_tables(report)]
    return blocks(parts)


_NAME_PARTS = re.compile(r"([^/@]+)([/@]?)")


def cell_name_html(name: str) -> str:
    """A cell name that wraps only after its ``/`` and ``@``: each platform, scenario
    and workload name stays whole (``virtio-blk-iothread`` never breaks at a hyphen),
    and a copy of the text is the name as typed (no look-alike hyphen)."""
    return "".join(f'<span class="nw">{_e(part)}</span>{_e(sep)}' + ("<wbr>" if sep else "")
                   for part, sep in _NAME_PARTS.findall(name))


def _card(block: CellBlock) -> str:
    pct = f' <span class="pct">{_e(block.pct)}</span>' if block.pct else ""
    items = "".join(f"<dt>{_e(label)}</dt><dd>{_e(text)}</dd>" for label, text in block.lines)
    return (f'<div class="card"><h3>{cell_name_html(block.cell)}{pct}</h3><dl>{items}</dl>'
            "</div>")


def _diagnosis_section(groups: Sequence[FixGroup]) -> str:
    """The Diagnosis as cards, one per cell, under the fix their dominant causes share
    (printed once), as the terminal lays it out."""
    if not groups:
        return ""
    parts = ['<h2 id="diagnosis">Diagnosis</h2><p>The bottleneck of every cell from the '
             "host-side evidence: the dominant cause, its numbers next to native, and "
             f"the contributing causes. {_e(DIAGNOSIS_NOTE)}</p>"]
    for group in groups:
        fix = (f'<p class="fix"><b>fix:</b> {_e(group.fix)}</p>' if group.fix is not None
               else '<p class="fix"><b>no fix:</b> no cause named</p>')
        parts.append(f'<section class="fixgroup">{fix}<div class="cards">'
                     + "".join(_card(b) for b in group.cells) + "</div></section>")
    return blocks(parts)


def _layers_section(table: TextTable | None) -> str:
    if table is None:
        return ""
    return ('<h2 id="layers">Latency by layer</h2><p>Where each guest disk cell\'s '
            "latency went, from the guest's own counters and the host's: in the guest, "
            "in the virtualization path, in the host device.</p>" + _text_table(table))


def _leaderboard_section(tables: Sequence[TextTable]) -> str:
    if not tables:
        return ""
    return ('<h2 id="leaderboard">Leaderboard</h2><p>Per phase, the guests ranked by '
            "their headline metric in % of native with its 95 % interval, and the "
            "bottleneck the diagnosis named; the note under each table says which orders "
            "the intervals support.</p>" + "".join(_text_table(t) for t in tables))


def _findings_section(table: TextTable | None) -> str:
    if table is None:
        return ""
    return ('<h2 id="findings">Findings</h2><p>What the seed papers found, their numbers, '
            "ours (mean ± 95 % CI), our A/B ratio with its 95 % interval next to the "
            "paper's, and the verdict: reproduced, weaker or stronger, effect absent, "
            "size excluded, opposite, inconclusive, precondition not met or not "
            "assessable under TCG (docs/seeds.md).</p>"
            + _text_table(table))


_FLEET_TEXT = ("<p>The same study on every host of a fleet run, each host against its own "
               "native baseline: each host's mean per cell, the spread of the host means "
               "(CoV across hosts) next to the noise of each host's repetitions (CoV "
               "within hosts), and the hosts that are outliers.</p>")


def fleet_section(tables: Sequence[TextTable]) -> str:
    """The Fleet section: the hosts with their environments and the host-to-host table
    (:func:`hvbench.report.fleet.fleet_tables`); empty without tables."""
    if not tables:
        return ""
    return '<h2 id="fleet">Fleet</h2>' + _FLEET_TEXT + "".join(_text_table(t) for t in tables)


def render_fleet_html(fleet_id: str, tables: Sequence[TextTable], *, tcg: bool) -> str:
    """``report --fleet F --format html``: one document with the Fleet section (each
    host's own run has its own report); the red banner when a host ran under TCG."""
    banner = f'<div class="banner" role="alert">{_e(TCG_BANNER)}</div>' if tcg else ""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
            f"<title>hvbench fleet {_e(fleet_id)}</title>\n"
            f"<style>{_STYLE}</style></head>\n<body>\n"
            f"<h1>hvbench fleet report: {_e(fleet_id)}</h1>\n{banner}\n"
            f"{fleet_section(tables)}\n</body></html>\n")


def _nav(workloads: Iterable[str], sections: Mapping[str, bool]) -> str:
    """Links to the environment, every workload and the optional sections present
    (``sections``: anchor -> present)."""
    titles = {"leaderboard": "Leaderboard", "series": "Time series",
              "scenarios": "Scenarios",
              **{s.anchor: s.title for s in _RUN_SECTIONS.values()},
              "diagnosis": "Diagnosis",
              "layers": "Latency by layer",
              "latency": "Latency", "findings": "Findings", "tuning": "Tuning",
              "fleet": "Fleet"}
    links = [("environment", "Environment"), ("warnings", "Warnings")]
    links += [(_anchor("w", w), f"Workload {w}") for w in workloads]
    links += [(anchor, titles[anchor]) for anchor, present in sections.items() if present]
    links.append(("study", "Study file"))
    return "<nav>" + "".join(f'<a href="#{a}">{_e(t)}</a>' for a, t in links) + "</nav>"


def report_palette(data: ReportInput) -> dict[str, str]:
    """One colour per platform for every figure of this report (native always
    :data:`~hvbench.report.plots.NATIVE_COLOR`), in the order the rows name them."""
    return platform_colors(list(dict.fromkeys(r.platform for r in data.rows)),
                           data.natives.values())


def render_html(data: ReportInput) -> str:
    """The whole report as one HTML document (UTF-8 text, no external reference)."""
    stats = phase_stats(data.rows)
    by_workload = _by_workload(stats)
    palette = report_palette(data)
    charts: dict[str, list[BarChart]] = defaultdict(list)
    for workload, chart in bar_charts(stats, data.natives):
        charts[workload].append(dataclasses.replace(chart, colors=palette))
    sections = [_workload_section(w, items, charts[w], data.natives.get(w))
                for w, items in by_workload.items()]
    cells = dict(data.cells) or {r.cell: (r.platform, r.workload) for r in data.rows}
    # The CoV of every sampled series is only shown for scenario runs: skip the work
    # (a storage matrix has hundreds of thousands of samples) elsewhere.
    scenario_run = any(r.scenario for r in data.rows)
    extra = {"leaderboard": _leaderboard_section(data.leaderboard),
             "series": _series_section(data, cells),
             "scenarios": _scenario_section(data, build_scenario_report(
                 data.rows, data.samples if scenario_run else (), cells, data.platforms),
                 cells),
             **{s.anchor: s.render(data.rows) for s in _RUN_SECTIONS.values()},
             "diagnosis": _diagnosis_section(data.diagnosis),
             "layers": _layers_section(data.layers),
             "latency": _latency_section(
                 data.latency, data.natives, palette,
                 {r.workload for r in data.rows if r.metric.startswith("wrk_")}),
             "findings": _findings_section(data.findings),
             "tuning": data.tuning,
             "fleet": fleet_section(data.fleet)}
    body = [_header(data), _nav(by_workload, {k: bool(v) for k, v in extra.items()}),
            _problems(stats, data.failures, data.warnings), *sections, *extra.values(),
            '<h2 id="study">Study file</h2>', f"<pre>{_e(data.study_text)}</pre>",
            _overrides_note(data.env),
            f"<p><small>hvbench {_e(data.env.get('hvbench_version', '?'))}, run "
            f"{_e(data.run_id)}</small></p>"]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
            f"<title>hvbench {_e(data.study_name)} {_e(data.run_id)}</title>\n"
            f"<style>{_STYLE}</style></head>\n<body>\n"
            + "\n".join(part for part in body if part) + "\n</body></html>\n")
