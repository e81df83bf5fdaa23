"""How precisely a cell is measured, and whether adaptive repetitions should go on.

Pure. A cell's precision is that of its main metric (:func:`main_metric`, the boot time
aside) in every phase: the 95 % CI half-width of the mean, in % of the mean. The phase
with the widest interval decides. With an adaptive rule (``repetitions = { min, max,
ci_pct }``) a cell needs another round while that width is above ``ci_pct`` and it has
had fewer than ``max`` rounds; a round whose repetition failed counts as a round, so a
cell that keeps failing stops at ``max`` too.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from hvbench.analysis.metrics import main_metric
from hvbench.analysis.stats import summarize
from hvbench.analysis.summaries import Row
from hvbench.model.study import RepetitionRule

__all__ = ["CellPrecision", "PrecisionState", "cell_precision"]

#: ``more``: run another round; ``reached``: within ci_pct; ``max``: stopped at max
#: rounds; ``no metric``: no main metric to test (stops after min); ``fixed``: not
#: adaptive.
PrecisionState = Literal["more", "reached", "max", "no metric", "fixed"]


@dataclass(frozen=True)
class CellPrecision:
    """Where a cell stands: ok repetitions, rounds it was in, its widest CI (% of the
    mean) with that metric's CoV, and the state."""

    cell: str
    n: int
    rounds: int
    ci_pct: float | None
    cov_pct: float | None
    #: ``phase/metric`` whose interval is the widest.
    metric: str | None
    state: PrecisionState
    target_pct: float | None = None
    max_rounds: int = 0


def _widest(rows: Iterable[Row]) -> tuple[float | None, float | None, str | None, int]:
    """(CI half-width %, CoV %, phase/metric, n) of the least precise phase."""
    values: dict[tuple[str, str], list[float]] = defaultdict(list)
    reps: set[int] = set()
    for row in rows:
        values[(row.phase, row.metric)].append(row.value)
        reps.add(row.repetition)
    by_phase: dict[str, list[str]] = defaultdict(list)
    for phase, metric in values:
        by_phase[phase].append(metric)
    worst: tuple[float | None, float | None, str | None] = (None, None, None)
    for phase, metrics in sorted(by_phase.items()):
        main = main_metric(metrics, boot=False)
        if main is None:
            continue
        summary = summarize(values[(phase, main)])
        if summary.n < 2 or summary.mean == 0:
            continue
        width = summary.ci95_half_width / abs(summary.mean) * 100.0
        if worst[0] is None or width > worst[0]:
            worst = (width, summary.cov_pct, f"{phase}/{main}")
    return (*worst, len(reps))


def cell_precision(cell: str, rule: RepetitionRule, rows: Iterable[Row],
                   rounds: int) -> CellPrecision:
    """The precision and state of ``cell`` from its ok rows, after ``rounds`` rounds."""
    width, cov, metric, n = _widest(rows)
    state: PrecisionState
    if not rule.adaptive or rule.ci_pct is None:
        state = "fixed"
    elif n >= max(2, rule.min) and width is not None and width <= rule.ci_pct:
        state = "reached"
    elif rounds >= rule.max:
        state = "max"
    elif width is None and n >= rule.min:
        state = "no metric"
    else:
        state = "more"
    return CellPrecision(cell=cell, n=n, rounds=rounds, ci_pct=width, cov_pct=cov,
                         metric=metric, state=state, target_pct=rule.ci_pct,
                         max_rounds=rule.max)

