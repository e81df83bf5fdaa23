"""The leaderboard of a study that puts several guest I/O paths beside native (issue 28,
``examples/io-paths.toml``): per phase, the guests ranked by their headline metric in %
of native with its 95 % interval, each with the bottleneck its diagnosis named, and
whether the order is conclusive (adjacent intervals apart) or not (they overlap).

Pure: it ranks what :func:`~hvbench.analysis.summaries.phase_stats` and the diagnosis
computed."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hvbench.analysis.diagnosis import Verdict
from hvbench.analysis.stats import percent_of_summary
from hvbench.analysis.summaries import PhaseStats, compared_to_native

#: Fewer guests than this in a phase make no ranking worth a table.
MIN_RANKED = 2


@dataclass(frozen=True)
class RankedPath:
    """One guest platform's place in a phase's leaderboard."""

    platform: str
    pct: float
    #: The 95 % interval of ``pct`` (clipped at 0); None without one (n < 2 on either
    #: side, or native's interval reaches 0: see :func:`percent_of_summary`).
    low: float | None
    high: float | None
    #: The diagnosis' short answer: its dominant rule, or its outcome ("-": none).
    bottleneck: str


@dataclass(frozen=True)
class Leaderboard:
    """One phase's guests ranked by % of native, best first."""

    workload: str
    phase: str
    metric: str
    native: str
    rows: tuple[RankedPath, ...]
    #: Adjacent pairs (better, worse) whose intervals overlap or are missing: their
    #: order is not shown by the data.
    overlapping: tuple[tuple[str, str], ...]

    @property
    def conclusive(self) -> bool:
        """True when every adjacent pair's intervals are apart."""
        return not self.overlapping


def _apart(better: RankedPath, worse: RankedPath) -> bool:
    return better.low is not None and worse.high is not None and better.low > worse.high


def _ranked(stats: PhaseStats, metric: str, native: str,
            bottlenecks: Mapping[str, str]) -> list[RankedPath]:
    per = stats.metrics[metric]
    rows = []
    for platform in stats.platforms:
        if platform == native or platform not in per:
            continue
        pct, low, high = percent_of_summary(per[platform], per[native])
        rows.append(RankedPath(platform, pct, None if low is None else max(low, 0.0), high,
                               bottlenecks.get(platform, "-")))
    # Best first; ties keep the study's order (sort is stable).
    return sorted(rows, key=lambda r: -r.pct)


def leaderboards(phases: Sequence[PhaseStats], natives: Mapping[str, str | None],
                 verdicts: Sequence[Verdict]) -> list[Leaderboard]:
    """A leaderboard for every phase with a native platform, a headline metric shown in
    % of native and at least :data:`MIN_RANKED` guests measured; phase order."""
    boards = []
    for stats in phases:
        native, metric = natives.get(stats.workload), stats.throughput_metric()
        if native is None or metric is None or not compared_to_native(metric):
            continue
        per = stats.metrics[metric]
        if native not in per or per[native].mean == 0:
            continue
        why = {v.platform: v.why() for v in verdicts
               if v.workload == stats.workload and v.phase == stats.phase}
        rows = _ranked(stats, metric, native, why)
        if len(rows) < MIN_RANKED:
            continue
        overlapping = tuple((a.platform, b.platform) for a, b in itertools.pairwise(rows)
                            if not _apart(a, b))
        boards.append(Leaderboard(stats.workload, stats.phase, metric, native,
                                  tuple(rows), overlapping))
    return boards
