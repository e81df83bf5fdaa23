"""A against B: is a difference real? Means, delta %, a permutation test, a verdict.

Pure: functions of stored rows and environments; the CLI reads the store and prints.

Method. For every (cell, phase, metric) both sides measured, the per-repetition values
of A and of B are compared with a two-sided permutation test of the difference of
means (``scipy.stats.permutation_test``, independent samples). When the two samples
have at most ``n_resamples`` distinct splits the test is exact; otherwise it draws
``n_resamples`` random splits from a generator seeded with ``seed``, so a comparison
always prints the same p-value. The verdict is ``significant`` only when both
p < alpha and |delta| > threshold (a tiny but consistent difference is ``negligible``);
when even the most extreme split could not reach alpha it is ``too few repetitions``
(two samples of 3 can never reach p < 0.01: 2 / C(6, 3) = 0.1).

Comparing two runs is refused when their environments differ in a key field
(:data:`KEY_ENV_FIELDS`) or when a cell they share was defined differently, unless
forced: the difference would then measure the change of host or study.

Direction. :func:`metric_direction` says which way a metric is better (throughputs and
IOPS: higher; latencies, boot and wall times, retransmits, losses and errors: lower;
others: none) and :func:`change_label` names a change of B against A accordingly; the
scenario report reads its degradation against alone with the same rule.

numpy and scipy are imported by the permutation test itself, so importing this module
for :func:`metric_direction` stays cheap.
"""

from __future__ import annotations

import fnmatch
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from hvbench.analysis.metrics import direction_of, main_metric
from hvbench.analysis.summaries import Row
from hvbench.errors import SpecError

__all__ = [
    "DEFAULT_ALPHA",
    "DEFAULT_THRESHOLD_PCT",
    "KEY_ENV_FIELDS",
    "Change",
    "Comparison",
    "ComparisonRefused",
    "Direction",
    "Side",
    "change_label",
    "compare_sides",
    "definition_differences",
    "delta_pct",
    "env_differences",
    "metric_direction",
    "min_p_value",
    "permutation_p_value",
    "side_values",
]

DEFAULT_ALPHA = 0.01
DEFAULT_THRESHOLD_PCT = 5.0
DEFAULT_RESAMPLES = 9999
DEFAULT_SEED = 20261123
#: Environment fields two compared runs must share: the host (name, kernel, CPU,
#: memory), the hypervisor (QEMU, accelerator) and the work directory's filesystem.
KEY_ENV_FIELDS = ("hostname", "kernel", "cpu_model", "cpus", "memory_bytes",
                  "qemu_version", "accelerator", "work_dir.filesystem")

Verdict = Literal["significant", "negligible", "not significant", "too few repetitions"]
#: Which way a metric is better: ``higher`` (throughputs), ``lower`` (times, losses).
Direction = Literal["higher", "lower"]
#: How B differs from A: ``better``/``worse`` with a direction, else ``higher``/``lower``.
Change = Literal["better", "worse", "higher", "lower"]
Key = tuple[str, str, str]


class ComparisonRefused(SpecError):
    """The two sides should not be compared (different environments or cell
    definitions); the message names what differs and how to override."""


@dataclass(frozen=True)
class Side:
    """One side of a comparison: a label and per-repetition values keyed by
    (cell, phase, metric). For a platform of a run the cell is the workload name."""

    label: str
    values: Mapping[Key, Sequence[float]]


@dataclass(frozen=True)
class Comparison:
    """One (cell, phase, metric) compared."""

    cell: str
    phase: str
    metric: str
    n_a: int
    n_b: int
    mean_a: float
    mean_b: float
    #: (mean B - mean A) / |mean A| in %; None when mean A is 0.
    delta_pct: float | None
    p_value: float
    verdict: Verdict
    #: For a significant difference: ``better`` / ``worse`` when the metric has a
    #: direction, else ``higher`` / ``lower``; empty otherwise.
    change: str


def _dig(env: Mapping[str, Any], dotted: str) -> Any:
    value: Any = env
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def env_differences(a: Mapping[str, Any], b: Mapping[str, Any],
                    fields: Sequence[str] = KEY_ENV_FIELDS) -> list[tuple[str, Any, Any]]:
    """(field, value in A, value in B) for every key field that differs; dotted fields
    reach into nested values (``work_dir.filesystem``)."""
    return [(f, _dig(a, f), _dig(b, f)) for f in fields if _dig(a, f) != _dig(b, f)]


def definition_differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """Names present in both mappings whose definitions (stored JSON) differ."""
    return sorted(name for name in a.keys() & b.keys() if a[name] != b[name])


def side_values(rows: Iterable[Row], platform: str | None = None) -> dict[Key, list[float]]:
    """Per-repetition values keyed by (cell, phase, metric); with ``platform``, only
    that platform's rows, keyed by workload instead of cell (so two platforms of one
    run line up)."""
    out: dict[Key, list[float]] = defaultdict(list)
    for row in rows:
        if platform is None:
            out[(row.cell, row.phase, row.metric)].append(row.value)
        elif row.platform == platform:
            out[(row.workload, row.phase, row.metric)].append(row.value)
    return dict(out)


def _main_metric(metrics: Iterable[str]) -> str | None:
    return main_metric(metrics)


def select_keys(keys: Iterable[Key], patterns: Sequence[str]) -> list[Key]:
    """Keys whose metric matches one of the fnmatch ``patterns``; without patterns, the
    throughput metric of each (cell, phase) (as the report's tables lead with)."""
    keys = sorted(set(keys))
    if patterns:
        return [k for k in keys if any(fnmatch.fnmatchcase(k[2], p) for p in patterns)]
    by_phase: dict[tuple[str, str], list[str]] = defaultdict(list)
    for cell, phase, metric in keys:
        by_phase[(cell, phase)].append(metric)
    chosen = {(c, p, m) for (c, p), metrics in by_phase.items()
              if (m := _main_metric(metrics)) is not None}
    return [k for k in keys if k in chosen]


def _mean_difference(a: Any, b: Any, axis: int) -> Any:
    return a.mean(axis=axis) - b.mean(axis=axis)


def min_p_value(n_a: int, n_b: int, n_resamples: int = DEFAULT_RESAMPLES) -> float:
    """The smallest two-sided p-value the test can return for these sample sizes."""
    splits = math.comb(n_a + n_b, n_a)
    if splits <= n_resamples:
        return min(1.0, 2.0 / splits)
    return 2.0 / (n_resamples + 1)


def permutation_p_value(a: Sequence[float], b: Sequence[float], *,
                        n_resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED) -> float:
    """Two-sided permutation test of mean(a) - mean(b); exact when the splits are few.

    Raises:
        SpecError: a side has fewer than 2 values.
    """
    if len(a) < 2 or len(b) < 2:
        raise SpecError(f"a permutation test needs 2 values per side, got {len(a)} and "
                        f"{len(b)}")
    if len(set(a) | set(b)) == 1:
        return 1.0  # every split gives the same difference
    import numpy as np  # noqa: PLC0415 - scipy and numpy cost ~1.5 s to import
    from scipy.stats import permutation_test  # noqa: PLC0415

    result = permutation_test(
        (np.asarray(a, dtype=float), np.asarray(b, dtype=float)), _mean_difference,
        permutation_type="independent", vectorized=True, n_resamples=n_resamples,
        alternative="two-sided", rng=np.random.default_rng(seed))
    return float(min(1.0, result.pvalue))


def metric_direction(metric: str) -> Direction | None:
    """Which way ``metric`` is better: ``higher`` for throughputs and IOPS (``mb_s``,
    ``replies_s``, ``*.iops``), ``lower`` for latencies and times (``*_ms``,
    ``boot_s``, ``phase_wall_s``), retransmits, losses and errors; None for metrics
    without one (CPU %, sizes, counts) or not in the catalogue
    (:mod:`hvbench.analysis.metrics`).

    >>> metric_direction("mb_s"), metric_direction("reply_ms"), metric_direction("cpu_pct")
    ('higher', 'lower', None)
    """
    direction = direction_of(metric)
    return None if direction == "neutral" else direction


def change_label(metric: str, delta: float) -> Change:
    """How a change of ``delta`` (B - A, any unit) reads for ``metric``: ``better`` or
    ``worse`` when it has a :func:`metric_direction`, else ``higher`` or ``lower``. A
    ``delta`` of 0 reads as ``worse`` / ``lower`` (callers only label real changes).

    >>> change_label("mb_s", -3.0), change_label("lat_p99_ms", -3.0), change_label("x", 2)
    ('worse', 'better', 'higher')
    """
    direction = metric_direction(metric)
    if direction is None:
        return "higher" if delta > 0 else "lower"
    improved = delta > 0 if direction == "higher" else delta < 0
    return "better" if improved else "worse"


def delta_pct(mean_a: float, mean_b: float) -> float | None:
    """(mean B - mean A) / |mean A| in %; None when mean A is 0 (any change from 0 is
    infinitely large in %).

    >>> delta_pct(50.0, 40.0), delta_pct(-2.0, -1.0), delta_pct(0.0, 1.0)
    (-20.0, 50.0, None)
    """
    return (mean_b - mean_a) / abs(mean_a) * 100.0 if mean_a != 0 else None


def compare_values(key: Key, a: Sequence[float], b: Sequence[float], *, alpha: float,
                   threshold_pct: float, n_resamples: int = DEFAULT_RESAMPLES,
                   seed: int = DEFAULT_SEED) -> Comparison:
    """One comparison with its verdict (see the module docstring)."""
    mean_a, mean_b = math.fsum(a) / len(a), math.fsum(b) / len(b)
    delta = delta_pct(mean_a, mean_b)
    enough = len(a) >= 2 and len(b) >= 2
    p = permutation_p_value(a, b, n_resamples=n_resamples, seed=seed) if enough else math.nan
    verdict: Verdict
    if not enough or min_p_value(len(a), len(b), n_resamples) >= alpha:
        verdict = "too few repetitions"
    elif p >= alpha:
        verdict = "not significant"
    else:
        # from a mean of 0 any change is infinitely large in %
        big = delta is None or abs(delta) > threshold_pct
        verdict = "significant" if big else "negligible"
    change = change_label(key[2], mean_b - mean_a) if verdict == "significant" else ""
    return Comparison(cell=key[0], phase=key[1], metric=key[2], n_a=len(a), n_b=len(b),
                      mean_a=mean_a, mean_b=mean_b, delta_pct=delta, p_value=p,
                      verdict=verdict, change=change)


@dataclass(frozen=True)
class ComparisonResult:
    """Every comparison, and the keys only one side has (among the selected metrics)."""

    comparisons: list[Comparison]
    only_a: list[Key]
    only_b: list[Key]


def compare_sides(a: Side, b: Side, *, metrics: Sequence[str] = (),
                  alpha: float = DEFAULT_ALPHA, threshold_pct: float = DEFAULT_THRESHOLD_PCT,
                  n_resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED
                  ) -> ComparisonResult:
    """Compare every selected (cell, phase, metric) present on both sides.

    Raises:
        SpecError: alpha not in (0, 1), a negative threshold, or fewer than 1 resample.
    """
    if not 0.0 < alpha < 1.0:
        raise SpecError(f"--alpha must be between 0 and 1, got {alpha}")
    if threshold_pct < 0:
        raise SpecError(f"--threshold must be >= 0 %, got {threshold_pct}")
    if n_resamples < 1:
        raise SpecError(f"n_resamples must be >= 1, got {n_resamples}")
    keys_a = set(select_keys(a.values, metrics))
    keys_b = set(select_keys(b.values, metrics))
    comparisons = [compare_values(k, a.values[k], b.values[k], alpha=alpha,
                                  threshold_pct=threshold_pct, n_resamples=n_resamples,
                                  seed=seed)
                   for k in sorted(keys_a & keys_b)]
    return ComparisonResult(comparisons, sorted(keys_a - keys_b), sorted(keys_b - keys_a))
