"""Time against size: the propagation and lifecycle conventions and their least-squares
trends, as data both reports print (the terminal's tables, the HTML report's figures
and tables).

Pure: functions of stored rows (and numbers) that return series and fits (their
equations and table rows: :mod:`hvbench.report.propagation`).

Propagation convention (seed 000 §5.1). A workload whose phases include at least two
of ``initial``, ``transfer`` and ``terminal`` with a duration (``duration_s``, else
``phase_wall_s``) is a propagation workload. Per repetition, y is the sum of those
phases' durations and x the image size: its ``size_bytes`` metric (any phase), or when
that is 0 or missing (a cache hit moves nothing) the cell's ``image_size``. One series
per (platform, method): the method is the cell's ``method`` identity field (the
transfer method, ``scp``); repetitions with ``cache_hit`` = 1 form their own series
(``overlay (cache hit)``). Each stored ``link_rate_bits`` gives the line of
a NIC at that rate, y = x·8 / rate (seed 000 Fig. 3b's theoretical NIC). Fig. 3(b)'s
own series are the ``transfer`` phase alone against the bytes moved
(:func:`transfer_series`, labelled ``<method> (transfer only)``); cache hits move
nothing and are left out of them.

Lifecycle convention (seed 003 Fig. 13). A workload with at least two of ``create``
... ``exit`` carrying a duration; x is the cell's ``image_size`` (an overlay's own file
is a few hundred kB whatever the image), else ``create``'s ``size_bytes``; y is
``create``'s duration; the method is the cell's ``method`` (``qcow2-overlay``).

The identity fields come from the store (schema version 2), never from names.

A linear fit needs 2 distinct sizes, a quadratic one 3. The intercept (the time at
size 0) is what is spent besides moving bytes: the manager's overhead for propagation.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hvbench.analysis.stats import Fit, linear_fit, poly2_fit
from hvbench.analysis.summaries import Row
from hvbench.model.workload import kind_phases

__all__ = [
    "DURATION_METRICS",
    "PROPAGATION_STEPS",
    "TRANSFER_ONLY",
    "ReferenceLine",
    "SizeSeries",
    "fits_for",
    "lifecycle_series",
    "lifecycle_workloads",
    "link_rates",
    "nic_lines",
    "propagation_series",
    "propagation_workloads",
    "transfer_series",
]

#: The phases whose durations add up to a propagation (``shutdown`` is not part of it).
PROPAGATION_STEPS = ("initial", "transfer", "terminal")
#: A phase's duration: its ``duration_s``, else the runner's ``phase_wall_s``.
DURATION_METRICS = ("duration_s", "phase_wall_s")
# -- fits ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class ReferenceLine:
    """A known line drawn dashed grey across the trend plot, e.g. the time a NIC needs
    at its line rate (seed 000 Fig. 3b's "theoretical NIC"): ``y = c0 + c1·x``."""

    label: str
    intercept: float
    slope: float


def fits_for(points: Sequence[tuple[float, float]]) -> list[tuple[str, Fit]]:
    """The linear and quadratic least-squares fits the points allow (2 and 3 distinct x)."""
    xs = [p[0] for p in points]
    ys = [p[1] for p in points]
    distinct = len(set(xs))
    out: list[tuple[str, Fit]] = []
    if distinct >= 2:
        out.append(("linear", linear_fit(xs, ys)))
    if distinct >= 3:
        out.append(("quadratic", poly2_fit(xs, ys)))
    return out


# -- which workloads, which method and size --------------------------------------------------
def duration_metric(metrics: set[str]) -> str | None:
    """The metric that holds a phase's duration, of those present."""
    return next((m for m in DURATION_METRICS if m in metrics), None)


def _workloads_with(rows: Sequence[Row], phases: Sequence[str]) -> list[str]:
    """Workloads with at least two of ``phases`` that carry a duration."""
    found: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        if row.phase in phases and row.metric in DURATION_METRICS:
            found[row.workload].add(row.phase)
    return [w for w, seen in found.items() if len(seen) >= 2]


def propagation_workloads(rows: Sequence[Row]) -> list[str]:
    """Workloads with at least two of :data:`PROPAGATION_STEPS` that carry a duration."""
    return _workloads_with(rows, PROPAGATION_STEPS)


def lifecycle_workloads(rows: Sequence[Row]) -> list[str]:
    """Workloads with at least two of the lifecycle's phases (``create`` ... ``exit``)
    that carry a duration."""
    return _workloads_with(rows, kind_phases("lifecycle"))


# -- series ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class SizeSeries:
    """Points (size in bytes, seconds) of one (platform, method) for a trend."""

    platform: str
    method: str
    points: list[tuple[float, float]]

    @property
    def label(self) -> str:
        return f"{self.platform} {self.method}"


def _per_repetition(rows: Sequence[Row], workloads: Sequence[str]
                    ) -> dict[tuple[str, str, int], dict[tuple[str, str], float]]:
    """(platform, workload, repetition) -> (phase, metric) -> value."""
    out: dict[tuple[str, str, int], dict[tuple[str, str], float]] = defaultdict(dict)
    for row in rows:
        if row.workload in workloads:
            out[(row.platform, row.workload, row.repetition)][(row.phase, row.metric)] = \
                row.value
    return out


def _facts(rows: Sequence[Row]) -> dict[tuple[str, str], tuple[str, float | None]]:
    """(platform, workload) -> (method, image size) from the cells' identity fields;
    a cell without a method is labelled with its workload's name."""
    return {(r.platform, r.workload): (r.method or r.workload, r.image_size) for r in rows}


def _duration(values: Mapping[tuple[str, str], float], phase: str) -> float | None:
    return next((values[(phase, m)] for m in DURATION_METRICS if (phase, m) in values), None)


def _size_series(points: Mapping[tuple[str, str], list[tuple[float, float]]]
                 ) -> list[SizeSeries]:
    return [SizeSeries(platform, method, found) for (platform, method), found in points.items()]


def propagation_series(rows: Sequence[Row], workloads: Sequence[str]) -> list[SizeSeries]:
    """Per (platform, method): (image size, initial + transfer + terminal seconds) of
    every repetition. The size is the ``size_bytes`` moved, or on a cache hit (nothing
    moved) the cell's ``image_size``; cache hits form their own series (``overlay
    (cache hit)``): they do not move the image, so they are a different trend.
    Repetitions without any size are left out."""
    points: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    facts = _facts(rows)
    for (platform, workload, _), values in _per_repetition(rows, workloads).items():
        method, image_size = facts[(platform, workload)]
        moved = next((v for (_, m), v in values.items() if m == "size_bytes"), None)
        size = moved if moved else image_size
        durations = [d for p in PROPAGATION_STEPS if (d := _duration(values, p)) is not None]
        if size is None or not durations:
            continue
        hit = any(m == "cache_hit" and v >= 1 for (_, m), v in values.items())
        method += " (cache hit)" if hit else ""
        points[(platform, method)].append((size, sum(durations)))
    return _size_series(points)


#: The suffix of a transfer-only series' method (seed 000 Fig. 3b).
TRANSFER_ONLY = " (transfer only)"


def transfer_series(rows: Sequence[Row], workloads: Sequence[str]) -> list[SizeSeries]:
    """Per (platform, method): (bytes moved, ``transfer`` seconds) of every repetition
    that moved bytes (seed 000 Fig. 3b, next to the theoretical NIC); the method is
    labelled ``<method> (transfer only)``. Cache hits (nothing moved) and repetitions
    without a transfer duration or ``size_bytes`` are left out."""
    points: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    facts = _facts(rows)
    for (platform, workload, _), values in _per_repetition(rows, workloads).items():
        moved = values.get(("transfer", "size_bytes"))
        seconds = _duration(values, "transfer")
        hit = values.get(("transfer", "cache_hit"), 0.0) >= 1
        if moved and seconds is not None and not hit:
            method = facts[(platform, workload)][0] + TRANSFER_ONLY
            points[(platform, method)].append((moved, seconds))
    return _size_series(points)


def lifecycle_series(rows: Sequence[Row], workloads: Sequence[str]) -> list[SizeSeries]:
    """Per (platform, method): (image size, ``create`` seconds) of every repetition
    (seed 003 Fig. 13). The size is the cell's ``image_size`` (an overlay's file is a
    few hundred kB whatever the image), else the ``create`` phase's ``size_bytes``."""
    points: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    facts = _facts(rows)
    for (platform, workload, _), values in _per_repetition(rows, workloads).items():
        method, image_size = facts[(platform, workload)]
        size = image_size or values.get(("create", "size_bytes"))
        seconds = _duration(values, "create")
        if size and seconds is not None:
            points[(platform, method)].append((size, seconds))
    return _size_series(points)


def link_rates(rows: Sequence[Row], workloads: Sequence[str]) -> list[float]:
    """The distinct ``link_rate_bits`` (bit/s) the workloads' transfers stored."""
    return sorted({r.value for r in rows if r.workload in workloads
                   and r.metric == "link_rate_bits" and r.value > 0})


def nic_lines(rates: Sequence[float]) -> list[ReferenceLine]:
    """The time a NIC at each line rate needs for x bytes: x·8 / rate (seed 000 Fig.
    3b's theoretical NIC; no protocol reaches it)."""
    return [ReferenceLine(f"theoretical NIC {rate / 1e6:g} Mbit/s", 0.0, 8.0 / rate)
            for rate in rates]

