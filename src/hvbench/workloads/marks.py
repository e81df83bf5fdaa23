"""Timing marks of the workloads that time their own steps (lifecycle, propagation).

Both record named ``time.monotonic()`` marks, check that they came in order, derive each
phase's duration from a pair of marks, and share one ``timeout_s`` between their steps.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from itertools import pairwise

from hvbench.errors import GuestTimeoutError


class Deadline:
    """A workload's ``timeout_s``, shared by its steps (``workload`` names it in errors)."""

    def __init__(self, seconds: float, workload: str) -> None:
        self.seconds = seconds
        self.workload = workload
        self.at = time.monotonic() + seconds

    def left(self, what: str, need: float = 0.0) -> float:
        """Seconds left; raises :class:`GuestTimeoutError` naming ``what`` if no more
        than ``need`` remain."""
        left = self.at - time.monotonic()
        if left <= max(need, 0.0):
            raise GuestTimeoutError(f"{self.workload} workload: no time left for {what} "
                                    f"within timeout_s = {self.seconds:g} s")
        return left


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


def phase_durations(marks: Mapping[str, float], bounds: Mapping[str, tuple[str, str]],
                    phases: Iterable[str] | None = None) -> dict[str, float]:
    """Each phase's duration (seconds): its end mark minus its start mark, for
    ``phases`` (default: every phase of ``bounds``, in its order)."""
    return {p: marks[bounds[p][1]] - marks[bounds[p][0]] for p in (phases or bounds)}
