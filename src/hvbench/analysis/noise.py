"""A host's noise floor: how much identical measurements differ, from A/A pairs.

Pure. ``hvbench noise`` runs cells with an even number of repetitions; repetitions
``2i`` and ``2i + 1`` of one cell are an A/A pair: the same definition measured in two
consecutive rounds of the run, each in its own guest boot and time window (the runner
boots a guest once per platform and repetition). Their relative difference

    d_i = 100 * (x[2i + 1] - x[2i]) / mean(x[2i], x[2i + 1])   (%)

is what changing nothing changes. The floor stored per host, cell definition, phase and
metric is ``sd_pct``, the sample standard deviation of the ``d_i`` (``pairs`` of them),
with the mean of the metric beside it.

Use. A comparison of means over ``n_a`` and ``n_b`` repetitions would see identical cells
differ by up to

    floor(n_a, n_b) = t(1 - alpha / 2, pairs - 1) * sd_pct * sqrt((1 / n_a + 1 / n_b) / 2)

(one repetition's A/A spread is ``sd_pct / sqrt(2)``; the t quantile carries the
uncertainty of a floor measured from few pairs); ``compare`` never calls a |delta|
inside it significant. A bound may be ``mid`` ± ``k`` times one repetition's A/A spread
(:meth:`NoiseFloor.spread_pct`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from hvbench.analysis.metrics import direction_of
from hvbench.analysis.stats import t_quantile
from hvbench.analysis.summaries import Row

__all__ = ["MIN_NOISE_PAIRS", "NoiseFloor", "aa_differences", "floors_of_rows"]

#: The fewest A/A pairs a floor is computed from (two degrees of freedom).
MIN_NOISE_PAIRS = 3


@dataclass(frozen=True)
class NoiseFloor:
    """One measured floor: the standard deviation (%) of ``pairs`` A/A differences."""

    sd_pct: float
    pairs: int
    #: The mean of the metric over the pairs (in its unit), to show what the % is of.
    mean: float
    #: The run the pairs were measured in, and when it was stored (from the store).
    run_id: str = ""
    measured_at: str = ""

    def floor_pct(self, n_a: int, n_b: int, alpha: float) -> float:
        """The |delta| % identical cells could show between means of ``n_a`` and ``n_b``
        repetitions at two-sided level ``alpha`` (module docstring). Raises ValueError
        for sizes below 1 or alpha outside (0, 1)."""
        if n_a < 1 or n_b < 1:
            raise ValueError(f"sample sizes must be >= 1, got {n_a} and {n_b}")
        t = t_quantile(1.0 - alpha / 2.0, max(1, self.pairs - 1))
        return t * self.sd_pct * math.sqrt((1.0 / n_a + 1.0 / n_b) / 2.0)

    def spread_pct(self) -> float:
        """One repetition's A/A standard deviation in % (``sd_pct / sqrt(2)``)."""
        return self.sd_pct / math.sqrt(2.0)


def aa_differences(by_repetition: Mapping[int, float]) -> list[float]:
    """The relative A/A differences (%) of repetitions ``(2i, 2i + 1)`` both present
    (a failed repetition drops its pair); a pair whose mean is 0 is skipped."""
    out = []
    for first in sorted(r for r in by_repetition if r % 2 == 0):
        a, b = by_repetition[first], by_repetition.get(first + 1)
        if b is None:
            continue
        mid = (a + b) / 2.0
        if mid != 0:
            out.append(100.0 * (b - a) / abs(mid))
    return out


def _floor(by_repetition: Mapping[int, float]) -> NoiseFloor | None:
    diffs = aa_differences(by_repetition)
    if len(diffs) < MIN_NOISE_PAIRS:
        return None
    mean_d = math.fsum(diffs) / len(diffs)
    sd = math.sqrt(math.fsum((d - mean_d) ** 2 for d in diffs) / (len(diffs) - 1))
    values = list(by_repetition.values())
    return NoiseFloor(sd_pct=sd, pairs=len(diffs), mean=math.fsum(values) / len(values))


def floors_of_rows(rows: Iterable[Row]) -> dict[tuple[str, str, str], NoiseFloor]:
    """The floor of every (cell, phase, metric) of one run's rows whose metric has a
    direction (throughputs, latencies, times) and that has
    :data:`MIN_NOISE_PAIRS` complete pairs or more."""
    series: dict[tuple[str, str, str], dict[int, float]] = defaultdict(dict)
    for row in rows:
        if direction_of(row.metric) != "neutral":
            series[(row.cell, row.phase, row.metric)][row.repetition] = row.value
    out = {}
    for key, by_rep in series.items():
        floor = _floor(by_rep)
        if floor is not None:
            out[key] = floor
    return out


def floors_by_key(floors: Sequence[tuple[tuple[str, str, str], NoiseFloor]]
                  ) -> dict[tuple[str, str, str], NoiseFloor]:
    """The first floor of each key (callers pass the newest first)."""
    out: dict[tuple[str, str, str], NoiseFloor] = {}
    for key, floor in floors:
        out.setdefault(key, floor)
    return out
