"""Exports for other tools: one row per measurement with every dimension.

Pure: each function takes rows and returns bytes; the CLI writes them.

Columns: ``run, cell, platform, workload, repetition, position, phase, metric, value,
unit`` (the first nine as ``report.rows_csv`` always had them), then the cell's platform
and workload definitions flattened into ``platform.<path>`` and ``workload.<path>``
columns (``platform.vm.disks.0.bus``, ``workload.file_size``, ...), so a dataframe can
group by bus or cache mode without parsing names. Lists of scalars (phases, file sizes)
are kept as JSON text; a field a cell does not have is empty (CSV) or null.

CSV and JSON need nothing; Parquet needs pyarrow (``pip install 'hvbench[parquet]'``).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hvbench.errors import HostError
from hvbench.report.tables import Row

__all__ = [
    "BASE_COLUMNS",
    "ExportError",
    "MeasurementTable",
    "flatten",
    "measurement_table",
    "to_csv",
    "to_json",
    "to_parquet",
]

BASE_COLUMNS = ("run", "cell", "platform", "workload", "repetition", "position", "phase",
                "metric", "value", "unit")


class ExportError(HostError):
    """The export cannot be made here (Parquet without pyarrow)."""


@dataclass(frozen=True)
class MeasurementTable:
    """Column names and one dict per measurement with every column (None: no value)."""

    columns: list[str]
    rows: list[dict[str, Any]]


def flatten(value: Any, prefix: str) -> dict[str, Any]:
    """Nested dicts and lists of dicts as dotted keys; lists of scalars as JSON text."""
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(flatten(item, f"{prefix}.{key}"))
        return out
    if isinstance(value, list | tuple):
        if value and all(isinstance(v, Mapping) for v in value):
            out = {}
            for index, item in enumerate(value):
                out.update(flatten(item, f"{prefix}.{index}"))
            return out
        return {prefix: json.dumps(list(value))}
    return {prefix: value}


def measurement_table(rows: Iterable[Row], run_id: str,
                      definitions: Mapping[str, tuple[Mapping[str, Any], Mapping[str, Any]]]
                      ) -> MeasurementTable:
    """The table of ``rows``; ``definitions`` maps a cell name to its stored (platform,
    workload) definitions (cells without one get no definition columns)."""
    flat = {cell: {**flatten(p, "platform"), **flatten(w, "workload")}
            for cell, (p, w) in definitions.items()}
    extra = sorted({key for columns in flat.values() for key in columns})
    out = []
    for row in rows:
        record: dict[str, Any] = dict.fromkeys(extra)
        record |= {
            "run": run_id, "cell": row.cell, "platform": row.platform,
            "workload": row.workload, "repetition": row.repetition,
            "position": getattr(row, "position", None), "phase": row.phase,
            "metric": row.metric, "value": row.value, "unit": row.unit}
        record.update(flat.get(row.cell, {}))
        out.append(record)
    return MeasurementTable([*BASE_COLUMNS, *extra], out)


def _csv_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)  # round-trips exactly
    return str(value)


def to_csv(table: MeasurementTable) -> bytes:
    """UTF-8 CSV with a header line."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(table.columns)
    for row in table.rows:
        writer.writerow([_csv_text(row.get(c)) for c in table.columns])
    return buffer.getvalue().encode()


def to_json(table: MeasurementTable) -> bytes:
    """A JSON array of objects with every column (null where a cell has no value)."""
    records = [{c: row.get(c) for c in table.columns} for row in table.rows]
    return (json.dumps(records, indent=1) + "\n").encode()


def _column(pa: Any, values: Sequence[Any]) -> Any:
    """A pyarrow array; a column mixing types (e.g. int and text) becomes text."""
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([None if v is None else str(v) for v in values], type=pa.string())


def to_parquet(table: MeasurementTable) -> bytes:
    """A Parquet file (zstd-compressed) with the same columns.

    Raises:
        ExportError: pyarrow is not installed.
    """
    try:
        import pyarrow as pa  # noqa: PLC0415 - optional dependency
        import pyarrow.parquet as pq  # noqa: PLC0415
    except ImportError as exc:
        raise ExportError("Parquet export needs pyarrow: pip install 'hvbench[parquet]' "
                          "(or use --format csv or json-rows)") from exc
    arrays = [_column(pa, [row.get(c) for row in table.rows]) for c in table.columns]
    buffer = io.BytesIO()
    pq.write_table(pa.table(arrays, names=table.columns), buffer, compression="zstd")
    return buffer.getvalue()
