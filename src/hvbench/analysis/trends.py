"""Time against size: least-squares trends of self-timed phases, as data both reports
print (the terminal's tables, the HTML report's figures and tables).

Pure: functions of stored rows (and numbers) that return series and fits (their
equations and table rows: :mod:`hvbench.report.fits`). A workload kind whose phases
time themselves builds its series from these (the propagation kind: total time and
transfer time against the image size, seed 000 Fig. 3; the lifecycle kind: ``create``
time against the image size, seed 003 Fig. 13; each in its package of
:mod:`hvbench.kinds`).

A phase's duration is its ``duration_s``, else the runner's ``phase_wall_s``. A
series' method and x come from the cells' identity fields (schema version 2: the
``method`` and ``image_size`` their kind declares), never from names.

A linear fit needs 2 distinct sizes, a quadratic one 3. The intercept (the time at
size 0) is what is spent besides moving bytes (for propagation: the manager's
overhead).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hvbench.analysis.stats import Fit, linear_fit, poly2_fit
from hvbench.analysis.summaries import Row

__all__ = [
    "DURATION_METRICS",
    "ReferenceLine",
    "SizeSeries",
    "duration_metric",
    "fits_for",
    "identity_of_cells",
    "per_repetition",
    "phase_duration",
    "size_series",
    "workloads_with",
]

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


def workloads_with(rows: Sequence[Row], phases: Sequence[str]) -> list[str]:
    """Workloads with at least two of ``phases`` that carry a duration."""
    found: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        if row.phase in phases and row.metric in DURATION_METRICS:
            found[row.workload].add(row.phase)
    return [w for w, seen in found.items() if len(seen) >= 2]


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


def per_repetition(rows: Sequence[Row], workloads: Sequence[str]
                    ) -> dict[tuple[str, str, int], dict[tuple[str, str], float]]:
    """(platform, workload, repetition) -> (phase, metric) -> value."""
    out: dict[tuple[str, str, int], dict[tuple[str, str], float]] = defaultdict(dict)
    for row in rows:
        if row.workload in workloads:
            out[(row.platform, row.workload, row.repetition)][(row.phase, row.metric)] = \
                row.value
    return out


def identity_of_cells(rows: Sequence[Row]) -> dict[tuple[str, str], tuple[str, float | None]]:
    """(platform, workload) -> (method, image size) from the cells' identity fields;
    a cell without a method is labelled with its workload's name."""
    return {(r.platform, r.workload): (r.method or r.workload, r.image_size) for r in rows}


def phase_duration(values: Mapping[tuple[str, str], float], phase: str) -> float | None:
    """The duration of ``phase`` among (phase, metric) values (:data:`DURATION_METRICS`)."""
    return next((values[(phase, m)] for m in DURATION_METRICS if (phase, m) in values), None)


def size_series(points: Mapping[tuple[str, str], list[tuple[float, float]]]
                ) -> list[SizeSeries]:
    """One series per (platform, method) of ``points``."""
    return [SizeSeries(platform, method, found) for (platform, method), found in points.items()]
