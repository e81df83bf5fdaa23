"""Statistics over repeated measurements: summaries, % of native, stability, trend fits.

This is the bottom layer of hvbench: it imports only the standard library and does no I/O,
so every number the reports print can be checked by hand in the unit tests.

Invalid input (empty samples, NaN or infinite values, mismatched or degenerate fit data)
raises :class:`ValueError`; callers validate user input before it reaches this module.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from statistics import NormalDist

__all__ = [
    "Fit",
    "Summary",
    "linear_fit",
    "percent_of",
    "percent_of_summary",
    "poly2_fit",
    "slope_test",
    "stability_warnings",
    "summarize",
    "t_quantile",
    "welch_interval",
]

# Above this many degrees of freedom the Cornish-Fisher expansion of the t quantile around
# the normal one is accurate to ~1e-10, and the exact CDF series would need ~df terms.
_EXACT_T_MAX_DF = 200


@dataclass(frozen=True)
class Summary:
    """Descriptive statistics of one sample.

    ``sd`` is the sample standard deviation (ddof=1; 0.0 when n == 1), ``cov_pct`` is
    sd/|mean| in percent (None when mean == 0), and ``ci95_low``/``ci95_high`` bound the
    Student-t 95 % confidence interval of the mean (both equal the mean when n == 1).
    """

    n: int
    mean: float
    sd: float
    cov_pct: float | None
    median: float
    min: float
    max: float
    ci95_low: float
    ci95_high: float

    @property
    def ci95_half_width(self) -> float:
        """Half the width of the 95 % CI (0.0 when n == 1)."""
        return (self.ci95_high - self.ci95_low) / 2.0


@dataclass(frozen=True)
class Fit:
    """A least-squares polynomial fit.

    ``coefficients`` are in ascending powers: ``(c0, c1)`` for a line, ``(c0, c1, c2)`` for a
    parabola. ``r_squared`` is 1.0 for a perfect fit even when all y are equal (R² is
    otherwise undefined there; the convention keeps reports free of special cases).
    """

    coefficients: tuple[float, ...]
    r_squared: float

    def predict(self, x: float) -> float:
        """Value of the fitted polynomial at ``x``."""
        return sum(c * x**power for power, c in enumerate(self.coefficients))


def _check_finite(values: Sequence[float], what: str) -> None:
    for i, value in enumerate(values):
        if not math.isfinite(value):
            raise ValueError(f"{what}[{i}] is {value!r}; only finite numbers can be summarized")


def _t_cdf_exact(t: float, df: int) -> float:
    """CDF of Student's t for integer ``df`` via the closed-form trigonometric series.

    With theta = atan(t / sqrt(df)) the CDF is a finite sum of powers of cos(theta)
    (Abramowitz & Stegun 26.7.3/26.7.4), so no special functions are needed.
    """
    theta = math.atan(t / math.sqrt(df))
    c2 = math.cos(theta) ** 2
    if df % 2 == 1:
        # odd df: 1/2 + (theta + sin*cos * (1 + 2/3 c2 + 2*4/(3*5) c2^2 + ...)) / pi
        term, total = 1.0, 1.0 if df > 1 else 0.0
        for k in range(1, (df - 1) // 2):
            term *= c2 * (2 * k) / (2 * k + 1)
            total += term
        return 0.5 + (theta + math.sin(theta) * math.cos(theta) * total) / math.pi
    # even df: 1/2 + sin/2 * (1 + 1/2 c2 + 1*3/(2*4) c2^2 + ...)
    term, total = 1.0, 1.0
    for k in range(1, df // 2):
        term *= c2 * (2 * k - 1) / (2 * k)
        total += term
    return 0.5 + 0.5 * math.sin(theta) * total


def _t_quantile_cornish_fisher(p: float, df: int) -> float:
    z = NormalDist().inv_cdf(p)
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


@cache
def t_quantile(p: float, df: int) -> float:
    """Quantile of Student's t distribution with integer ``df`` degrees of freedom.

    Exact (bisection on the closed-form CDF) up to 200 df, a Cornish-Fisher expansion above.

    Raises:
        ValueError: ``p`` is not strictly between 0 and 1, or ``df`` < 1.
    """
    if not 0.0 < p < 1.0:
        raise ValueError(f"quantile probability must be in (0, 1), got {p}")
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    if df > _EXACT_T_MAX_DF:
        return _t_quantile_cornish_fisher(p, df)
    low, high = 0.0, 1.0
    while _t_cdf_exact(high, df) < p:  # df=1 has heavy tails: grow the bracket first
        high *= 2.0
    for _ in range(200):
        mid = (low + high) / 2.0
        if mid in (low, high):
            break
        if _t_cdf_exact(mid, df) < p:
            low = mid
        else:
            high = mid
    return (low + high) / 2.0


def _median(ordered: Sequence[float]) -> float:
    mid = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[mid]
    return (ordered[mid - 1] + ordered[mid]) / 2.0


def summarize(values: Sequence[float]) -> Summary:
    """Summarize one sample (typically one metric of one cell over its repetitions).

    Raises:
        ValueError: ``values`` is empty or contains NaN or an infinity.
    """
    if not values:
        raise ValueError("cannot summarize an empty sample")
    _check_finite(values, "values")
    n = len(values)
    mean = math.fsum(values) / n
    # two-pass variance with fsum: exact enough for the tiny CoVs of quiet hosts
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    half = t_quantile(0.975, n - 1) * sd / math.sqrt(n) if n > 1 else 0.0
    ordered = sorted(float(v) for v in values)  # ints in, floats out: one type in reports
    return Summary(
        n=n, mean=mean, sd=sd, cov_pct=sd / abs(mean) * 100.0 if mean != 0 else None,
        median=_median(ordered), min=ordered[0], max=ordered[-1],
        ci95_low=mean - half, ci95_high=mean + half,
    )


def welch_interval(a: Sequence[float], b: Sequence[float], level: float = 0.95
                   ) -> tuple[float, float, float, int]:
    """Welch's t-interval of mean(a) - mean(b) for two independent samples of unequal
    variance: ``(difference, low, high, df)``. The Welch-Satterthwaite degrees of
    freedom are rounded down (``t_quantile`` takes whole df; fewer df widen the
    interval, never narrow it). Two samples without spread give a zero-width interval.

    Raises:
        ValueError: a sample has fewer than 2 values or a value is not finite, or
            ``level`` is not strictly between 0 and 1.
    """
    if len(a) < 2 or len(b) < 2:
        raise ValueError(f"a Welch interval needs 2 values per sample, got {len(a)} and "
                         f"{len(b)}")
    _check_finite(a, "a")
    _check_finite(b, "b")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    sa, sb = summarize(a), summarize(b)
    va, vb = sa.sd**2 / sa.n, sb.sd**2 / sb.n
    diff = sa.mean - sb.mean
    if va + vb == 0:
        return diff, diff, diff, sa.n + sb.n - 2
    df_real = (va + vb) ** 2 / (va**2 / (sa.n - 1) + vb**2 / (sb.n - 1))
    df = max(1, math.floor(df_real))
    half = t_quantile(0.5 + level / 2.0, df) * math.sqrt(va + vb)
    return diff, diff - half, diff + half, df


def percent_of(value: float, baseline: float) -> float | None:
    """``value`` as a percentage of ``baseline``; None when ``baseline`` is 0."""
    if baseline == 0:
        return None
    return value / baseline * 100.0


def percent_of_summary(
    cell: Summary, native: Summary
) -> tuple[float, float | None, float | None]:
    """Mean of ``cell`` in % of the mean of ``native``, with an approximate 95 % interval.

    The interval uses the delta method on R = m_cell / m_native, with each CI half-width h
    standing in for t*SE: ``h_R = sqrt((h_cell / m_native)^2 + (m_cell * h_native /
    m_native^2)^2)``. It is symmetric and ignores covariance (the samples are independent).
    We chose it over Fieller's interval because it is always finite and simple to explain;
    it is only reliable while the native CI stays well away from 0, so bounds are None
    when either sample has n < 2 (no CI) or the native CI includes 0.

    Raises:
        ValueError: the native mean is 0 (no percentage exists).
    """
    if native.mean == 0:
        raise ValueError("the native mean is 0: a percentage of it is undefined")
    ratio = cell.mean / native.mean
    crosses_zero = native.ci95_low <= 0.0 <= native.ci95_high
    if cell.n < 2 or native.n < 2 or crosses_zero:
        return ratio * 100.0, None, None
    half = math.hypot(
        cell.ci95_half_width / native.mean,
        cell.mean * native.ci95_half_width / native.mean**2,
    )
    return ratio * 100.0, (ratio - half) * 100.0, (ratio + half) * 100.0


def stability_warnings(
    summary: Summary, *, metric: str, cov_limit_pct: float = 10.0, min_n: int = 3,
    planned: int | None = None,
) -> list[tuple[str, str]]:
    """Actionable warnings about a summary whose numbers should not be trusted as is,
    each as (detail of this place, message): the message is the same wherever it
    applies, so a report can list the places once.

    ``planned``: the repetitions the run planned (None: unknown). A sample as large as
    planned is what the user chose (in the study or with ``--repetitions``): no advice
    to raise it; one smaller lost repetitions. The CoV is judged from ``min_n`` values
    only: below that it is not shown either. Returns an empty list for a sample with at
    least ``min_n`` values and a CoV within ``cov_limit_pct``.
    """
    warnings: list[tuple[str, str]] = []
    if summary.n < min_n and planned is None:
        warnings.append((f"n={summary.n}", f"{metric}: fewer than {min_n} repetitions: "
                         f"raise [study] repetitions to at least {min_n} so the CI means "
                         "something"))
    elif planned is not None and summary.n < min(planned, min_n):
        warnings.append((f"n={summary.n} of {planned}", f"{metric}: fewer repetitions "
                         "than planned (the others failed): the interval is wider"))
    if summary.n < min_n:
        return warnings
    if summary.cov_pct is None:
        if summary.sd > 0:
            warnings.append(("mean 0", f"{metric}: the mean is 0 so the CoV is undefined; "
                             "check that the metric is really measured (values of both "
                             "signs cancel out)"))
    elif summary.cov_pct > cov_limit_pct:
        warnings.append((f"CoV {summary.cov_pct:.1f} %", f"{metric}: CoV > "
                         f"{cov_limit_pct:g} %: the host is noisy or the test too short; "
                         "lengthen the test, pin CPUs or add repetitions"))
    return warnings


def _check_fit_input(xs: Sequence[float], ys: Sequence[float], degree: int) -> None:
    if len(xs) != len(ys):
        raise ValueError(f"xs and ys differ in length ({len(xs)} != {len(ys)})")
    _check_finite(xs, "xs")
    _check_finite(ys, "ys")
    if len(set(xs)) <= degree:
        raise ValueError(
            f"a degree-{degree} fit needs at least {degree + 1} distinct x values, "
            f"got {len(set(xs))}"
        )


def _solve(matrix: list[list[float]], rhs: list[float]) -> list[float]:
    """Solve a small dense linear system by Gaussian elimination with partial pivoting."""
    size = len(rhs)
    rows = [[*row, b] for row, b in zip(matrix, rhs, strict=True)]
    for col in range(size):
        pivot = max(range(col, size), key=lambda r: abs(rows[r][col]))
        if rows[pivot][col] == 0:
            raise ValueError("singular system: the x values do not determine the fit")
        rows[col], rows[pivot] = rows[pivot], rows[col]
        for r in range(col + 1, size):
            factor = rows[r][col] / rows[col][col]
            for c in range(col, size + 1):
                rows[r][c] -= factor * rows[col][c]
    solution = [0.0] * size
    for r in reversed(range(size)):
        known = math.fsum(rows[r][c] * solution[c] for c in range(r + 1, size))
        solution[r] = (rows[r][size] - known) / rows[r][r]
    return solution


def _r_squared(fit: Fit, xs: Sequence[float], ys: Sequence[float]) -> float:
    mean_y = math.fsum(ys) / len(ys)
    ss_tot = math.fsum((y - mean_y) ** 2 for y in ys)
    ss_res = math.fsum((y - fit.predict(x)) ** 2 for x, y in zip(xs, ys, strict=True))
    if ss_tot == 0:
        return 1.0 if ss_res <= 1e-12 * max(1.0, mean_y**2) else 0.0
    return 1.0 - ss_res / ss_tot


def _poly_fit(xs: Sequence[float], ys: Sequence[float], degree: int) -> Fit:
    _check_fit_input(xs, ys, degree)
    # Fit in u = (x - m) / s: normal equations in raw x (e.g. block sizes up to 1e6) would
    # be badly conditioned once squared.
    m = math.fsum(xs) / len(xs)
    s = max(abs(x - m) for x in xs)
    us = [(x - m) / s for x in xs]
    powers = range(degree + 1)
    matrix = [[math.fsum(u ** (i + j) for u in us) for j in powers] for i in powers]
    rhs = [math.fsum(y * u**i for u, y in zip(us, ys, strict=True)) for i in powers]
    a = _solve(matrix, rhs)
    # expand sum a_k ((x - m)/s)^k back into powers of x (binomial theorem)
    coefficients = [0.0] * (degree + 1)
    for k, a_k in enumerate(a):
        for j in range(k + 1):
            coefficients[j] += a_k * math.comb(k, j) * (-m) ** (k - j) / s**k
    fit = Fit(coefficients=tuple(coefficients), r_squared=0.0)
    return Fit(coefficients=fit.coefficients, r_squared=_r_squared(fit, xs, ys))


def linear_fit(xs: Sequence[float], ys: Sequence[float]) -> Fit:
    """Least-squares line ``y = c0 + c1 x``; ``Fit.coefficients == (c0, c1)``.

    Raises:
        ValueError: lengths differ, a value is not finite, or fewer than 2 distinct x.
    """
    return _poly_fit(xs, ys, 1)


def t_two_sided_p(t: float, df: int) -> float:
    """Two-sided p-value of a Student's t statistic with integer ``df`` (the exact
    closed-form CDF; its series has about df/2 terms). Raises ValueError for df < 1."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    if math.isnan(t):
        return 1.0
    if math.isinf(t):
        return 0.0
    return min(1.0, max(0.0, 2.0 * (1.0 - _t_cdf_exact(abs(t), df))))


def slope_test(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """(slope, two-sided p-value of slope = 0) of the least-squares line through the
    points: the t test on the slope with n - 2 degrees of freedom, as an ordinary
    linear regression reports it. A perfect fit with a non-zero slope has p = 0, a flat
    series p = 1. Pure Python, so that reading a run does not import scipy (~1 s).

    Raises:
        ValueError: lengths differ, fewer than 3 points, or all x equal.
    """
    n = len(xs)
    if n != len(ys):
        raise ValueError(f"slope_test needs as many x as y ({n} vs {len(ys)})")
    if n < 3:
        raise ValueError(f"slope_test needs at least 3 points, got {n}")
    mx, my = math.fsum(xs) / n, math.fsum(ys) / n
    sxx = math.fsum((x - mx) ** 2 for x in xs)
    if sxx <= 0:
        raise ValueError("slope_test needs at least two distinct x")
    sxy = math.fsum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    syy = math.fsum((y - my) ** 2 for y in ys)
    slope = sxy / sxx
    residual = max(syy - slope * sxy, 0.0)
    if slope == 0.0:
        return 0.0, 1.0
    if residual <= syy * 1e-24:
        return slope, 0.0
    stderr = math.sqrt(residual / (n - 2) / sxx)
    return slope, t_two_sided_p(slope / stderr, n - 2)


def poly2_fit(xs: Sequence[float], ys: Sequence[float]) -> Fit:
    """Least-squares parabola ``y = c0 + c1 x + c2 x²``; ``coefficients == (c0, c1, c2)``.

    Raises:
        ValueError: lengths differ, a value is not finite, or fewer than 3 distinct x.
    """
    return _poly_fit(xs, ys, 2)


def median_ratio_ci95(a: Sequence[float], b: Sequence[float], *, resamples: int = 2000,
                      seed: int = 0) -> tuple[float, float]:
    """A 95 % percentile-bootstrap interval of median(a) / median(b): how closely the
    noise of two samples lets their ratio be pinned down (deterministic for a seed).
    Raises ValueError for an empty sample or a zero median of ``b``."""
    if not a or not b:
        raise ValueError("median_ratio_ci95 needs two non-empty samples")
    rng = random.Random(seed)  # noqa: S311 - resampling, not secrets
    ratios = sorted(_median(sorted(rng.choices(a, k=len(a))))
                    / _median(sorted(rng.choices(b, k=len(b)))) for _ in range(resamples))
    return ratios[int(0.025 * resamples)], ratios[int(0.975 * resamples) - 1]


# -- time series ------------------------------------------------------------------------
def one_second_buckets(rows: Iterable[tuple[float, float]]) -> list[tuple[int, float]]:
    """Mean of the samples in each whole second since the window's start: ``(second,
    mean)`` for every second that has samples, in order (seed 003 Fig. 14 plots the
    target's throughput this way)."""
    sums: dict[int, list[float]] = {}
    for t, value in rows:
        if math.isfinite(value) and t >= 0:
            sums.setdefault(int(t), []).append(value)
    return [(second, sum(vals) / len(vals)) for second, vals in sorted(sums.items())]


#: A bucket below this share of the baseline belongs to the dip.
DIP_THRESHOLD = 0.9


def steady_buckets(buckets: Sequence[tuple[int, float]]) -> list[tuple[int, float]]:
    """``buckets`` without the first and the last when at least 3 stay.

    The measured window opens before the load generator sends (connection set-up, the
    tool's start) and closes after it stopped, so those two seconds hold partly idle
    samples: a first bucket near 0 would drag a median baseline down and make every
    later second look like a gain; a last one would look like a dip."""
    ordered = sorted(buckets)
    return ordered[1:-1] if len(ordered) >= 5 else ordered


def dip_metrics(buckets: Sequence[tuple[int, float]], event_s: float) -> dict[str, float]:
    """The dip that an event at ``event_s`` caused in a bucketed throughput series.

    Only the :func:`steady_buckets` count. Baseline: the median of those before the
    event (its whole seconds). Depth: 1 - lowest bucket after the event / baseline, in
    %. Length: the seconds from the first bucket after the event below
    :data:`DIP_THRESHOLD` x baseline to the last one (0 when none is). Empty when there
    is no baseline (the event came first)."""
    steady = steady_buckets(buckets)
    before = sorted(v for t, v in steady if t + 1 <= event_s)
    after = [(t, v) for t, v in steady if t + 1 > event_s]
    if not before or not after:
        return {}
    baseline = _median(before)
    if baseline <= 0:
        return {}
    low = [t for t, v in after if v < DIP_THRESHOLD * baseline]
    lowest = min(v for _, v in after)
    return {
        "baseline": baseline,
        "depth_pct": max(0.0, (1.0 - lowest / baseline) * 100.0),
        "length_s": float(low[-1] - low[0] + 1) if low else 0.0,
        "min_normalized": lowest / baseline,
    }


def series_cov_pct(values: Sequence[float]) -> float | None:
    """Coefficient of variation (%) of a metric's samples over a window (seed 003
    §4.3); None for fewer than 2 samples or a zero mean."""
    finite = [v for v in values if math.isfinite(v)]
    if len(finite) < 2:
        return None
    mean = sum(finite) / len(finite)
    if mean == 0:
        return None
    var = sum((v - mean) ** 2 for v in finite) / (len(finite) - 1)
    return math.sqrt(var) / abs(mean) * 100.0
