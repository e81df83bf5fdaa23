"""The steady-state test on hand-made series: flat, drifting, noisy, short, with idle
edges, and only on phases whose headline the series measures."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from hvbench.analysis.steady import (
    active,
    binned_cov_pct,
    drift,
    flatness,
    steady_states,
    steady_warnings,
)


@dataclass(frozen=True)
class Sample:
    cell: str
    repetition: int
    phase: str
    monitor: str
    t: float
    values: dict[str, Any] = field(default_factory=dict)


def _disk(cell: str, rep: int, ys: list[float]) -> list[Sample]:
    return [Sample(cell, rep, "read", "host.disk.vda", 0.1 * i, {"r_kb_s": y, "w_kb_s": 0.0})
            for i, y in enumerate(ys)]


def test_drift_of_flat_rising_and_noisy_series() -> None:
    flat = [(0.1 * i, 100.0) for i in range(30)]
    assert drift(flat) == (0.0, 1.0)
    rising = [(0.1 * i, 100.0 + 2.0 * i) for i in range(30)]
    found = drift(rising)
    assert found is not None and found[0] > 0.4 and found[1] < 1e-6
    rng = random.Random(1)
    noisy = [(0.1 * i, 100.0 + rng.gauss(0, 5)) for i in range(30)]
    found = drift(noisy)
    assert found is not None and abs(found[0]) < 0.1
    assert drift(rising[:9]) is None  # too short to tell


def test_idle_edges_are_not_the_workload() -> None:
    series = [(0.0, 0.0), (0.1, 1.0), (0.2, 100.0), (0.3, 90.0), (0.4, 2.0), (0.5, 0.0)]
    assert active(series) == [(0.2, 100.0), (0.3, 90.0)]
    assert active([(0.0, 0.0)]) == []


def test_a_drifting_cell_is_named_and_a_steady_one_is_not() -> None:
    rng = random.Random(2)
    samples = (_disk("vm/dd", 0, [0.0] * 3 + [100.0 - 2.0 * i for i in range(30)] + [0.0])
               + _disk("vm/dd", 1, [100.0 + rng.gauss(0, 3) for _ in range(30)])
               + _disk("native/dd", 0, [100.0 + rng.gauss(0, 3) for _ in range(30)]))
    cells = {"vm/dd": ("vm", "dd"), "native/dd": ("native", "dd")}
    states = {s.platform: s for s in steady_states(
        samples, cells, {("vm/dd", "read"), ("native/dd", "read")})}
    assert states["vm"].steady is False and (states["vm"].tested, states["vm"].drifting) == (2, 1)
    assert states["vm"].worst_drift_pct is not None and states["vm"].worst_drift_pct < -50
    assert states["native"].steady is True
    (warning,) = steady_warnings(states.values())
    assert warning.startswith("dd/read on vm: not at steady state: throughput drifted -")
    # A phase whose headline the series does not measure is not tested.
    assert steady_states(samples, cells, set()) == []


def test_flatness_within_a_repetition_from_one_second_bins() -> None:
    # A limiter: a burst every 500 ms, so four 100 ms samples in five are 0 (their CoV
    # is 200 %), but every second carries the same bytes.
    burst = [4000.0 if i % 5 == 0 else 0.0 for i in range(45)]
    assert binned_cov_pct([(0.1 * i, y) for i, y in enumerate(burst)]) == 0.0
    # Bursty second to second: 2 MB, 6 MB, 2 MB, 6 MB.
    uneven = [y for mb in (2.0, 6.0, 2.0, 6.0, 4.0) for y in [mb * 1000.0] * 10]
    cov = binned_cov_pct([(0.1 * i, y) for i, y in enumerate(uneven)])
    assert cov is not None and cov == 50.0
    # Fewer than 3 whole seconds: no flatness at all (never a CoV of one value).
    assert binned_cov_pct([(0.1 * i, 1.0) for i in range(25)]) is None
    samples = _disk("vm/dd", 0, [0.0] * 3 + burst + [0.0] * 3) + _disk("vm/dd", 1, uneven)
    assert flatness(samples, {"vm/dd": ("vm", "dd")}) == {("dd", "read", "vm"): 25.0}
