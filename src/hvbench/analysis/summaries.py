"""Per-phase summaries of a run's measurements and the text of their table cells.

Pure: rows in, dataclasses and strings out. The terminal (``report.tables``), the HTML
report and ``--format json`` all read these, so a number is formatted one way
everywhere. Which metric heads a phase and which rows follow it comes from the metric
catalogue (:mod:`hvbench.analysis.metrics`).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from hvbench.analysis.metrics import detail_metrics, lookup, main_metric
from hvbench.analysis.stats import Summary, percent_of_summary, stability_warnings, summarize
from hvbench.model.study import LIFECYCLE_PHASES, PROFILE_PHASES, PROPAGATION_PHASES

__all__ = [
    "PhaseStats",
    "Row",
    "TextTable",
    "compared_to_native",
    "cov_text",
    "fmt_value",
    "grouped_warnings",
    "mean_ci_text",
    "pct_of_native_text",
    "phase_key",
    "phase_rows",
    "phase_stats",
    "stats_texts",
    "warning_lines",
    "warnings_for",
]

#: Phases in the order a reader expects them: the profiles' (write before read), then
#: propagation's and the lifecycle's steps in the order they happen. ``shutdown`` ends
#: both, so it goes after the lifecycle's ``agent`` (propagation's ``terminal`` comes
#: before ``create`` anyway, and the two kinds never share a workload).
_KNOWN_PHASES = tuple(dict.fromkeys(
    [p for phases in PROFILE_PHASES.values() for p in phases]
    + [p for p in PROPAGATION_PHASES if p != "shutdown"] + list(LIFECYCLE_PHASES)
    + ["idle"]))
_SIZE_PHASE = re.compile(r"^(\d+)kB$")


class Row(Protocol):
    """One stored measurement with its dimensions (the store's MeasurementRow)."""

    @property
    def cell(self) -> str: ...
    @property
    def platform(self) -> str: ...
    @property
    def workload(self) -> str: ...
    @property
    def repetition(self) -> int: ...
    @property
    def phase(self) -> str: ...
    @property
    def metric(self) -> str: ...
    @property
    def value(self) -> float: ...
    @property
    def unit(self) -> str: ...
    # The cell's identity fields (store schema version 2): None when unknown.
    @property
    def base_platform(self) -> str | None: ...
    @property
    def scenario(self) -> str | None: ...
    @property
    def method(self) -> str | None: ...
    @property
    def image_size(self) -> float | None: ...


@dataclass(frozen=True)
class TextTable:
    """A table as text: what the terminal, the HTML report and the JSON all carry."""

    title: str
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    #: How many leading columns are labels (left-aligned).
    left: int = 1
    note: str = ""


@dataclass
class PhaseStats:
    """Summaries of every metric of one workload phase, per platform."""

    workload: str
    phase: str
    platforms: list[str]
    metrics: dict[str, dict[str, Summary]] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)

    def throughput_metric(self) -> str | None:
        """The catalogue's headline metric among this phase's metrics."""
        return main_metric(self.metrics)


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


def phase_key(phase: str) -> tuple[int, int, str]:
    """Profiles' phase order (write before read), web sizes by size, others by name."""
    if phase in _KNOWN_PHASES:
        return (1, _KNOWN_PHASES.index(phase), phase)
    match = _SIZE_PHASE.match(phase)
    if match:
        return (2, int(match.group(1)), phase)
    return (0 if phase == "boot" else 3, 0, phase)


def fmt_value(value: float) -> str:
    """A number as the tables print it: whole above 1000, else 3 significant digits
    (999.6 rounds up to 1000 there: whole too, never ``1e+03``)."""
    short = f"{value:.3g}"
    return f"{value:.0f}" if abs(value) >= 1000 or "e+" in short else short


#: Significant digits of an interval's half-width; the value is printed to the same
#: decimal place, so neither claims more precision than the other.
CI_DIGITS = 2
#: Fewest values from which a CoV is shown and judged: of two values it is noise.
MIN_COV_N = 3


def _decimals(half: float) -> int:
    """Decimals that give ``half`` :data:`CI_DIGITS` significant digits (0 from 10 on:
    whole numbers are not rounded to tens)."""
    return max(0, CI_DIGITS - 1 - math.floor(math.log10(half)))


def mean_ci_text(summary: Summary, unit: str = "") -> str:
    """``mean ± half-width`` of the 95 % CI, both to the decimal place of the
    half-width's :data:`CI_DIGITS` significant digits; a single repetition shows its
    value and ``(n=1)`` (a CI of ± 0 would claim a precision one value cannot give)."""
    tail = f" {unit}" if unit else ""
    if summary.n < 2:
        return f"{fmt_value(summary.mean)}{tail} (n={summary.n})"
    half = summary.ci95_half_width
    # Equal values leave rounding noise (1e-14) in the sd: print it as the 0 it is.
    if half <= 1e-9 * abs(summary.mean):
        return f"{fmt_value(summary.mean)} ± 0{tail}"
    places = _decimals(half)
    return f"{summary.mean:.{places}f} ± {half:.{places}f}{tail}"


def stats_texts(summary: Summary) -> tuple[str, str, str]:
    """(median, min, max) as the tables print values (``--stats``)."""
    return fmt_value(summary.median), fmt_value(summary.min), fmt_value(summary.max)


def pct_of_native_text(per: Mapping[str, Summary], platform: str, native: str) -> str:
    """``% of native [low-high]`` (delta-method interval, clipped at 0: a ratio of
    throughputs is never negative); ``-`` without a value or with a native mean of 0."""
    if platform not in per or native not in per or per[native].mean == 0:
        return "-"
    pct, low, high = percent_of_summary(per[platform], per[native])
    if low is None or high is None:
        return f"{pct:.1f} %"
    return f"{pct:.1f} % [{max(low, 0.0):.0f}-{high:.0f}]"


def cov_text(summary: Summary | None) -> str:
    """The CoV in % with one decimal; ``-`` without one or with fewer than
    :data:`MIN_COV_N` values."""
    if summary is None or summary.cov_pct is None or summary.n < MIN_COV_N:
        return "-"
    return f"{summary.cov_pct:.1f}"


def compared_to_native(metric: str) -> bool:
    """True for metrics the reports show in % of the native platform."""
    spec = lookup(metric)
    return spec is not None and spec.vs_native


def _detail_metric(stats: PhaseStats, name: str, pattern: bool) -> str | None:
    if not pattern:
        return name if name in stats.metrics else None
    spec = lookup(name)
    return next((m for m in sorted(stats.metrics) if lookup(m) is spec), None)


def phase_rows(stats: PhaseStats, native: str | None, *, extra: bool = False
               ) -> list[tuple[str, list[str]]]:
    """Label and one text per platform for every row of a phase's table: the headline
    mean ± CI, % of native, CoV, with ``extra`` its median, min and max, the
    catalogue's detail rows present, n."""
    rows: list[tuple[str, list[str]]] = []
    main = stats.throughput_metric()
    if main:
        per = stats.metrics[main]
        label = lookup(main)
        short = label.short_label if label else main
        rows.append((f"{short} mean ± 95% CI", [
            mean_ci_text(per[p]) if p in per else "-" for p in stats.platforms]))
        if native and native in per and compared_to_native(main):
            rows.append(("% of native", [pct_of_native_text(per, p, native)
                                         for p in stats.platforms]))
        rows.append(("CoV %", [cov_text(per.get(p)) for p in stats.platforms]))
        if extra:
            texts = [stats_texts(per[p]) if p in per else ("-", "-", "-")
                     for p in stats.platforms]
            rows += [(f"{short} {name}", [t[i] for t in texts])
                     for i, name in enumerate(("median", "min", "max"))]
    for spec in detail_metrics():
        metric = _detail_metric(stats, spec.name, spec.is_pattern)
        if metric:
            per = stats.metrics[metric]
            rows.append((spec.label, [fmt_value(per[p].mean) if p in per else "-"
                                      for p in stats.platforms]))
    if main:
        rows.append(("n", [str(stats.metrics[main][p].n) if p in stats.metrics[main] else "0"
                           for p in stats.platforms]))
    return rows


def warnings_for(stats: Sequence[PhaseStats],
                 planned: Mapping[tuple[str, str], int] | None = None) -> list[str]:
    """Stability warnings of every throughput metric, each ``where (detail): message``;
    ``planned``: (platform, workload) -> the repetitions the run planned for that cell
    (absent: unknown), so that a count the user chose is not second-guessed. A boot
    phase counts boots, not repetitions: its count is not judged against the plan."""
    out = []
    for phase in stats:
        metric = phase.throughput_metric()
        if metric is None:
            continue
        for platform, summary in phase.metrics[metric].items():
            count = (planned or {}).get((platform, phase.workload))
            if phase.phase == "boot" and count is not None:
                count = summary.n
            for detail, warning in stability_warnings(summary, metric=metric,
                                                      planned=count):
                out.append(f"{phase.workload}/{phase.phase} on {platform} ({detail}): "
                           f"{warning}")
    return out


def grouped_warnings(warnings: Sequence[str]) -> list[tuple[str, list[str]]]:
    """(message, the places it applies to) for report warnings (``where: message``),
    one entry per distinct message in order of first appearance: with 28 platforms
    and 2 repetitions the same advice would otherwise fill pages."""
    groups: dict[str, list[str]] = {}
    for warning in warnings:
        where, sep, message = warning.partition(": ")
        if not sep:
            where, message = "", warning
        groups.setdefault(message, []).append(where)
    return list(groups.items())


def warning_lines(warnings: Sequence[str]) -> list[str]:
    """One line per distinct warning: ``where: message`` for one place, else
    ``message: place, place, ...``."""
    out = []
    for message, places in grouped_warnings(warnings):
        if len(places) == 1:
            out.append(f"{places[0]}: {message}" if places[0] else message)
        else:
            out.append(f"{message}; at {', '.join(places)}")
    return out
