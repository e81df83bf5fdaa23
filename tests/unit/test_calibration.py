"""``hvbench calibrate``: thresholds from planted cells (separable groups give the middle
of the gap; overlapping or too few keep the default, and say why), the rules reading a
calibrated threshold, the store round trip, the plants file's errors, and the whole path
on a stored fixture run."""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
from collections.abc import Mapping
from pathlib import Path

import pytest
from rich.console import Console

from hvbench.analysis.calibration import (
    THRESHOLDS,
    PlantedCell,
    Threshold,
    calibrate,
    calibrate_one,
    stored_thresholds,
    thresholds_of,
)
from hvbench.analysis.diagnosis import WAIT_PCT
from hvbench.analysis.resources import CellModel
from hvbench.cli import calibrate as cli
from hvbench.errors import SpecError
from hvbench.report.calibration import calibration_line, calibration_table
from hvbench.report.model import load_run_report
from hvbench.store.database import CalibrationRecord, Store
from tests.unit.test_diagnosis import DISK, dominant, model

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
WAIT = next(t for t in THRESHOLDS if t.name == "WAIT_PCT")


def _cell(wait: float) -> CellModel:
    return model({**DISK, "qemu.vcpu.wait_pct": wait})


def _planted(waits: Mapping[str, list[float]]) -> list[PlantedCell]:
    return [PlantedCell(_cell(w), rule) for rule, values in waits.items() for w in values]


def test_separable_groups_give_the_middle_of_the_gap() -> None:
    cells = _planted({"host-cpu-contention": [40.0, 55.0], "none": [5.0, 12.0],
                      "few-in-flight": [20.0]})
    outcome = calibrate_one(WAIT, cells)
    assert outcome.calibrated and outcome.value == pytest.approx(30.0)
    assert (outcome.positives, outcome.negatives) == (2, 3)
    assert outcome.note == "between others' highest 20 and host-cpu-contention's lowest 40"
    assert thresholds_of([outcome]) == {"WAIT_PCT": pytest.approx(30.0)}


def test_overlap_or_too_few_cells_keep_the_default_and_say_why() -> None:
    overlap = calibrate_one(WAIT, _planted({"host-cpu-contention": [35.0, 60.0],
                                            "none": [5.0, 43.9]}))
    assert not overlap.calibrated and overlap.value == WAIT_PCT == overlap.default
    assert overlap.note == ("the groups overlap on this host: others' highest 43.9 >= "
                            "host-cpu-contention's lowest 35")
    few = calibrate_one(WAIT, _planted({"host-cpu-contention": [60.0], "none": [5.0, 6.0]}))
    assert not few.calibrated and "1 planted with host-cpu-contention, 2 others" in few.note
    assert thresholds_of([overlap, few]) == {}


def test_a_threshold_read_below_takes_the_gap_the_other_way() -> None:
    low = Threshold("WAIT_PCT", "few-in-flight", "res.vcpu.wait_pct", "below",
                    WAIT.read)
    outcome = calibrate_one(low, _planted({"few-in-flight": [1.0, 3.0], "none": [9.0, 11.0]}))
    assert outcome.calibrated and outcome.value == pytest.approx(6.0)


def test_cells_without_the_metric_are_neither_group() -> None:
    cells = [PlantedCell(model(DISK), "host-cpu-contention")] * 3
    assert [o.positives for o in calibrate(cells)] == [3 if t is WAIT else 0
                                                       for t in THRESHOLDS]


def test_the_rules_read_a_calibrated_threshold() -> None:
    cell = _cell(25.0)
    assert dominant(cell) != "host-cpu-contention"
    calibrated = dataclasses.replace(cell, thresholds={"WAIT_PCT": 20.0})
    assert dominant(calibrated) == "host-cpu-contention"


def _record(name: str, value: float, calibrated: bool) -> CalibrationRecord:
    return CalibrationRecord(name=name, rule="r", default_value=1.0, value=value,
                             calibrated=calibrated, positives=2, negatives=3, note="n")


def test_stored_thresholds_skip_the_kept_and_the_unknown() -> None:
    rows = [_record("WAIT_PCT", 22.0, True), _record("FLUSH_PER_WRITE", 0.1, False),
            _record("NO_SUCH", 1.0, True)]
    assert stored_thresholds(rows) == {"WAIT_PCT": 22.0}


def test_the_store_keeps_calibrations_per_host_newest_first(tmp_path: Path) -> None:
    with Store(tmp_path / "c.db") as store:
        store.add_calibration("cal-1", "h1", ["r1"], [_record("WAIT_PCT", 20.0, True)])
        store.add_calibration("cal-2", "h1", ["r2", "r3"],
                              [_record("WAIT_PCT", 25.0, True),
                               _record("FLUSH_PER_WRITE", 1.0, False)])
        store.add_calibration("cal-3", "h2", [], [_record("WAIT_PCT", 9.0, True)])
        mine = store.calibrations("h1")
    assert [c.calibration for c in mine] == ["cal-2", "cal-1"]
    assert mine[0].runs == ("r2", "r3")
    assert [(t.name, t.value, t.calibrated) for t in mine[0].thresholds] == [
        ("WAIT_PCT", 25.0, True), ("FLUSH_PER_WRITE", 1.0, False)]
    line = calibration_line(mine[0])
    assert line == ("thresholds calibrated on host h1 (hvbench calibrate, cal-2): "
                    "WAIT_PCT 25 (default 1)")
    table = calibration_table(mine[0])
    assert table.rows[1][3] == "1 (kept)" and "FLUSH_PER_WRITE: n" in table.note
    assert calibration_line(dataclasses.replace(mine[0], thresholds=mine[0].thresholds[1:])) \
        is None


def _plants(tmp_path: Path, expected: object, studies: tuple[str, ...] = ()) -> Path:
    directory = tmp_path / "plants"
    directory.mkdir()
    (directory / "expected.json").write_text(json.dumps(expected))
    for name in studies:
        shutil.copy(RUNS / "quick.toml", directory / f"{name}.toml")
    return directory


@pytest.mark.parametrize(("expected", "studies", "message"), [
    ({"a": {"x": 1}}, ("a",), "expected.json: a.x: expected a rule name"),
    ({"a": {"x": "io-limit"}}, (), "expected.json: a: no study file"),
    (["a"], (), "expected an object of plant name -> planted cells"),
])
def test_a_bad_plants_file_is_one_line_naming_the_entry(
        tmp_path: Path, expected: object, studies: tuple[str, ...], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        cli.load_plants(_plants(tmp_path, expected, studies))
    with pytest.raises(SpecError, match="no such file"):
        cli.load_plants(tmp_path / "nowhere")


def _args(db: Path, plants: Path, **kw: object) -> argparse.Namespace:
    base: dict[str, object] = {"plants": str(plants), "plant_names": [], "rounds": 1,
                               "from_runs": [], "show": False, "dry_run": False,
                               "format": "json", "db": str(db), "output": None}
    return argparse.Namespace(**{**base, **kw})


def test_calibrating_from_a_stored_run_of_a_plant(tmp_path: Path) -> None:
    # The whole path on real stored rows: the quick fixture run as a "plant" whose
    # IDE cells are planted with emulated-controller and virtio-blk's are clean.
    db = tmp_path / "quick.db"
    shutil.copy(RUNS / "quick.db", db)
    plants = _plants(tmp_path, {"quick": {"guest.ide/*": "emulated-controller",
                                          "guest.virtio-blk/*": "none"}}, ("quick",))
    console = Console(record=True, width=200)
    with Store(db) as store:
        run = store.run_ids()[0]
    assert cli.handle(_args(db, plants, from_runs=[run]), console, console) == 0
    shown = json.loads(console.export_text())
    assert shown["runs"] == [run] and [t["name"] for t in shown["thresholds"]] == [
        t.name for t in THRESHOLDS]
    # No rule with a calibrated threshold was planted: every default stays, with why.
    assert all(not t["calibrated"] and t["value"] == t["default"] for t in shown["thresholds"])
    assert all(t["note"].startswith("too few cells") for t in shown["thresholds"])
    with Store(db) as store:
        report = load_run_report(store, run, monitors=[], steady=False)
    assert report.calibration is not None
    assert report.calibration.calibration == shown["calibration"]
    with pytest.raises(SpecError, match="--plant: no plant 'quik' \\(did you mean 'quick'"):
        cli.handle(_args(db, plants, plant_names=["quik"]), console, console)


def test_a_run_of_another_study_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "web.db"
    shutil.copy(RUNS / "web.db", db)
    plants = _plants(tmp_path, {"quick": {"guest.ide/*": "emulated-controller"}},
                     ("quick",))
    with Store(db) as store:
        run = store.run_ids()[0]
    console = Console(record=True)
    with pytest.raises(SpecError, match=f"run {run} is of study 'web', not of a planted"):
        cli.handle(_args(db, plants, from_runs=[run]), console, console)
