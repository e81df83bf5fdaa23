"""The values the store takes and returns: frozen dataclasses, no SQL.

``*Record`` types go into the store; ``*Row`` types and :class:`RunRecord` /
:class:`RunSummary` come out of it. JSON-valued fields (platform, workload, env, sample
values) are plain dicts so they round-trip through ``json`` unchanged.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from hvbench.model.platform import DEFAULT_PLATFORM_KIND
from hvbench.model.workload import DEFAULT_WORKLOAD_KIND, identity_facts

if TYPE_CHECKING:
    from hvbench.model.study import Cell

RunStatus = Literal["running", "complete", "interrupted", "failed"]
RepetitionStatus = Literal["ok", "failed"]

RUN_STATUSES: tuple[RunStatus, ...] = ("running", "complete", "interrupted", "failed")
REPETITION_STATUSES: tuple[RepetitionStatus, ...] = ("ok", "failed")
#: The raw-output kind of a window's monitor errors: a JSON object, monitor name ->
#: why it stopped early or gave nothing (a sampler that died, a neighbour's load that
#: stopped); the window's figures from that monitor are partial or absent.
MONITOR_ERRORS_KIND = "monitor-errors"


@dataclass(frozen=True)
class CellIdentity:
    """What a cell is, as fields (schema version 2), so that reports never parse names:
    the platform variant without its scenario, the scenario, the kinds, and the facts
    the reports group by (an image's size and how it is made or moved, a disk
    workload's file size, the roles of a scenario's neighbours)."""

    base_platform: str
    platform_kind: str = ""
    workload_kind: str = ""
    scenario: str | None = None
    #: The facts the workload's kind declares (:class:`~hvbench.model.workload.
    #: IdentityFacts`): how an image is made or moved, its size, a test file's size.
    method: str | None = None
    image_size: int | None = None
    file_size: int | None = None
    neighbour_roles: tuple[str, ...] = ()


@dataclass(frozen=True)
class CellRecord:
    """One cell of a study: a platform (native or a VM configuration) times a workload.

    ``identity`` None: derived from the definitions (:func:`identity_of`)."""

    name: str
    platform_name: str
    platform: Mapping[str, Any]
    workload_name: str
    workload: Mapping[str, Any]
    identity: CellIdentity | None = None


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
    #: A fleet run is one run per host (schema version 3); None for a run of one machine.
    fleet_id: str | None = None
    host: str | None = None


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
class NoiseFloorRecord:
    """A host's noise floor of one cell, phase and metric (analysis/noise.py): the
    standard deviation (%) of ``pairs`` A/A differences, and the metric's mean."""

    definition: str
    cell: str
    phase: str
    metric: str
    pairs: int
    mean: float
    sd_pct: float


@dataclass(frozen=True)
class NoiseFloorRow:
    """A stored noise floor with the run it was measured in and when."""

    run_id: str
    host: str
    floor: NoiseFloorRecord
    created_at: str


@dataclass(frozen=True)
class CalibrationRecord:
    """One diagnosis threshold of a calibration (``hvbench calibrate``): its value for
    the rules (the default when not ``calibrated``) and why."""

    name: str
    rule: str
    default_value: float
    value: float
    calibrated: bool
    positives: int
    negatives: int
    note: str


@dataclass(frozen=True)
class CalibrationRow:
    """A stored calibration: its id, host, time, the runs it came from, its thresholds."""

    calibration: str
    host: str
    created_at: str
    runs: tuple[str, ...]
    thresholds: tuple[CalibrationRecord, ...]


def definition_key(platform: Mapping[str, Any], workload: Mapping[str, Any]) -> str:
    """A short digest of a cell's platform and workload definitions (stored JSON, no
    names): cells defined alike in different studies share it."""
    text = json.dumps({"platform": platform, "workload": workload}, sort_keys=True,
                      separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:20]


@dataclass(frozen=True)
class CellRow:
    """A stored cell with its database id."""

    id: int
    name: str
    platform_name: str
    platform: dict[str, Any]
    workload_name: str
    workload: dict[str, Any]
    identity: CellIdentity = CellIdentity("")


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
    #: The cell's identity fields (schema version 2); None: not known (rows built
    #: by hand), read as the platform alone.
    base_platform: str | None = None
    scenario: str | None = None
    method: str | None = None
    image_size: float | None = None


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
class RepetitionRow:
    """A stored repetition (ok or failed) with everything recorded about it but its
    results: what ``hvbench db copy`` moves along with them."""

    cell: str
    repetition: int
    position: int
    status: RepetitionStatus
    error: str | None
    console_log: str | None
    qemu_argv: list[str] | None
    accel: str | None
    started_at: str
    finished_at: str


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


def identity_of(platform_name: str, platform: Mapping[str, Any],
                workload: Mapping[str, Any], base_platform: str | None = None
                ) -> CellIdentity:
    """A cell's identity from its stored platform and workload definitions (the JSON
    of schema version 1, which the v2 migration reads too). ``base_platform`` None:
    ``platform_name`` without the ``@<scenario>`` suffix its scenario's name gives
    (version 1 kept the platform variant only in that name)."""
    scenario_def = platform.get("scenario")
    scenario = scenario_def.get("name") if isinstance(scenario_def, Mapping) else None
    if base_platform is None:
        base_platform = platform_name
        if scenario is not None:
            base_platform = platform_name.removesuffix(f"@{scenario}")
    roles = tuple(str(n.get("role", "idle")) for n in scenario_def.get("neighbours", ())
                  if isinstance(n, Mapping)) if isinstance(scenario_def, Mapping) else ()
    facts = identity_facts(workload)
    return CellIdentity(
        base_platform=base_platform,
        platform_kind=str(platform.get("kind", DEFAULT_PLATFORM_KIND)),
        workload_kind=str(workload.get("kind", DEFAULT_WORKLOAD_KIND)),
        scenario=None if scenario is None else str(scenario), method=facts.method,
        image_size=facts.image_size, file_size=facts.file_size, neighbour_roles=roles)


def cell_record(cell: Cell) -> CellRecord:
    """The store's record of a study cell, with its identity fields: the platform
    variant's and the scenario's names come from the cell itself, the facts from the
    specs (never from the names)."""
    platform: dict[str, Any] = cell.platform.spec.model_dump(mode="json")
    if cell.scenario is not None:
        platform = {**platform, "scenario": {"name": cell.scenario.name,
                                             **cell.scenario.spec.model_dump(mode="json")}}
    workload: dict[str, Any] = cell.workload.spec.model_dump(mode="json")
    identity = identity_of(cell.platform_name, platform, workload,
                           base_platform=cell.platform.name)
    return CellRecord(cell.name, cell.platform_name, platform, cell.workload.name, workload,
                      identity)
