"""What the propagation kind reads in a run's rows (seed 000 §5.1, Figs. 3-4), as data
both reports print.

Pure: functions of stored rows. A workload whose phases include at least two of
``initial``, ``transfer`` and ``terminal`` with a duration (``duration_s``, else
``phase_wall_s``) is a propagation workload. Per repetition, y is the sum of those
phases' durations and x the image size: its ``size_bytes`` metric (any phase), or when
that is 0 or missing (a cache hit moves nothing) the cell's ``image_size``. One series
per (platform, method): the method is the cell's ``method`` identity field (the
transfer method, ``scp``); repetitions with ``cache_hit`` = 1 form their own series
(``overlay (cache hit)``). Each stored ``link_rate_bits`` gives the line of a NIC at
that rate, y = x·8 / rate (seed 000 Fig. 3b's theoretical NIC). Fig. 3(b)'s own series
are the ``transfer`` phase alone against the bytes moved (:func:`transfer_series`,
labelled ``<method> (transfer only)``); cache hits move nothing and are left out of
them.

Phase shares (Fig. 4): per repetition of a propagation cell, each of
:data:`PROPAGATION_STEPS` is divided by their sum; the shares of a cell are then
summarized over its repetitions (mean and Student-t 95 % CI), so a phase's mean share
and the cell's mean durations need not agree exactly. ``shutdown`` is not counted:
seed 000 measures propagation up to a running VM (its Fig. 4 stacks the initial
overhead, the data transfer and the terminal overhead); stopping the guest afterwards
is not part of delivering it. Repetitions that were node-cache hits (``cache_hit`` = 1)
are summarized apart from the cell's fetches, as in the trends: they move nothing, so
their shares answer a different question.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from hvbench.analysis.stats import Summary, summarize
from hvbench.analysis.summaries import Row
from hvbench.analysis.trends import (
    DURATION_METRICS,
    ReferenceLine,
    SizeSeries,
    identity_of_cells,
    per_repetition,
    phase_duration,
    size_series,
    workloads_with,
)

#: The phases whose durations add up to a propagation (``shutdown`` is not part of it).
PROPAGATION_STEPS = ("initial", "transfer", "terminal")


def propagation_workloads(rows: Sequence[Row]) -> list[str]:
    """Workloads with at least two of :data:`PROPAGATION_STEPS` that carry a duration."""
    return workloads_with(rows, PROPAGATION_STEPS)


def propagation_series(rows: Sequence[Row], workloads: Sequence[str]) -> list[SizeSeries]:
    """Per (platform, method): (image size, initial + transfer + terminal seconds) of
    every repetition. The size is the ``size_bytes`` moved, or on a cache hit (nothing
    moved) the cell's ``image_size``; cache hits form their own series (``overlay
    (cache hit)``): they do not move the image, so they are a different trend.
    Repetitions without any size are left out."""
    points: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    facts = identity_of_cells(rows)
    for (platform, workload, _), values in per_repetition(rows, workloads).items():
        method, image_size = facts[(platform, workload)]
        moved = next((v for (_, m), v in values.items() if m == "size_bytes"), None)
        size = moved if moved else image_size
        durations = [d for p in PROPAGATION_STEPS if (d := phase_duration(values, p)) is not None]
        if size is None or not durations:
            continue
        hit = any(m == "cache_hit" and v >= 1 for (_, m), v in values.items())
        method += " (cache hit)" if hit else ""
        points[(platform, method)].append((size, sum(durations)))
    return size_series(points)


#: The suffix of a transfer-only series' method (seed 000 Fig. 3b).
TRANSFER_ONLY = " (transfer only)"


def transfer_series(rows: Sequence[Row], workloads: Sequence[str]) -> list[SizeSeries]:
    """Per (platform, method): (bytes moved, ``transfer`` seconds) of every repetition
    that moved bytes (seed 000 Fig. 3b, next to the theoretical NIC); the method is
    labelled ``<method> (transfer only)``. Cache hits (nothing moved) and repetitions
    without a transfer duration or ``size_bytes`` are left out."""
    points: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    facts = identity_of_cells(rows)
    for (platform, workload, _), values in per_repetition(rows, workloads).items():
        moved = values.get(("transfer", "size_bytes"))
        seconds = phase_duration(values, "transfer")
        hit = values.get(("transfer", "cache_hit"), 0.0) >= 1
        if moved and seconds is not None and not hit:
            method = facts[(platform, workload)][0] + TRANSFER_ONLY
            points[(platform, method)].append((moved, seconds))
    return size_series(points)


def link_rates(rows: Sequence[Row], workloads: Sequence[str]) -> list[float]:
    """The distinct ``link_rate_bits`` (bit/s) the workloads' transfers stored."""
    return sorted({r.value for r in rows if r.workload in workloads
                   and r.metric == "link_rate_bits" and r.value > 0})


def nic_lines(rates: Sequence[float]) -> list[ReferenceLine]:
    """The time a NIC at each line rate needs for x bytes: x·8 / rate (seed 000 Fig.
    3b's theoretical NIC; no protocol reaches it)."""
    return [ReferenceLine(f"theoretical NIC {rate / 1e6:g} Mbit/s", 0.0, 8.0 / rate)
            for rate in rates]


# -- phase shares ---------------------------------------------------------------------------
@dataclass(frozen=True)
class PhaseShare:
    """One cell's (or one cell's cache hits') phase shares over its repetitions."""

    cell: str
    platform: str
    method: str
    #: The cell's ``image_size`` identity field in bytes (None when it has none).
    image_size: float | None
    #: phase -> its % of initial + transfer + terminal, over the repetitions.
    shares: dict[str, Summary]
    #: initial + transfer + terminal seconds, over the repetitions.
    total: Summary
    #: True for the cell's node-cache hits (then ``method`` ends in ``(cache hit)``).
    cache_hit: bool = False

    @property
    def label(self) -> str:
        """The cell, with ``(cache hit)`` for its hits: one bar of a chart each."""
        return self.cell + (" (cache hit)" if self.cache_hit else "")


def _durations(rows: Sequence[Row], workloads: Sequence[str]
               ) -> dict[tuple[str, int], tuple[dict[str, float], bool]]:
    """(cell, repetition) -> (phase -> seconds, cache hit), the first duration metric
    of :data:`DURATION_METRICS` a phase has."""
    found: dict[tuple[str, int], dict[tuple[str, str], float]] = defaultdict(dict)
    for row in rows:
        if row.workload in workloads:
            found[(row.cell, row.repetition)][(row.phase, row.metric)] = row.value
    out: dict[tuple[str, int], tuple[dict[str, float], bool]] = {}
    for key, values in found.items():
        seconds = {step: value for step in PROPAGATION_STEPS
                   if (value := next((values[(step, m)] for m in DURATION_METRICS
                                      if (step, m) in values), None)) is not None}
        hit = any(m == "cache_hit" and v >= 1 for (_, m), v in values.items())
        out[key] = (seconds, hit)
    return out


def phase_shares(rows: Sequence[Row], workloads: Sequence[str]) -> list[PhaseShare]:
    """Each propagation cell's phase shares (module docstring), ordered by platform,
    method and image size; repetitions whose phases add up to 0 s are left out."""
    facts = {r.cell: (r.platform, r.method or r.workload, r.image_size) for r in rows
             if r.workload in workloads}
    grouped: dict[tuple[str, bool], list[dict[str, float]]] = defaultdict(list)
    for (cell, _), (seconds, hit) in sorted(_durations(rows, workloads).items()):
        if sum(seconds.values()) > 0:
            grouped[(cell, hit)].append(seconds)
    out = [_share(cell, hit, facts[cell], reps) for (cell, hit), reps in grouped.items()]
    return sorted(out, key=lambda s: (s.platform, s.method, s.image_size or 0.0, s.cell))


def _share(cell: str, hit: bool, fact: tuple[str, str, float | None],
           repetitions: Sequence[dict[str, float]]) -> PhaseShare:
    platform, method, size = fact
    totals = [sum(seconds.values()) for seconds in repetitions]
    shares = {step: summarize([100.0 * s[step] / total
                               for s, total in zip(repetitions, totals, strict=True)
                               if step in s])
              for step in PROPAGATION_STEPS if any(step in s for s in repetitions)}
    return PhaseShare(cell, platform, method + (" (cache hit)" if hit else ""), size,
                      shares, summarize(totals), hit)

