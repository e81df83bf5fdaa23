"""What one measured phase of any workload produced, before the runner stores it."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class PhaseOutcome:
    """One phase's numbers and the raw tool output they came from.

    ``metrics`` maps a catalogue metric name to (value, unit); ``raw`` is the tool's own
    output (fio JSON, iperf3 JSON, httperf text, a lifecycle record) of kind
    ``raw_kind``; ``series`` is the tool's own time series (iperf3 intervals, a transfer's
    progress), ``(t, {key: value})``; ``caches_dropped`` says which caches were dropped
    before a disk phase (host, guest); ``attachments`` are further raw outputs to store
    next to ``raw``, ``(raw kind, content)``, e.g. a rewritten fio job file and the list
    of what was rewritten; ``focus``: the monotonic interval of the phase whose host
    evidence explains its metrics (a max-rate search's chosen probe), None for the
    whole monitored window.
    """

    phase: str
    metrics: dict[str, tuple[float, str]] = field(default_factory=dict)
    raw: str = ""
    raw_kind: str = ""
    series: list[tuple[float, dict[str, float]]] = field(default_factory=list)
    caches_dropped: dict[str, bool] = field(default_factory=dict)
    attachments: list[tuple[str, str]] = field(default_factory=list)
    focus: tuple[float, float] | None = None
