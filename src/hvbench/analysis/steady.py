"""Did a measurement reach steady state? A slope test on its stored throughput series.

A phase measured while throughput still climbs (caches warming, a guest's writeback
filling) or sinks (a device's write cache filling, thermal or credit throttling) has a
mean that depends on its length: it measures the transient. For each repetition the
phase's throughput series (the host block device's read+write kB/s for disk cells,
iperf3's per-interval Mbit/s for network cells) is fitted with a least-squares line;
the **drift** is the fitted change across the phase relative to the phase's mean. A
repetition has *not* reached steady state when the drift is both large
(|drift| >= :data:`DRIFT_LIMIT`) and significant (slope p-value < :data:`ALPHA`): the
first alone flags noise, the second alone flags drifts too small to matter. Series
with fewer than :data:`MIN_POINTS` points (a phase shorter than about one second of
10 Hz samples, or three iperf3 intervals) cannot tell and are counted as untested.
"""

from __future__ import annotations

import statistics
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from hvbench.analysis.scenarios import SampleLike
from hvbench.analysis.stats import slope_test

__all__ = ["ALPHA", "DRIFT_LIMIT", "FLAT_BIN_S", "MIN_BINS", "MIN_POINTS", "SteadyState",
           "active", "binned_cov_pct", "drift", "flatness", "steady_states",
           "steady_warnings"]

#: |drift| from which a significant trend matters: beyond the 10 % CoV that the
#: stability warnings already treat as unreliable.
DRIFT_LIMIT = 0.10
#: Significance of the slope (the same level as compare's default).
ALPHA = 0.01
#: Fewest points a series needs to be tested.
MIN_POINTS = 10
#: Width of the bins whose CoV measures flatness within a repetition: a limiter
#: (QEMU's throttle, a blkio cgroup) releases requests in bursts within a second, so
#: 100 ms samples of a throttled 1 MB-record stream alternate between 0 and 1 MB.
FLAT_BIN_S = 1.0
#: Fewest whole bins a repetition needs before its flatness is read.
MIN_BINS = 3
#: Samples below this share of a series' peak at its start or end are the window's
#: idle edges.
IDLE_SHARE = 0.05


@dataclass(frozen=True)
class SteadyState:
    """The steady-state test of one platform in one phase, over its repetitions."""

    workload: str
    phase: str
    platform: str
    #: Repetitions with a series long enough to test.
    tested: int
    #: Of those, the ones that drifted (large and significant).
    drifting: int
    #: The largest |drift| among the drifting repetitions, signed, in %.
    worst_drift_pct: float | None
    #: The longest busy span (s) of a series too short to test (None: all tested).
    untested_s: float | None = None

    @property
    def steady(self) -> bool | None:
        """True / False, or None when no repetition could be tested."""
        return None if self.tested == 0 else self.drifting == 0


def drift(points: Sequence[tuple[float, float]]) -> tuple[float, float] | None:
    """(drift as a fraction of the mean, slope p-value) of a series of (t, y); None
    when it has fewer than :data:`MIN_POINTS` points, no time span or a mean of 0."""
    if len(points) < MIN_POINTS:
        return None
    ts, ys = [p[0] for p in points], [p[1] for p in points]
    span, mean = max(ts) - min(ts), statistics.fmean(ys)
    if span <= 0 or mean <= 0:
        return None
    if len(set(ys)) == 1:
        return 0.0, 1.0
    slope, p_value = slope_test(ts, ys)
    return slope * span / mean, p_value


def _point(sample: SampleLike) -> float | None:
    if sample.monitor == "iperf3":
        value = sample.values.get("mbit_s")
    elif sample.monitor.startswith("host.disk."):
        value = (sample.values.get("r_kb_s") or 0.0) + (sample.values.get("w_kb_s") or 0.0)
    else:
        return None
    return float(value) if isinstance(value, int | float) else None


def _series(samples: Iterable[SampleLike]
            ) -> dict[tuple[str, int, str], list[tuple[float, float]]]:
    """(cell, repetition, phase) -> its throughput series: iperf3's when there is one,
    else the block device that moved the most bytes."""
    by: dict[tuple[str, int, str], dict[str, list[tuple[float, float]]]] = {}
    for sample in samples:
        value = _point(sample)
        if value is not None:
            key = (sample.cell, sample.repetition, sample.phase)
            by.setdefault(key, {}).setdefault(sample.monitor, []).append((sample.t, value))
    out: dict[tuple[str, int, str], list[tuple[float, float]]] = {}
    for key, monitors in by.items():
        if "iperf3" in monitors:
            out[key] = sorted(monitors["iperf3"])
        else:
            busiest = max(monitors.values(), key=lambda s: sum(v for _, v in s))
            out[key] = sorted(busiest)
    return out


def active(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """The series without its idle edges: the monitor window opens before the workload
    starts and closes after it ends, and those samples (below :data:`IDLE_SHARE` of the
    series' peak) are not the workload's throughput."""
    if not points:
        return []
    floor = IDLE_SHARE * max(v for _, v in points)
    busy = [i for i, (_, v) in enumerate(points) if v > floor]
    return list(points[busy[0]:busy[-1] + 1]) if busy else []


def steady_states(samples: Iterable[SampleLike], cells: Mapping[str, tuple[str, str]],
                  measured: Collection[tuple[str, str]]) -> list[SteadyState]:
    """The test for every (workload, phase, platform) with a throughput series;
    ``cells``: cell -> (platform, workload); ``measured``: the (cell, phase) pairs whose
    headline is a throughput the series measures (MB/s of a disk phase, Mbit/s of a
    network one): a file-operation phase's device traffic is its journal, and a window
    shared by several jobs of a job file is none of them."""
    grouped: dict[tuple[str, str, str], list[tuple[float, float] | None]] = {}
    short: dict[tuple[str, str, str], float] = {}
    for (cell, _, phase), points in _series(samples).items():
        if (cell, phase) not in measured:
            continue
        platform, workload = cells.get(cell, (cell, ""))
        key = (workload, phase, platform)
        busy = active(points)
        result = drift(busy)
        grouped.setdefault(key, []).append(result)
        if result is None:
            span = busy[-1][0] - busy[0][0] if len(busy) > 1 else 0.0
            short[key] = max(short.get(key, 0.0), span)
    out = []
    for key, results in grouped.items():
        tested = [r for r in results if r is not None]
        drifting = [d for d, p in tested if abs(d) >= DRIFT_LIMIT and p < ALPHA]
        worst = max(drifting, key=abs) * 100.0 if drifting else None
        out.append(SteadyState(*key, len(tested), len(drifting), worst, short.get(key)))
    return out


def steady_warnings(states: Iterable[SteadyState]) -> list[str]:
    """A stability warning for every phase and platform that drifted, and one for
    every phase whose repetitions were all too short to test (its longest span: the
    same message wherever it applies, so a report lists the places once)."""
    out = []
    for s in states:
        where = f"{s.workload}/{s.phase} on {s.platform}"
        if s.drifting and s.worst_drift_pct is not None:
            out.append(f"{where}: not at steady state: throughput drifted "
                       f"{s.worst_drift_pct:+.0f} % across the phase in {s.drifting} of "
                       f"{s.tested} repetitions (slope p < {ALPHA}); add ramp_time or run "
                       "longer")
        elif s.tested == 0 and s.untested_s is not None:
            out.append(f"{where} (phase {s.untested_s:.1f} s): steady state not "
                       f"testable: fewer than {MIN_POINTS} throughput samples; run the "
                       "phase longer to test it")
    return out


def binned_cov_pct(points: Sequence[tuple[float, float]], width: float = FLAT_BIN_S
                   ) -> float | None:
    """CoV % of a series' means over whole bins of ``width`` seconds (the partial bin
    at the end is dropped); None with fewer than :data:`MIN_BINS` bins or a zero mean."""
    if not points:
        return None
    start = points[0][0]
    bins: dict[int, list[float]] = {}
    for t, value in points:
        bins.setdefault(int((t - start) // width), []).append(value)
    last = int((points[-1][0] - start) // width)
    means = [statistics.fmean(v) for k, v in sorted(bins.items()) if k < last]
    if len(means) < MIN_BINS:
        return None
    mean = statistics.fmean(means)
    return None if mean <= 0 else 100.0 * statistics.pstdev(means) / mean


def flatness(samples: Iterable[SampleLike], cells: Mapping[str, tuple[str, str]]
             ) -> dict[tuple[str, str, str], float]:
    """(workload, phase, platform) -> the median over its repetitions of the CoV % of
    the throughput series within each repetition (:func:`binned_cov_pct` of its busy
    part); combinations without a long enough series are absent."""
    grouped: dict[tuple[str, str, str], list[float]] = {}
    for (cell, _, phase), points in _series(samples).items():
        cov = binned_cov_pct(active(points))
        if cov is not None:
            platform, workload = cells.get(cell, (cell, ""))
            grouped.setdefault((workload, phase, platform), []).append(cov)
    return {key: statistics.median(covs) for key, covs in grouped.items()}
