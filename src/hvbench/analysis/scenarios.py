"""What the scenario studies add to a report: degradation against alone, the aggregated
throughput ratio of co-located web servers, guests started on demand, CPU weights, the
neighbours' QEMU threads (CPU, wait, blocked, executions, context switches, wake-ups),
and the stability (CoV) of every sampled metric over the measured window.

Pure: functions of stored rows and samples that return dataclasses; the tables and the
JSON shape made of them are :mod:`hvbench.report.scenarios`.

Conventions of a scenario run (see docs/reports.md):

- a qemu platform ``vm`` is measured alone (platform ``vm``) and in each scenario
  (platform ``vm@<scenario>``); the cells are ``vm/web`` and ``vm@idle3/web``;
- a scenario cell's measurements are the workload's own metrics plus monitor summaries:
  ``nb<i>.<class>.<metric>`` (a neighbour's QEMU threads), ``nb<i>.load.replies_per_s``
  and ``nb<i>.load.file_kb`` (a web neighbour's load generator during the window),
  ``nb<i>.load.goodput_mbit_s`` (an iperf3 neighbour), ``ondemand.<k>.asked_at_s`` and
  ``ondemand.<k>.startup_s`` (guests started during the window), ``dip.*`` (the
  target's throughput dip, :func:`hvbench.analysis.stats.dip_metrics`);
- monitor ``throughput`` samples are the target's traffic in 1 s buckets
  (``{"value": ...}``);
- the stored platform definition of a scenario cell has a ``scenario`` key with the
  scenario, including ``weights`` {io, target, neighbours, cpus, target_quota_pct}.
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from hvbench.analysis.metrics import (
    direction_of,
    main_metric,
    main_metrics,
    short_label,
    vs_alone_metrics,
)
from hvbench.analysis.stats import Summary, percent_of_summary, series_cov_pct, summarize
from hvbench.analysis.summaries import Row, phase_key
from hvbench.model.rates import relative_pct

__all__ = [
    "NEIGHBOUR_THREAD_COLUMNS",
    "AggregatedRatio",
    "CovRow",
    "Degradation",
    "NeighbourRatio",
    "NeighbourThreads",
    "OnDemandRow",
    "OnDemandSeries",
    "OnDemandStart",
    "RateSweep",
    "RateSweepRow",
    "ScenarioReport",
    "WeightsTable",
    "aggregated_ratios",
    "alone_baselines",
    "build_scenario_report",
    "cov_rows",
    "degradation_rows",
    "file_phase",
    "higher_is_better",
    "identities",
    "is_main_cov",
    "jain_index",
    "neighbour_threads",
    "ondemand_rows",
    "ondemand_series",
    "rate_sweeps",
    "weights_label",
    "weights_tables",
]

_NB_LOAD = re.compile(r"^(nb\d+)\.load\.(replies_per_s|goodput_mbit_s)$")
_ONDEMAND = re.compile(r"^ondemand\.(\d+)\.(asked_at_s|startup_s)$")
_THREAD_MONITOR = re.compile(r"^(qemu|nb\d+)$")
_TAP_KEY = re.compile(r"^[\w.-]+-tap\d+\.(rx|tx)_mbit_s$")
#: Thread metrics whose CoV the main table shows: utilisation, run-queue wait and
#: blocked time of the vCPUs (seed 003 Fig. 11's UT, WA and BL) and the main loop's CPU.
_MAIN_THREAD_KEYS = ("vcpu.cpu_pct", "vcpu.wait_pct", "vcpu.blocked_pct", "main.cpu_pct")
#: Rows of the weights table for each thread monitor: (class, metric, label).
_WEIGHT_THREAD_ROWS = (
    ("main", "cpu_pct", "main loop CPU %"), ("main", "wait_pct", "main loop wait %"),
    ("main", "exec_per_s", "main loop exec/s"),
    ("main", "cpu_ms_per_exec", "main loop CPU ms per exec"),
    ("vcpu", "cpu_pct", "vCPU CPU %"), ("vcpu", "wait_pct", "vCPU wait %"),
    ("vcpu", "exec_per_s", "vCPU exec/s"), ("vcpu", "cpu_ms_per_exec", "vCPU CPU ms per exec"),
)
MISSING_BASELINE = "no alone baseline"


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


# -- names and directions ------------------------------------------------------------------
def identities(rows: Iterable[Row]) -> dict[str, tuple[str, str | None]]:
    """Platform name -> (base platform, scenario or None), from the cells' identity
    fields the rows carry (a row without them is its platform alone)."""
    return {r.platform: (r.base_platform or r.platform, r.scenario) for r in rows}


def higher_is_better(metric: str) -> bool | None:
    """True for throughputs, False for latencies and times, None without a direction:
    the catalogue's direction, which ``hvbench compare`` applies too."""
    direction = direction_of(metric)
    return None if direction == "neutral" else direction == "higher"


def _summary(values: Iterable[float]) -> Summary | None:
    found = list(values)
    return summarize(found) if found else None


def _metric_summary(metrics: Mapping[str, Mapping[int, float]], metric: str
                    ) -> Summary | None:
    """The summary of one metric over the repetitions; None when it is absent."""
    return _summary(metrics.get(metric, {}).values())


def _by_rep(rows: Iterable[Row]) -> dict[tuple[str, str, str], dict[str, dict[int, float]]]:
    """(platform, workload, phase) -> metric -> repetition -> value."""
    out: dict[tuple[str, str, str], dict[str, dict[int, float]]] = defaultdict(
        lambda: defaultdict(dict))
    for row in rows:
        out[(row.platform, row.workload, row.phase)][row.metric][row.repetition] = row.value
    return out


def _cell_names(rows: Iterable[Row]) -> dict[tuple[str, str], str]:
    """(platform, workload) -> the cell's name."""
    return {(r.platform, r.workload): r.cell for r in rows}


# -- (a) degradation against alone -------------------------------------------------------
@dataclass(frozen=True)
class Degradation:
    """One metric of one (workload, phase) in one scenario against the base platform
    alone. ``pct`` > 0 means worse: (alone - scenario) / alone x 100 for metrics where
    higher is better, (scenario - alone) / alone x 100 where lower is better."""

    platform: str
    scenario: str
    workload: str
    phase: str
    metric: str
    higher_is_better: bool
    alone: Summary | None
    other: Summary
    pct: float | None
    pct_low: float | None = None
    pct_high: float | None = None
    #: The platform name the scenario's cells are stored under (``vm@idle3``).
    measured: str = ""

    @property
    def pct_of_alone(self) -> float | None:
        """The scenario's mean in % of alone (100 = no change)."""
        if self.alone is None or self.alone.mean == 0:
            return None
        return self.other.mean / self.alone.mean * 100.0


def _compared_metrics(metrics: Iterable[str]) -> list[str]:
    """The phase's throughput metric (not a boot time: the target boots before its
    scenario starts) and the latency-like metrics it has, in that order."""
    present = set(metrics)
    main = main_metric(present, boot=False)
    return ([main] if main else []) + [m for m in vs_alone_metrics() if m in present]


def _degradation(where: tuple[str, str, str, str], metric: str, alone: Summary | None,
                 other: Summary, measured: str) -> Degradation:
    """``where``: (base platform, scenario, workload, phase); ``measured``: the
    platform name the scenario's cells are stored under."""
    higher = higher_is_better(metric) is not False
    if alone is None or alone.mean == 0:
        return Degradation(*where, metric, higher, alone, other, None, measured=measured)
    pct, low, high = percent_of_summary(other, alone)
    if higher:
        # Worse = less than alone: 100 - % of alone; the interval flips with the sign.
        return Degradation(*where, metric, higher, alone, other, 100.0 - pct,
                           None if high is None else 100.0 - high,
                           None if low is None else 100.0 - low, measured)
    return Degradation(*where, metric, higher, alone, other, pct - 100.0,
                       None if low is None else low - 100.0,
                       None if high is None else high - 100.0, measured)


def degradation_rows(rows: Iterable[Row]) -> list[Degradation]:
    """Every scenario platform's (workload, phase, metric) against its base platform
    alone, ordered by base platform, workload, phase, metric and scenario (as they
    appear). A missing alone measurement gives ``alone`` = None and no percentage."""
    rows = list(rows)
    values = _by_rep(rows)
    who = identities(rows)
    # Platforms in order of appearance; a base platform where it or a scenario of it
    # appears first (its alone cells may be missing).
    order = {who[p]: i for i, p in enumerate(dict.fromkeys(k[0] for k in values))}
    bases = {b: i for i, b in enumerate(dict.fromkeys(b for b, _ in order))}
    out: list[Degradation] = []
    for (platform, workload, phase), metrics in values.items():
        base, scenario = who[platform]
        if scenario is None:
            continue
        alone = values.get((base, workload, phase), {})
        for metric in _compared_metrics(metrics):
            other = summarize(list(metrics[metric].values()))
            out.append(_degradation((base, scenario, workload, phase), metric,
                                    _metric_summary(alone, metric), other, platform))
    metric_order = [*main_metrics(), *vs_alone_metrics()]
    return sorted(out, key=lambda d: (bases[d.platform], d.workload,
                                      phase_key(d.phase), metric_order.index(d.metric),
                                      order[(d.platform, d.scenario)]))


# -- (b) aggregated throughput ratio -------------------------------------------------------
@dataclass(frozen=True)
class NeighbourRatio:
    """A web neighbour's load during the target's window against its alone baseline."""

    label: str
    file_kb: float | None
    rate: Summary
    baseline: float | None
    ratio: Summary | None


@dataclass(frozen=True)
class AggregatedRatio:
    """Seed 003 Fig. 20: target replies/s / its alone best + each web neighbour's
    replies/s / the alone best for its file size, per repetition, then summarised."""

    cell: str
    platform: str
    workload: str
    phase: str
    target: Summary | None
    target_baseline: float | None
    target_ratio: Summary | None
    neighbours: tuple[NeighbourRatio, ...]
    aggregated: Summary | None
    missing: tuple[str, ...] = ()
    #: Jain's fairness index of the sides' replies/s (seed 003 Figs 15-17), when every
    #: web neighbour serves the target's file size (identical guests); else None.
    fairness: Summary | None = None


def alone_baselines(rows: Iterable[Row]) -> dict[tuple[str, str], float]:
    """(platform alone, phase) -> the highest mean ``replies_s`` over the web workloads
    measured alone (seed 003 uses each file size's maximum single-VM throughput)."""
    values: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for row in rows:
        if row.metric == "replies_s" and row.scenario is None:
            values[(row.platform, row.workload, row.phase)].append(row.value)
    out: dict[tuple[str, str], float] = {}
    for (platform, _, phase), found in values.items():
        mean = sum(found) / len(found)
        out[(platform, phase)] = max(out.get((platform, phase), mean), mean)
    return out


def file_phase(file_kb: float) -> str:
    """The phase name a web workload gives its file size (``4kB``)."""
    return f"{file_kb:g}kB"


def _neighbour_ratio(label: str, metrics: Mapping[str, Mapping[int, float]], base: str,
                     baselines: Mapping[tuple[str, str], float]
                     ) -> tuple[NeighbourRatio, dict[int, float] | None]:
    """The neighbour's summary and its per-repetition ratio (None: a repetition's file
    size has no baseline). Each repetition is divided by the baseline of the file size
    it stored (a study always serves one size; nothing is assumed)."""
    rates = metrics[f"{label}.load.replies_per_s"]
    sizes = metrics.get(f"{label}.load.file_kb", {})
    file_kb = next(iter(sizes.values()), None)
    found = {r: baselines.get((base, file_phase(sizes[r]))) if r in sizes else None
             for r in rates}
    per_rep = ({r: v / b for r, v in rates.items() if (b := found[r])}
               if all(found.values()) else None)
    baseline = found.get(min(rates)) if per_rep else None
    summary = _summary(per_rep.values()) if per_rep else None
    return (NeighbourRatio(label, file_kb, summarize(list(rates.values())), baseline,
                           summary), per_rep)


def _missing_text(what: str, base: str, phase: str) -> str:
    return f"{MISSING_BASELINE} for {what}: no replies_s of {base} alone in phase {phase}"


def _web_neighbours(metrics: Iterable[str]) -> list[str]:
    """``nb<i>`` labels of the web neighbours (those with a replies/s load), in order."""
    return sorted({m.group(1) for m in map(_NB_LOAD.match, metrics)
                   if m and m.group(2) == "replies_per_s"}, key=_nb_index)


def jain_index(values: Sequence[float]) -> float | None:
    """Jain's fairness index (Σx)² / (n Σx²): 1 when every side gets the same, 1/n when
    one side gets everything; None for no values or all zero."""
    square_sum = sum(v * v for v in values)
    if not values or square_sum <= 0:
        return None
    return sum(values) ** 2 / (len(values) * square_sum)


def _fairness(target: Mapping[int, float], metrics: Mapping[str, Mapping[int, float]],
              phase: str) -> Summary | None:
    """Jain's index of the target's and each web neighbour's replies/s per repetition,
    summarised; None unless every neighbour serves the target's file size (with
    different sizes equal replies/s are not a fair share)."""
    labels = _web_neighbours(metrics)
    sizes = [metrics.get(f"{nb}.load.file_kb", {}) for nb in labels]
    if not target or not labels or any(
            not size or {file_phase(v) for v in size.values()} != {phase} for size in sizes):
        return None
    sides = [target, *(metrics[f"{nb}.load.replies_per_s"] for nb in labels)]
    reps = set.intersection(*(set(side) for side in sides))
    found = [j for r in sorted(reps) if (j := jain_index([side[r] for side in sides]))]
    return _summary(found)


def _sum_per_rep(parts: Sequence[Mapping[int, float]]) -> Summary | None:
    """The per-repetition sum of the parts, over the repetitions they all have."""
    if not parts:
        return None
    reps = set.intersection(*(set(p) for p in parts))
    return _summary(sum(p[r] for p in parts) for r in sorted(reps))


def _aggregate(cell: str, key: tuple[str, str, str], base: str,
               metrics: Mapping[str, Mapping[int, float]],
               baselines: Mapping[tuple[str, str], float]) -> AggregatedRatio:
    platform, workload, phase = key
    target = metrics.get("replies_s", {})
    target_baseline = baselines.get((base, phase))
    target_ratio = ({r: v / target_baseline for r, v in target.items()}
                    if target and target_baseline else None)
    missing: list[str] = []
    if target_ratio is None:
        missing.append(_missing_text("the target", base, phase) if target
                       else "the target has no replies_s")
    parts = [target_ratio] if target_ratio else []
    neighbours = []
    for label in _web_neighbours(metrics):
        nb, per_rep = _neighbour_ratio(label, metrics, base, baselines)
        neighbours.append(nb)
        if per_rep is None:
            where = file_phase(nb.file_kb) if nb.file_kb is not None else "(no file_kb)"
            missing.append(_missing_text(label, base, where))
        else:
            parts.append(per_rep)
    # Without every baseline a sum would silently leave a side out: no aggregate then.
    aggregated = None if missing else _sum_per_rep(parts)
    return AggregatedRatio(cell, platform, workload, phase, _summary(target.values()),
                           target_baseline,
                           _summary(target_ratio.values()) if target_ratio else None,
                           tuple(neighbours), aggregated, tuple(missing),
                           _fairness(target, metrics, phase))


def _nb_index(label: str) -> int:
    return int(label.removeprefix("nb"))


def aggregated_ratios(rows: Sequence[Row]) -> list[AggregatedRatio]:
    """One entry per (cell, phase) with a web neighbour (``nb<i>.load.replies_per_s``)."""
    baselines = alone_baselines(rows)
    cells = _cell_names(rows)
    who = identities(rows)
    out = []
    for key, metrics in _by_rep(rows).items():
        if _web_neighbours(metrics):
            cell = cells.get(key[:2], f"{key[0]}/{key[1]}")
            out.append(_aggregate(cell, key, who[key[0]][0], metrics, baselines))
    return sorted(out, key=lambda a: (a.workload, phase_key(a.phase), a.platform))


# -- (b') the aggregated ratio over a neighbour's rate (seed 003 Fig. 20) ---------------------
@dataclass(frozen=True)
class RateSweepRow:
    """One neighbour rate of a sweep: the rates as declared (``30%``, ``120``; one per
    web neighbour), the scenario cell's platform and its aggregated ratio."""

    rates: tuple[str, ...]
    platform: str
    ratio: AggregatedRatio


@dataclass(frozen=True)
class RateSweep:
    """The scenarios that differ only in their web neighbours' rates, for one (base
    platform, workload, phase), ordered by rate."""

    platform: str
    workload: str
    phase: str
    rows: tuple[RateSweepRow, ...]


def _declared_rate(value: Any) -> str:
    pct = relative_pct(value) if isinstance(value, str) else None
    return f"{pct:g}%" if pct is not None else f"{float(value):g}"


def _rate_key(text: str) -> tuple[bool, float]:
    """Relative rates first, then requests/s, each ascending."""
    pct = relative_pct(text)
    return (pct is None, pct if pct is not None else float(text))


def _sweep_point(definition: Mapping[str, Any]) -> tuple[str, tuple[str, ...]] | None:
    """(the scenario without its name and web neighbours' rates, as JSON; those rates)
    of a stored platform definition, or None without web neighbours."""
    scenario = definition.get("scenario")
    if not isinstance(scenario, Mapping):
        return None
    rates: list[str] = []
    neighbours = []
    for nb in scenario.get("neighbours") or ():
        web = isinstance(nb, Mapping) and nb.get("role") == "net" and nb.get("load") == "web"
        if web:
            rates.append(_declared_rate(nb.get("rate")))
        neighbours.append({k: v for k, v in nb.items() if k != "rate"} if web else nb)
    if not rates:
        return None
    rest = {k: v for k, v in scenario.items() if k not in ("name", "neighbours")}
    return json.dumps({**rest, "neighbours": neighbours}, sort_keys=True), tuple(rates)


def rate_sweeps(ratios: Sequence[AggregatedRatio], rows: Sequence[Row],
                platforms: Mapping[str, Mapping[str, Any]]) -> list[RateSweep]:
    """The aggregated ratios grouped into sweeps: scenario cells of one base platform,
    workload and phase whose stored scenario definitions are the same but for their web
    neighbours' rates (a ``rate = [...]`` axis), when at least two rates were measured.
    Identity comes from the stored definitions, never from scenario names."""
    who = identities(rows)
    grouped: dict[tuple[str, str, str, str], list[RateSweepRow]] = defaultdict(list)
    for ratio in ratios:
        point = _sweep_point(platforms.get(ratio.platform, {}))
        if point is None:
            continue
        base = who.get(ratio.platform, (ratio.platform, None))[0]
        grouped[(base, ratio.workload, ratio.phase, point[0])].append(
            RateSweepRow(point[1], ratio.platform, ratio))
    out = []
    for (base, workload, phase, _), found in grouped.items():
        if len({r.rates for r in found}) < 2:
            continue
        found.sort(key=lambda r: ([_rate_key(t) for t in r.rates], r.platform))
        out.append(RateSweep(base, workload, phase, tuple(found)))
    return sorted(out, key=lambda w: (w.platform, w.workload, phase_key(w.phase)))


# -- (c) guests started on demand ----------------------------------------------------------
@dataclass(frozen=True)
class OnDemandStart:
    """The k-th guest started on demand: when it was asked for and its start-up time."""

    index: int
    asked_at: Summary | None
    startup: Summary


@dataclass(frozen=True)
class OnDemandRow:
    """Start-up times and the target's dip of one (cell, phase) over its repetitions."""

    cell: str
    platform: str
    workload: str
    phase: str
    starts: tuple[OnDemandStart, ...]
    depth_pct: Summary | None
    length_s: Summary | None
    min_normalized: Summary | None
    baseline: Summary | None
    n: int


def _start_indexes(metrics: Iterable[str]) -> list[int]:
    """The k of every ``ondemand.<k>.*`` metric, in order."""
    return sorted({int(m.group(1)) for m in map(_ONDEMAND.match, metrics) if m})


def ondemand_rows(rows: Sequence[Row]) -> list[OnDemandRow]:
    """Every (cell, phase) whose window started guests (``ondemand.<k>.startup_s``)."""
    cells = _cell_names(rows)
    out = []
    for (platform, workload, phase), metrics in _by_rep(rows).items():
        starts = _start_indexes(metrics)
        if not starts:
            continue
        items = tuple(OnDemandStart(k, _metric_summary(metrics, f"ondemand.{k}.asked_at_s"),
                                    startup) for k in starts
                      if (startup := _metric_summary(metrics, f"ondemand.{k}.startup_s")))
        reps = {r for m, v in metrics.items() if _ONDEMAND.match(m) for r in v}
        out.append(OnDemandRow(
            cells.get((platform, workload), f"{platform}/{workload}"), platform, workload,
            phase, items, _metric_summary(metrics, "dip.depth_pct"),
            _metric_summary(metrics, "dip.length_s"),
            _metric_summary(metrics, "dip.min_normalized"),
            _metric_summary(metrics, "dip.baseline"), len(reps)))
    return sorted(out, key=lambda o: (o.workload, phase_key(o.phase), o.platform))


@dataclass(frozen=True)
class OnDemandSeries:
    """One repetition's normalized 1 s throughput of a window with on-demand starts."""

    cell: str
    platform: str
    workload: str
    phase: str
    repetition: int
    xs: tuple[float, ...]
    ys: tuple[float, ...]
    asked_at: tuple[float, ...]
    ready_at: tuple[float, ...]


def ondemand_series(rows: Sequence[Row], samples: Iterable[SampleLike],
                    cells: Mapping[str, tuple[str, str]]) -> list[OnDemandSeries]:
    """Monitor ``throughput`` samples divided by the repetition's ``dip.baseline`` (seed
    003 Fig. 14's normalized throughput), with when each guest was asked for and was
    ready. Repetitions without a baseline are left out (nothing to normalize by)."""
    per_rep: dict[tuple[str, int, str], dict[str, float]] = defaultdict(dict)
    for row in rows:
        if row.metric == "dip.baseline" or _ONDEMAND.match(row.metric):
            per_rep[(row.cell, row.repetition, row.phase)][row.metric] = row.value
    points: dict[tuple[str, int, str], list[tuple[float, float]]] = defaultdict(list)
    for s in samples:
        if s.monitor == "throughput" and "value" in s.values and s.cell in cells:
            points[(s.cell, s.repetition, s.phase)].append((s.t, float(s.values["value"])))
    out = []
    for key, found in sorted(points.items()):
        metrics = per_rep.get(key, {})
        baseline = metrics.get("dip.baseline")
        if not baseline:
            continue
        found.sort()
        asked = {k: metrics[f"ondemand.{k}.asked_at_s"] for k in _start_indexes(metrics)
                 if f"ondemand.{k}.asked_at_s" in metrics}
        ready = [a + metrics[f"ondemand.{k}.startup_s"] for k, a in asked.items()
                 if f"ondemand.{k}.startup_s" in metrics]
        cell, rep, phase = key
        out.append(OnDemandSeries(cell, *cells[cell], phase, rep,
                                  tuple(t for t, _ in found),
                                  tuple(v / baseline for _, v in found),
                                  tuple(asked.values()), tuple(ready)))
    return out


# -- (d) CoV over the measured window --------------------------------------------------------
@dataclass(frozen=True)
class CovRow:
    """CoV (sd / mean, %) of one sampled key over each repetition's window, and their
    summary over the repetitions (seed 003 §4.3, Figs. 11-12)."""

    cell: str
    platform: str
    workload: str
    phase: str
    monitor: str
    key: str
    per_repetition: tuple[float, ...]
    summary: Summary
    points: int


def cov_rows(samples: Iterable[SampleLike], cells: Mapping[str, tuple[str, str]]
             ) -> list[CovRow]:
    """Every numeric (cell, phase, monitor, key) series of the samples. A repetition
    whose series has fewer than 2 points or a zero mean has no CoV and is left out."""
    series: dict[tuple[str, str, str, str], dict[int, list[float]]] = defaultdict(
        lambda: defaultdict(list))
    for s in samples:
        if s.cell not in cells:
            continue
        for key, value in s.values.items():
            if isinstance(value, int | float) and not isinstance(value, bool) \
                    and math.isfinite(value):
                series[(s.cell, s.phase, s.monitor, key)][s.repetition].append(float(value))
    out = []
    for (cell, phase, monitor, key), reps in series.items():
        covs = [c for _, values in sorted(reps.items())
                if (c := series_cov_pct(values)) is not None]
        if covs:
            out.append(CovRow(cell, *cells[cell], phase, monitor, key, tuple(covs),
                              summarize(covs), sum(len(v) for v in reps.values())))
    return sorted(out, key=lambda c: (c.workload, phase_key(c.phase), c.platform,
                                      c.monitor, c.key))


def is_main_cov(row: CovRow) -> bool:
    """The series the CoV table shows: the target's 1 s throughput, every tap's
    Mbit/s, host CPU busy, and the QEMU (``qemu``, ``nb<i>``) thread metrics of
    :data:`_MAIN_THREAD_KEYS`."""
    if row.monitor == "throughput":
        return True
    if row.monitor == "net":
        return bool(_TAP_KEY.match(row.key))
    if row.monitor == "host.cpu":
        return row.key == "busy_pct"
    return bool(_THREAD_MONITOR.match(row.monitor)) and row.key in _MAIN_THREAD_KEYS


# -- CPU weights (seed 003 Table 5) ----------------------------------------------------------
def weights_label(definition: Mapping[str, Any]) -> str | None:
    """``io:target:neighbours`` (``0.5:1:1``) of a stored platform definition whose
    scenario sets weights; None otherwise."""
    scenario = definition.get("scenario")
    weights = scenario.get("weights") if isinstance(scenario, Mapping) else None
    if not isinstance(weights, Mapping):
        return None
    return ":".join(f"{float(weights.get(k) or 1.0):g}" for k in ("io", "target", "neighbours"))


def _weights_key(label: str) -> tuple[float, ...]:
    return tuple(float(v) for v in label.split(":"))


@dataclass(frozen=True)
class WeightsTable:
    """One (base platform, workload, phase): metrics as rows, one column per weights
    variant (ordered by io, target, neighbours weight), as seed 003 Table 5."""

    platform: str
    workload: str
    phase: str
    columns: tuple[tuple[str, str], ...]
    rows: tuple[tuple[str, tuple[Summary | None, ...]], ...]


_LOAD_LABELS = {"replies_per_s": "load replies/s", "goodput_mbit_s": "load goodput Mbit/s"}


def _thread_rows(present: set[str]) -> list[tuple[str, str]]:
    """(metric, label) of the target's (``qemu``) then each neighbour's thread metrics."""
    monitors = sorted({m.split(".")[0] for m in present
                       if _THREAD_MONITOR.match(m.split(".")[0])},
                      key=lambda n: -1 if n == "qemu" else _nb_index(n))
    rows = []
    for monitor in monitors:
        who = "target QEMU" if monitor == "qemu" else monitor
        rows += [(f"{monitor}.{cls}.{metric}", f"{who} {label}")
                 for cls, metric, label in _WEIGHT_THREAD_ROWS
                 if f"{monitor}.{cls}.{metric}" in present]
    return rows


def _weight_rows(metrics_per_column: Sequence[Mapping[str, Mapping[int, float]]]
                 ) -> list[tuple[str, str]]:
    """(metric, label) rows present in any column, in the table's order: throughputs
    (the target's, each neighbour's load, their sum), NICs, host CPU, threads."""
    present: set[str] = set().union(*(set(m) for m in metrics_per_column))
    rows: list[tuple[str, str]] = []
    main = main_metric(present, boot=False)
    if main:
        rows.append((main, f"target {short_label(main)}"))
    loads = sorted((m for m in present if _NB_LOAD.match(m)),
                   key=lambda m: (_nb_index(m.split(".")[0]), m))
    rows += [(m, f"{m.split('.')[0]} {_LOAD_LABELS[m.rsplit('.', 1)[1]]}") for m in loads]
    if main == "replies_s" and any(m.endswith("replies_per_s") for m in loads):
        rows.append(("aggregate", "aggregated replies/s"))
    rows += [(m, f"tap {m.removeprefix('net.')}") for m in sorted(present)
             if m.startswith("net.") and _TAP_KEY.match(m.removeprefix("net."))]
    if "host.cpu.busy_pct" in present:
        rows.append(("host.cpu.busy_pct", "host CPU busy %"))
    return rows + _thread_rows(present)


def _weights_cell(metrics: Mapping[str, Mapping[int, float]], metric: str
                  ) -> Summary | None:
    """One cell of the weights table; ``aggregate`` is the target's replies/s plus every
    web neighbour's, per repetition (seed 003's aggregated throughput)."""
    if metric != "aggregate":
        return _metric_summary(metrics, metric)
    if "replies_s" not in metrics:
        return None
    return _sum_per_rep([metrics["replies_s"], *(
        metrics[f"{nb}.load.replies_per_s"] for nb in _web_neighbours(metrics))])


def weights_tables(rows: Sequence[Row], platforms: Mapping[str, Mapping[str, Any]]
                   ) -> list[WeightsTable]:
    """For every (base platform, workload, phase) measured in scenarios with weights."""
    labels = {p: label for p, d in platforms.items() if (label := weights_label(d))}
    grouped: dict[tuple[str, str, str], list[tuple[str, Mapping[str, Mapping[int, float]]]]]
    grouped = defaultdict(list)
    who = identities(rows)
    for (platform, workload, phase), metrics in _by_rep(rows).items():
        if platform in labels:
            grouped[(who[platform][0], workload, phase)].append((platform, metrics))
    out = []
    for (base, workload, phase), found in grouped.items():
        found.sort(key=lambda item: (_weights_key(labels[item[0]]), item[0]))
        table_rows = []
        for metric, label in _weight_rows([m for _, m in found]):
            table_rows.append((label, tuple(_weights_cell(m, metric) for _, m in found)))
        if not table_rows:
            continue  # a phase without any weight-relevant metric (e.g. boot)
        out.append(WeightsTable(base, workload, phase,
                                tuple((labels[p], who[p][1] or p) for p, _ in found),
                                tuple(table_rows)))
    return sorted(out, key=lambda w: (w.platform, w.workload, phase_key(w.phase)))


# -- neighbours' QEMU threads (seed 003 Figs 11-14, Tables 2 and 4) -------------------------
#: Columns of the neighbours' thread table: (metric within a class, header).
NEIGHBOUR_THREAD_COLUMNS = (
    ("cpu_pct", "CPU %"), ("wait_pct", "wait %"), ("blocked_pct", "blocked %"),
    ("exec_per_s", "exec/s"), ("cpu_ms_per_exec", "CPU ms/exec"),
    ("vol_cs_per_s", "vol cs/s"), ("invol_cs_per_s", "invol cs/s"),
    ("wakeups_per_s", "wake-ups/s"),
)
#: Thread classes in the table's order; ``total`` is the whole QEMU process.
_NEIGHBOUR_CLASSES = ("vcpu", "main", "iothread", "worker", "vhost", "other", "total")
_NB_THREAD = re.compile(r"^(nb\d+)\.(\w+)\.(\w+)$")


@dataclass(frozen=True)
class NeighbourThreads:
    """One scenario cell's phase: each neighbour's QEMU thread classes (rows) and their
    metrics (:data:`NEIGHBOUR_THREAD_COLUMNS`) over the repetitions. ``wakeups_known``
    is False when some repetition ran on a kernel without schedstats, None when the
    run predates context switch and wake-up sampling (no flag stored)."""

    platform: str
    workload: str
    phase: str
    rows: tuple[tuple[str, str, tuple[Summary | None, ...]], ...]
    wakeups_known: bool | None


def neighbour_threads(rows: Sequence[Row]) -> list[NeighbourThreads]:
    """For every (platform, workload, phase) with a neighbour's thread metrics."""
    out = []
    for (platform, workload, phase), metrics in _by_rep(rows).items():
        found = {(m[1], m[2]) for name in metrics if (m := _NB_THREAD.match(name))}
        labels = sorted({nb for nb, _ in found}, key=_nb_index)
        table_rows = []
        for nb in labels:
            for cls in _NEIGHBOUR_CLASSES:
                if (nb, cls) not in found or f"{nb}.{cls}.cpu_pct" not in metrics:
                    continue
                table_rows.append((nb, cls, tuple(
                    _metric_summary(metrics, f"{nb}.{cls}.{key}")
                    for key, _ in NEIGHBOUR_THREAD_COLUMNS)))
        if not table_rows:
            continue
        flags = [v for nb in labels
                 for v in metrics.get(f"{nb}.total.wakeups_known", {}).values()]
        known = None if not flags else all(flags)
        out.append(NeighbourThreads(platform, workload, phase, tuple(table_rows), known))
    return sorted(out, key=lambda n: (n.platform, n.workload, phase_key(n.phase)))


# -- everything together ---------------------------------------------------------------------
@dataclass(frozen=True)
class ScenarioReport:
    """All scenario tables of one run (empty lists when the run has none)."""

    degradation: list[Degradation] = field(default_factory=list)
    ratios: list[AggregatedRatio] = field(default_factory=list)
    ondemand: list[OnDemandRow] = field(default_factory=list)
    weights: list[WeightsTable] = field(default_factory=list)
    cov: list[CovRow] = field(default_factory=list)
    neighbours: list[NeighbourThreads] = field(default_factory=list)
    sweeps: list[RateSweep] = field(default_factory=list)


def build_scenario_report(rows: Sequence[Row], samples: Sequence[SampleLike] = (),
                          cells: Mapping[str, tuple[str, str]] | None = None,
                          platforms: Mapping[str, Mapping[str, Any]] | None = None
                          ) -> ScenarioReport:
    """Every scenario table of the rows; the CoV needs samples and ``cells`` (cell ->
    (platform, workload); default: from the rows), the weights the stored platform
    definitions."""
    known = dict(cells) if cells else {r.cell: (r.platform, r.workload) for r in rows}
    ratios = aggregated_ratios(rows)
    return ScenarioReport(degradation_rows(rows), ratios, ondemand_rows(rows),
                          weights_tables(rows, platforms or {}), cov_rows(samples, known),
                          neighbour_threads(rows), rate_sweeps(ratios, rows, platforms or {}))

