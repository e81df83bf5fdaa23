"""Relative web rates ("90%" of the platform's measured maximum), neighbour rate
sweeps and identical guests: parsing and errors, run order (references first), run-time
resolution (in the same round, and from the store on --resume), and the seed 003
Fig. 20 table over the neighbour rate."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from hvbench.analysis.scenarios import build_scenario_report
from hvbench.errors import HvbenchError, SpecError
from hvbench.kinds.web.cell import WebCell
from hvbench.kinds.web.spec import WebWorkloadSpec
from hvbench.model.rates import check_rate, offered_rate, relative_pct, resolve_rate
from hvbench.model.study import Study, cell_references, parse_study
from hvbench.report.scenarios import rate_sweep_table, scenario_json, scenario_tables
from hvbench.run.cells.base import CellContext, CellResult, as_spec
from hvbench.run.plan import (
    PlannedItem,
    plan_study,
    reference_names,
    references_first,
    repetition_order,
    round_cells,
)
from hvbench.run.runner import StudyRunner
from hvbench.store.database import MeasurementRecord, Store
from hvbench.store.records import MeasurementRow, cell_record

HOST_RAM = 24 << 30

BASE = """
[study]
name = "rates"
repetitions = 2
seed = 5

[[lab.host]]
name = "client"

[[platform]]
kind = "native"

[[platform]]
name = "vm"
nic = { model = "virtio-net", backend = "tap" }

[[workload]]
name = "max"
kind = "web"
mode = "max-rate"
file_kb = [1, 70]
"""

FIXED = """
[[workload]]
name = "fixed"
kind = "web"
file_kb = [1]
rate = "90%"
"""

SWEEP = """
[[scenario]]
name = "colo"
workloads = ["fixed"]
neighbours = [{ role = "net", load = "web", file_kb = 70, rate = ["30%", "60%", 120] }]
"""


def parse(text: str) -> Study:
    return parse_study(text, "r.toml", HOST_RAM)


def refused(text: str) -> str:
    with pytest.raises(SpecError) as err:
        parse(text)
    message = str(err.value)
    assert re.match(r"r\.toml(:\d+)?: ", message) and "\n" not in message
    return message


# -- the rate itself -------------------------------------------------------------------------
def test_rates_are_requests_per_second_or_a_percentage() -> None:
    assert check_rate(120) == 120.0 and check_rate(" 90 %") == "90 %"
    assert relative_pct("90%") == 90.0 and relative_pct(90.0) is None
    assert resolve_rate("90%", 1070.0) == pytest.approx(963.0)
    assert resolve_rate(50.0, None) == 50.0
    for bad in ("fast", "0%", "2000%", 0, -3, True):
        with pytest.raises(ValueError, match="expected"):
            check_rate(bad)
    with pytest.raises(ValueError, match="no measured maximum"):
        resolve_rate("90%", None)


def test_offered_rate_takes_the_reference_of_its_file_size() -> None:
    refs = {"max": {1: 1000.0, 70: 150.0}}
    offered, reference = offered_rate("30%", "max", 70, refs, "x")
    assert offered == pytest.approx(45.0) and reference == 150.0
    assert offered_rate(80.0, "max", 70, {}, "x") == (80.0, None)
    with pytest.raises(HvbenchError, match="cell c: rate 30% of max's maximum for 10 kB"):
        offered_rate("30%", "max", 10, refs, "cell c")


def test_a_reference_that_sustained_nothing_says_so() -> None:
    with pytest.raises(HvbenchError, match="sustained no rate in this round"):
        offered_rate("90%", "max", 1, {"max": {1: 0.0}}, "cell c")


# -- parsing ---------------------------------------------------------------------------------
def test_a_relative_fixed_rate_keeps_its_declaration_in_the_stored_definition() -> None:
    study = parse(BASE + FIXED)
    cell = next(c for c in study.cells if c.name == "vm/fixed")
    assert as_spec(cell.workload.spec, WebWorkloadSpec).rate == "90%"
    assert cell_record(cell).workload["rate"] == "90%"


@pytest.mark.parametrize(("extra", "message"), [
    (FIXED.replace('rate = "90%"', 'rate = "90%"\nmode = "max-rate"'),
     "a relative rate applies to mode = \"fixed\""),
    (FIXED.replace('rate = "90%"', 'rate = 90\nrate_of = "max"'), "rate_of applies to a "
     "relative rate"),
    (FIXED.replace("file_kb = [1]", "file_kb = [1, 200]"),
     "workload fixed: file_kb: 200 kB is not measured by the reference max-rate workload "
     "'max'"),
    (FIXED + 'rate_of = "fixed"\n', "workload fixed: rate_of: 'fixed' is not a max-rate "
     "web workload of the study (max-rate web workloads: max)"),
    (FIXED + BASE[BASE.index("[[workload]]"):].replace('"max"', '"max2"'),
     "workload fixed: rate_of: several max-rate web workloads (max, max2)"),
    (FIXED + SWEEP.replace("file_kb = 70", "file_kb = 10"),
     "scenario colo.r30pct: neighbours[0]: file_kb: 10 kB is not measured"),
    (FIXED + SWEEP.replace('"60%"', '"fast"'), "scenario[0]: neighbours[0].rate: rate "
     "'fast': expected requests/s or a percentage"),
])
def test_relative_rate_errors_name_file_field_and_expectation(extra: str, message: str
                                                              ) -> None:
    assert message in refused(BASE + extra)


def test_a_relative_rate_without_any_reference_is_a_spec_error() -> None:
    no_max = BASE.replace('mode = "max-rate"', 'mode = "fixed"')
    assert "r.toml: workload fixed: rate: a relative rate needs a [[workload]] of kind = " \
        "\"web\" and mode = \"max-rate\"" in refused(no_max + FIXED)


def test_rate_of_picks_one_of_several_references() -> None:
    second = BASE[BASE.index("[[workload]]"):].replace('"max"', '"max2"')
    study = parse(BASE + second + FIXED + 'rate_of = "max2"\n')
    fixed = next(c for c in study.cells if c.name == "vm/fixed")
    assert reference_names(study) == {"vm/max2", "native/max2"}
    assert as_spec(fixed.workload.spec, WebWorkloadSpec).rate_of == "max2"


# -- the neighbour rate axis -------------------------------------------------------------------
def test_a_list_of_neighbour_rates_gives_one_scenario_per_rate() -> None:
    study = parse(BASE + FIXED + SWEEP)
    assert [s.name for s in study.scenarios] == ["colo.r30pct", "colo.r60pct", "colo.r120"]
    assert [s.spec.neighbours[0].rate for s in study.scenarios] == ["30%", "60%", 120.0]
    assert study.scenarios[0].values == {"neighbours[0].rate": "30%"}
    cell = next(c for c in study.cells if c.name == "vm@colo.r60pct/fixed")
    record = cell_record(cell)
    # The rate is in the stored definition (no schema change); identity as before.
    assert record.platform["scenario"]["neighbours"][0]["rate"] == "60%"
    assert record.identity is not None and record.identity.scenario == "colo.r60pct"
    assert record.identity.neighbour_roles == ("net",)


def test_an_empty_rate_list_is_refused() -> None:
    assert "neighbours[0].rate: expected a rate or a non-empty list" in refused(
        BASE + FIXED + SWEEP.replace('["30%", "60%", 120]', "[]"))


# -- identical guests ------------------------------------------------------------------------
IDENTICAL = """
[[scenario]]
name = "pair"
workloads = ["fixed"]
identical = 2
"""


def test_identical_guests_apply_to_one_fixed_web_workload() -> None:
    study = parse(BASE + FIXED + IDENTICAL)
    pair = next(s for s in study.scenarios if s.name == "pair")
    assert pair.spec.identical == 2 and pair.spec.guest_count() == 1
    assert "vm@pair/fixed" in [c.name for c in study.cells]
    assert "scenario pair: identical: applies to a web workload with mode = \"fixed\"" in \
        refused(BASE + FIXED + IDENTICAL.replace('workloads = ["fixed"]', 'workloads = ["max"]'))
    two = FIXED.replace("file_kb = [1]", "file_kb = [1, 70]")
    assert "identical: applies to a web workload" in refused(BASE + two + IDENTICAL)
    other = FIXED.replace('name = "fixed"', 'name = "fixed2"')
    assert "identical: applies to one workload, got fixed and fixed2" in refused(
        BASE + FIXED + other + IDENTICAL.replace('["fixed"]', '["fixed", "fixed2"]'))
    assert "identical" in refused(BASE + FIXED + IDENTICAL.replace("= 2", "= 1"))


# -- run order -------------------------------------------------------------------------------
def test_references_run_first_in_every_round_and_the_order_is_recorded(tmp_path: Path
                                                                       ) -> None:
    study = parse(BASE + FIXED + SWEEP)
    refs = reference_names(study)
    assert refs == {"vm/max", "native/max"}
    for seed in range(8):
        shuffled = parse((BASE + FIXED + SWEEP).replace("seed = 5", f"seed = {seed}"))
        for rep in (-1, 0, 1):
            cells = repetition_order(shuffled, rep)
            order = [c.name for c in cells]
            for at, cell in enumerate(cells):
                for ref in cell_references(shuffled, cell).values():
                    assert order.index(ref.name) < at, order
    # Without relative rates the shuffled order is untouched.
    plain = list(repetition_order(study, 0))
    assert references_first(plain, ()) == plain
    with Store(tmp_path / "r.db") as store:
        runner = StudyRunner(study, store)
        runner.run_id = store.create_run(
            run_id=None, study_name="rates", study_path="r.toml", study_text=study.text,
            seed=5, env={}, hvbench_version="t", git_commit=None)
        runner.plan(runner.cell_ids())
        recorded = store.order(runner.run_id)
    assert recorded[0] == [c.name for c in round_cells(study, 0)]
    assert recorded[1][0] in refs
    # A dry run shows the relative rate as declared.
    plan = plan_study(study)
    assert plan.items[0].cell.name in refs and plan.estimate_s > 0


# -- resolution at run time ----------------------------------------------------------------
def _item(study: Study, name: str, rep: int) -> PlannedItem:
    return PlannedItem(rep, next(c for c in study.cells if c.name == name), 0)


def _maxima(value_1k: float, value_70k: float) -> CellResult:
    return CellResult(measurements=[MeasurementRecord("1kB", "max_rate_rps", value_1k, "req/s"),
                                    MeasurementRecord("70kB", "max_rate_rps", value_70k,
                                                      "req/s"),
                                    MeasurementRecord("1kB", "replies_s", 1.0, "")])


def test_the_runner_resolves_from_the_same_round_and_from_the_store(tmp_path: Path) -> None:
    study = parse(BASE + FIXED + SWEEP)
    with Store(tmp_path / "r.db") as store:
        runner = StudyRunner(study, store)
        runner._remember(_item(study, "vm/max", 0), _maxima(1000.0, 150.0))
        runner._remember(_item(study, "vm/max", 1), _maxima(800.0, 120.0))
        runner._remember(_item(study, "vm/fixed", 1), _maxima(1.0, 1.0))  # no reference
        assert runner.rate_refs(_item(study, "vm/fixed", 1)) == {"max": {1: 800.0, 70: 120.0}}
        assert runner.rate_refs(_item(study, "vm@colo.r30pct/fixed", 0)) == {
            "max": {1: 1000.0, 70: 150.0}}
        assert runner.rate_refs(_item(study, "vm/fixed", -1)) == {}
        # --resume: a new runner reads the stored maxima of the run.
        run_id = store.create_run(run_id=None, study_name="rates", study_path="r.toml",
                                  study_text=study.text, seed=5, env={},
                                  hvbench_version="t", git_commit=None)
        ids = store.add_cells(run_id, [cell_record(c) for c in study.cells])
        store.record_repetition(
            run_id=run_id, cell_id=ids["vm/max"], repetition=0, position=0, status="ok",
            measurements=_maxima(640.0, 90.0).measurements, samples=[], raw=[],
            qemu_argv=None, accel=None, started_at="t", finished_at="t")
        resumed = StudyRunner(study, store, run_id=run_id)
        assert resumed.rate_refs(_item(study, "vm/fixed", 0)) == {"max": {1: 640.0, 70: 90.0}}
        # A base round whose reference failed has no maximum (no silent fallback); an
        # adaptive round above the base ones takes the latest earlier round's.
        assert resumed.rate_refs(_item(study, "vm/fixed", 1)) == {}
        assert resumed.rate_refs(_item(study, "vm/fixed", 3)) == {"max": {1: 640.0, 70: 90.0}}


def test_the_web_cell_offers_the_share_of_the_reference_per_file_size() -> None:
    study = parse(BASE + FIXED.replace("file_kb = [1]", "file_kb = [1, 70]")
                  + "calls_per_conn = 2\n")
    cell = next(c for c in study.cells if c.name == "vm/fixed")
    ctx = cast(CellContext, SimpleNamespace(study=study, cell=cell,
                                            rate_refs={"max": {1: 1000.0, 70: 150.0}}))
    spec, reference = WebCell._resolved(ctx, as_spec(cell.workload.spec, WebWorkloadSpec), 70)
    assert reference == 150.0 and spec.rate == pytest.approx(150.0 * 0.9 / 2)
    assert spec.rate_of is None and as_spec(cell.workload.spec, WebWorkloadSpec).rate == "90%"
    empty = cast(CellContext, SimpleNamespace(study=study, cell=cell, rate_refs={}))
    with pytest.raises(HvbenchError, match="cell vm/fixed: rate 90% of max's maximum"):
        WebCell._resolved(empty, as_spec(cell.workload.spec, WebWorkloadSpec), 1)


# -- seed 003 Fig. 20 over the neighbour rate --------------------------------------------------
def _rows(platform: str, workload: str, phase: str, metrics: dict[str, float]
          ) -> list[MeasurementRow]:
    base, _, scenario = platform.partition("@")
    return [MeasurementRow(0, f"{platform}/{workload}", platform, workload, rep, 0, phase,
                           metric, value, "", base, scenario or None)
            for metric, value in metrics.items() for rep in range(2)]


def _definition(name: str, rate: Any) -> dict[str, Any]:
    return {"kind": "qemu", "scenario": {
        "name": name, "workloads": ["fixed"], "identical": None,
        "neighbours": [{"role": "net", "load": "web", "file_kb": 70, "rate": rate}]}}


def sweep_rows() -> tuple[list[MeasurementRow], dict[str, dict[str, Any]]]:
    rows = [*_rows("vm", "max", "1kB", {"replies_s": 1000.0, "max_rate_rps": 1000.0}),
            *_rows("vm", "max", "70kB", {"replies_s": 150.0, "max_rate_rps": 150.0})]
    platforms: dict[str, dict[str, Any]] = {"vm": {"kind": "qemu"}}
    for name, rate, target, nb in (("colo.r90pct", "90%", 400.0, 120.0),
                                   ("colo.r30pct", "30%", 700.0, 45.0),
                                   ("colo.r120", 120.0, 500.0, 110.0)):
        rows += _rows(f"vm@{name}", "fixed", "1kB", {
            "replies_s": target, "nb0.load.replies_per_s": nb, "nb0.load.file_kb": 70.0})
        platforms[f"vm@{name}"] = _definition(name, rate)
    # Another scenario with one rate only: no sweep of its own.
    rows += _rows("vm@single", "fixed", "1kB", {"replies_s": 600.0,
                                                "nb0.load.replies_per_s": 60.0,
                                                "nb0.load.file_kb": 70.0})
    platforms["vm@single"] = {**_definition("single", "50%"), "memory_mib": 512}
    platforms["vm@single"]["scenario"] = {**platforms["vm@single"]["scenario"],
                                          "weights": {"io": 2.0}}
    return rows, platforms


def test_fig_20_table_has_a_row_per_neighbour_rate() -> None:
    rows, platforms = sweep_rows()
    report = build_scenario_report(rows, platforms=platforms)
    (sweep,) = report.sweeps
    assert (sweep.platform, sweep.workload, sweep.phase) == ("vm", "fixed", "1kB")
    assert [r.rates for r in sweep.rows] == [("30%",), ("90%",), ("120",)]
    low = sweep.rows[0].ratio
    assert low.aggregated is not None
    assert low.aggregated.mean == pytest.approx(700 / 1000 + 45 / 150)
    table = rate_sweep_table(sweep)
    assert len(table.rows) == 3 and table.rows[1][0] == "90%"
    assert table.rows[0][2].startswith("0.7") and table.rows[0][3].startswith("nb0: 0.3")
    assert table.rows[0][5] == "-"  # 1 kB next to 70 kB: no fairness index
    assert table in scenario_tables(report)
    doc = scenario_json(report)["rate_sweeps"]
    assert [r["neighbour_rates"] for r in doc[0]["rows"]] == [["30%"], ["90%"], ["120"]]
    assert doc[0]["rows"][2]["aggregated"]["mean"] == pytest.approx(0.5 + 110 / 150)
