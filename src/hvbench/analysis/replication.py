"""Does a run reproduce a paper's effect? The verdict scheme of the findings.

Pure. A paper's finding compares two sides and gives both numbers, so its effect is a
ratio ``Rp = A / B``. A run measures the same two sides over repetitions; the runner
measures every cell of a repetition in one shuffled round, so A's and B's repetition
``r`` ran back to back. The effect we measure is the ratio of the two sides, taken in
logs (a ratio of 0.5 and one of 2 are the same size of effect):

- **paired** (both sides have 3 repetitions or more in common, or the very same
  repetitions): the per-round log ratios ``ln(A_r / B_r)``, a Student t 95 % interval
  of their mean (:func:`hvbench.analysis.stats.summarize`);
- **Welch** (the rounds do not pair): Welch's t 95 % interval of the difference of the
  mean logs (:func:`hvbench.analysis.stats.welch_interval`).

Both give ``ours xR [lo, hi]`` after exponentiating. The margin ``δ`` is what counts as
no effect: 10 %, or this host's noise floor for these cells and sample sizes when one is
stored and larger (:mod:`hvbench.analysis.noise`). With ``d = ln(1 + δ)``, the paper's
log effect ``e = |ln Rp|`` and our interval turned so that the paper's direction is
positive (``[x_lo, x_hi]``), a directional finding reads:

============================================  ==============================================
``reproduced``                                ``x_lo > d`` and ``[x_lo, x_hi]`` inside
                                              ``[e / 2, 2 e]``: the paper's direction, and
                                              its size within a factor 2 in log
``same direction, weaker`` / ``stronger``     ``x_lo > d``, the whole interval below
                                              ``e / 2`` / above ``2 e``
``effect absent``                             the interval inside ``[-d, d]`` while the
                                              paper's ``e > d`` (an equivalence test)
``opposite``                                  ``x_hi < -d``
``paper's size excluded, direction open``     none of the above, but the interval misses
                                              ``[e / 2, 2 e]``
``inconclusive``                              none of the above: with the repetitions the
                                              interval would need to settle
============================================  ==============================================

An *equivalence* finding (the paper found A ≈ B) passes only the equivalence test:
``reproduced`` when the interval lies inside ``[-d, d]``, ``opposite`` when it lies
wholly outside (a difference where the paper found none), else ``inconclusive``.

Fewer than :data:`MIN_REPETITIONS` values on a side never give a verdict: one
repetition has no interval at all, two have one degree of freedom.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from hvbench.analysis.stats import summarize, t_quantile, welch_interval

__all__ = [
    "MAX_NEEDED_REPETITIONS",
    "MIN_MARGIN",
    "MIN_REPETITIONS",
    "Classification",
    "RatioInterval",
    "Test",
    "Verdict",
    "classify",
    "log_ratio_interval",
    "margin",
    "needed_repetitions",
]

#: Every verdict a finding can get (``not measured``: the run lacks a side).
Verdict = Literal["reproduced", "same direction, weaker", "same direction, stronger",
                  "effect absent", "paper's size excluded, direction open", "opposite",
                  "inconclusive", "precondition not met", "not assessable under TCG",
                  "not measured"]
Test = Literal["paired t", "Welch t"]
#: The fewest repetitions per side a verdict takes.
MIN_REPETITIONS = 3
#: The smallest margin δ: a 10 % difference is the least we call an effect.
MIN_MARGIN = 0.10
#: The repetition estimate stops here (more would not fit a study under TCG anyway).
MAX_NEEDED_REPETITIONS = 100
#: How far the size may be from the paper's, as a factor on the log ratio.
SIZE_FACTOR = 2.0


@dataclass(frozen=True)
class RatioInterval:
    """Our A/B ratio: the mean log ratio and its 95 % interval (NaN bounds when a side
    has a single value)."""

    test: Test
    #: Values per side (paired: the pairs, on both sides).
    n_a: int
    n_b: int
    log_mean: float
    log_low: float
    log_high: float

    @property
    def ratio(self) -> float:
        """``exp`` of the mean log ratio (a geometric mean ratio)."""
        return math.exp(self.log_mean)

    @property
    def low(self) -> float:
        """Lower end of the ratio's 95 % interval (NaN without one)."""
        return math.exp(self.log_low)

    @property
    def high(self) -> float:
        """Upper end of the ratio's 95 % interval (NaN without one)."""
        return math.exp(self.log_high)

    @property
    def n(self) -> int:
        """The smaller side's count: what the repetition rule reads."""
        return min(self.n_a, self.n_b)

    @property
    def has_interval(self) -> bool:
        """True when both sides had 2 values or more."""
        return not math.isnan(self.log_low)


@dataclass(frozen=True)
class Classification:
    """A verdict with its reason (``""`` when the verdict says it all) and, for
    ``inconclusive``, the repetitions per side a decision would need (None: not
    estimable, e.g. from one value)."""

    verdict: Verdict
    reason: str = ""
    needed_repetitions: int | None = None


def log_ratio_interval(a: Mapping[int, float], b: Mapping[int, float]
                       ) -> RatioInterval | None:
    """The interval of ln(A / B) from one value per repetition and side (keys:
    repetition numbers); None when a side is empty or a value is not positive (a log
    ratio needs positive numbers)."""
    if not a or not b or min(a.values()) <= 0 or min(b.values()) <= 0:
        return None
    common = sorted(a.keys() & b.keys())
    if len(common) >= MIN_REPETITIONS or (a.keys() == b.keys()):
        logs = [math.log(a[r]) - math.log(b[r]) for r in common]
        s = summarize(logs)
        low, high = (s.ci95_low, s.ci95_high) if s.n > 1 else (math.nan, math.nan)
        return RatioInterval("paired t", s.n, s.n, s.mean, low, high)
    la = [math.log(v) for v in a.values()]
    lb = [math.log(v) for v in b.values()]
    mean = math.fsum(la) / len(la) - math.fsum(lb) / len(lb)
    if len(la) < 2 or len(lb) < 2:
        return RatioInterval("Welch t", len(la), len(lb), mean, math.nan, math.nan)
    _, low, high, _ = welch_interval(la, lb)
    return RatioInterval("Welch t", len(la), len(lb), mean, low, high)


def margin(floor_pcts: Sequence[float]) -> float:
    """δ as a fraction: :data:`MIN_MARGIN`, or the largest noise floor (in %) of the
    compared cells when that is larger."""
    return max([MIN_MARGIN, *(f / 100.0 for f in floor_pcts)])


def needed_repetitions(interval: RatioInterval, x_mean: float,
                       bounds: Sequence[float]) -> int | None:
    """The repetitions per side at which an interval of today's spread, around today's
    mean, would clear the nearest decision boundary; None when it cannot be estimated
    (no spread measured, or the mean sits on a boundary) or would exceed
    :data:`MAX_NEEDED_REPETITIONS`."""
    if not interval.has_interval:
        return None
    gap = min(abs(x_mean - b) for b in bounds)
    df_now = _df(interval.test, interval.n)
    se = (interval.log_high - interval.log_low) / 2.0 / t_quantile(0.975, df_now)
    if gap <= 0 or se <= 0:
        return None
    for n in range(interval.n + 1, MAX_NEEDED_REPETITIONS + 1):
        # The standard error shrinks as 1/sqrt(n) at today's spread.
        if t_quantile(0.975, _df(interval.test, n)) * se * math.sqrt(interval.n / n) < gap:
            return n
    return None


def _df(test: Test, n: int) -> int:
    return max(1, n - 1 if test == "paired t" else 2 * n - 2)


def _inconclusive(interval: RatioInterval, x_mean: float, bounds: Sequence[float],
                  reason: str) -> Classification:
    needed = needed_repetitions(interval, x_mean, bounds)
    more = (f"about {needed} repetitions per side would decide" if needed is not None
            else f"more than {MAX_NEEDED_REPETITIONS} repetitions per side, or a "
                 "quieter measurement, would be needed")
    return Classification("inconclusive", f"{reason}; {more}", needed)


def _equivalence(interval: RatioInterval, d: float) -> Classification:
    lo, hi = interval.log_low, interval.log_high
    if -d <= lo and hi <= d:
        return Classification("reproduced", "equivalence: the interval lies inside 1 ± δ")
    if lo > d or hi < -d:
        return Classification("opposite", "a difference beyond δ where the paper found none")
    return _inconclusive(interval, interval.log_mean, (-d, d),
                         "the interval straddles the margin δ")


def _sized(interval: RatioInterval, x_mean: float, lo: float, hi: float, e: float
           ) -> Classification:
    """The paper's direction is shown (the interval clears the margin): how its size
    compares."""
    small, large = e / SIZE_FACTOR, e * SIZE_FACTOR
    if small <= lo and hi <= large:
        return Classification("reproduced")
    if hi < small:
        return Classification("same direction, weaker")
    if lo > large:
        return Classification("same direction, stronger")
    return _inconclusive(interval, x_mean, (small, large),
                         "the paper's direction, its size not settled")


def _directional(interval: RatioInterval, paper_log: float, d: float) -> Classification:
    sign = 1.0 if paper_log > 0 else -1.0
    lo, hi = sorted((sign * interval.log_low, sign * interval.log_high))
    x_mean, e = sign * interval.log_mean, abs(paper_log)
    small, large = e / SIZE_FACTOR, e * SIZE_FACTOR
    if lo > d:
        return _sized(interval, x_mean, lo, hi, e)
    if hi < -d:
        return Classification("opposite")
    if -d <= lo and hi <= d and e > d:
        return Classification("effect absent",
                              "equivalence: the interval lies inside 1 ± δ, the paper's "
                              "ratio outside")
    if hi < small or lo > large:
        return Classification("paper's size excluded, direction open")
    return _inconclusive(interval, x_mean, (-d, d, small, large),
                         "the interval reaches across the margin δ")


def classify(interval: RatioInterval, paper_ratio: float, *, equivalence: bool,
             delta: float) -> Classification:
    """The verdict of one finding's statistics (module docstring): ``paper_ratio`` is
    the paper's A/B, ``delta`` the margin δ as a fraction. Sides with fewer than
    :data:`MIN_REPETITIONS` values are ``inconclusive``.

    Raises:
        ValueError: ``paper_ratio`` or ``delta`` is not positive.
    """
    if paper_ratio <= 0 or delta <= 0:
        raise ValueError(f"the paper's ratio and δ must be positive, got {paper_ratio} "
                         f"and {delta}")
    if interval.n < MIN_REPETITIONS:
        return Classification(
            "inconclusive",
            f"n = {interval.n}: a verdict needs at least {MIN_REPETITIONS} repetitions "
            "per side", MIN_REPETITIONS)
    d = math.log1p(delta)
    if equivalence:
        return _equivalence(interval, d)
    return _directional(interval, math.log(paper_ratio), d)
