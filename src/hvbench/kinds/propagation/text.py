"""The propagation kind's part of the terminal and JSON reports (seed 000 Figs. 3-4):
each size series' fits as equations with R² and intercept, the NIC lines, and each
propagation phase's share of the time. The series, fits and shares are
:mod:`.analysis`'s; this module only writes them out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich import box
from rich.table import Table

from hvbench.analysis.stats import Summary
from hvbench.analysis.summaries import Row
from hvbench.kinds.propagation.analysis import (
    PROPAGATION_STEPS,
    PhaseShare,
    link_rates,
    nic_lines,
    phase_shares,
    propagation_series,
    propagation_workloads,
    transfer_series,
)
from hvbench.report.fits import FIT_HEADERS, fit_rows
from hvbench.report.model import KindReport


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


PROPAGATION_FIT_TITLE = ("propagation: total time against image size, least-squares fits "
                         "(seed 000 Fig. 3)")
#: The columns of :func:`hvbench.report.fits.fit_rows`, short enough for an
#: 80-column terminal.
PROPAGATION_FIT_HEADERS = ("platform", "method", "fit", "equation (y s, x bytes)", "R²",
                           "overhead s")
PROPAGATION_FIT_NOTE = ("y = initial + transfer + terminal seconds of a repetition, x = the "
                        "image size in bytes (size_bytes moved, else the variant's size); "
                        "overhead = the intercept, the time at size 0: what the manager "
                        "spends besides moving bytes; the theoretical NIC needs "
                        "x·8 / link_rate_bits seconds. Rows labelled (transfer only) fit the "
                        "transfer phase alone against the bytes moved (seed 000 Fig. 3b).")


def propagation_fit_table(rows: Sequence[Row]) -> Table | None:
    """The propagation fits for the terminal, as the HTML report's table: per
    (platform, method) the linear and quadratic least-squares equation, R² and
    intercept (:func:`hvbench.report.fits.fit_rows`), then the theoretical NIC line of each
    stored ``link_rate_bits``; None when the run has no propagation workload."""
    return propagation_fit_table_of(propagation_fit_rows(rows))


def propagation_fit_table_of(found: Sequence[Sequence[str]]) -> Table | None:
    """:func:`propagation_fit_table` of rows already computed (None for none)."""
    if not found:
        return None
    # No vertical rules and a wide enough equation column: a linear equation stays
    # on one line in 80 columns.
    table = Table(title=PROPAGATION_FIT_TITLE, title_justify="left",
                  caption=PROPAGATION_FIT_NOTE, caption_justify="left", box=box.SIMPLE_HEAD)
    width = min(32, max(len(texts[3]) for texts in found if texts[2] != "quadratic"))
    for index, header in enumerate(PROPAGATION_FIT_HEADERS):
        table.add_column(header, justify="left" if index < 4 else "right", overflow="fold",
                         min_width=width if index == 3 else None)
    for texts in found:
        table.add_row(*texts)
    return table


PROPAGATION_SHARE_TITLE = ("propagation: share of each phase in the propagation time "
                           "(seed 000 Fig. 4)")
PROPAGATION_SHARE_NOTE = ("% of initial + transfer + terminal per repetition, mean ± 95% CI "
                          "over the n repetitions; shutdown is not counted (propagation "
                          "ends with a running guest); propagation s = that sum.")


def propagation_share_table_of(found: Sequence[Sequence[str]]) -> Table | None:
    """The :data:`SHARE_HEADERS` rows for the terminal (None
    for none)."""
    if not found:
        return None
    table = Table(title=PROPAGATION_SHARE_TITLE, title_justify="left",
                  caption=PROPAGATION_SHARE_NOTE, caption_justify="left",
                  box=box.SIMPLE_HEAD)
    for index, header in enumerate(SHARE_HEADERS):
        table.add_column(header, justify="left" if index < 2 else "right", overflow="fold")
    for texts in found:
        table.add_row(*texts)
    return table


def _fits_json(fits: Sequence[Sequence[str]]) -> list[dict[str, str]]:
    keys = ("platform", "method", "fit", "equation", "r_squared", "intercept_s")
    return [dict(zip(keys, row, strict=True)) for row in fits]


@dataclass(frozen=True)
class PropagationPart:
    """The propagation part of a run's report (a
    :class:`~hvbench.report.model.KindPart`): :data:`~hvbench.report.fits.FIT_HEADERS`
    rows of the fits and :data:`SHARE_HEADERS` rows of the phase shares (each empty
    without propagation)."""

    fits: list[list[str]]
    shares: list[list[str]]

    def terminal_tables(self) -> list[Table]:
        """The fit table, then the share table (each only when it has rows)."""
        found = (propagation_fit_table_of(self.fits), propagation_share_table_of(self.shares))
        return [table for table in found if table is not None]

    def json(self) -> dict[str, Any]:
        """``headers`` and ``fits`` (platform, method, fit, equation, R², intercept);
        with propagation cells also ``share_headers`` and ``shares``."""
        out: dict[str, Any] = {"headers": list(FIT_HEADERS), "fits": _fits_json(self.fits)}
        if self.shares:
            out["share_headers"] = list(SHARE_HEADERS)
            out["shares"] = [dict(zip(SHARE_HEADERS, row, strict=True))
                             for row in self.shares]
        return out

    def titles(self) -> list[str]:
        return ((["propagation fits"] if self.fits else [])
                + ([PROPAGATION_SHARE_TITLE] if self.shares else []))


def propagation_part(rows: Sequence[Row]) -> PropagationPart:
    """The propagation part of the report of a run with ``rows``."""
    return PropagationPart(propagation_fit_rows(rows),
                           share_rows(phase_shares(rows, propagation_workloads(rows))))


#: The part as the report registry takes it (JSON key ``propagation``).
TEXT = KindReport("propagation", propagation_part)
