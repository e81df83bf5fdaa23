"""The values the store takes and returns: frozen dataclasses, no SQL.

``*Record`` types go into the store; ``*Row`` types and :class:`RunRecord` /
:class:`RunSummary` come out of it. JSON-valued fields (platform, workload, env, sample
values) are plain dicts so they round-trip through ``json`` unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from hvbench.model.study import Cell

RunStatus = Literal["running", "complete", "interrupted", "failed"]
RepetitionStatus = Literal["ok", "failed"]

RUN_STATUSES: tuple[RunStatus, ...] = ("running", "complete", "interrupted", "failed")
REPETITION_STATUSES: tuple[RepetitionStatus, ...] = ("ok", "failed")


@dataclass(frozen=True)
class CellRecord:
    """One cell of a study: a platform (native or a VM configuration) times a workload."""

    name: str
    platform_name: str
    platform: Mapping[str, Any]
    workload_name: str
    workload: Mapping[str, Any]


@dataclass(frozen=True)
class MeasurementRecord:
    """One scalar result of one phase of a repetition, e.g. ``("seq-write", "mb_s")``."""

    phase: str
    metric: str
    value: float
    unit: str


@dataclass(frozen=True)
class SampleRecord:
    """One point of a time series a monitor took during a phase (t in seconds)."""

    phase: str
    monitor: str
    t: float
    values: Mapping[str, Any]


@dataclass(frozen=True)
class RawRecord:
    """A tool's raw output kept for later re-analysis, e.g. kind ``"fio-json"``."""

    phase: str
    kind: str
    content: str


@dataclass(frozen=True)
class RunRecord:
    """A run as stored: the study it executed and the environment it ran in."""

    id: str
    study_name: str
    study_path: str
    study_text: str
    seed: int
    created_at: str
    finished_at: str | None
    status: RunStatus
    hvbench_version: str
    git_commit: str | None
    env: dict[str, Any]


@dataclass(frozen=True)
class RunSummary:
    """One line of the run list."""

    id: str
    study_name: str
    created_at: str
    status: RunStatus
    n_cells: int
    n_ok: int
    n_failed: int
    accelerator: str | None


@dataclass(frozen=True)
class CellRow:
    """A stored cell with its database id."""

    id: int
    name: str
    platform_name: str
    platform: dict[str, Any]
    workload_name: str
    workload: dict[str, Any]


@dataclass(frozen=True)
class MeasurementRow:
    """A measurement with every dimension a report groups by."""

    cell_id: int
    cell: str
    platform: str
    workload: str
    repetition: int
    position: int
    phase: str
    metric: str
    value: float
    unit: str


@dataclass(frozen=True)
class SampleRow:
    """A time-series point with the cell and repetition it belongs to."""

    cell: str
    repetition: int
    phase: str
    monitor: str
    t: float
    values: dict[str, Any]


@dataclass(frozen=True)
class RawRow:
    """A raw tool output with the cell and repetition it belongs to."""

    cell: str
    repetition: int
    phase: str
    kind: str
    content: str


@dataclass(frozen=True)
class FailureRow:
    """A repetition that failed (and was not retried successfully)."""

    cell: str
    repetition: int
    error: str | None
    console_log: str | None
    qemu_argv: list[str] | None
    accel: str | None
    finished_at: str


def cell_record(cell: Cell) -> CellRecord:
    """How the store keeps ``cell``: its names, its workload's definition and its
    platform's, in a scenario with the scenario's (``platform.scenario``)."""
    platform: dict[str, Any] = cell.platform.spec.model_dump(mode="json")
    if cell.scenario is not None:
        platform = {**platform, "scenario": {"name": cell.scenario.name,
                                             **cell.scenario.spec.model_dump(mode="json")}}
    return CellRecord(cell.name, cell.platform_name, platform, cell.workload.name,
                      cell.workload.spec.model_dump(mode="json"))
