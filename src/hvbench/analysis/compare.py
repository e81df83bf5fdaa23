"""A against B: is a difference real? Means, delta %, a permutation test, a verdict.

Pure: functions of stored rows and environments; the CLI reads the store and prints.

Method. For every (cell, phase, metric) both sides measured:

- **Paired** (the default when both sides carry repetition numbers: two platforms of one
  run). The runner measures every cell of a repetition in one shuffled round, so A's and
  B's repetition ``r`` ran back to back, through the same drift of the host. The
  differences B - A of the repetitions both sides have are tested with a paired Student
  t-test (``scipy.stats.ttest_rel``); the means and n are those of the pairs. Three pairs
  at least (two degrees of freedom); fewer is ``too few repetitions``.
- **Independent** (two runs, or ``paired=False``): a two-sided permutation test of the
  difference of means (``scipy.stats.permutation_test``). When the two samples have at
  most ``n_resamples`` distinct splits the test is exact; otherwise it draws
  ``n_resamples`` random splits from a generator seeded with ``seed``, so a comparison
  always prints the same p-value; when even the most extreme split could not reach
  alpha the verdict is ``too few repetitions`` (two samples of 3 can never reach
  p < 0.01: 2 / C(6, 3) = 0.1). Each value is one repetition (its own guest boot and
  time window) or, for a side of several runs, one run's mean (:attr:`Side.unit`):
  samples taken inside one boot or window are never pooled as if independent.

The verdict is ``significant`` only when p < alpha, |delta| > threshold (a tiny but
consistent difference is ``negligible``) and, when this host's noise floor of the cell
and metric is known (:mod:`hvbench.analysis.noise`, ``hvbench noise``), |delta| is above
that floor for these sample sizes (else ``within noise floor``): what identical cells
measured back to back differ by is never called an effect.

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
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from hvbench.analysis.metrics import direction_of, main_metric
from hvbench.analysis.noise import NoiseFloor
from hvbench.analysis.summaries import Row
from hvbench.errors import SpecError
from hvbench.model import settings

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
    "setting_differences",
    "side_repetitions",
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

Verdict = Literal["significant", "negligible", "within noise floor", "not significant",
                  "too few repetitions"]
#: How a comparison was tested (see the module docstring).
Test = Literal["paired t", "permutation"]
#: The fewest pairs a paired test takes (two degrees of freedom).
MIN_PAIRS = 3
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
    """One side of a comparison: a label and values keyed by (cell, phase, metric). For
    a platform of a run the cell is the workload name."""

    label: str
    values: Mapping[Key, Sequence[float]]
    #: The repetition number of each value (same order as ``values``): when both sides
    #: have them for a key, the comparison is paired by repetition.
    repetitions: Mapping[Key, Sequence[int]] = field(default_factory=dict)
    #: What one value is: one ``repetition`` (its own boot and time window) or one
    #: ``run``'s mean (a side made of several runs).
    unit: Literal["repetition", "run"] = "repetition"


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
    test: Test = "permutation"
    #: The host's noise floor for these sample sizes (|delta| % below it is noise);
    #: None when none was measured for this cell and metric.
    noise_floor_pct: float | None = None


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


def setting_differences(a: Any, b: Any) -> list[tuple[str, Any, Any]]:
    """(setting, value in A, value in B) for every platform setting two stored cell
    definitions differ in, on every disk and NIC (:func:`hvbench.model.settings.flat`).
    A cell's definition is its (platform, workload) pair; anything else (a workload
    alone) has no platform settings: []."""
    if not (isinstance(a, tuple) and isinstance(b, tuple) and a and b
            and isinstance(a[0], Mapping) and isinstance(b[0], Mapping)):
        return []
    flat_a, flat_b = settings.flat(a[0]), settings.flat(b[0])
    return [(k, flat_a.get(k), flat_b.get(k)) for k in dict.fromkeys([*flat_a, *flat_b])
            if flat_a.get(k) != flat_b.get(k)]


def _keyed(rows: Iterable[Row], platform: str | None) -> Iterator[tuple[Key, Row]]:
    """Each row with its key: (cell, phase, metric); with ``platform``, only that
    platform's rows, keyed by workload instead of cell (so two platforms of one run
    line up)."""
    for row in rows:
        if platform is None:
            yield (row.cell, row.phase, row.metric), row
        elif row.platform == platform:
            yield (row.workload, row.phase, row.metric), row


def side_values(rows: Iterable[Row], platform: str | None = None) -> dict[Key, list[float]]:
    """Per-repetition values keyed as :func:`_keyed` keys them."""
    out: dict[Key, list[float]] = defaultdict(list)
    for key, row in _keyed(rows, platform):
        out[key].append(row.value)
    return dict(out)


def side_repetitions(rows: Iterable[Row], platform: str | None = None
                     ) -> dict[Key, list[int]]:
    """The repetition number of each value :func:`side_values` returns for the same
    arguments, in the same order (what pairs two platforms of one run)."""
    out: dict[Key, list[int]] = defaultdict(list)
    for key, row in _keyed(rows, platform):
        out[key].append(row.repetition)
    return dict(out)


def run_means(rows_by_run: Sequence[Iterable[Row]]) -> dict[Key, list[float]]:
    """One value per run and (cell, phase, metric): the mean of the run's repetitions
    (a side of several runs compares run-level values, never pooled repetitions)."""
    out: dict[Key, list[float]] = defaultdict(list)
    for rows in rows_by_run:
        for key, values in side_values(rows).items():
            out[key].append(math.fsum(values) / len(values))
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


def paired_p_value(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided paired t-test of mean(b - a) = 0 over pairs ``(a[i], b[i])``.

    Identical differences give p = 1 when they are all 0 and p = 0 otherwise (a
    perfectly consistent shift). Raises :class:`SpecError` for fewer than
    :data:`MIN_PAIRS` pairs or sides of different lengths.
    """
    if len(a) != len(b) or len(a) < MIN_PAIRS:
        raise SpecError(f"a paired test needs {MIN_PAIRS} pairs or more of equal sides, got "
                        f"{len(a)} and {len(b)} values")
    diffs = [y - x for x, y in zip(a, b, strict=True)]
    if max(diffs) == min(diffs):
        return 1.0 if diffs[0] == 0 else 0.0
    from scipy.stats import ttest_rel  # noqa: PLC0415 - scipy costs ~1 s to import

    return float(ttest_rel(b, a).pvalue)


def pair_values(a: Sequence[float], reps_a: Sequence[int], b: Sequence[float],
                reps_b: Sequence[int]) -> tuple[list[float], list[float]]:
    """The values of the repetitions both sides have, in repetition order."""
    by_a = dict(zip(reps_a, a, strict=True))
    by_b = dict(zip(reps_b, b, strict=True))
    common = sorted(by_a.keys() & by_b.keys())
    return [by_a[r] for r in common], [by_b[r] for r in common]


def compare_values(key: Key, a: Sequence[float], b: Sequence[float], *, alpha: float,
                   threshold_pct: float, n_resamples: int = DEFAULT_RESAMPLES,
                   seed: int = DEFAULT_SEED,
                   pairs: tuple[Sequence[int], Sequence[int]] | None = None,
                   noise: NoiseFloor | None = None) -> Comparison:
    """One comparison with its verdict (see the module docstring). ``pairs``: the
    repetition numbers of ``a`` and ``b``, to pair them; ``noise``: the host's noise
    floor of this cell and metric."""
    test: Test = "permutation"
    if pairs is not None:
        a, b = pair_values(a, pairs[0], b, pairs[1])
        test = "paired t"
    mean_a = math.fsum(a) / len(a) if a else math.nan
    mean_b = math.fsum(b) / len(b) if b else math.nan
    delta = delta_pct(mean_a, mean_b) if a and b else None
    if test == "paired t":
        enough = len(a) >= MIN_PAIRS
        p = paired_p_value(a, b) if enough else math.nan
    else:
        enough = len(a) >= 2 and len(b) >= 2 and \
            min_p_value(len(a), len(b), n_resamples) < alpha
        p = permutation_p_value(a, b, n_resamples=n_resamples, seed=seed) \
            if len(a) >= 2 and len(b) >= 2 else math.nan
    floor = noise.floor_pct(len(a), len(b), alpha) if noise is not None and enough else None
    verdict: Verdict
    if not enough:
        verdict = "too few repetitions"
    elif p >= alpha:
        verdict = "not significant"
    elif floor is not None and delta is not None and abs(delta) <= floor:
        verdict = "within noise floor"
    else:
        # from a mean of 0 any change is infinitely large in %
        big = delta is None or abs(delta) > threshold_pct
        verdict = "significant" if big else "negligible"
    change = change_label(key[2], mean_b - mean_a) if verdict == "significant" else ""
    return Comparison(cell=key[0], phase=key[1], metric=key[2], n_a=len(a), n_b=len(b),
                      mean_a=mean_a, mean_b=mean_b, delta_pct=delta, p_value=p,
                      verdict=verdict, change=change, test=test, noise_floor_pct=floor)


@dataclass(frozen=True)
class ComparisonResult:
    """Every comparison, and the keys only one side has (among the selected metrics)."""

    comparisons: list[Comparison]
    only_a: list[Key]
    only_b: list[Key]


def compare_sides(a: Side, b: Side, *, metrics: Sequence[str] = (),
                  alpha: float = DEFAULT_ALPHA, threshold_pct: float = DEFAULT_THRESHOLD_PCT,
                  n_resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
                  paired: bool = True, floors: Mapping[Key, NoiseFloor] | None = None
                  ) -> ComparisonResult:
    """Compare every selected (cell, phase, metric) present on both sides: paired by
    repetition when ``paired`` and both sides carry repetition numbers for the key,
    else independent; ``floors``: the host's noise floor per key (A's keys).

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
    floors = floors or {}
    comparisons = []
    for k in sorted(keys_a & keys_b):
        pairs = ((a.repetitions[k], b.repetitions[k])
                 if paired and k in a.repetitions and k in b.repetitions else None)
        comparisons.append(compare_values(
            k, a.values[k], b.values[k], alpha=alpha, threshold_pct=threshold_pct,
            n_resamples=n_resamples, seed=seed, pairs=pairs, noise=floors.get(k)))
    return ComparisonResult(comparisons, sorted(keys_a - keys_b), sorted(keys_b - keys_a))
