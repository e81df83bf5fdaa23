"""Host-to-host spread of a fleet run (pure): per cell, phase and metric, each host's
mean, the CoV across hosts (of the host means) next to the CoV within hosts (the mean
of each host's own CoV over its repetitions), and the hosts that are outliers.

Outlier test: each host's repetitions against the pooled repetitions of all other hosts,
Welch's t-test, Bonferroni-corrected for the number of hosts; a host is an outlier when
the corrected p-value is below ``alpha`` *and* its mean differs from the others' by more
than ``threshold_pct`` (a difference too small to matter is not an outlier, however
sure). It needs at least 3 hosts (with 2, "which one is off" has no answer) and 2
repetitions per side.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hvbench.store.records import MeasurementRow

MIN_HOSTS_FOR_OUTLIERS = 3
#: The run environment's key of a host's share of a ``--spread`` fleet run: its class
#: and the repetitions it runs (a field, so ``--resume`` finds the share again and
#: reports show it).
SPREAD_KEY = "fleet_spread"
@dataclass(frozen=True)
class HostSpread:
    """One (cell, phase, metric) across the hosts of a fleet."""

    cell: str
    phase: str
    metric: str
    unit: str
    means: dict[str, float]
    across_cov_pct: float | None
    within_cov_pct: float | None
    outliers: tuple[str, ...]
    p_values: dict[str, float]


def _cov_pct(values: Sequence[float]) -> float | None:
    if len(values) < 2:
        return None
    mean = statistics.fmean(values)
    return None if mean == 0 else 100 * statistics.stdev(values) / abs(mean)


def _welch_p(a: Sequence[float], b: Sequence[float]) -> float | None:
    if len(a) < 2 or len(b) < 2:
        return None
    if statistics.pstdev(a) == 0 and statistics.pstdev(b) == 0:
        return 1.0 if statistics.fmean(a) == statistics.fmean(b) else 0.0
    from scipy.stats import ttest_ind  # noqa: PLC0415 - scipy is slow to import

    return float(ttest_ind(a, b, equal_var=False).pvalue)


def host_spread(rows_by_host: Mapping[str, Sequence[MeasurementRow]], *,
                alpha: float = 0.01, threshold_pct: float = 5.0) -> list[HostSpread]:
    """The spread of every (cell, phase, metric) measured on at least one host."""
    values: dict[tuple[str, str, str], dict[str, list[float]]] = defaultdict(
        lambda: defaultdict(list))
    units: dict[tuple[str, str, str], str] = {}
    for host, rows in rows_by_host.items():
        for row in rows:
            key = (row.cell, row.phase, row.metric)
            values[key][host].append(row.value)
            units[key] = row.unit
    out = []
    for key in sorted(values):
        per_host = values[key]
        means = {h: statistics.fmean(v) for h, v in sorted(per_host.items())}
        within = [c for c in (_cov_pct(v) for v in per_host.values()) if c is not None]
        p_values: dict[str, float] = {}
        outliers = []
        if len(per_host) >= MIN_HOSTS_FOR_OUTLIERS:
            for host, mine in per_host.items():
                rest = [x for h, v in per_host.items() if h != host for x in v]
                p = _welch_p(mine, rest)
                if p is None:
                    continue
                p_values[host] = min(1.0, p * len(per_host))
                rest_mean = statistics.fmean(rest)
                off = abs(means[host] - rest_mean) / abs(rest_mean) * 100 \
                    if rest_mean else 0.0
                if p_values[host] < alpha and off > threshold_pct:
                    outliers.append(host)
        out.append(HostSpread(
            key[0], key[1], key[2], units[key], means, _cov_pct(list(means.values())),
            statistics.fmean(within) if within else None, tuple(sorted(outliers)),
            p_values))
    return out

