"""hvbench.analysis.stats against hand-computed values (t quantiles from standard tables)."""

from __future__ import annotations

import math
import random

import pytest

from hvbench.analysis.stats import (
    Summary,
    linear_fit,
    percent_of,
    percent_of_summary,
    poly2_fit,
    slope_test,
    stability_warnings,
    summarize,
    t_quantile,
    welch_interval,
)
from hvbench.analysis.summaries import fmt_value


@pytest.mark.parametrize(
    ("p", "df", "expected"),
    [
        (0.975, 1, 12.706205),
        (0.975, 2, 4.302653),
        (0.975, 3, 3.182446),
        (0.975, 4, 2.776445),
        (0.975, 5, 2.570582),
        (0.975, 10, 2.228139),
        (0.975, 30, 2.042272),
        (0.975, 100, 1.983972),
        (0.975, 1000, 1.962339),
        (0.995, 4, 4.604095),
        (0.95, 7, 1.894579),
        (0.025, 3, -3.182446),
        (0.5, 9, 0.0),
    ],
)
def test_t_quantile_matches_tables(p: float, df: int, expected: float) -> None:
    assert t_quantile(p, df) == pytest.approx(expected, abs=2e-6)


def test_t_quantile_is_continuous_where_the_method_changes() -> None:
    assert t_quantile(0.975, 200) > t_quantile(0.975, 201) > t_quantile(0.975, 202)
    assert t_quantile(0.975, 200) - t_quantile(0.975, 201) < 1e-4


@pytest.mark.parametrize(("p", "df"), [(0.0, 3), (1.0, 3), (0.5, 0)])
def test_t_quantile_rejects_bad_arguments(p: float, df: int) -> None:
    with pytest.raises(ValueError):
        t_quantile(p, df)


def test_summary_of_one_to_four() -> None:
    s = summarize([4, 1, 3, 2])
    assert (s.n, s.mean, s.median, s.min, s.max) == (4, 2.5, 2.5, 1.0, 4.0)
    assert isinstance(s.min, float)
    assert s.sd == pytest.approx(1.2909944)
    assert s.cov_pct == pytest.approx(51.639778)
    # half width = t(0.975, 3) * sd / sqrt(4) = 3.182446 * 1.2909944 / 2 = 2.054260
    assert s.ci95_low == pytest.approx(2.5 - 2.054260, abs=1e-6)
    assert s.ci95_high == pytest.approx(2.5 + 2.054260, abs=1e-6)
    assert s.ci95_half_width == pytest.approx(2.054260, abs=1e-6)


def test_summary_of_odd_sample_has_middle_median() -> None:
    assert summarize([10.0, 1.0, 3.0]).median == 3.0


def test_single_value_has_zero_spread_and_a_point_ci() -> None:
    s = summarize([7.5])
    assert (s.sd, s.cov_pct, s.ci95_low, s.ci95_high) == (0.0, 0.0, 7.5, 7.5)


def test_zero_mean_has_no_cov() -> None:
    s = summarize([-1.0, 1.0])
    assert s.mean == 0.0
    assert s.cov_pct is None


def test_negative_mean_cov_uses_absolute_mean() -> None:
    assert summarize([-9.0, -11.0]).cov_pct == pytest.approx(math.sqrt(2) / 10 * 100)


@pytest.mark.parametrize("values", [[], [1.0, math.nan], [math.inf]])
def test_summarize_rejects_empty_and_non_finite(values: list[float]) -> None:
    with pytest.raises(ValueError):
        summarize(values)


def test_percent_of() -> None:
    assert percent_of(50.0, 200.0) == 25.0
    assert percent_of(1.0, 0.0) is None


def test_percent_of_summary_delta_method() -> None:
    cell, native = summarize([9.0, 10.0, 11.0]), summarize([19.0, 20.0, 21.0])
    pct, low, high = percent_of_summary(cell, native)
    # h = t(0.975, 2) / sqrt(3) = 2.484138 for both; h_R = hypot(h / 20, 10 * h / 400)
    half = math.hypot(2.484138 / 20, 10 * 2.484138 / 400) * 100
    assert pct == 50.0
    assert low == pytest.approx(50.0 - half, abs=1e-4)
    assert high == pytest.approx(50.0 + half, abs=1e-4)
    assert half == pytest.approx(13.88675, abs=1e-4)


def test_percent_of_summary_without_ci() -> None:
    assert percent_of_summary(summarize([5.0]), summarize([10.0, 10.0])) == (50.0, None, None)


def test_percent_of_summary_native_ci_through_zero() -> None:
    _, low, high = percent_of_summary(summarize([1.0, 1.0]), summarize([-1.0, 3.0]))
    assert (low, high) == (None, None)


def test_percent_of_summary_zero_native_mean_is_an_error() -> None:
    with pytest.raises(ValueError, match="native mean is 0"):
        percent_of_summary(summarize([1.0]), summarize([-1.0, 1.0]))


def test_quiet_sample_has_no_warnings() -> None:
    assert stability_warnings(summarize([100.0, 101.0, 99.0]), metric="mb_s") == []


def test_too_few_repetitions_warns() -> None:
    ((where, warning),) = stability_warnings(summarize([100.0, 101.0]), metric="mb_s")
    assert where == "n=2"
    assert warning.startswith("mb_s: fewer than 3 repetitions")
    assert "[study] repetitions" in warning


def test_the_users_repetition_count_is_not_second_guessed() -> None:
    # --repetitions 2 (or repetitions = 2 in the study): as planned, nothing to say,
    # and a CoV of two values is not judged.
    noisy = summarize([100.0, 150.0])
    assert stability_warnings(noisy, metric="mb_s", planned=2) == []
    ((where, warning),) = stability_warnings(summarize([100.0]), metric="mb_s", planned=2)
    assert where == "n=1 of 2"
    assert "failed" in warning and "[study]" not in warning


def test_noisy_sample_warns_with_cov() -> None:
    summary = Summary(
        n=5,
        mean=100.0,
        sd=14.2,
        cov_pct=14.2,
        median=100.0,
        min=80.0,
        max=120.0,
        ci95_low=82.4,
        ci95_high=117.6,
    )
    ((where, warning),) = stability_warnings(summary, metric="iops")
    assert where == "CoV 14.2 %"
    assert "CoV > 10 %" in warning
    assert "pin CPUs" in warning
    assert stability_warnings(summary, metric="iops", cov_limit_pct=15) == []


def test_zero_mean_with_spread_warns() -> None:
    warnings = stability_warnings(summarize([-1.0, 1.0, 0.0]), metric="x")
    assert len(warnings) == 1
    assert "CoV is undefined" in warnings[0][1]


def test_linear_fit_by_hand() -> None:
    fit = linear_fit([1.0, 2.0, 3.0], [2.0, 4.0, 6.5])
    c0, c1 = fit.coefficients
    assert c1 == pytest.approx(2.25)  # Sxy / Sxx = 4.5 / 2
    assert c0 == pytest.approx(-1 / 3)
    assert fit.r_squared == pytest.approx(1 - (1 / 24) / (61 / 6))
    assert fit.predict(4.0) == pytest.approx(-1 / 3 + 9.0)


def test_poly2_fit_recovers_an_exact_parabola() -> None:
    fit = poly2_fit([0.0, 1.0, 2.0, 3.0], [1.0, 2.0, 5.0, 10.0])
    assert fit.coefficients == pytest.approx((1.0, 0.0, 1.0), abs=1e-9)
    assert fit.r_squared == pytest.approx(1.0)


def test_poly2_fit_is_well_conditioned_for_large_x() -> None:
    xs = [float(4096 * 2**i) for i in range(9)]  # block sizes 4 KiB .. 1 MiB
    ys = [3.0 + 2e-3 * x + 1e-9 * x * x for x in xs]
    c0, c1, c2 = poly2_fit(xs, ys).coefficients
    assert c0 == pytest.approx(3.0, rel=1e-6)
    assert c1 == pytest.approx(2e-3, rel=1e-8)
    assert c2 == pytest.approx(1e-9, rel=1e-8)


def test_fit_of_constant_ys_is_perfect() -> None:
    assert linear_fit([1.0, 2.0, 3.0], [5.0, 5.0, 5.0]).r_squared == 1.0


def test_poly2_fit_by_hand_residual() -> None:
    # y = x^2 with the last point off by +1. Normal equations:
    # [4 2 6; 2 6 8; 6 8 18] c = [7; 10; 22]  ->  c = (-0.15, 0.05, 1.25)
    fit = poly2_fit([-1.0, 0.0, 1.0, 2.0], [1.0, 0.0, 1.0, 5.0])
    assert fit.coefficients == pytest.approx((-0.15, 0.05, 1.25), abs=1e-9)
    # residuals -0.05, 0.15, -0.15, 0.05 -> SSres = 0.05; SStot = 14.75
    assert fit.r_squared == pytest.approx(1 - 0.05 / 14.75)


@pytest.mark.parametrize(
    ("xs", "ys", "message"),
    [
        ([1.0, 2.0], [1.0], "differ in length"),
        ([1.0, 1.0, 1.0], [1.0, 2.0, 3.0], "distinct x"),
        ([1.0, math.nan], [1.0, 2.0], "finite"),
    ],
)
def test_fits_reject_bad_input(xs: list[float], ys: list[float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        linear_fit(xs, ys)


def test_poly2_needs_three_distinct_x() -> None:
    with pytest.raises(ValueError, match="3 distinct x"):
        poly2_fit([1.0, 2.0, 2.0], [1.0, 2.0, 3.0])


def test_median_ratio_ci95_brackets_the_ratio_and_is_deterministic() -> None:
    from hvbench.analysis.stats import median_ratio_ci95

    a, b = [10.0, 11.0, 9.0, 10.5, 9.5], [5.0, 5.5, 4.5, 5.2, 4.8]
    low, high = median_ratio_ci95(a, b)
    assert low <= 2.0 <= high
    assert (low, high) == median_ratio_ci95(a, b)
    with pytest.raises(ValueError, match="non-empty"):
        median_ratio_ci95([], b)


def test_welch_interval_matches_a_hand_computation() -> None:
    # a: mean 2, var 1 (n 3); b: mean 5, var 4 (n 3). se^2 = 1/3 + 4/3 = 5/3;
    # df = (5/3)^2 / ((1/3)^2/2 + (4/3)^2/2) = 2.94 -> 2, t(0.975, 2) = 4.303.
    diff, low, high, df = welch_interval([1.0, 2.0, 3.0], [3.0, 5.0, 7.0])
    assert (diff, df) == (-3.0, 2)
    half = 4.302652729911275 * math.sqrt(5.0 / 3.0)
    assert low == pytest.approx(-3.0 - half) and high == pytest.approx(-3.0 + half)


def test_welch_interval_without_spread_is_a_point_and_needs_two_values() -> None:
    assert welch_interval([2.0, 2.0], [1.0, 1.0, 1.0]) == (1.0, 1.0, 1.0, 3)
    with pytest.raises(ValueError, match="2 values per sample"):
        welch_interval([1.0], [1.0, 2.0])


@pytest.mark.parametrize("seed", range(12))
def test_slope_test_matches_an_ordinary_regression(seed: int) -> None:
    # The pure-Python slope t test must give what scipy's linregress gives (scipy is
    # only imported here, to check against).
    from scipy.stats import linregress

    rng = random.Random(seed)
    n = rng.choice([3, 4, 10, 57, 400, 1201])
    xs = [i * 0.1 + rng.uniform(0, 0.05) for i in range(n)]
    drift = rng.choice([0.0, 0.001, 0.05, 2.0])
    ys = [100 + drift * x + rng.gauss(0, 3) for x in xs]
    slope, p_value = slope_test(xs, ys)
    reference = linregress(xs, ys)
    assert slope == pytest.approx(reference.slope, rel=1e-9, abs=1e-12)
    assert p_value == pytest.approx(reference.pvalue, rel=1e-6, abs=1e-9)


def test_slope_test_edges() -> None:
    assert slope_test([0, 1, 2], [5, 5, 5]) == (0.0, 1.0)
    assert slope_test([0, 1, 2], [1, 2, 3]) == (1.0, 0.0)
    with pytest.raises(ValueError, match="at least 3 points"):
        slope_test([0, 1], [1, 2])
    with pytest.raises(ValueError, match="distinct x"):
        slope_test([1, 1, 1], [1, 2, 3])


@pytest.mark.parametrize(("value", "shown"), [(1012.4, "1012"), (999.6, "1000"),
                                              (-999.7, "-1000"), (998.4, "998"),
                                              (0.752, "0.752"), (3.0, "3")])
def test_table_numbers_never_turn_exponential_at_1000(value: float, shown: str) -> None:
    """The demo's table printed 1e+03 executions/s next to 1012 and 859."""
    assert fmt_value(value) == shown
