"""Completion-latency distributions from fio's ``json+`` histograms and the web
workload's wrk reports (pure).

fio's ``json+`` output carries, per job and direction, ``clat_ns.bins``: the lower edge
of each of its logarithmic histogram buckets (ns) -> the I/Os that completed in it.
wrk's report (hvbench's Lua ``done()`` hook, ``wrk-json``) carries every distinct
request latency (us) and its count; :func:`wrk_histogram` puts those into fio's
buckets, so both plot alike and a plot has at most a few hundred steps. Summing the
buckets of every repetition of a cell gives the cell's distribution; its CDF is what
the HTML report draws against native's, since a mean or a few percentiles hide the
shape (two modes, a long tail) that tells where latency comes from.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["Histogram", "cdf", "fio_bucket", "fio_clat_histogram", "merge", "percentile_ms",
           "tail_points", "wrk_histogram"]

#: Latency in ns (a bucket's lower edge) -> I/Os completed in that bucket.
Histogram = dict[int, int]
_NS_PER_MS = 1e6


def _document(text: str) -> Mapping[str, Any] | None:
    # fio may print warnings before the JSON document.
    start = text.find("{")
    try:
        doc = json.loads(text[start:]) if start >= 0 else None
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def _job_bins(job: Mapping[str, Any]) -> Histogram:
    found: Histogram = {}
    for direction in ("read", "write", "trim"):
        stats = job.get(direction)
        bins = stats.get("clat_ns", {}).get("bins") if isinstance(stats, dict) else None
        if not isinstance(bins, dict):
            continue
        for edge, count in bins.items():
            if str(edge).isdigit() and isinstance(count, int) and count > 0:
                found[int(edge)] = found.get(int(edge), 0) + count
    return found


def fio_clat_histogram(text: str, job: str | None = None) -> Histogram:
    """The completion-latency histogram of fio ``json+`` output ``text``, every
    direction summed: of the jobs named ``job`` when there are any (a job file's phase
    is one of its jobs), else of every job. Empty for plain ``json`` output (no bins)
    or text that is not a fio document."""
    doc = _document(text)
    jobs = [j for j in (doc or {}).get("jobs", []) if isinstance(j, dict)]
    named = [j for j in jobs if j.get("jobname") == job]
    return merge(_job_bins(j) for j in (named or jobs))


#: fio's histogram resolution: 2**6 buckets per power of two (FIO_IO_U_PLAT_BITS).
_FIO_PLAT_BITS = 6


def fio_bucket(ns: int) -> int:
    """The lower edge of fio's histogram bucket that holds ``ns``: exact below 128 ns,
    then 64 buckets per power of two (about 1.5 % wide)."""
    if ns < 1 << (_FIO_PLAT_BITS + 1):
        return ns
    shift = ns.bit_length() - 1 - _FIO_PLAT_BITS
    return (ns >> shift) << shift


#: Weight of a wrk report that gives quantiles instead of a histogram: its shares are
#: turned into this many samples.
_QUANTILE_SAMPLES = 100_000


def _pairs(value: object) -> list[tuple[float, float]]:
    """``[[a, b], ...]`` of non-negative numbers (others skipped)."""
    out: list[tuple[float, float]] = []
    for pair in value if isinstance(value, list) else ():
        if (isinstance(pair, list) and len(pair) == 2
                and all(isinstance(v, int | float) and not isinstance(v, bool) and v >= 0
                        for v in pair)):
            out.append((float(pair[0]), float(pair[1])))
    return out


def wrk_histogram(text: str) -> Histogram:
    """The request-latency histogram of a wrk report, in ns and fio's buckets: from
    ``latency_us.histogram`` (pairs of a latency in us and its count), or, when wrk's
    report gave ``latency_us.quantiles`` instead (pairs of a percentile and its latency
    in us; the maximum ``max`` after them), from those shares, as
    :data:`_QUANTILE_SAMPLES` samples. Empty for text that is not such a report. These
    are wrk's samples: its coordinated-omission correction is in them."""
    doc = _document(text)
    latency = (doc or {}).get("latency_us")
    if not isinstance(latency, dict):
        return {}
    found: Histogram = {}

    def add(us: float, count: int) -> None:
        if count > 0:
            edge = fio_bucket(round(us * 1000))
            found[edge] = found.get(edge, 0) + count

    if "histogram" in latency:
        for us, count in _pairs(latency["histogram"]):
            add(us, round(count))
        return found
    quantiles = _pairs(latency.get("quantiles"))
    top = latency.get("max")
    if quantiles and isinstance(top, int | float) and not isinstance(top, bool):
        quantiles.append((100.0, float(top)))
    done = 0.0
    for pct, us in quantiles:
        add(us, round((pct - done) / 100.0 * _QUANTILE_SAMPLES))
        done = max(done, pct)
    return found


def merge(histograms: Iterable[Mapping[int, int]]) -> Histogram:
    """The sum of histograms (e.g. one per repetition)."""
    total: Histogram = {}
    for histogram in histograms:
        for edge, count in histogram.items():
            total[edge] = total.get(edge, 0) + count
    return total


def cdf(histogram: Mapping[int, int]) -> list[tuple[float, float]]:
    """(latency ms, share of I/Os completed by then) at every bucket, ascending; empty
    for an empty histogram."""
    total = sum(histogram.values())
    if total <= 0:
        return []
    points: list[tuple[float, float]] = []
    done = 0
    for edge in sorted(histogram):
        done += histogram[edge]
        points.append((edge / _NS_PER_MS, done / total))
    return points


def percentile_ms(histogram: Mapping[int, int], pct: float) -> float | None:
    """The bucket (ms) where ``pct`` % of the I/Os have completed; None when empty.
    Bucket edges are fio's, so the value has fio's resolution (about 1.5 %)."""
    for latency, share in cdf(histogram):
        if share * 100.0 >= pct:
            return latency
    return None


def tail_points(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """(latency ms, share of I/Os slower than it) for a log-scale tail plot: the last
    point (share 0) is dropped, it cannot be drawn on a log axis."""
    return [(ms, 1.0 - share) for ms, share in points if share < 1.0]
