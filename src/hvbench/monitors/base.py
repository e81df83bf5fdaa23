"""What every monitor offers to :class:`~hvbench.monitors.sampler.MonitorSet`.

A monitor splits its work in two so that sampling stays cheap: :meth:`Monitor.sample`
(in the sampling thread) only reads raw counters; :meth:`Monitor.report` (after the
window, in the caller's thread) parses them and computes the metrics.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

#: One observation: (time.monotonic() when it was read, the monitor's raw snapshot).
Sample = tuple[float, Any]
#: One row of a time series: (seconds since the window started, {metric: value}).
SeriesRow = tuple[float, dict[str, float]]


@dataclass(frozen=True)
class ThreadReport:
    """One thread's metrics over the whole window (see :mod:`hvbench.monitors.cpu`)."""

    tid: int
    comm: str
    cls: str
    metrics: dict[str, float]


@dataclass
class MonitorReport:
    """What one monitor made of its samples. Metric names are relative to the
    monitor's name (``r_mb_s`` for monitor ``host.disk.vda``)."""

    summary: dict[str, float] = field(default_factory=dict)
    series: list[SeriesRow] = field(default_factory=list)
    threads: list[ThreadReport] = field(default_factory=list)
    #: Set when some samples could not be decoded; the report covers those before.
    error: str | None = None


class Monitor(Protocol):
    """A source of counters sampled by a :class:`~hvbench.monitors.sampler.MonitorSet`."""

    #: The prefix of the monitor's metric names (``host.disk.vda``, ``qemu``).
    name: str

    def open(self) -> None:
        """Acquire what sampling needs (file descriptors). Raises HostError when the
        source does not exist."""

    def sample(self) -> Any:
        """Read the raw counters, cheaply. Raises HostError when the source vanished
        (the device was removed, the process exited); the set then stops the monitor."""

    def report(self, samples: Sequence[Sample], t0: float) -> MonitorReport:
        """Summary over the first..last sample and one series row per interval, times
        relative to ``t0`` (a time.monotonic() value)."""

    def close(self) -> None:
        """Release what :meth:`open` acquired. Safe to call more than once."""
