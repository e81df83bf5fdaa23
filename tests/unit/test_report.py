"""Report rendering: golden output of a stored real run, CSV and JSON shapes."""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

import pytest
from rich.console import Console
from rich.table import Table

from hvbench.analysis.stats import summarize
from hvbench.kinds.propagation.text import propagation_fit_rows, propagation_fit_table
from hvbench.report.fits import FIT_HEADERS
from hvbench.report.tables import (
    mean_ci_text,
    phase_stats,
    phase_table,
    rows_csv,
    summary_json,
    warnings_for,
)
from hvbench.store.records import MeasurementRow

FIXTURES = Path(__file__).parent.parent / "fixtures"


def load() -> tuple[str, dict[str, str | None], list[MeasurementRow]]:
    data = json.loads((FIXTURES / "quick-rows.json").read_text())
    return data["run"], data["natives"], [MeasurementRow(**r) for r in data["rows"]]


def render() -> str:
    _, natives, rows = load()
    with Path(os.devnull).open("w") as sink:
        console = Console(width=120, record=True, color_system=None, file=sink)
        for stats in phase_stats(rows):
            console.print(phase_table(stats, natives.get(stats.workload)))
        for warning in warnings_for(phase_stats(rows)):
            console.print(warning)
        return console.export_text()


def test_report_golden() -> None:
    golden = FIXTURES / "report-quick.golden.txt"
    text = render()
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(text)
    assert text == golden.read_text()


def test_percent_of_native_and_ci_are_shown() -> None:
    text = render()
    assert "% of native" in text and "mean ± 95% CI" in text
    assert "host avgrq-sz (sectors)" in text and "QEMU vCPU threads CPU %" in text


def test_csv_has_every_dimension() -> None:
    run, _, rows = load()
    parsed = list(csv.DictReader(io.StringIO(rows_csv(rows, run))))
    assert len(parsed) == len(rows)
    assert set(parsed[0]) == {"run", "cell", "platform", "workload", "repetition", "phase",
                              "metric", "value", "unit"}
    assert float(parsed[0]["value"]) == rows[0].value


def test_json_summaries() -> None:
    run, natives, rows = load()
    doc = json.loads(summary_json(phase_stats(rows), natives, {"id": run}))
    write = next(p for p in doc["phases"] if p["phase"] == "write")
    native = write["metrics"]["mb_s"]["native"]
    assert native["pct_of_native"] == 100.0 and native["n"] == 3
    guest = write["metrics"]["mb_s"]["guest.virtio-blk"]
    assert 0 < guest["pct_of_native"] < 100
    assert guest["ci95_low"] <= guest["mean"] <= guest["ci95_high"]


def test_json_carries_extra_sections() -> None:
    run, natives, rows = load()
    doc = json.loads(summary_json(phase_stats(rows), natives, {"id": run},
                                  {"scenarios": {"degradation": []}}))
    assert doc["scenarios"] == {"degradation": []} and doc["phases"]


def test_mean_ci_text() -> None:
    # The interval to 2 significant digits, the value to the same decimal place.
    assert mean_ci_text(summarize([10.0, 12.0, 14.0]), "s") == "12.0 ± 5.0 s"
    assert mean_ci_text(summarize([2.52, 2.57, 2.62])) == "2.57 ± 0.12"
    assert mean_ci_text(summarize([1000.0, 1500.0, 2000.0])) == "1500 ± 1242"
    # one repetition: the value and n=1, no interval
    assert mean_ci_text(summarize([1070.0])) == "1070 (n=1)"
    assert mean_ci_text(summarize([0.1 + 0.2, 0.3, 0.30000000000000004])) == "0.3 ± 0"


# -- propagation fits in the terminal -----------------------------------------------------------
def propagation_fixture() -> list[MeasurementRow]:
    """What the propagation workload stores (per phase: duration_s, size_bytes,
    bytes_on_wire, link_rate_bits, mb_s, cache_hit), for scp at 1, 2 and 4 GiB taking
    exactly 2 s + 8 ns per byte on a 1 Gbit/s link, and an overlay whose second
    repetition is a cache hit; two repetitions each."""
    rows = []
    for workload, size in (("propagation.scp-1G", 1 << 30), ("propagation.scp-2G", 2 << 30),
                           ("propagation.scp-4G", 4 << 30), ("propagation.overlay-1G", 1 << 30)):
        cell = f"node/{workload}"
        for rep in range(2):
            hit = workload.endswith("overlay-1G") and rep == 1
            moved = 0.0 if hit else float(size)
            transfer = 0.01 if hit else 8e-9 * size
            values = {"initial": 0.5, "transfer": transfer, "terminal": 1.2, "shutdown": 0.3}
            for phase, seconds in values.items():
                metrics = {"duration_s": seconds, "size_bytes": moved if phase == "transfer"
                           else 0.0, "bytes_on_wire": moved * 1.01 if phase == "transfer"
                           else 0.0, "link_rate_bits": 1e9, "mb_s": moved / 1e6 / seconds,
                           "cache_hit": float(hit)}
                method = workload.removeprefix("propagation.").split("-")[0]
                rows += [MeasurementRow(0, cell, "node", workload, rep, 0, phase, m, v, "",
                                        "node", None, method, float(size))
                         for m, v in metrics.items()]
    return rows


def render_table(table: Table) -> str:
    with Path(os.devnull).open("w") as sink:
        console = Console(width=220, record=True, color_system=None, file=sink)
        console.print(table)
        return console.export_text()


def test_propagation_fit_rows_of_the_fixture() -> None:
    fits = propagation_fit_rows(propagation_fixture())
    by_key = {(r[0], r[1], r[2]): r[3:] for r in fits}
    # 2 s (initial + terminal 1.7 s, the rest of the intercept is 0) ... exactly linear
    equation, r2, intercept = by_key[("node", "scp", "linear")]
    assert equation == "y = 1.7 + 8e-09·x" and r2 == "1.0000" and intercept == "1.7"
    assert by_key[("node", "scp", "quadratic")][1] == "1.0000"
    # the overlay moved 1 GiB once and hit the cache once: one size each, no fit
    assert not any(r[1].startswith("overlay") for r in fits)
    assert fits[-1] == ["theoretical NIC 1000 Mbit/s", "-", "line rate", "y = 0 + 8e-09·x",
                        "1", "0"]
    assert propagation_fit_rows(load()[2]) == []


def test_propagation_fit_table_for_the_terminal() -> None:
    assert propagation_fit_table(load()[2]) is None
    table = propagation_fit_table(propagation_fixture())
    assert table is not None
    assert len(table.columns) == len(FIT_HEADERS)
    assert str(table.columns[-1].header) == "overhead s"
    text = render_table(table)
    for expected in ("propagation: total time against image size", "y = 1.7 + 8e-09·x",
                     "quadratic", "theoretical NIC 1000 Mbit/s", "y = 0 + 8e-09·x",
                     "what the manager spends", "x·8 / link_rate_bits seconds"):
        assert expected in text, expected


def test_after_the_phase_tables_come_the_fits_then_the_scenario_tables() -> None:
    from hvbench.report.model import build_run_report
    from hvbench.report.render import terminal_tables
    from hvbench.store.records import RunRecord

    run = RunRecord("r", "s", "s.toml", "", 0, "t", None, "complete", "0", None, {})

    def extra_titles(rows: list[MeasurementRow]) -> list[str]:
        report = build_run_report(run, [], rows)
        tables = terminal_tables(report)[len(report.phases):]
        titles = [str(t.title).split(" (")[0].split(":")[0] for t in tables]
        # The diagnosis table, when a cell has a verdict, is always last.
        if "Diagnosis" in titles:
            assert titles.index("Diagnosis") == len(titles) - 1
        return [t for t in titles if t != "Diagnosis"]

    assert extra_titles(load()[2]) == []
    alone = [MeasurementRow(0, "vm/w", "vm", "w", r, 0, "tx", "mbit_s", 100.0 + r, "")
             for r in range(3)]
    busy = [MeasurementRow(0, "vm@idle1/w", "vm@idle1", "w", r, 0, "tx", "mbit_s", 90.0 + r, "",
                           "vm", "idle1") for r in range(3)]
    # the fits, then each phase's share of the propagation time, then the scenarios
    assert extra_titles([*propagation_fixture(), *alone, *busy]) == \
        ["propagation", "propagation", "Degradation against alone"]


def test_cli_report_prints_the_propagation_fits(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    from hvbench.cli.main import main
    from hvbench.store.database import Store
    from hvbench.store.records import CellRecord, MeasurementRecord

    rows = propagation_fixture()
    db = tmp_path / "p.db"
    with Store(db) as store:
        run = store.create_run(run_id="p1", study_name="propagation", study_path="p.toml",
                               study_text="", seed=1, env={"accelerator": "kvm"},
                               hvbench_version="0", git_commit=None)
        cells = sorted({(r.cell, r.workload) for r in rows})
        sizes = {r.workload: r.image_size for r in rows}
        ids = store.add_cells(run, [CellRecord(c, "node", {"kind": "native"}, w, {
            "kind": "propagation", "method": w.removeprefix("propagation.").split("-")[0],
            "image_size": int(sizes[w] or 0)}) for c, w in cells])
        for cell, _ in cells:
            for rep in range(2):
                store.record_repetition(
                    run_id=run, cell_id=ids[cell], repetition=rep, position=0, status="ok",
                    measurements=[MeasurementRecord(r.phase, r.metric, r.value, r.unit)
                                  for r in rows if r.cell == cell and r.repetition == rep],
                    samples=[], started_at="t0", finished_at="t1")
    assert main(["report", run, "--db", str(db)]) == 0
    text = capsys.readouterr().out
    assert "propagation: total time against image size" in text
    assert text.index("propagation.scp-4G / terminal") < text.index("y = 1.7 + 8e-09·x")
    # 80 columns: the NIC's label wraps, its equation does not
    assert "theoretical NIC" in text and "line rate   y = 0 + 8e-09·x" in text
