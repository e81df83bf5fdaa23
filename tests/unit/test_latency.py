"""Latency distributions from fio's json+ histograms and wrk's reports: parsing,
merging, CDF, tail."""

from __future__ import annotations

import json
from pathlib import Path

from hvbench.analysis.latency import (
    cdf,
    fio_bucket,
    fio_clat_histogram,
    merge,
    percentile_ms,
    tail_points,
    wrk_histogram,
)
from hvbench.report.plots import LatencyCurve, latency_cdf


def _doc(*jobs: tuple[str, dict[str, int], dict[str, int]]) -> str:
    return "fio: warning before the document\n" + json.dumps({"jobs": [
        {"jobname": name, "read": {"clat_ns": {"bins": r}}, "write": {"clat_ns": {"bins": w}}}
        for name, r, w in jobs]})


def test_histogram_sums_directions_and_picks_the_named_job() -> None:
    text = _doc(("fill", {"1000": 5}, {}), ("randread", {"2000": 3, "4000": 1}, {"2000": 1}))
    assert fio_clat_histogram(text, "randread") == {2000: 4, 4000: 1}
    # A profile phase's job is not named after the phase: every job counts.
    assert fio_clat_histogram(text, "read") == {1000: 5, 2000: 4, 4000: 1}


def test_plain_json_and_junk_give_no_histogram() -> None:
    assert fio_clat_histogram(json.dumps({"jobs": [{"jobname": "j", "read": {
        "clat_ns": {"mean": 3.0}}}]})) == {}
    assert fio_clat_histogram("not fio") == {}


def test_cdf_percentiles_and_tail() -> None:
    histogram = merge([{1_000_000: 90}, {1_000_000: 0, 10_000_000: 9, 100_000_000: 1}])
    points = cdf(histogram)
    assert points == [(1.0, 0.9), (10.0, 0.99), (100.0, 1.0)]
    assert percentile_ms(histogram, 50) == 1.0
    assert percentile_ms(histogram, 99) == 10.0
    assert percentile_ms(histogram, 99.9) == 100.0
    assert percentile_ms({}, 50) is None
    assert tail_points(points) == [(1.0, 0.09999999999999998), (10.0, 0.010000000000000009)]


def test_latency_plot_is_svg_and_deterministic() -> None:
    curves = [LatencyCurve("native", [(0.1, 0.5), (0.2, 1.0)], native=True),
              LatencyCurve("vm", [(1.0, 0.9), (5.0, 1.0)])]
    svg = latency_cdf("w / read", curves)
    assert svg.startswith("<?xml") and "</svg>" in svg
    assert svg == latency_cdf("w / read", curves)


# -- wrk's reports (the web workload's latency pass) ---------------------------------------
WRK_STDOUT = (Path(__file__).parents[1] / "fixtures" / "net" / "wrk-10k-c4.stdout").read_text()


def test_fio_buckets() -> None:
    assert [fio_bucket(n) for n in (0, 127, 128, 129, 130, 255, 256, 259, 260)] == \
        [0, 127, 128, 128, 130, 254, 256, 256, 260]
    # 64 buckets per power of two: at most 1/64 below the value.
    assert all(0 <= n - fio_bucket(n) <= n / 64 for n in range(1, 200_000, 7))


def test_wrk_histogram_from_a_real_report() -> None:
    from hvbench.workloads.wrk import parse_wrk, report_json

    doc = report_json(WRK_STDOUT)
    histogram = wrk_histogram(doc)
    result = parse_wrk(doc)
    # Every sample is in it (wrk's corrected ones too), in ns.
    assert sum(histogram.values()) == result.samples
    assert min(histogram) == fio_bucket(round(result.min_ms * 1000) * 1000)
    # fio's buckets keep a plot small: far fewer steps than distinct microseconds.
    assert len(histogram) < len(json.loads(doc)["latency_us"]["histogram"])
    p99 = percentile_ms(histogram, 99)
    assert p99 is not None and abs(p99 - result.percentiles["99"]) <= result.percentiles["99"] / 64


def test_wrk_histogram_from_quantiles() -> None:
    from hvbench.workloads.wrk import parse_wrk, report_json

    stdout = (Path(__file__).parents[1] / "fixtures" / "net"
              / "wrk-10k-c4-quantiles.stdout").read_text()
    doc = report_json(stdout)
    histogram = wrk_histogram(doc)
    result = parse_wrk(doc)
    assert sum(histogram.values()) == 100_000
    for pct in ("50", "90", "99"):
        found = percentile_ms(histogram, float(pct))
        assert found is not None
        assert abs(found - result.percentiles[pct]) <= result.percentiles[pct] / 64
    assert max(histogram) == fio_bucket(round(result.max_ms * 1e6))


def test_wrk_histogram_of_junk_is_empty() -> None:
    assert wrk_histogram("not json") == {}
    assert wrk_histogram(json.dumps({"latency_us": {"histogram": [[1, "x"], [2]]}})) == {}
