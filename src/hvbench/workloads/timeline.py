"""The timeline of a workload that times its own steps (lifecycle, propagation).

Both record named ``time.monotonic()`` marks, check that the marks came in order, derive
each phase's duration from a pair of marks, and share one ``timeout_s`` between their
steps: :class:`Timeline` holds all of that for one run. :func:`check_order` and
:func:`phase_durations` are the same arithmetic on a plain mapping of marks, for pure
code that gets its marks from elsewhere (a stored raw document, a test).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import pairwise

from hvbench.errors import GuestTimeoutError

#: (start mark, end mark) of each phase, by phase name.
PhaseBounds = Mapping[str, tuple[str, str]]


def check_order(marks: Mapping[str, float], order: Sequence[str]) -> None:
    """Raise ValueError unless every mark of ``order`` is present and none comes before
    the one listed ahead of it."""
    missing = [m for m in order if m not in marks]
    if missing:
        raise ValueError(f"marks missing: {', '.join(missing)}")
    for earlier, later in pairwise(order):
        if marks[later] < marks[earlier]:
            raise ValueError(f"{later} ({marks[later]:.6f}) comes before {earlier} "
                             f"({marks[earlier]:.6f})")


def phase_durations(marks: Mapping[str, float], bounds: PhaseBounds,
                    phases: Iterable[str] | None = None) -> dict[str, float]:
    """Each phase's duration (seconds): its end mark minus its start mark, for
    ``phases`` (default: every phase of ``bounds``, in its order). Raises KeyError for
    a missing mark."""
    return {p: marks[bounds[p][1]] - marks[bounds[p][0]] for p in (phases or bounds)}


class Timeline:
    """One run of a workload: its deadline (``timeout_s`` from now, shared by every
    step) and its named marks on one monotonic clock.

    ``workload`` names the run in errors; ``clock`` is ``time.monotonic`` (another only
    in tests).
    """

    def __init__(self, timeout_s: float, workload: str, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.timeout_s = timeout_s
        self.workload = workload
        self._clock = clock
        self.deadline = clock() + timeout_s
        self.marks: dict[str, float] = {}

    def now(self) -> float:
        """The timeline's clock."""
        return self._clock()

    def mark(self, name: str, at: float | None = None) -> float:
        """Record mark ``name`` at ``at`` (default: now) and return its time. Raises
        ValueError if ``name`` is marked already: a mark is a single instant."""
        if name in self.marks:
            raise ValueError(f"{self.workload}: mark {name!r} is set already")
        self.marks[name] = self.now() if at is None else at
        return self.marks[name]

    def update(self, marks: Mapping[str, float]) -> None:
        """Record several marks taken elsewhere (e.g. derived from a guest's timings).
        Raises ValueError as :meth:`mark`."""
        for name, at in marks.items():
            self.mark(name, at)

    def remaining(self, what: str, need: float = 0.0) -> float:
        """Seconds left before the deadline, the timeout to give step ``what``. Raises
        :class:`GuestTimeoutError` naming ``what`` if no more than ``need`` seconds
        remain."""
        left = self.deadline - self.now()
        if left <= max(need, 0.0):
            raise GuestTimeoutError(f"{self.workload} workload: no time left for {what} "
                                    f"within timeout_s = {self.timeout_s:g} s")
        return left

    def check_order(self, order: Sequence[str]) -> None:
        """:func:`check_order` of this timeline's marks (ValueError)."""
        check_order(self.marks, order)
