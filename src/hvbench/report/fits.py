"""Least-squares fits as text: each size series' linear and quadratic fits as
equations with R² and intercept, and reference lines (a NIC at its line rate), for the
tables of the kinds whose phases time themselves (propagation, seed 000 Fig. 3;
lifecycle, seed 003 Fig. 13) and the plots' legends.

The series and fits are computed by :mod:`hvbench.analysis.trends`; this module only
writes them out."""

from __future__ import annotations

from collections.abc import Sequence

from hvbench.analysis.stats import Fit
from hvbench.analysis.trends import ReferenceLine, SizeSeries, fits_for

__all__ = [
    "FIT_HEADERS",
    "fit_equation",
    "fit_polynomial",
    "fit_rows",
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
