"""Exports: every measurement with every dimension, in CSV, JSON and Parquet."""

from __future__ import annotations

import builtins
import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from hvbench.report.export import (
    BASE_COLUMNS,
    ExportError,
    flatten,
    measurement_table,
    to_csv,
    to_json,
    to_parquet,
)
from hvbench.store.records import MeasurementRow

FIXTURES = Path(__file__).parent.parent / "fixtures"
VM = {"kind": "qemu", "vm": {"machine": "pc", "memory_mib": 256, "nics": [],
                             "disks": [{"bus": "ide", "cache": "none", "size": 100663296}]}}
NATIVE = {"kind": "native"}
DD = {"kind": "disk", "profile": "dd", "file_size": 67108864, "phases": None,
      "direct": True}


def load() -> tuple[str, list[MeasurementRow]]:
    data = json.loads((FIXTURES / "quick-rows.json").read_text())
    return data["run"], [MeasurementRow(**r) for r in data["rows"]]


def definitions() -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    return {"native/dd": (NATIVE, DD), "guest.ide/dd": (VM, DD),
            "guest.virtio-blk/dd": (VM, {**DD, "phases": ["write", "read"]})}


def test_flatten_nested_definitions() -> None:
    assert flatten(VM, "platform") == {
        "platform.kind": "qemu", "platform.vm.machine": "pc", "platform.vm.memory_mib": 256,
        "platform.vm.nics": "[]", "platform.vm.disks.0.bus": "ide",
        "platform.vm.disks.0.cache": "none", "platform.vm.disks.0.size": 100663296}
    assert flatten({"file_kb": [1, 10]}, "workload") == {"workload.file_kb": "[1, 10]"}


def test_table_has_every_row_and_dimension() -> None:
    run, rows = load()
    table = measurement_table(rows, run, definitions())
    assert table.columns[: len(BASE_COLUMNS)] == list(BASE_COLUMNS)
    assert "platform.vm.disks.0.bus" in table.columns and "workload.profile" in table.columns
    assert len(table.rows) == len(rows)
    ide = next(r for r in table.rows if r["cell"] == "guest.ide/dd")
    assert ide["platform.vm.disks.0.bus"] == "ide" and ide["run"] == run
    native = next(r for r in table.rows if r["cell"] == "native/dd")
    assert native["platform.vm.machine"] is None and native["platform.kind"] == "native"


def test_csv_round_trips_values_and_keeps_the_old_columns_first() -> None:
    run, rows = load()
    parsed = list(csv.DictReader(io.StringIO(to_csv(measurement_table(
        rows, run, definitions())).decode())))
    assert len(parsed) == len(rows)
    assert list(parsed[0])[:10] == list(BASE_COLUMNS)
    assert [float(p["value"]) for p in parsed] == [r.value for r in rows]
    assert parsed[0]["platform.vm.machine"] == ""  # the native cell has no VM
    assert {p["workload.direct"] for p in parsed} == {"true"}


def test_json_rows() -> None:
    run, rows = load()
    doc = json.loads(to_json(measurement_table(rows, run, definitions())))
    assert len(doc) == len(rows)
    assert doc[0]["value"] == rows[0].value and doc[0]["platform.vm.machine"] is None
    assert doc[-1]["position"] == rows[-1].position


def test_parquet_has_the_same_table() -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    run, rows = load()
    table = measurement_table(rows, run, {**definitions(), "native/dd": (
        {"kind": "native", "odd": 1}, DD), "guest.ide/dd": ({"kind": "qemu", "odd": "x"}, DD)})
    read = pq.read_table(io.BytesIO(to_parquet(table)))
    assert read.num_rows == len(rows) and read.column_names == table.columns
    assert read.column("value").to_pylist() == [r.value for r in rows]
    # a column mixing int and text is stored as text
    assert set(read.column("platform.odd").to_pylist()) == {"1", "x", None}


def test_parquet_without_pyarrow_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    real = builtins.__import__

    def no_pyarrow(name: str, *args: Any, **kw: Any) -> Any:
        if name.startswith("pyarrow"):
            raise ImportError(name)
        return real(name, *args, **kw)

    monkeypatch.setattr(builtins, "__import__", no_pyarrow)
    run, rows = load()
    with pytest.raises(ExportError, match=r"pip install 'hvbench\[parquet\]'"):
        to_parquet(measurement_table(rows, run, {}))
