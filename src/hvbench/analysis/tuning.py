"""The statistics of a tuning run (pure): each configuration's objective per
repetition, its summary and % of native, the ranking, when finalists are separated,
the winner's tests against the default and native, and each axis's effect.

The objective of one repetition of a configuration is the metric of its single target
phase, or, with several targets, the weighted mean of each target's value in % of the
native mean (different metrics and scales only combine as shares of native).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from hvbench.analysis.compare import Comparison, compare_values
from hvbench.analysis.stats import Summary, percent_of_summary, summarize
from hvbench.analysis.summaries import Row
from hvbench.model.tune import TuneSpec

Goal = Literal["maximize", "minimize"]


@dataclass(frozen=True)
class Objective:
    """What a tuning run optimises: ``targets`` are (workload, phase, weight)."""

    metric: str
    goal: Goal
    targets: tuple[tuple[str, str, float], ...]


def objective_of(spec: TuneSpec) -> Objective:
    """The analysis layer's view of the objective."""
    return Objective(spec.metric, spec.goal,
                     tuple((t.workload, t.phase, t.weight) for t in spec.targets))


def _values(rows: Sequence[Row], platform: str, workload: str, phase: str, metric: str
            ) -> dict[int, float]:
    return {r.repetition: r.value for r in rows
            if r.platform == platform and r.workload == workload and r.phase == phase
            and r.metric == metric}


def native_means(rows: Sequence[Row], objective: Objective, native: str | None
                 ) -> dict[tuple[str, str], float]:
    """(workload, phase) -> the native mean of the metric (those measured)."""
    out: dict[tuple[str, str], float] = {}
    if native is None:
        return out
    for workload, phase, _ in objective.targets:
        values = _values(rows, native, workload, phase, objective.metric)
        if values:
            out[(workload, phase)] = math.fsum(values.values()) / len(values)
    return out


def scores(rows: Sequence[Row], platform: str, objective: Objective,
           natives: Mapping[tuple[str, str], float]) -> list[float]:
    """The objective of every repetition of ``platform`` that measured every target,
    in repetition order (see the module docstring). Empty with several targets and no
    native mean (or a native mean of 0)."""
    per_target = [_values(rows, platform, w, p, objective.metric)
                  for w, p, _ in objective.targets]
    reps = sorted(set.intersection(*(set(v) for v in per_target))) if per_target else []
    if len(objective.targets) == 1:
        return [per_target[0][r] for r in reps]
    if any(not natives.get((w, p)) for w, p, _ in objective.targets):
        return []
    total = math.fsum(weight for _, _, weight in objective.targets)
    return [math.fsum(weight * values[r] / natives[(w, p)] * 100.0
                      for (w, p, weight), values in zip(objective.targets, per_target,
                                                        strict=True)) / total
            for r in reps]


def better(a: float, b: float, goal: Goal) -> bool:
    """Whether objective ``a`` beats ``b``."""
    return a > b if goal == "maximize" else a < b


def ranked(summaries: Mapping[str, Summary], goal: Goal) -> list[str]:
    """Configurations best first (by mean; more repetitions first on a tie)."""
    sign = -1.0 if goal == "maximize" else 1.0
    return sorted(summaries, key=lambda n: (sign * summaries[n].mean, -summaries[n].n, n))


def separated(best: Summary, others: Sequence[Summary], goal: Goal) -> bool:
    """True when ``best``'s 95 % interval lies wholly on the better side of every other
    interval (each with at least 2 repetitions)."""
    if best.n < 2 or any(o.n < 2 for o in others):
        return False
    if goal == "maximize":
        return all(best.ci95_low > o.ci95_high for o in others)
    return all(best.ci95_high < o.ci95_low for o in others)


@dataclass(frozen=True)
class TrialRow:
    """One configuration of the ranked table."""

    name: str
    params: Mapping[str, Any]
    summary: Summary
    #: % of native (mean, CI low, CI high); None without a native baseline.
    pct_of_native: tuple[float, float | None, float | None] | None
    #: Better than native: a page cache or a shortcut, not the device, was measured.
    above_native: bool
    #: The order in which the search first measured it (0: first).
    order: int


def trial_rows(per_config: Mapping[str, Sequence[float]], params: Mapping[str, Mapping[str, Any]],
               order: Sequence[str], objective: Objective, native: Sequence[float]
               ) -> list[TrialRow]:
    """The ranked table: every configuration with at least one score, best first.

    ``native``: the native platform's objective per repetition (single target: the
    metric; several: each repetition's share of the native mean, around 100)."""
    summaries = {n: summarize(v) for n, v in per_config.items() if v}
    native_summary = summarize(native) if native else None
    rows = []
    for name in ranked(summaries, objective.goal):
        summary = summaries[name]
        pct = None
        above = False
        if native_summary is not None and native_summary.mean != 0:
            pct = percent_of_summary(summary, native_summary)
            above = better(summary.mean, native_summary.mean, objective.goal)
        rows.append(TrialRow(name, params.get(name, {}), summary, pct, above,
                             order.index(name) if name in order else len(order)))
    return rows


def winner_of(rows: Sequence[TrialRow], min_repetitions: int) -> TrialRow | None:
    """The best configuration among those measured at least ``min_repetitions`` times
    (the finalists), else the best of all."""
    pool = [r for r in rows if r.summary.n >= min_repetitions] or list(rows)
    return pool[0] if pool else None


def test_against(winner: Sequence[float], other: Sequence[float], metric: str, *,
                 alpha: float, label: str) -> Comparison:
    """The winner (side B) against ``other`` (side A): mean difference, permutation
    p-value and verdict (:func:`hvbench.analysis.compare.compare_values`, 5 % threshold)."""
    return compare_values((label, "objective", metric), list(other), list(winner),
                          alpha=alpha, threshold_pct=5.0)


@dataclass(frozen=True)
class AxisEffect:
    """One axis value: the mean objective of the configurations that had it."""

    axis: str
    value: Any
    mean: float
    configs: int


def axis_effects(per_config: Mapping[str, Sequence[float]],
                 params: Mapping[str, Mapping[str, Any]]) -> list[AxisEffect]:
    """Per axis and value, the mean over configurations (each weighted once, by its own
    mean) that had that value: the per-axis effect of the HTML report."""
    means = {n: math.fsum(v) / len(v) for n, v in per_config.items() if v}
    groups: dict[tuple[str, str], list[float]] = {}
    values: dict[tuple[str, str], Any] = {}
    for name, mean in means.items():
        for axis, value in params.get(name, {}).items():
            key = (axis, repr(value))
            groups.setdefault(key, []).append(mean)
            values[key] = value
    return [AxisEffect(axis, values[(axis, key)], math.fsum(g) / len(g), len(g))
            for (axis, key), g in sorted(groups.items())]
