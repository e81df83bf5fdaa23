"""What a fleet report leads with (pure): per workload and phase its main metric on
every host, with each host's % of its own native, and with 2 hosts a host-to-host
verdict paired by cell.

The main metric of a (workload, phase) is the catalogue's headline among the metrics
measured there (:func:`hvbench.analysis.metrics.main_metric`), the same for its native
and guest cells. % of native is against the native cell of the same workload on the
same host (a fleet host runs its own baseline).

The verdict of two hosts A and B: every (cell, phase) both measured gives one log
ratio of their means, turned so that positive is "A better" (the metric's direction;
metrics without one are left out); the ratios are paired by cell, and their mean gets a
Student t 95 % interval (:func:`hvbench.analysis.stats.summarize`). With the margin
``d = ln(1 + 10 %)`` (:data:`hvbench.analysis.replication.MIN_MARGIN`): the interval
above ``d`` says A is better, below ``-d`` B, inside ``[-d, d]`` the hosts are
equivalent within the margin, anything else (or fewer than
:data:`~hvbench.analysis.replication.MIN_REPETITIONS` cells) is ``inconclusive``.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from hvbench.analysis.metrics import direction_of, main_metric
from hvbench.analysis.replication import MIN_MARGIN, MIN_REPETITIONS
from hvbench.analysis.stats import summarize
from hvbench.analysis.summaries import compared_to_native, phase_key
from hvbench.store.records import MeasurementRow

__all__ = ["HostVerdict", "MainRow", "host_verdict", "main_rows"]

_MARGIN = f"{100 * MIN_MARGIN:g} %"
#: How the verdict is reached, as the report's note says it.
VERDICT_NOTE = (f"Paired by cell: one log ratio of the host means per cell and phase "
                f"(main metric, turned so that positive is the first host better), a "
                f"Student t 95 % interval of their mean; better or equivalent only when the "
                f"interval clears or stays within ±{_MARGIN}, else inconclusive.")


@dataclass(frozen=True)
class MainRow:
    """The main metric of one cell and phase on every host that measured it."""

    cell: str
    platform: str
    workload: str
    phase: str
    metric: str
    unit: str
    #: host -> mean over its repetitions.
    means: dict[str, float]
    #: host -> % of that host's native mean (hosts without a native value: absent).
    pct_native: dict[str, float]


@dataclass(frozen=True)
class HostVerdict:
    """Two hosts compared over the cells both measured."""

    first: str
    second: str
    cells: int
    #: How much better the first host is, in % (geometric mean ratio - 1; negative:
    #: the second is better); None without a cell.
    pct: float | None
    low_pct: float | None
    high_pct: float | None
    verdict: str
    reason: str


def _means(rows_by_host: Mapping[str, Sequence[MeasurementRow]]
           ) -> tuple[dict[tuple[str, str, str, str, str], dict[str, float]], dict[str, str]]:
    """(cell, platform, workload, phase, metric) -> host -> mean; metric -> unit."""
    values: dict[tuple[str, str, str, str, str], dict[str, list[float]]] = defaultdict(
        lambda: defaultdict(list))
    units: dict[str, str] = {}
    for host, rows in rows_by_host.items():
        for row in rows:
            key = (row.cell, row.platform, row.workload, row.phase, row.metric)
            values[key][host].append(row.value)
            units[row.metric] = row.unit
    return ({k: {h: statistics.fmean(v) for h, v in per.items()} for k, per in values.items()},
            units)


def main_rows(rows_by_host: Mapping[str, Sequence[MeasurementRow]],
              native_platforms: Collection[str]) -> list[MainRow]:
    """One row per cell and phase: its workload's main metric on every host, each host's
    % of its own native (``native_platforms``: the platform names of kind native), in
    workload, phase and cell order (natives first)."""
    means, units = _means(rows_by_host)
    metrics: dict[tuple[str, str], set[str]] = defaultdict(set)
    for _cell, _platform, workload, phase, metric in means:
        metrics[(workload, phase)].add(metric)
    main = {key: main_metric(names) for key, names in metrics.items()}
    natives = {(workload, phase, metric): per
               for (_c, platform, workload, phase, metric), per in means.items()
               if platform in native_platforms}
    out = []
    for (cell, platform, workload, phase, metric), per in means.items():
        if metric != main[(workload, phase)]:
            continue
        native = natives.get((workload, phase, metric), {}) \
            if compared_to_native(metric) else {}
        pct = {h: 100 * v / native[h] for h, v in per.items() if native.get(h)}
        out.append(MainRow(cell, platform, workload, phase, metric, units[metric],
                           dict(sorted(per.items())), pct))
    return sorted(out, key=lambda r: (r.workload, phase_key(r.phase),
                                      r.platform not in native_platforms, r.cell))


def _signed_log(row: MainRow, first: str, second: str) -> float | None:
    a, b = row.means.get(first), row.means.get(second)
    direction = direction_of(row.metric)
    if a is None or b is None or a <= 0 or b <= 0 or direction == "neutral":
        return None
    return math.log(a / b) if direction == "higher" else math.log(b / a)


def host_verdict(rows: Sequence[MainRow], hosts: Sequence[str]) -> HostVerdict | None:
    """The verdict of the first host against the second, paired by cell (None unless
    exactly 2 hosts)."""
    if len(hosts) != 2:
        return None
    first, second = hosts
    logs = [x for x in (_signed_log(r, first, second) for r in rows) if x is not None]
    if not logs:
        return HostVerdict(first, second, 0, None, None, None, "inconclusive",
                           "no cell with a main metric measured on both hosts")
    s = summarize(logs)
    pct = 100 * math.expm1(s.mean)
    if s.n < MIN_REPETITIONS:
        return HostVerdict(first, second, s.n, pct, None, None, "inconclusive",
                           f"{s.n} cell(s) paired; a verdict needs {MIN_REPETITIONS}")
    low, high = 100 * math.expm1(s.ci95_low), 100 * math.expm1(s.ci95_high)
    d = math.log1p(MIN_MARGIN)
    if s.ci95_low > d:
        verdict, reason = f"{first} better", f"the interval is above +{_MARGIN}"
    elif s.ci95_high < -d:
        verdict, reason = f"{second} better", f"the interval is below -{_MARGIN}"
    elif -d <= s.ci95_low and s.ci95_high <= d:
        verdict, reason = "equivalent", f"the interval is within ±{_MARGIN}"
    else:
        verdict, reason = "inconclusive", (f"the interval crosses ±{_MARGIN}; more "
                                           "repetitions or cells would narrow it")
    return HostVerdict(first, second, s.n, pct, low, high, verdict, reason)
