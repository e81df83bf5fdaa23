"""Per-phase summaries of a run's measurements, the phase order and the stability
warnings.

Pure: rows in, dataclasses out; their text is :mod:`hvbench.report.text`.
:func:`fmt_value` stays here because analysis's own sentences (a verdict's evidence, an
error naming a value) quote numbers the way the tables print them. Which metric heads a
phase comes from the metric catalogue (:mod:`hvbench.analysis.metrics`).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from hvbench.analysis.metrics import lookup, main_metric
from hvbench.analysis.stats import Summary, stability_warnings, summarize
from hvbench.model.workload import ordered_phases

__all__ = [
    "PhaseStats",
    "Row",
    "compared_to_native",
    "fmt_value",
    "phase_key",
    "phase_stats",
    "warnings_for",
]



def _known_phases() -> tuple[str, ...]:
    """Phases in the order a reader expects them: each registered workload kind's, in
    the order they happen (:func:`~hvbench.model.workload.ordered_phases`: the disk
    profiles' write before read, propagation's steps, then the lifecycle's), then
    ``idle``. Read when called: the kinds register after this module is imported."""
    return (*ordered_phases(), "idle")
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
    known = _known_phases()
    if phase in known:
        return (1, known.index(phase), phase)
    match = _SIZE_PHASE.match(phase)
    if match:
        return (2, int(match.group(1)), phase)
    return (0 if phase == "boot" else 3, 0, phase)


def fmt_value(value: float) -> str:
    """A number as the tables print it: whole above 1000, else 3 significant digits
    (999.6 rounds up to 1000 there: whole too, never ``1e+03``)."""
    short = f"{value:.3g}"
    return f"{value:.0f}" if abs(value) >= 1000 or "e+" in short else short


def compared_to_native(metric: str) -> bool:
    """True for metrics the reports show in % of the native platform."""
    spec = lookup(metric)
    return spec is not None and spec.vs_native


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

