"""Adaptive repetitions and ABBA order: parsing, rounds, the stopping rule, dry runs."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from hvbench.analysis.precision import cell_precision
from hvbench.cli.run import plan_lines, precision_lines
from hvbench.errors import SpecError
from hvbench.model.study import (
    RepetitionRule,
    Study,
    base_rounds,
    cell_order,
    parse_study,
    repetition_rule,
    with_repetitions,
)
from hvbench.report.precision import precision_line
from hvbench.run.plan import measured_items, plan_study, round_cells

HOST_RAM = 24 << 30

STUDY = """
[study]
name = "adaptive"
repetitions = {study_reps}
seed = 5
{extra}

[[platform]]
kind = "native"

[[platform]]
kind = "qemu"
name = "vm"
disk = {{ bus = ["virtio-blk", "ide"], size = "64M" }}

[[workload]]
name = "dd"
profile = "dd"
target = "device"
file_size = "16M"
direct = true

[[workload]]
name = "dd2"
profile = "dd"
target = "device"
file_size = "8M"
direct = true
{workload_reps}
"""


def study(study_reps: str = "{ min = 3, max = 10, ci_pct = 2 }", extra: str = "",
          workload_reps: str = "") -> Study:
    return parse_study(STUDY.format(study_reps=study_reps, extra=extra,
                                    workload_reps=workload_reps), "a.toml", HOST_RAM)


def test_the_table_form_is_adaptive() -> None:
    s = study()
    assert s.study.repetitions == 3
    rules = {repetition_rule(s, c) for c in s.cells}
    assert rules == {RepetitionRule(3, 10, 2.0)}
    assert all(r.adaptive for r in rules)


def test_a_workload_sets_its_own_repetitions() -> None:
    s = study(study_reps="2", workload_reps="repetitions = 4")
    by_workload = {c.workload.name: repetition_rule(s, c)
                   for c in s.cells}
    assert by_workload == {"dd": RepetitionRule(2, 2), "dd2": RepetitionRule(4, 4)}
    assert base_rounds(s) == 4
    # rounds 2 and 3 hold only dd2's cells
    assert {c.workload.name for c in round_cells(s, 3)} == {"dd2"}
    items = measured_items(s)
    assert len(items) == 3 * 2 + 3 * 4
    assert [i.position for i in items] == list(range(len(items)))
    adaptive = study(study_reps="2",
                     workload_reps="repetitions = { min = 2, max = 6, ci_pct = 1 }")
    rules = {repetition_rule(adaptive, c)
             for c in adaptive.cells}
    assert rules == {RepetitionRule(2, 2), RepetitionRule(2, 6, 1.0)}


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"study_reps": "{ min = 5, max = 3, ci_pct = 2 }"},
     "a.toml:\\d+: study: repetitions: .*max \\(3\\) is below min \\(5\\)"),
    ({"study_reps": "{ min = 3, ci = 2 }"}, "a.toml:\\d+: study: repetitions.ci: unknown field"),
    ({"workload_reps": "repetitions = { min = 3, max = 9 }"},
     "a.toml: workload\\[1\\]: repetitions: ci_pct"),
    ({"workload_reps": "repetitions = 0"}, "a.toml: workload\\[1\\]: repetitions"),
    ({"extra": 'ab = ["native", "nope"]'}, "ab: 'nope' is not a platform"),
    ({"extra": 'ab = ["native", "native"]'}, "one platform twice"),
])
def test_bad_repetitions_and_pairs_name_the_field(kwargs: dict[str, str],
                                                  message: str) -> None:
    with pytest.raises(SpecError, match=message):
        study(**kwargs)


def test_abba_order_puts_the_pair_side_by_side_alternating() -> None:
    s = study(extra='ab = ["vm.virtio-blk", "vm.ide"]')
    firsts = []
    for rep in range(8):
        order = [c.platform_name for c in cell_order(
            s.cells, 5, rep, s.study.ab)]
        platforms = list(dict.fromkeys(order))
        i, j = platforms.index("vm.virtio-blk"), platforms.index("vm.ide")
        assert abs(i - j) == 1, platforms
        firsts.append(platforms[min(i, j)])
    assert firsts == ["vm.virtio-blk", "vm.ide"] * 4
    # every cell is still there, once
    assert sorted(c.name for c in cell_order(s.cells, 5, 3, s.study.ab)) == sorted(
        c.name for c in s.cells)


def test_fixed_repetitions_drop_the_adaptive_rule() -> None:
    s = with_repetitions(study(workload_reps="repetitions = 7"), 4)
    assert {repetition_rule(s, c) for c in s.cells} == {RepetitionRule(4, 4)}


@dataclass(frozen=True)
class Row:
    repetition: int
    phase: str
    metric: str
    value: float
    cell: str = "c"
    platform: str = "p"
    workload: str = "w"
    unit: str = ""
    base_platform: str | None = None
    scenario: str | None = None
    method: str | None = None
    image_size: float | None = None


def rows(values: list[float], phase: str = "read") -> list[Row]:
    return [Row(r, phase, "mb_s", v) for r, v in enumerate(values)]


RULE = RepetitionRule(3, 6, 2.0)


def test_precision_states() -> None:
    tight = rows([100.0, 100.5, 99.5])
    loose = rows([100.0, 130.0, 70.0])
    assert cell_precision("c", RepetitionRule(3, 3), tight, 3).state == "fixed"
    assert cell_precision("c", RULE, tight, 3).state == "reached"
    assert cell_precision("c", RULE, loose, 3).state == "more"
    stopped = cell_precision("c", RULE, loose, 6)
    assert stopped.state == "max" and stopped.metric == "read/mb_s"
    assert stopped.cov_pct == pytest.approx(30.0)
    # the widest phase decides
    both = cell_precision("c", RULE, [*tight, *rows([1.0, 2.0, 3.0], "write")], 3)
    assert both.state == "more" and both.metric == "write/mb_s"
    # a cell that keeps failing stops at max rounds; one without a main metric after min
    assert cell_precision("c", RULE, [], 6).state == "max"
    assert cell_precision("c", RULE, [], 2).state == "more"
    other = [Row(r, "read", "host.cpu.busy_pct", 1.0) for r in range(3)]
    assert cell_precision("c", RULE, other, 3).state == "no metric"


def test_precision_lines_name_the_cells_that_hit_max() -> None:
    loose = cell_precision("vm/dd", RULE, rows([100.0, 130.0, 70.0]), 6)
    tight = cell_precision("native/dd", RULE, rows([100.0, 100.5, 99.5]), 3)
    lines = precision_lines([tight, loose])
    assert lines[0] == "adaptive repetitions: 1 of 2 cells reached their CI target"
    assert "vm/dd: stopped at max 6 rounds" in lines[2] and "CoV 30.0 %" in lines[2]
    assert precision_line(tight).startswith("native/dd: ±")
    assert precision_lines([]) == []


def test_dry_run_shows_the_adaptive_range() -> None:
    plan = plan_study(study())
    lines = plan_lines(plan)
    assert "3 repetitions at least (adaptive)" in lines[0]
    assert plan.estimate_max_s is not None and plan.estimate_max_s > plan.estimate_s
    assert any(line.startswith("adaptive repetitions: up to") for line in lines)
    assert plan_study(study(study_reps="3")).estimate_max_s is None
