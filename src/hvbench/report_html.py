"""The HTML report: one self-contained file people read in a browser.

Pure: :func:`render_html` takes a :class:`ReportInput` (what the store holds about one
run) and returns the document as text; the CLI reads the store and writes the file.
Every figure is an SVG made by :mod:`hvbench.plots`, embedded as a ``data:`` image; a
Content-Security-Policy meta tag forbids every other source, so opening the file
requests nothing, offline or not.

What it shows, top to bottom: the environment (host, QEMU, accelerator) with a red
banner when guests ran under TCG; stability warnings and failed repetitions; per
workload, grouped bars of the throughput metric (platforms x phases, 95 % CI error bars,
seed 000 Figs. 5-10), the same as % of native, a summary table and the host disk table
(iostat -x columns, seed 001 Tables 1-2); time series from the monitors, one panel per
cell and phase; propagation figures when a workload follows the convention of
:data:`PROPAGATION_PHASES`; the study file.

Propagation convention. A workload whose phases include at least two of ``initial``,
``transfer`` and ``terminal`` is a propagation workload: each phase's duration
(``duration_s``, else ``phase_wall_s``) is stacked per cell (seed 000 Fig. 4), and when
its repetitions carry a ``size_bytes`` metric (in any phase), the total duration
against that size gets linear and quadratic least-squares trend lines with their
equations and R² (seed 000 Fig. 3), one series per platform.
"""

from __future__ import annotations

import base64
import fnmatch
import html
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from hvbench.errors import SpecError
from hvbench.model.study import PROFILE_PHASES
from hvbench.plots import (
    BarChart,
    Interval,
    Line,
    Panel,
    TrendSeries,
    fit_equation,
    fits_for,
    grouped_bars,
    stacked_bars,
    time_series_grid,
    trend_lines,
)
from hvbench.report import (
    MAIN_LABELS,
    MAX_COLUMNS,
    RELATIVE_METRICS,
    TCG_BANNER,
    PhaseStats,
    Row,
    phase_stats,
    warnings_for,
)
from hvbench.stats import Summary, percent_of_summary, summarize

__all__ = [
    "AUTO_SERIES",
    "CSP",
    "HOST_DISK_COLUMNS",
    "PROPAGATION_PHASES",
    "ReportInput",
    "SeriesChoice",
    "bar_charts",
    "grouped_warnings",
    "host_disk_rows",
    "parse_series_choice",
    "propagation_points",
    "propagation_segments",
    "render_html",
    "series_figures",
]

#: The only sources the page may use: inline styles and data: images.
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
PROPAGATION_PHASES = ("initial", "transfer", "terminal")
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
_KNOWN_PHASES = tuple(dict.fromkeys(
    [p for phases in PROFILE_PHASES.values() for p in phases] + list(PROPAGATION_PHASES)))
_SIZE_PHASE = re.compile(r"^(\d+)kB$")


class SampleLike(Protocol):
    """One stored time-series point (the store's SampleRow)."""

    @property
    def cell(self) -> str: ...
    @property
    def repetition(self) -> int: ...
    @property
    def phase(self) -> str: ...
    @property
    def monitor(self) -> str: ...
    @property
    def t(self) -> float: ...
    @property
    def values(self) -> Mapping[str, Any]: ...


@dataclass(frozen=True)
class SeriesChoice:
    """Which time series to draw: a monitor name (fnmatch pattern) and the value keys
    summed per point, e.g. ``host.disk.*`` and ``("r_mb_s", "w_mb_s")``."""

    monitor: str
    keys: tuple[str, ...]
    label: str


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
def phase_key(phase: str) -> tuple[int, int, str]:
    """Profiles' phase order (write before read), web sizes by size, others by name."""
    if phase in _KNOWN_PHASES:
        return (1, _KNOWN_PHASES.index(phase), phase)
    match = _SIZE_PHASE.match(phase)
    if match:
        return (2, int(match.group(1)), phase)
    return (0 if phase == "boot" else 3, 0, phase)


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
        for metric, phases in by_metric.items():
            label = MAIN_LABELS[metric]
            values = {(p.phase, platform): _interval(s) for p in phases
                      for platform, s in p.metrics[metric].items()}
            out.append((workload, _chart(f"{workload}: {label}, mean with 95 % CI", label,
                                         platforms, [p.phase for p in phases], values)))
            if native and metric in RELATIVE_METRICS:
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
def _fmt(value: float) -> str:
    return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.3g}"


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
                cells.append(_fmt(per[platform].mean) if platform in per else "-")
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
                         f"{_fmt(s.mean)} ± {_fmt(s.ci95_half_width)} {MAIN_LABELS[metric]}",
                         _pct_text(per, platform, native, metric),
                         "-" if s.cov_pct is None else f"{s.cov_pct:.1f}", str(s.n),
                         *(_mean_text(item, m, platform)
                           for m in ("iops", "lat_p99_ms", "cpu_pct"))])
    return rows


def _pct_text(per: Mapping[str, Summary], platform: str, native: str | None,
              metric: str) -> str:
    if not native or native not in per or metric not in RELATIVE_METRICS:
        return "-"
    interval = _pct_interval(per[platform], per[native])
    if interval is None:
        return "-"
    if interval.low is None or interval.high is None:
        return f"{interval.value:.1f} %"
    return f"{interval.value:.1f} % [{interval.low:.0f}-{interval.high:.0f}]"


def _mean_text(item: PhaseStats, metric: str, platform: str) -> str:
    per = item.metrics.get(metric, {})
    return _fmt(per[platform].mean) if platform in per else "-"


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


# -- propagation ---------------------------------------------------------------------------
def _duration_metric(metrics: set[str]) -> str | None:
    return next((m for m in ("duration_s", "phase_wall_s") if m in metrics), None)


def propagation_workloads(rows: Sequence[Row]) -> list[str]:
    """Workloads with at least two of :data:`PROPAGATION_PHASES` that carry a duration."""
    phases: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        if row.phase in PROPAGATION_PHASES and row.metric in ("duration_s", "phase_wall_s"):
            phases[row.workload].add(row.phase)
    return [w for w, found in phases.items() if len(found) >= 2]


def propagation_segments(rows: Sequence[Row], workloads: Sequence[str]
                         ) -> tuple[list[str], list[str], dict[tuple[str, str], float]]:
    """(bars = the cells of the workloads, segments = phases, mean duration per
    (cell, phase))."""
    values: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(
        lambda: defaultdict(list))
    for row in rows:
        if row.workload in workloads and row.phase in PROPAGATION_PHASES:
            values[(row.cell, row.phase)][row.metric].append(row.value)
    bars, means = [], {}
    for (cell, phase), metrics in values.items():
        metric = _duration_metric(set(metrics))
        if metric:
            means[(cell, phase)] = summarize(metrics[metric]).mean
            bars.append(cell)
    segments = [p for p in PROPAGATION_PHASES if any(k[1] == p for k in means)]
    return list(dict.fromkeys(bars)), segments, means


def propagation_points(rows: Sequence[Row], workloads: Sequence[str]) -> list[TrendSeries]:
    """Per platform: (size_bytes, total propagation duration) of every repetition of
    the given workloads that stored a ``size_bytes``; platforms in order of appearance."""
    sizes: dict[tuple[str, str, int], float] = {}
    durations: dict[tuple[str, str, int], dict[str, dict[str, float]]] = defaultdict(
        lambda: defaultdict(dict))
    for row in rows:
        if row.workload not in workloads:
            continue
        key = (row.platform, row.workload, row.repetition)
        if row.metric == "size_bytes":
            sizes[key] = row.value
        elif row.phase in PROPAGATION_PHASES and row.metric in ("duration_s", "phase_wall_s"):
            durations[key][row.phase][row.metric] = row.value
    points: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for key, size in sizes.items():
        per_phase = durations.get(key, {})
        total = sum(m.get("duration_s", m.get("phase_wall_s", 0.0))
                    for m in per_phase.values())
        if per_phase:
            points[key[0]].append((size, total))
    return [TrendSeries(platform, sorted(p)) for platform, p in points.items()]


# -- HTML ----------------------------------------------------------------------------------
_STYLE = """
body{font-family:DejaVu Sans,Verdana,sans-serif;margin:1.5em auto;max-width:1400px;
color:#222;padding:0 1em}
h1{font-size:1.5em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;margin:.6em 0;font-size:.85em}
td,th{border:1px solid #ccc;padding:.2em .5em;text-align:right}
th{background:#f2f2f2}td.l,th.l{text-align:left}
.banner{background:#c00;color:#fff;font-weight:bold;padding:.7em 1em;margin:1em 0;
font-size:1.1em}
.warn{background:#fff6d6;border-left:4px solid #e0a800;padding:.4em 1em}
.fail{background:#fde8e8;border-left:4px solid #c00;padding:.4em 1em}
figure{margin:1em 0}figure img{max-width:100%;height:auto;display:block}
figcaption{font-size:.85em;color:#555}pre{background:#f7f7f7;padding:1em;overflow:auto}
nav a{margin-right:1em}details{display:inline}summary{cursor:pointer;color:#555}
"""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _img(svg: str, alt: str) -> str:
    data = base64.b64encode(svg.encode()).decode("ascii")
    return f'<img alt="{_e(alt)}" src="data:image/svg+xml;base64,{data}">'


def _figure(svg: str, alt: str, caption: str | None = None) -> str:
    text = f"<figcaption>{_e(caption)}</figcaption>" if caption else ""
    return f"<figure>{_img(svg, alt)}{text}</figure>"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1) -> str:
    head = "".join(f'<th class="{"l" if i < left else ""}">{_e(h)}</th>'
                   for i, h in enumerate(headers))
    body = "".join("<tr>" + "".join(f'<td class="{"l" if i < left else ""}">{_e(c)}</td>'
                                    for i, c in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


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
    parts = [f"<h1>hvbench report: {_e(data.study_name)}</h1>",
             _table(["", ""], meta, left=2)]
    if data.env.get("accelerator") == "tcg":
        parts.append(f'<div class="banner" role="alert">{_e(TCG_BANNER)}</div>')
    parts += ['<h2 id="environment">Environment</h2>', _table(["", ""], env, left=2)]
    return "\n".join(parts)


def grouped_warnings(warnings: Sequence[str]) -> list[tuple[str, list[str]]]:
    """(message, where it applies) for report warnings (``where: message``), one entry
    per distinct message in order of first appearance: with 28 platforms and 2
    repetitions the same advice would otherwise fill pages."""
    groups: dict[str, list[str]] = {}
    for warning in warnings:
        where, sep, message = warning.partition(": ")
        if not sep:
            where, message = "", warning
        groups.setdefault(message, []).append(where)
    return list(groups.items())


def _warning_item(message: str, places: Sequence[str]) -> str:
    if len(places) == 1:
        return f"<li>{_e(places[0])}: {_e(message)}</li>"
    return (f"<li>{_e(message)} <details><summary>{len(places)} places</summary>"
            f"{_e(', '.join(places))}</details></li>")


def _problems(stats: Sequence[PhaseStats], failures: Sequence[tuple[str, int, str]]) -> str:
    warnings = grouped_warnings(warnings_for(stats))
    parts = ['<h2 id="warnings">Stability warnings</h2>']
    if warnings:
        parts.append('<div class="warn"><ul>' + "".join(_warning_item(message, places)
                                                         for message, places in warnings)
                     + "</ul></div>")
    else:
        parts.append("<p>None: every throughput metric has at least 3 repetitions and a "
                     "CoV within 10 %.</p>")
    if failures:
        parts.append('<div class="fail"><p>Failed repetitions (not in the numbers):</p><ul>'
                     + "".join(f"<li>{_e(c)} rep {r + 1}: {_e(err)}</li>"
                               for c, r, err in failures) + "</ul></div>")
    return "\n".join(parts)


def _workload_section(workload: str, items: Sequence[PhaseStats],
                      charts: Sequence[BarChart], native: str | None) -> str:
    parts = [f'<h2 id="{_anchor("w", workload)}">Workload {_e(workload)}</h2>']
    parts += [_figure(grouped_bars(chart), chart.title,
                      _PCT_CAPTION if chart.reference else _CAPTION) for chart in charts]
    parts += ["<h3>Summary</h3>", _table(SUMMARY_HEADERS, summary_rows(items, native), left=2)]
    disk = host_disk_rows(items, native)
    if disk:
        parts += ["<h3>Host disk (iostat -x of the device under the work directory)</h3>",
                  _table(["phase", "platform", *(h for _, h in HOST_DISK_COLUMNS)], disk,
                         left=2)]
    return "\n".join(parts)


_CAPTION = ("Bars: means over the repetitions; whiskers: 95 % confidence intervals of "
            "the mean (Student t), none with a single repetition.")
_PCT_CAPTION = ("Bars: mean in % of the native mean; whiskers: 95 % interval of the ratio "
                "(delta method); dashed line: native.")


def _anchor(prefix: str, name: str) -> str:
    return f"{prefix}-" + re.sub(r"[^A-Za-z0-9_-]+", "-", name)


def _series_section(data: ReportInput) -> str:
    cells = dict(data.cells) or {r.cell: (r.platform, r.workload) for r in data.rows}
    figures = series_figures(data.samples, cells, data.series)
    if not figures:
        return ""
    parts = ['<h2 id="series">Time series</h2>',
             "<p>One panel per cell, one line per repetition; 10 Hz monitor samples "
             "(iperf3: its own per-second intervals).</p>"]
    for workload, phase, chosen, panels in figures:
        if panels:
            title = f"{workload} / {phase}: {chosen.label}"
            parts.append(_figure(time_series_grid(title, chosen.label, panels), title,
                                 f"{title}; one panel per cell, one line per repetition."))
    return "\n".join(parts)


def _propagation_section(rows: Sequence[Row]) -> str:
    workloads = propagation_workloads(rows)
    if not workloads:
        return ""
    parts = ['<h2 id="propagation">Propagation</h2>']
    bars, segments, values = propagation_segments(rows, workloads)
    title = "time per propagation phase (mean over repetitions)"
    parts.append(_figure(stacked_bars(title, "s", bars, segments, values), title,
                         "One bar per cell, stacked from its phases' durations."))
    series = propagation_points(rows, workloads)
    if any(s.points for s in series):
        title = "total propagation time against size, with least-squares trends"
        parts.append(_figure(trend_lines(title, "size (bytes)", "s", series), title,
                             "Points: repetitions; solid: linear fit; dashed: quadratic fit."))
        fits = [[s.label, kind, fit_equation(fit)] for s in series
                for kind, fit in fits_for(s.points)]
        parts.append(_table(["platform", "fit", "equation"], fits, left=3))
    return "\n".join(parts)


def _nav(workloads: Iterable[str], series: bool, propagation: bool) -> str:
    links = [("environment", "Environment"), ("warnings", "Warnings")]
    links += [(_anchor("w", w), f"Workload {w}") for w in workloads]
    links += [("series", "Time series")] if series else []
    links += [("propagation", "Propagation")] if propagation else []
    links.append(("study", "Study file"))
    return "<nav>" + "".join(f'<a href="#{a}">{_e(t)}</a>' for a, t in links) + "</nav>"


def render_html(data: ReportInput) -> str:
    """The whole report as one HTML document (UTF-8 text, no external reference)."""
    stats = phase_stats(data.rows)
    by_workload = _by_workload(stats)
    charts: dict[str, list[BarChart]] = defaultdict(list)
    for workload, chart in bar_charts(stats, data.natives):
        charts[workload].append(chart)
    sections = [_workload_section(w, items, charts[w], data.natives.get(w))
                for w, items in by_workload.items()]
    series = _series_section(data)
    propagation = _propagation_section(data.rows)
    body = [_header(data), _nav(by_workload, bool(series), bool(propagation)),
            _problems(stats, data.failures), *sections, series, propagation,
            '<h2 id="study">Study file</h2>', f"<pre>{_e(data.study_text)}</pre>",
            f"<p><small>hvbench {_e(data.env.get('hvbench_version', '?'))}, run "
            f"{_e(data.run_id)}</small></p>"]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
            f"<title>hvbench {_e(data.study_name)} {_e(data.run_id)}</title>\n"
            f"<style>{_STYLE}</style></head>\n<body>\n"
            + "\n".join(part for part in body if part) + "\n</body></html>\n")
