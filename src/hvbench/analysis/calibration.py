"""Per-host calibration of the diagnosis thresholds (``hvbench calibrate``): pure.

A threshold of :mod:`hvbench.analysis.diagnosis` separates the cells where its cause is
present from those where it is not. Which value separates them depends on the host: a
vCPU's run-queue wait on an idle TCG host, how close a tbf-shaped link gets to its
rate, how many flushes a write costs on this file system. The planted matrix
(``examples/diagnosis``) gives cells whose cause is known; for each calibrated threshold
the cells planted with its rule are the *positives*, every other planted cell where the
metric was measured (clean guests, other causes) the *negatives*.

When the two groups separate on this host (every positive beyond every negative, in the
direction the rule reads), the calibrated value is the middle of the gap between them,
the point farthest from both. When they overlap, or either group has fewer than
:data:`MIN_CELLS` cells, the threshold keeps its default and the outcome says why:
a threshold is never moved on evidence that does not decide it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hvbench.analysis import diagnosis as rules
from hvbench.analysis.resources import CellModel
from hvbench.store.records import CalibrationRecord

#: Fewest positive and fewest negative cells a threshold is calibrated from.
MIN_CELLS = 2


def _metric(metric: str) -> Callable[[CellModel], float | None]:
    def read(cell: CellModel) -> float | None:
        return cell.get(metric)
    return read


@dataclass(frozen=True)
class Threshold:
    """One calibrated threshold: its name in :mod:`~hvbench.analysis.diagnosis`, the
    rule that reads it, what it is compared with, and whether the rule fires at values
    ``above`` it (at or over) or ``below`` it (under)."""

    name: str
    rule: str
    what: str
    direction: str
    read: Callable[[CellModel], float | None]

    @property
    def default(self) -> float:
        """The value the rules use without a calibration."""
        return float(getattr(rules, self.name))


THRESHOLDS: tuple[Threshold, ...] = (
    Threshold("WAIT_PCT", "host-cpu-contention", "res.vcpu.wait_pct", "above",
              _metric("res.vcpu.wait_pct")),
    Threshold("LINK_SATURATED_PCT", "link-saturated", "res.net.link_util_pct", "above",
              _metric("res.net.link_util_pct")),
    Threshold("FLUSH_PER_WRITE", "flush-per-write", "res.disk.flush_per_write", "above",
              _metric("res.disk.flush_per_write")),
    Threshold("SLIRP_MAIN_PCT", "user-mode-networking", "qemu.main.cpu_pct", "above",
              _metric("qemu.main.cpu_pct")),
)


@dataclass(frozen=True)
class PlantedCell:
    """A cell of the planted matrix and the rule planted in it (``none``: a clean
    guest)."""

    model: CellModel
    planted: str


@dataclass(frozen=True)
class Calibrated:
    """One threshold's outcome: ``value`` is what the rules will read (the default when
    not ``calibrated``); ``note`` says from what, or why the default stays."""

    name: str
    rule: str
    default: float
    value: float
    calibrated: bool
    positives: int
    negatives: int
    note: str


def _values(threshold: Threshold, cells: Sequence[PlantedCell]
            ) -> tuple[list[float], list[float]]:
    positives: list[float] = []
    negatives: list[float] = []
    for cell in cells:
        value = threshold.read(cell.model)
        if value is None:
            continue
        (positives if cell.planted == threshold.rule else negatives).append(value)
    return positives, negatives


def calibrate_one(threshold: Threshold, cells: Sequence[PlantedCell]) -> Calibrated:
    """Calibrate ``threshold`` from the planted ``cells`` (see the module)."""
    pos, neg = _values(threshold, cells)
    default = threshold.default

    def kept(note: str) -> Calibrated:
        return Calibrated(threshold.name, threshold.rule, default, default, False,
                          len(pos), len(neg), note)

    if len(pos) < MIN_CELLS or len(neg) < MIN_CELLS:
        return kept(f"too few cells to decide: {len(pos)} planted with {threshold.rule}, "
                    f"{len(neg)} others (at least {MIN_CELLS} each)")
    if threshold.direction == "above":
        low, high = max(neg), min(pos)
        inner, outer = "others' highest", f"{threshold.rule}'s lowest"
    else:
        low, high = max(pos), min(neg)
        inner, outer = f"{threshold.rule}'s highest", "others' lowest"
    if low >= high:
        return kept(f"the groups overlap on this host: {inner} {low:.3g} >= "
                    f"{outer} {high:.3g}")
    value = (low + high) / 2.0
    return Calibrated(threshold.name, threshold.rule, default, value, True, len(pos),
                      len(neg), f"between {inner} {low:.3g} and {outer} {high:.3g}")


def calibrate(cells: Sequence[PlantedCell],
              thresholds: Sequence[Threshold] = THRESHOLDS) -> list[Calibrated]:
    """Every threshold's outcome on the planted ``cells``."""
    return [calibrate_one(t, cells) for t in thresholds]


def thresholds_of(outcomes: Sequence[Calibrated]) -> dict[str, float]:
    """The values the rules read from a calibration: only the calibrated ones (the
    others stay at their defaults)."""
    return {o.name: o.value for o in outcomes if o.calibrated}


def stored_thresholds(records: Sequence[CalibrationRecord]) -> dict[str, float]:
    """The thresholds the rules read from a stored calibration: its calibrated ones
    (names this hvbench does not calibrate are ignored)."""
    names = {t.name for t in THRESHOLDS}
    return {r.name: r.value for r in records if r.calibrated and r.name in names}
