"""The propagation kind's section of the HTML report (seed 000 Figs. 3-4).

A workload whose phases include at least two of ``initial``, ``transfer`` and
``terminal`` is a propagation workload: each phase's duration (``duration_s``, else
``phase_wall_s``) is stacked per cell (Fig. 4), and the total of the three against the
image size gets linear and quadratic least-squares trend lines with their equations and
R² (Fig. 3), one series per (platform, method): the method is the variant name without
its size tokens (``propagation.scp-128M`` -> ``scp``), cache hits (``cache_hit`` = 1)
are a series of their own. The size is ``size_bytes`` (any phase), or the variant's
size token when nothing moved. A dashed line shows a NIC at each stored
``link_rate_bits``; the fit table reads each intercept as the manager's overhead. The
series, fits and the table's rows are :mod:`.analysis`'s and :mod:`.text`'s, which
the terminal report prints too.
"""

from __future__ import annotations

from collections.abc import Sequence

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
from hvbench.kinds.propagation.text import (
    PROPAGATION_SHARE_NOTE,
    PROPAGATION_SHARE_TITLE,
    SHARE_HEADERS,
    propagation_fit_rows,
    share_rows,
)
from hvbench.report.fits import FIT_HEADERS
from hvbench.report.html import (
    RunSection,
    blocks,
    escape,
    figure,
    phase_segments,
    size_trend,
    table,
    trend_figure,
)
from hvbench.report.plots import TrendSeries, stacked_bars


def propagation_segments(rows: Sequence[Row], workloads: Sequence[str]
                         ) -> tuple[list[str], list[str], dict[tuple[str, str], float]]:
    """:func:`~hvbench.report.html.phase_segments` of
    :data:`~.analysis.PROPAGATION_STEPS` (seed 000 Fig. 4)."""
    return phase_segments(rows, workloads, PROPAGATION_STEPS)


def propagation_points(rows: Sequence[Row], workloads: Sequence[str]) -> list[TrendSeries]:
    """:func:`~.analysis.propagation_series` as trend series labelled
    ``platform method``."""
    return [size_trend(s) for s in propagation_series(rows, workloads)]


def propagation_section(rows: Sequence[Row]) -> str:
    """The Propagation section of a run's report ("" without propagation workloads)."""
    workloads = propagation_workloads(rows)
    if not workloads:
        return ""
    parts = ['<h2 id="propagation">Propagation</h2>']
    bars, segments, values = propagation_segments(rows, workloads)
    title = "time per propagation phase (mean over repetitions)"
    parts.append(figure(stacked_bars(title, "s", bars, segments, values), title,
                        "One bar per cell, stacked from its phases' durations."))
    parts += _share_parts(phase_shares(rows, workloads))
    series = propagation_series(rows, workloads)
    if any(s.points for s in series):
        references = nic_lines(link_rates(rows, workloads))
        parts.append(trend_figure(
            "total propagation time against size, with least-squares trends",
            "image size (bytes)", series, references,
            "One series per platform and method; points: repetitions; solid: linear fit; "
            "dashed: quadratic fit; grey dashes: the NIC at its line rate (size x 8 / "
            "link_rate_bits)."))
        transfer = transfer_series(rows, workloads)
        if any(s.points for s in transfer):
            parts.append(trend_figure(
                "transfer time alone against bytes moved, with the theoretical NIC",
                "bytes moved", transfer, references,
                "Seed 000 Fig. 3(b): the transfer phase only, one series per platform and "
                "method (cache hits move nothing and are left out); solid: linear fit; "
                "dashed: quadratic fit; grey dashes: the NIC at its line rate."))
        parts.append(table(FIT_HEADERS, propagation_fit_rows(rows), left=3))
    return blocks(parts)


def _share_parts(shares: Sequence[PhaseShare]) -> list[str]:
    """Seed 000 Fig. 4: a 100 %-stacked bar per cell (mean shares) and the share table."""
    if not shares:
        return []
    values = {(s.label, step): summary.mean for s in shares
              for step, summary in s.shares.items()}
    segments = [p for p in PROPAGATION_STEPS if any(p in s.shares for s in shares)]
    title = "share of each propagation phase (mean % over repetitions)"
    return [figure(stacked_bars(title, "% of propagation time", [s.label for s in shares],
                                segments, values), title,
                   "One bar per cell (its cache hits apart), stacked from each phase's "
                   "mean share of initial + transfer + terminal; shutdown is not counted."),
            f"<h3>{escape(PROPAGATION_SHARE_TITLE)}</h3>",
            table(SHARE_HEADERS, share_rows(shares), left=2),
            f"<p><small>{escape(PROPAGATION_SHARE_NOTE)}</small></p>"]


#: The section as the report registry takes it.
SECTION = RunSection("propagation", "Propagation", propagation_section)
