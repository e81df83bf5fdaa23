"""Report rendering: golden output of a stored real run, CSV and JSON shapes."""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

from rich.console import Console

from hvbench.report import phase_stats, phase_table, rows_csv, summary_json, warnings_for
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
