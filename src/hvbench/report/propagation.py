"""The propagation tables' text (seed 000): each size series' fits as equations with
R² and intercept, the NIC lines, and each propagation phase's share of the time.

The fits, series and shares are computed by :mod:`hvbench.analysis.trends` and
:mod:`hvbench.analysis.shares`; this module only writes them out."""

from __future__ import annotations

from collections.abc import Sequence

from hvbench.analysis.shares import PhaseShare
from hvbench.analysis.stats import Fit, Summary
from hvbench.analysis.summaries import Row
from hvbench.analysis.trends import (
    PROPAGATION_STEPS,
    ReferenceLine,
    SizeSeries,
    fits_for,
    link_rates,
    nic_lines,
    propagation_series,
    propagation_workloads,
    transfer_series,
)

__all__ = [
    "FIT_HEADERS",
    "SHARE_HEADERS",
    "fit_equation",
    "fit_polynomial",
    "fit_rows",
    "propagation_fit_rows",
    "share_rows",
]


FIT_HEADERS = ("platform", "method", "fit", "equation (x in bytes, y in s)", "R²",
               "intercept: the manager's overhead s")


def _number(value: float) -> str:
    return f"{value:.4g}"


def fit_polynomial(coefficients: Sequence[float]) -> str:
    """``y = c0 + c1·x [+ c2·x²]`` with 4 significant digits (ascending powers)."""
    terms = [_number(coefficients[0])]
    for power, coefficient in enumerate(coefficients[1:], start=1):
        sign = "-" if coefficient < 0 else "+"
        x = "x" if power == 1 else "x²"
        terms.append(f"{sign} {_number(abs(coefficient))}·{x}")
    return f"y = {' '.join(terms)}"


def fit_equation(fit: Fit) -> str:
    """``y = c0 + c1·x [+ c2·x²]`` with 4 significant digits, then ``R² = ...``."""
    return f"{fit_polynomial(fit.coefficients)}  (R² = {fit.r_squared:.4f})"


def fit_rows(series: Sequence[SizeSeries], references: Sequence[ReferenceLine] = ()
             ) -> list[list[str]]:
    """Each series' linear and quadratic fits (:data:`FIT_HEADERS`): equation, R², and
    the intercept, which is the time at size 0, i.e. what the manager spends besides
    moving bytes (seed 000 §5.1 reads it as the IaaS manager's overhead); then one row
    per reference line (``line rate``)."""
    rows = [[s.platform, s.method, kind, fit_polynomial(fit.coefficients),
             f"{fit.r_squared:.4f}", f"{fit.coefficients[0]:.4g}"]
            for s in series for kind, fit in fits_for(s.points)]
    rows += [[ref.label, "-", "line rate", fit_polynomial((ref.intercept, ref.slope)), "1",
              f"{ref.intercept:.4g}"] for ref in references]
    return rows


def propagation_fit_rows(rows: Sequence[Row]) -> list[list[str]]:
    """:func:`fit_rows` of every propagation series of the run (total time), then of its
    transfer-only series (:func:`transfer_series`), then its NIC lines, as the HTML
    report's table (empty when the run has no propagation point)."""
    workloads = propagation_workloads(rows)
    series = propagation_series(rows, workloads)
    if not any(s.points for s in series):
        return []
    return fit_rows([*series, *transfer_series(rows, workloads)],
                    nic_lines(link_rates(rows, workloads)))


#: The columns of :func:`share_rows`.
SHARE_HEADERS = ("platform", "method", "image size", "n",
                 *(f"{step} %" for step in PROPAGATION_STEPS), "propagation s")


def _mean_ci(summary: Summary | None, digits: int) -> str:
    if summary is None:
        return "-"
    if summary.n < 2:
        return f"{summary.mean:.{digits}f}"
    return f"{summary.mean:.{digits}f} ± {summary.ci95_high - summary.mean:.{digits}f}"


def _size(size: float | None) -> str:
    return "-" if size is None else f"{size / (1 << 20):g} MiB"


def share_rows(shares: Sequence[PhaseShare]) -> list[list[str]]:
    """:data:`SHARE_HEADERS` rows: each phase's share as ``mean ± 95 % CI half-width``
    (the mean alone for one repetition), then the propagation time in seconds."""
    return [[s.platform, s.method, _size(s.image_size), str(s.total.n),
             *(_mean_ci(s.shares.get(step), 1) for step in PROPAGATION_STEPS),
             _mean_ci(s.total, 2)] for s in shares]
