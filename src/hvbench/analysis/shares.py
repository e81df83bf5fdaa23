"""Each propagation phase's share of the propagation time (seed 000 Fig. 4), as data
both reports print (the text: :mod:`hvbench.report.propagation`).

Pure: a function of stored rows. Per repetition of a propagation cell, each of
``initial``, ``transfer`` and ``terminal`` (:data:`~hvbench.analysis.trends.PROPAGATION_STEPS`)
is divided by their sum; the shares of a cell are then summarized over its repetitions
(mean and Student-t 95 % CI), so a phase's mean share and the cell's mean durations need
not agree exactly. ``shutdown`` is not counted: seed 000 measures propagation up to a
running VM (its Fig. 4 stacks the initial overhead, the data transfer and the terminal
overhead); stopping the guest afterwards is not part of delivering it. Repetitions that
were node-cache hits (``cache_hit`` = 1) are summarized apart from the cell's fetches,
as in the trends: they move nothing, so their shares answer a different question.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from hvbench.analysis.stats import Summary, summarize
from hvbench.analysis.summaries import Row
from hvbench.analysis.trends import DURATION_METRICS, PROPAGATION_STEPS

__all__ = ["PhaseShare", "phase_shares"]

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

