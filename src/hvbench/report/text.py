"""Numbers and tables as text, the same for the terminal, the HTML report and the JSON
that carries table text: a mean with its 95 % CI to the precision the interval allows,
% of native, CoV, a phase's table rows and the report's warnings grouped by message.

The summaries themselves come from :mod:`hvbench.analysis.summaries`."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hvbench.analysis.metrics import detail_metrics, lookup
from hvbench.analysis.stats import Summary, percent_of_summary
from hvbench.analysis.summaries import PhaseStats, compared_to_native, fmt_value

__all__ = [
    "CI_DIGITS",
    "MIN_COV_N",
    "TextTable",
    "cov_text",
    "grouped_warnings",
    "mean_ci_text",
    "pct_of_native_text",
    "phase_rows",
    "stats_texts",
    "warning_lines",
]


@dataclass(frozen=True)
class TextTable:
    """A table as text: what the terminal, the HTML report and the JSON all carry."""

    title: str
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    #: How many leading columns are labels (left-aligned).
    left: int = 1
    note: str = ""


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
