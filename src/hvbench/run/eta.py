"""The time left of a run, from its dry-run plan, at every instant (pure but for the
clock it is given).

The plan's per-item estimates (:func:`~hvbench.run.plan.plan_study`: earlier runs of
the same cells, else each kind's default, plus a boot per guest the runner boots) give
an ETA before the first measurement ends. Once items finish, the estimate of what is
left is scaled by how far the finished ones were off (their measured seconds over their
estimated ones), so a host slower than the defaults corrects the ETA as the run goes.
The item running now counts with what is left of its estimate (never below zero), so the
ETA falls while it runs instead of standing still until it ends.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence

from hvbench.run.plan import BOOT_ESTIMATE_S, StudyPlan, groups, platform_boots

#: A clock in seconds (time.monotonic, or a fake one in tests).
Clock = Callable[[], float]


def item_estimates(plan: StudyPlan) -> list[float]:
    """The estimated seconds of each item of ``plan`` in run order: its cell's estimate,
    plus a guest boot for the first item of each group whose platform the runner boots
    (the boot happens before that item starts running)."""
    out: list[float] = []
    for group in groups(plan.items):
        boot = BOOT_ESTIMATE_S * platform_boots(group)
        for index, item in enumerate(group):
            out.append(plan.cell_seconds[item.cell.name] + (boot if index == 0 else 0.0))
    return out


class RunEta:
    """Time left of a run whose items finish one after another, in plan order.

    ``estimates``: each planned item's estimated seconds (:func:`item_estimates`).
    Items the run adds beyond them (adaptive rounds, :meth:`set_total`) are estimated at
    the median of the planned ones.
    """

    def __init__(self, estimates: Sequence[float], clock: Clock = time.monotonic) -> None:
        self.estimates = list(estimates)
        self.total = len(self.estimates)
        self.clock = clock
        self.finished = 0
        self._spent = 0.0
        self._item_started = clock()

    def set_total(self, total: int) -> None:
        """The run now has ``total`` items (adaptive rounds add some)."""
        self.total = max(total, self.finished)

    def item_done(self) -> None:
        """The item running now ended (measured or failed); the next one starts."""
        now = self.clock()
        self._spent += now - self._item_started
        self._item_started = now
        self.finished += 1

    def _estimate(self, index: int) -> float:
        if index < len(self.estimates):
            return self.estimates[index]
        return statistics.median(self.estimates) if self.estimates else 0.0

    def scale(self) -> float:
        """Measured over estimated seconds of the finished items (1 before any)."""
        planned = sum(self._estimate(i) for i in range(self.finished))
        if self.finished == 0 or planned <= 0:
            return 1.0
        return self._spent / planned

    def remaining_s(self) -> float:
        """Seconds left: what is left of the running item's estimate plus every later
        item's, times :meth:`scale`; 0 once every item finished."""
        if self.finished >= self.total:
            return 0.0
        scale = self.scale()
        running = self.clock() - self._item_started
        current = max(0.0, self._estimate(self.finished) * scale - running)
        later = sum(self._estimate(i) for i in range(self.finished + 1, self.total))
        return current + later * scale


def clock_text(seconds: float) -> str:
    """``H:MM:SS``, as wide at 0 s as at 9 h (pure)."""
    minutes, secs = divmod(max(0, round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"
