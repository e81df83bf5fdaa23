"""Run plans: the items in run order, groups, guest boots, estimated durations (from
earlier runs in a store, else each kind's default); selecting cells and repetitions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from hvbench.errors import SpecError
from hvbench.model.study import (
    Study,
    cell_order,
    parse_study,
    select_cells,
    with_repetitions,
)
from hvbench.run.cells.registry import cell_kind
from hvbench.run.plan import (
    BOOT_ESTIMATE_S,
    groups,
    measured_items,
    plan_study,
    run_items,
    warmup_items,
)
from hvbench.store.database import Store
from hvbench.store.records import cell_record

HOST_RAM = 24 << 30

STUDY = """
[study]
name = "plan"
repetitions = 2
warmup = 1
seed = 3

[lab]
[[lab.host]]
name = "client"

[[platform]]
kind = "native"

[[platform]]
name = "vm"
nic = { backend = "tap" }
disk = { size = "1G" }

[[workload]]
profile = "dd"
direct = true

[[workload]]
kind = "network"
peer = ["host", "guest"]
duration_s = 4

[[workload]]
kind = "lifecycle"
idle_guests = 2

[[scenario]]
name = "busy"
neighbours = [{ role = "cpu", count = 2 }]
start = { count = 1 }
workloads = ["dd"]
"""


@pytest.fixture
def study() -> Study:
    return parse_study(STUDY, "plan.toml", HOST_RAM)


def test_items_follow_the_recorded_order_with_warmups_first(study: Study) -> None:
    items = run_items(study)
    warm = [i for i in items if i.repetition < 0]
    assert len(warm) == len(study.cells) and {i.position for i in warm} == {-1}
    assert warm == warmup_items(study)
    measured = items[len(warm):]
    assert [i.cell for i in measured] == (cell_order(study.cells, 3, 0)
                                          + cell_order(study.cells, 3, 1))
    assert [i.position for i in measured] == list(range(2 * len(study.cells)))
    assert run_items(study, warmup=False) == measured


def test_done_items_are_skipped_but_keep_everyones_position(study: Study) -> None:
    first = cell_order(study.cells, 3, 0)[0]
    left = measured_items(study, {(first.name, 0)})
    assert len(left) == 2 * len(study.cells) - 1
    assert left[0].position == 1 and all(i.cell != first or i.repetition == 1 for i in left)


def test_groups_share_a_platform_within_a_repetition(study: Study) -> None:
    found = list(groups(measured_items(study)))
    for group in found:
        assert len({(i.repetition, i.cell.platform_name) for i in group}) == 1
    # native, vm, vm@busy per repetition.
    assert len(found) == 6
    assert list(groups([])) == []


def test_the_plan_counts_boots_and_estimates_from_each_kinds_default(study: Study) -> None:
    plan = plan_study(study)
    assert plan.cells == tuple(c.name for c in study.cells)
    assert (plan.repetitions, plan.warmup) == (2, 1)
    assert len(plan.items) == 3 * len(study.cells)
    # Per round (1 warm-up, 2 measured): vm and vm@busy boot; native does not.
    assert plan.platform_boots == 3 * 2
    # Per round: vm (1) + peer (1) + lifecycle (1 + 2 idle); vm@busy (1) + 2
    # neighbours + 1 on-demand guest per dd phase (write, read).
    assert plan.guest_boots == 3 * ((1 + 1 + 3) + (1 + 2 + 2))
    per_round = 0.0
    for cell in study.cells:
        kind, spec = cell_kind(cell), cell.workload.spec
        per_round += kind.estimate_s(spec) + kind.guests(spec) * BOOT_ESTIMATE_S
    assert plan.estimate_s == pytest.approx(3 * per_round + plan.platform_boots
                                            * BOOT_ESTIMATE_S)
    assert plan.from_history == ()


def _store_durations(store: Store, study: Study, seconds: dict[str, float]) -> None:
    run = store.create_run(run_id=None, study_name="old", study_path="old.toml",
                           study_text="", seed=0, env={}, hvbench_version="0",
                           git_commit=None)
    ids = store.add_cells(run, [cell_record(c) for c in study.cells])
    start = datetime(2024, 1, 1, tzinfo=UTC)
    for rep, (name, took) in enumerate(seconds.items()):
        store.record_repetition(
            run_id=run, cell_id=ids[name], repetition=rep, position=rep, status="ok",
            started_at=start.isoformat(timespec="milliseconds"),
            finished_at=(start + timedelta(seconds=took)).isoformat(timespec="milliseconds"))


def test_earlier_runs_of_the_same_definition_give_the_estimate(study: Study,
                                                               tmp_path: Path) -> None:
    native_dd = next(c for c in study.cells if c.name == "native/dd")
    with Store(tmp_path / "r.db") as store:
        _store_durations(store, study, {"native/dd": 42.5})
        assert store.cell_durations([cell_record(native_dd)]) == {"native/dd": [42.5]}
        plain = plan_study(study)
        informed = plan_study(study, store)
    assert informed.from_history == ("native/dd",)
    default = cell_kind(native_dd).estimate_s(native_dd.workload.spec)
    assert informed.estimate_s - plain.estimate_s == pytest.approx(3 * (42.5 - default))


def test_a_changed_definition_has_no_history(study: Study, tmp_path: Path) -> None:
    changed = parse_study(STUDY.replace("direct = true", "direct = true\nfile_size = \"2G\""),
                          "plan.toml", HOST_RAM)
    with Store(tmp_path / "r.db") as store:
        _store_durations(store, study, {"native/dd": 42.5})
        assert plan_study(changed, store).from_history == ()


# -- selecting ---------------------------------------------------------------------------
def test_select_cells_keeps_matches_and_drops_exclusions(study: Study) -> None:
    picked = select_cells(study, only=["vm*"], exclude=["*/lifecycle"])
    assert [c.name for c in picked.cells] == [
        c.name for c in study.cells if c.name.startswith("vm") and "lifecycle" not in c.name]
    assert picked.platforms == study.platforms and picked.text == study.text
    assert select_cells(study) == study
    assert [c.name for c in select_cells(study, exclude=["vm*"]).cells] == ["native/dd",
                                                                            "native/iperf3.host"]


def test_select_cells_names_the_patterns_when_nothing_remains(study: Study) -> None:
    with pytest.raises(SpecError, match=r"only 'nope\*'.*exclude 'x'"):
        select_cells(study, only=["nope*"], exclude=["x"])


def test_with_repetitions_overrides_the_study_and_checks_the_range(study: Study) -> None:
    assert with_repetitions(study, 5).study.repetitions == 5
    assert len(measured_items(with_repetitions(study, 1))) == len(study.cells)
    with pytest.raises(SpecError, match="repetitions"):
        with_repetitions(study, 0)
