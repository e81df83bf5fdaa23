"""check: parsing bounds files (one-line errors), evaluating them on a stored real run,
the CLI table (golden) and its exit codes."""

from __future__ import annotations

import json
import os
import statistics
from pathlib import Path

import pytest
from rich.console import Console

from hvbench.analysis.bounds import Bound, BoundsFile, evaluate, failed, parse_bounds
from hvbench.cli.check import bounds_summary, bounds_table
from hvbench.cli.main import main
from hvbench.errors import SpecError
from hvbench.store.database import Store
from hvbench.store.records import CellRecord, MeasurementRecord, MeasurementRow

FIXTURES = Path(__file__).parent.parent / "fixtures"


def load() -> tuple[str, dict[str, str | None], list[MeasurementRow]]:
    data = json.loads((FIXTURES / "quick-rows.json").read_text())
    return data["run"], data["natives"], [MeasurementRow(**r) for r in data["rows"]]


def mean_of(rows: list[MeasurementRow], platform: str, phase: str,
            metric: str = "mb_s") -> float:
    """The mean of the stored rows of one (platform, phase, metric)."""
    values = [r.value for r in rows
              if (r.platform, r.phase, r.metric) == (platform, phase, metric)]
    assert values, (platform, phase, metric)
    return statistics.fmean(values)


def bounds(text: str) -> BoundsFile:
    return parse_bounds(text, "b.toml")


# -- parsing ---------------------------------------------------------------------------------
def test_fixture_file_parses() -> None:
    parsed = parse_bounds((FIXTURES / "bounds-quick.toml").read_text(), "bounds-quick.toml")
    assert len(parsed.bound) == 5
    assert parsed.bound[3].limits() == (40.0, 60.0)
    assert parsed.bound[0].limits() == (150.0, 400.0)
    assert parsed.bound[4].label(4) == "#5"


@pytest.mark.parametrize(("text", "message"), [
    ("[[bound]]\nmetric = 'mb_s'\nmin = 1\nmaxx = 2\n",
     "b.toml: bound[0].maxx: unknown field (did you mean 'max'?)"),
    ("[[bound]]\nmetric = 'mb_s'\n",
     "b.toml: bound[0]: a bound needs min and/or max, or mid with tolerance_pct"),
    ("[[bound]]\nmetric = 'mb_s'\nmin = 1\nmid = 2\ntolerance_pct = 5\n",
     "b.toml: bound[0]: give either min/max or mid with a tolerance, not both"),
    ("[[bound]]\nmetric = 'mb_s'\nmid = 2\n",
     "b.toml: bound[0]: mid goes with tolerance_pct"),
    ("[[bound]]\nmetric = 'mb_s'\nmin = 3\nmax = 2\n",
     "b.toml: bound[0]: min (3) is above max (2)"),
    ("[[bound]]\nmetric = 'mb_s'\nmin = 'fast'\n", "b.toml: bound[0].min: Input should be"),
    ("[[bound]]\nmetric = 'mb_s'\nstat = 'p99'\nmin = 1\n",
     "b.toml: bound[0].stat: Input should be"),
    ("[[bound]]\nmetric = 'mb_s'\nmid = 1\ntolerance_pct = -5\n",
     "b.toml: bound[0].tolerance_pct: Input should be greater than or equal to 0"),
    ("", "b.toml: bound: required, missing"),
    ("[[bound]\n", "b.toml: not valid TOML"),
])
def test_errors_are_one_line_naming_file_and_field(text: str, message: str) -> None:
    with pytest.raises(SpecError) as info:
        bounds(text)
    assert str(info.value).startswith(message)
    assert "\n" not in str(info.value)


# -- evaluation ------------------------------------------------------------------------------
def test_min_max_pass_and_fail() -> None:
    _, natives, rows = load()
    ok = evaluate(bounds("[[bound]]\nmetric='mb_s'\nplatform='native'\nphase='write'\n"
                         "min=150\nmax=400\n"), rows, natives)
    assert [r.status for r in ok] == ["pass"] and not failed(ok)
    assert ok[0].value == pytest.approx(mean_of(rows, "native", "write"))
    bad = evaluate(bounds("[[bound]]\nmetric='mb_s'\nplatform='native'\nphase='write'\n"
                          "min=300\n"), rows, natives)
    assert [r.status for r in bad] == ["fail"] and failed(bad)


def test_patterns_expand_to_every_match() -> None:
    _, natives, rows = load()
    results = evaluate(bounds("[[bound]]\nmetric='mb_s'\nmin=1\n"), rows, natives)
    assert {(r.platform, r.phase) for r in results} == {
        (p, ph) for p in ("native", "guest.virtio-blk", "guest.ide") for ph in ("read", "write")}


def test_of_native_skips_native_and_uses_its_mean() -> None:
    _, natives, rows = load()
    results = evaluate(bounds("[[bound]]\nmetric='mb_s'\nphase='write'\nof_native=true\n"
                              "min=45\n"), rows, natives)
    by_platform = {r.platform: r for r in results}
    assert set(by_platform) == {"guest.virtio-blk", "guest.ide"}
    # % of native's mean, from the stored rows; the fixture's run puts virtio-blk above
    # the 45 % bound and IDE below it.
    native = mean_of(rows, "native", "write")
    pct = {p: 100 * mean_of(rows, p, "write") / native for p in by_platform}
    assert pct["guest.ide"] < 45 <= pct["guest.virtio-blk"], pct
    assert by_platform["guest.virtio-blk"].value == pytest.approx(pct["guest.virtio-blk"])
    assert by_platform["guest.ide"].value == pytest.approx(pct["guest.ide"])
    assert by_platform["guest.virtio-blk"].status == "pass"
    assert by_platform["guest.ide"].status == "fail"
    missing = evaluate(bounds("[[bound]]\nmetric='mb_s'\nof_native=true\nmin=1\n"), rows, {})
    assert {r.note for r in missing} == {"no native baseline for workload dd"}
    assert failed(missing)


def test_stat_and_mid_tolerance() -> None:
    _, natives, rows = load()
    boot = evaluate(bounds("[[bound]]\nmetric='boot_s'\nplatform='guest.ide'\nstat='min'\n"
                           "max=6\n"), rows, natives)
    assert boot[0].stat == "min" and boot[0].status == "pass"
    mid = evaluate(bounds("[[bound]]\nmetric='mb_s'\nplatform='guest.ide'\nphase='read'\n"
                          "mid=100\ntolerance_pct=10\n"), rows, natives)
    assert (mid[0].low, mid[0].high, mid[0].status) == (90.0, 110.0, "fail")


def test_a_bound_matching_nothing_fails() -> None:
    _, natives, rows = load()
    results = evaluate(bounds("[[bound]]\nmetric='mbit_s'\nmin=1\n"), rows, natives)
    # A metric no measurement has: a typo, most often; the closest metric is named.
    assert [(r.status, r.note) for r in results] == [
        ("missing", "no such metric (did you mean 'mb_s'?)")]
    assert failed(results)
    other = evaluate(bounds("[[bound]]\nmetric='mb_s'\nplatform='nope'\nmin=1\n"), rows,
                     natives)
    assert [(r.status, r.note) for r in other] == [("missing", "no measurement matches")]


def test_bound_model_rejects_nothing_valid() -> None:
    assert Bound(metric="x", min=1).limits() == (1.0, None)
    assert Bound(metric="x", mid=-10, tolerance_pct=10).limits() == (-11.0, -9.0)


# -- CLI -------------------------------------------------------------------------------------
def render() -> str:
    run, natives, rows = load()
    parsed = parse_bounds((FIXTURES / "bounds-quick.toml").read_text(), "bounds-quick.toml")
    results = evaluate(parsed, rows, natives)
    with Path(os.devnull).open("w") as sink:
        console = Console(width=120, record=True, color_system=None, file=sink)
        console.print(bounds_table(results, run))
        console.print(bounds_summary(results), markup=False)
        return console.export_text()


def test_check_golden() -> None:
    golden = FIXTURES / "check-quick.golden.txt"
    text = render()
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(text)
    assert text == golden.read_text()


def quick_db(path: Path) -> str:
    """The stored quick run in a real database."""
    run, _, rows = load()
    with Store(path) as store:
        store.create_run(run_id=run, study_name="quick", study_path="quick.toml",
                         study_text="", seed=1, env={"accelerator": "tcg"},
                         hvbench_version="0", git_commit=None)
        platforms = {r.cell: r.platform for r in rows}
        ids = store.add_cells(run, [CellRecord(c, p, {"kind": "native" if p == "native"
                                                      else "qemu"}, "dd", {})
                                    for c, p in platforms.items()])
        by_rep: dict[tuple[str, int], list[MeasurementRecord]] = {}
        for r in rows:
            by_rep.setdefault((r.cell, r.repetition), []).append(
                MeasurementRecord(r.phase, r.metric, r.value, r.unit))
        for (cell, rep), records in by_rep.items():
            store.record_repetition(run_id=run, cell_id=ids[cell], repetition=rep, position=0,
                                    status="ok", measurements=records, started_at="t",
                                    finished_at="t")
    return run


def test_cli_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "r.db"
    run = quick_db(db)
    good = tmp_path / "good.toml"
    good.write_text("[[bound]]\nmetric='mb_s'\nplatform='native'\nmin=100\n")
    assert main(["check", run, "--bounds", str(good), "--db", str(db)]) == 0
    assert "2 of 2 checks passed" in capsys.readouterr().out
    assert main(["check", "--bounds", str(FIXTURES / "bounds-quick.toml"),
                 "--db", str(db)]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "5 of 9 checks passed; exit code 1" in out
    bad = tmp_path / "bad.toml"
    bad.write_text("[[bound]]\nmetric='mb_s'\n")
    assert main(["check", "--bounds", str(bad), "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}: bound[0]: a bound needs" in err and "Traceback" not in err
    assert main(["check", "--bounds", str(tmp_path / "none.toml"), "--db", str(db)]) == 2
    assert "cannot read the bounds file" in capsys.readouterr().err
