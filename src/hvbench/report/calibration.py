"""A host's calibration of the diagnosis thresholds (``hvbench calibrate``) as a table,
as JSON, and as the line ``explain`` prints when its verdicts read calibrated values."""

from __future__ import annotations

from typing import Any

from hvbench.report.text import TextTable
from hvbench.store.records import CalibrationRow

CALIBRATION_HEADERS = ("threshold", "rule", "default", "this host", "planted", "others")


def _value(value: float) -> str:
    return f"{value:.3g}"


def calibration_table(row: CalibrationRow) -> TextTable:
    """One line per threshold: its default, the value the rules read on this host (the
    default again, marked ``kept``, when the planted cells did not decide it), how many
    cells were planted with its rule and how many others; the note under it says, per
    threshold, from what or why not, and which runs."""
    rows = tuple(
        (t.name, t.rule, _value(t.default_value),
         _value(t.value) if t.calibrated else f"{_value(t.value)} (kept)",
         str(t.positives), str(t.negatives))
        for t in row.thresholds)
    notes = [f"{t.name}: {t.note}" for t in row.thresholds]
    if row.runs:
        notes.append(f"from the planted runs {', '.join(row.runs)}")
    return TextTable(f"calibration {row.calibration} of host {row.host} ({row.created_at})",
                     CALIBRATION_HEADERS, rows, left=2, note="\n".join(notes))


def calibration_json(row: CalibrationRow) -> dict[str, Any]:
    """The calibration as JSON: id, host, time, runs, each threshold."""
    return {"calibration": row.calibration, "host": row.host, "created_at": row.created_at,
            "runs": list(row.runs),
            "thresholds": [{"name": t.name, "rule": t.rule, "default": t.default_value,
                            "value": t.value, "calibrated": t.calibrated,
                            "positives": t.positives, "negatives": t.negatives,
                            "note": t.note} for t in row.thresholds]}


def calibration_line(row: CalibrationRow | None) -> str | None:
    """What ``explain`` says about the thresholds its rules read: the calibrated ones
    with their defaults; None when the host has no calibration or it moved nothing."""
    if row is None:
        return None
    moved = [t for t in row.thresholds if t.calibrated]
    if not moved:
        return None
    values = ", ".join(f"{t.name} {_value(t.value)} (default {_value(t.default_value)})"
                       for t in moved)
    return (f"thresholds calibrated on host {row.host} (hvbench calibrate, "
            f"{row.calibration}): {values}")
