"""Paired A/B, the noise floor and run-level sides of ``compare``; noise bounds."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pytest

from hvbench.analysis.bounds import evaluate, parse_bounds
from hvbench.analysis.compare import (
    Side,
    compare_sides,
    compare_values,
    pair_values,
    paired_p_value,
    run_means,
)
from hvbench.analysis.noise import NoiseFloor, aa_differences, floors_of_rows
from hvbench.analysis.stats import t_quantile
from hvbench.errors import SpecError
from hvbench.store.database import Store
from hvbench.store.records import (
    CellRecord,
    MeasurementRecord,
    NoiseFloorRecord,
    definition_key,
)


@dataclass(frozen=True)
class FakeRow:
    cell: str
    platform: str
    workload: str
    repetition: int
    phase: str
    metric: str
    value: float
    unit: str = ""
    base_platform: str | None = None
    scenario: str | None = None
    method: str | None = None
    image_size: float | None = None


KEY = ("dd", "read", "mb_s")
#: A host that drifts from 100 to 140 MB/s over the run; B is 5 % slower in every round.
DRIFT_A = [100.0, 110.0, 120.0, 130.0, 140.0, 125.0]
DRIFT_B = [a * 0.95 for a in DRIFT_A]


def test_pairing_removes_drift_that_hides_a_five_percent_slowdown() -> None:
    unpaired = compare_values(KEY, DRIFT_A, DRIFT_B, alpha=0.01, threshold_pct=1.0)
    reps = list(range(len(DRIFT_A)))
    paired = compare_values(KEY, DRIFT_A, DRIFT_B, alpha=0.01, threshold_pct=1.0,
                            pairs=(reps, reps))
    assert unpaired.test == "permutation" and unpaired.verdict == "not significant"
    assert paired.test == "paired t" and paired.verdict == "significant"
    assert paired.change == "worse" and paired.delta_pct == pytest.approx(-5.0)


def test_paired_p_value_against_the_t_distribution() -> None:
    a, b = [10.0, 11.0, 12.0, 13.0], [10.5, 11.2, 12.9, 13.4]
    diffs = [y - x for x, y in zip(a, b, strict=True)]
    mean = sum(diffs) / 4
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / 3)
    t = mean / (sd / 2)
    # two-sided p where t is the (1 - p/2) quantile of t with 3 df
    p = paired_p_value(a, b)
    assert t_quantile(1 - p / 2, 3) == pytest.approx(t, rel=1e-6)
    assert paired_p_value([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]) == 1.0
    assert paired_p_value([1.0, 2.0, 3.0], [2.0, 3.0, 4.0]) == 0.0
    with pytest.raises(SpecError, match="3 pairs"):
        paired_p_value([1.0, 2.0], [1.0, 2.0])


def test_only_repetitions_both_sides_have_are_paired() -> None:
    assert pair_values([1.0, 2.0, 3.0], [0, 1, 2], [5.0, 7.0], [2, 0]) == ([1.0, 3.0],
                                                                         [7.0, 5.0])
    few = compare_values(KEY, [1.0, 2.0, 3.0], [1.1, 2.1, 3.1], alpha=0.01,
                         threshold_pct=1.0, pairs=([0, 1, 2], [0, 1, 5]))
    assert few.verdict == "too few repetitions" and few.n_a == few.n_b == 2


def test_noise_floor_formula() -> None:
    floor = NoiseFloor(sd_pct=2.0, pairs=10, mean=100.0)
    expected = t_quantile(0.995, 9) * 2.0 * math.sqrt((1 / 5 + 1 / 5) / 2)
    assert floor.floor_pct(5, 5, 0.01) == pytest.approx(expected)
    assert floor.spread_pct() == pytest.approx(2.0 / math.sqrt(2))
    with pytest.raises(ValueError, match="sample sizes"):
        floor.floor_pct(0, 5, 0.01)


def test_a_difference_inside_the_noise_floor_is_never_significant() -> None:
    reps = list(range(6))
    a = [100.0, 100.1, 99.9, 100.0, 100.2, 99.8]
    b = [x * 1.06 for x in a]
    plain = compare_values(KEY, a, b, alpha=0.01, threshold_pct=5.0, pairs=(reps, reps))
    noisy_host = NoiseFloor(sd_pct=5.0, pairs=10, mean=100.0)
    floored = compare_values(KEY, a, b, alpha=0.01, threshold_pct=5.0, pairs=(reps, reps),
                             noise=noisy_host)
    quiet_host = NoiseFloor(sd_pct=0.5, pairs=10, mean=100.0)
    quiet = compare_values(KEY, a, b, alpha=0.01, threshold_pct=5.0, pairs=(reps, reps),
                           noise=quiet_host)
    assert plain.verdict == "significant" and plain.noise_floor_pct is None
    assert floored.verdict == "within noise floor"
    assert floored.noise_floor_pct == pytest.approx(noisy_host.floor_pct(6, 6, 0.01))
    assert quiet.verdict == "significant"


def test_sides_pair_only_when_both_carry_repetitions() -> None:
    values = {KEY: DRIFT_A}
    reps = {KEY: list(range(6))}
    b_values = {KEY: DRIFT_B}
    paired = compare_sides(Side("a", values, reps), Side("b", b_values, reps),
                           threshold_pct=1.0)
    unpaired = compare_sides(Side("a", values, reps), Side("b", b_values, reps),
                             threshold_pct=1.0, paired=False)
    one_sided = compare_sides(Side("a", values, reps), Side("b", b_values), threshold_pct=1.0)
    assert paired.comparisons[0].test == "paired t"
    assert unpaired.comparisons[0].test == "permutation"
    assert one_sided.comparisons[0].test == "permutation"


def test_run_means_give_one_value_per_run() -> None:
    run1 = [FakeRow("n/dd", "n", "dd", r, "read", "mb_s", v) for r, v in enumerate([1, 3])]
    run2 = [FakeRow("n/dd", "n", "dd", r, "read", "mb_s", v) for r, v in enumerate([5, 7, 9])]
    assert run_means([run1, run2]) == {("n/dd", "read", "mb_s"): [2.0, 7.0]}


def test_aa_pairs_are_consecutive_repetitions() -> None:
    # (0, 1) and (2, 3) pair; 4 has no partner; 7's partner 6 failed
    diffs = aa_differences({0: 100.0, 1: 110.0, 2: 50.0, 3: 50.0, 4: 1.0, 7: 3.0})
    assert diffs == pytest.approx([100 * 10 / 105, 0.0])


def test_floors_of_rows_need_three_pairs_and_a_direction() -> None:
    rows = [FakeRow("n/dd", "n", "dd", r, "read", metric, v)
            for r, v in enumerate([100.0, 102.0, 98.0, 101.0, 99.0, 100.0])
            for metric in ("mb_s", "host.cpu.busy_pct")]
    floors = floors_of_rows(rows)
    assert list(floors) == [("n/dd", "read", "mb_s")]
    floor = floors[("n/dd", "read", "mb_s")]
    diffs = aa_differences(dict(enumerate([100.0, 102.0, 98.0, 101.0, 99.0, 100.0])))
    mean = sum(diffs) / 3
    assert floor.pairs == 3
    assert floor.sd_pct == pytest.approx(math.sqrt(sum((d - mean) ** 2 for d in diffs) / 2))
    assert floors_of_rows(rows[:8]) == {}  # two pairs only


def test_definition_key_ignores_names_and_key_order() -> None:
    a = definition_key({"kind": "native"}, {"profile": "dd", "file_size": 1})
    b = definition_key({"kind": "native"}, {"file_size": 1, "profile": "dd"})
    c = definition_key({"kind": "native"}, {"file_size": 2, "profile": "dd"})
    assert a == b != c


def test_noise_floors_round_trip_in_the_store(tmp_path: Path) -> None:
    with Store(tmp_path / "n.db") as store:
        run = store.create_run(run_id="r1", study_name="s", study_path="s.toml",
                               study_text="", seed=0, env={"hostname": "h1"},
                               hvbench_version="0", git_commit=None)
        cells = store.add_cells(run, [CellRecord("n/dd", "n", {"kind": "native"}, "dd",
                                                 {"profile": "dd"})])
        store.record_repetition(run_id=run, cell_id=cells["n/dd"], repetition=0,
                                position=0, status="ok", started_at="t", finished_at="t",
                                measurements=[MeasurementRecord("read", "mb_s", 1.0, "MB/s")])
        key = definition_key({"kind": "native"}, {"profile": "dd"})
        floor = NoiseFloorRecord(definition=key, cell="n/dd", phase="read", metric="mb_s",
                                 pairs=4, mean=100.0, sd_pct=3.0)
        store.add_noise_floors(run, "h1", [floor])
        store.add_noise_floors(run, "h1", [floor])  # again: replaced, not doubled
        rows = store.noise_floors("h1", [key])
        assert [(r.run_id, r.host, r.floor) for r in rows] == [("r1", "h1", floor)]
        assert store.noise_floors("h2") == []
        assert store.noise_floors("h1", ["other"]) == []


BOUNDS = """
[[bound]]
metric = "mb_s"
workload = "dd"
mid = 100
tolerance_noise = 2
"""


def test_noise_bounds_use_the_cells_floor() -> None:
    bounds = parse_bounds(BOUNDS, "b.toml")
    rows = [FakeRow("n/dd", "n", "dd", r, "read", "mb_s", v) for r, v in
            enumerate([104.0, 104.0])]
    group = ("n", "dd", "read", "mb_s")
    within = evaluate(bounds, rows, noise={group: 3.0})  # 100 +/- 6
    outside = evaluate(bounds, rows, noise={group: 1.0})  # 100 +/- 2
    missing = evaluate(bounds, rows)
    assert (within[0].status, within[0].low, within[0].high) == ("pass", 94.0, 106.0)
    assert outside[0].status == "fail"
    assert missing[0].status == "fail" and "hvbench noise" in missing[0].note


@pytest.mark.parametrize(("extra", "message"), [
    ("tolerance_pct = 5\n", "not both"),
    ("", None),
])
def test_noise_bound_validation(extra: str, message: str | None) -> None:
    text = BOUNDS + extra
    if message is None:
        assert parse_bounds(text, "b.toml").bound[0].tolerance_noise == 2
        return
    with pytest.raises(SpecError, match=message):
        parse_bounds(text, "b.toml")
    with pytest.raises(SpecError, match="tolerance_noise"):
        parse_bounds('[[bound]]\nmetric = "x"\nmid = 1\n', "b.toml")
