"""One shape for running a cell, whatever its workload kind.

Each workload kind has one class implementing :class:`CellKind` (a module of this
package, or the package of :mod:`hvbench.kinds` that registered it);
:mod:`hvbench.run.cells.registry` finds it by ``spec.kind``. The runner
calls :func:`run_cell` (``prepare``, ``run``, ``release``) with a :class:`CellContext` and
stores the :class:`CellResult`; every kind builds that result with :func:`cell_result`
from its :class:`~hvbench.workloads.outcome.PhaseOutcome` s, so the stored phases,
metrics, samples and raw outputs have one shape.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from pydantic import BaseModel

from hvbench.errors import HvbenchError, SpecError
from hvbench.model.spec import VmSpec
from hvbench.model.study import Cell, Study
from hvbench.model.workload import WorkloadSpec
from hvbench.monitors.sampler import MonitorResult
from hvbench.monitors.session import PhaseMonitors, monitors_for
from hvbench.platforms.base import Platform
from hvbench.run.lab_session import LabSession
from hvbench.run.scenario import ScenarioRun
from hvbench.store.records import (
    MONITOR_ERRORS_KIND,
    MeasurementRecord,
    RawRecord,
    SampleRecord,
)
from hvbench.workloads.outcome import PhaseOutcome

#: Phase monitors for a platform; with interfaces (device -> label) the NIC sampler
#: instead of the work directory's disk (see :func:`monitors_for`).
MonitorsFactory = Callable[[Platform, Mapping[str, str] | None], PhaseMonitors]
_Spec = TypeVar("_Spec", bound=BaseModel)
_State = TypeVar("_State", bound="RunState")


@dataclass
class CellResult:
    """What one (cell, repetition) produced, ready for the store."""

    measurements: list[MeasurementRecord] = field(default_factory=list)
    samples: list[SampleRecord] = field(default_factory=list)
    raw: list[RawRecord] = field(default_factory=list)


@dataclass
class CellContext:
    """Everything a cell kind may use for one (cell, repetition).

    ``platform`` is the started platform (None for kinds that boot their own guests);
    ``session`` the run's lab (None for studies without one); ``scenario`` the group's
    neighbours (None alone); ``kind_state`` what each kind keeps for the whole run (by
    kind, see :meth:`run_state`); ``guest_name`` the name a guest the cell boots itself
    takes.
    """

    cell: Cell
    study: Study
    platform: Platform | None
    session: LabSession | None
    scenario: ScenarioRun | None
    monitors: MonitorsFactory
    guest_name: str
    #: Each kind's run-wide state (:class:`RunState`), by workload kind.
    kind_state: Mapping[str, RunState] = field(default_factory=dict)
    #: The measured maxima relative rates take a share of: reference workload name ->
    #: file size (kB) -> max_rate_rps of the platform alone in this round.
    rate_refs: Mapping[str, Mapping[int, float]] = field(default_factory=dict)

    def started(self) -> Platform:
        """The started platform. Raises :class:`HvbenchError` for a kind that boots
        its own guests (a programming error)."""
        if self.platform is None:
            raise HvbenchError(f"internal: cell {self.cell.name} has no started platform")
        return self.platform

    def lab(self) -> LabSession:
        """The run's lab. Raises :class:`HvbenchError` when the study has none."""
        if self.session is None:
            raise HvbenchError(f"cell {self.cell.name}: a {self.cell.workload.spec.kind} "
                               "workload runs without a lab")
        return self.session

    def run_state(self, model: type[_State]) -> _State:
        """The run-wide state of the cell's workload kind as ``model``. Raises
        :class:`HvbenchError` when the kind registered none or another class (a
        programming error)."""
        kind = self.cell.workload.spec.kind
        state = self.kind_state.get(kind)
        if not isinstance(state, model):
            raise HvbenchError(f"internal: workload kind {kind!r} has no run state "
                               f"{model.__name__}")
        return state

    def spec(self, model: type[_Spec]) -> _Spec:
        """The cell's workload spec as ``model``. Raises :class:`HvbenchError` when the
        registry handed a cell to the wrong kind (a programming error)."""
        return as_spec(self.cell.workload.spec, model)


def as_spec(spec: object, model: type[_Spec]) -> _Spec:
    """``spec`` typed as ``model``: the registry hands each kind its own specs only, so
    a mismatch is a programming error (:class:`HvbenchError`), never dispatch."""
    if not isinstance(spec, model):
        raise HvbenchError(f"internal: a {type(spec).__name__} is not a {model.__name__}")
    return spec


class CellKind(Protocol):
    """How one workload kind runs a cell. One instance per (cell, repetition): what
    ``prepare`` sets up lives on it until ``release``."""

    #: The workload kind (``spec.kind``) this class runs.
    kind: str
    #: The runner boots the cell's platform (and its scenario) for it; False for kinds
    #: that boot their own guests from the platform's VM spec.
    boots_platform: bool
    #: The cell needs the run's lab (the study then has one).
    needs_lab: bool

    def check(self, cell: Cell, study_path: str) -> None:
        """Checks of one cell that read files or run tools (a disk job file is read,
        parsed by fio and fitted to the cell's target) before anything starts; raises
        :class:`SpecError`."""
        ...

    def server_ports(self, spec: WorkloadSpec) -> tuple[int, ...]:
        """Ports of servers the workload runs on the platform: forwarded on a guest's
        user-mode NIC; natively the server runs in the lab host ``native``."""
        ...

    def estimate_s(self, spec: WorkloadSpec) -> float:
        """A rough duration of one repetition under TCG, for plans when no earlier run
        says; without the boots of the guests it boots itself (a plan adds those)."""
        ...

    def guests(self, spec: WorkloadSpec) -> int:
        """Guests the cell boots itself per repetition (besides the platform)."""
        ...

    def prepare(self, ctx: CellContext) -> None:
        """Set up what ``run`` measures against (a disk target, a peer, a server)."""
        ...

    def run(self, ctx: CellContext) -> CellResult:
        """Run every phase. Raises :class:`HvbenchError` subclasses for a failed cell."""
        ...

    def release(self, ctx: CellContext) -> None:
        """Undo ``prepare`` (also after a failed or partial one). Safe twice."""
        ...


class RunState(Protocol):
    """What a workload kind keeps for a whole run, whatever the cell (lifecycle: the
    repository images written once per size). One per run and kind, made by the
    factory the kind registered; the runner closes it when the run ends, however it
    ends."""

    def close(self) -> None:
        """Remove what the state made (files, directories). Never raises; safe twice."""
        ...


class RoundMemory(Protocol):
    """What a workload kind keeps of a run's results for other cells of the same round
    (web: a max-rate cell's maxima, which relative rates take a share of). One per run,
    made by the factory the kind registered; the runner tells it every result and asks
    it for each cell's (and its scenario's) rate references."""

    def note(self, cell: Cell, repetition: int,
             measurements: Sequence[MeasurementRecord]) -> None:
        """Keep what ``cell``'s repetition ``repetition`` measured, if others need it."""
        ...

    def rate_refs(self, cell: Cell, repetition: int) -> Mapping[str, Mapping[int, float]]:
        """The maxima ``cell``'s relative rates take a share of: reference workload name
        -> file size (kB) -> requests/s. Empty when it has none."""
        ...


class Simple:
    """Defaults for kinds without files to check, servers, guests or preparation."""

    def check(self, cell: Cell, study_path: str) -> None:
        return None

    def server_ports(self, spec: WorkloadSpec) -> tuple[int, ...]:
        return ()

    def guests(self, spec: WorkloadSpec) -> int:
        return 0

    def prepare(self, ctx: CellContext) -> None:
        return None

    def release(self, ctx: CellContext) -> None:
        return None


def run_cell(kind: CellKind, ctx: CellContext) -> CellResult:
    """``prepare``, ``run`` and, whatever happens, ``release``.

    When ``prepare`` or ``run`` fails (or is interrupted), that failure is what
    propagates: an error of the ``release`` that follows is attached to it as a note
    rather than replacing it, so Ctrl-C still ends the run as an interrupt.
    """
    try:
        kind.prepare(ctx)
        result = kind.run(ctx)
    except BaseException as exc:
        _release_after(kind, ctx, exc)
        raise
    kind.release(ctx)
    return result


def _release_after(kind: CellKind, ctx: CellContext, failure: BaseException) -> None:
    try:
        kind.release(ctx)
    except Exception as exc:  # the first failure is the one to report
        failure.add_note(f"releasing the cell afterwards also failed: {exc}")


def scenario_monitors(scenario: ScenarioRun | None, *,
                      guest_sampling: bool = True) -> MonitorsFactory:
    """The phase monitors of a cell: :func:`monitors_for` the platform (with the guest
    sampler unless ``guest_sampling`` is False), and in a scenario also its
    neighbours' threads and (with interfaces) taps, and its per-window activity
    (loads, on-demand starts)."""

    def make(platform: Platform, interfaces: Mapping[str, str] | None) -> PhaseMonitors:
        if scenario is None:
            return monitors_for(platform, interfaces=interfaces, guest=guest_sampling)
        labels = None if interfaces is None else {**interfaces, **scenario.interfaces()}
        return scenario.monitors(monitors_for(platform, interfaces=labels,
                                              guest=guest_sampling))
    return make


# -- the records ---------------------------------------------------------------------------
@dataclass
class MeasuredWindow:
    """One monitored stretch of a cell and the phases it produced.

    ``wall_s`` becomes each phase's ``phase_wall_s`` (None: not stored, as for a
    lifecycle whose phases carry their own durations); ``monitors`` the phases' host
    metrics and the window's samples; ``label`` the phase those samples (and, unless
    the cell keeps one raw document, the raw output) are stored under: the first
    phase's name unless given (a fio job file's phases share one window, ``job-file``).
    """

    outcomes: Sequence[PhaseOutcome]
    wall_s: float | None = None
    monitors: MonitorResult | None = None
    label: str | None = None


class MonitorWindow(contextlib.AbstractContextManager["MonitorWindow"]):
    """Host monitors and a wall clock around exactly the measured part of a phase;
    discarded if it raises. ``focus`` (monotonic start, end), when set inside the
    window (a phase's :attr:`PhaseOutcome.focus`), is the interval the summaries
    cover (the series still cover the whole window)."""

    def __init__(self, monitors: PhaseMonitors) -> None:
        self.monitors = monitors
        self.wall_s = 0.0
        self.result = MonitorResult()
        self.focus: tuple[float, float] | None = None
        self._started = 0.0

    def __enter__(self) -> MonitorWindow:
        self.monitors.start()
        self._started = time.monotonic()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
        if exc_type is not None:
            self.monitors.abort()
            return
        self.wall_s = time.monotonic() - self._started
        self.result = self.monitors.stop(self.focus)

    def measured(self, outcomes: Sequence[PhaseOutcome], label: str | None = None
                 ) -> MeasuredWindow:
        """This window's result around ``outcomes``."""
        return MeasuredWindow(outcomes, self.wall_s, self.result, label)


def cell_result(windows: Sequence[MeasuredWindow], *, raw_once: str | None = None
                ) -> CellResult:
    """The store's records of a cell's measured windows.

    Per phase: its metrics, ``phase_wall_s``, the monitors' summary and which caches
    were dropped; per window: the monitors' series under its label; per phase: the
    tool's own series under the monitor named by its raw kind (``iperf3``,
    ``propagation``, ``lifecycle``); the raw output per window, or with ``raw_once``
    only the first phase's, once, under that phase name (every phase carries the same
    document).
    """
    out = CellResult()
    for window in windows:
        _add_window(out, window, keep_raw=raw_once is None)
    first = next((w.outcomes[0] for w in windows if w.outcomes), None)
    if raw_once is not None and first is not None:
        out.raw.append(RawRecord(raw_once, first.raw_kind, first.raw))
    return out


def _add_window(out: CellResult, window: MeasuredWindow, *, keep_raw: bool) -> None:
    summary = window.monitors.summary if window.monitors is not None else {}
    focus_s = window.monitors.focus_s if window.monitors is not None else None
    for outcome in window.outcomes:
        out.measurements += measurement_records(outcome, window.wall_s, summary)
        if focus_s is not None:
            out.measurements.append(
                MeasurementRecord(outcome.phase, "evidence_window_s", focus_s, "s"))
    label = window.label or (window.outcomes[0].phase if window.outcomes else "")
    if window.monitors is not None:
        out.samples += [SampleRecord(label, monitor, t, values)
                        for monitor, t, values in window.monitors.rows()]
        # The guest sampler's raw lines, next to the metrics parsed from them.
        out.raw += [RawRecord(label, kind, content)
                    for kind, content in window.monitors.raw.items()]
        # Why a monitor's figures are partial or absent, kept with them.
        if window.monitors.errors:
            out.raw.append(RawRecord(label, MONITOR_ERRORS_KIND,
                                     json.dumps(window.monitors.errors, sort_keys=True)))
    for outcome in window.outcomes:
        monitor = outcome.raw_kind.split("-")[0]
        out.samples += [SampleRecord(outcome.phase, monitor, t, values)
                        for t, values in outcome.series]
    if keep_raw and window.outcomes:
        first = window.outcomes[0]
        out.raw.append(RawRecord(label, first.raw_kind, first.raw))
    # What a workload adds to its raw output (a rewritten fio job file, its changes).
    out.raw += [RawRecord(label, kind, content) for outcome in window.outcomes
                for kind, content in outcome.attachments]


def measurement_records(outcome: PhaseOutcome, wall_s: float | None,
                        summary: Mapping[str, float]) -> list[MeasurementRecord]:
    """One phase's rows: metrics, wall time, host monitors, dropped caches."""
    phase = outcome.phase
    records = [MeasurementRecord(phase, m, v, u) for m, (v, u) in outcome.metrics.items()]
    if wall_s is not None:
        records.append(MeasurementRecord(phase, "phase_wall_s", wall_s, "s"))
    records += [MeasurementRecord(phase, name, value, "") for name, value in summary.items()]
    records += [MeasurementRecord(phase, f"cache_dropped.{which}", float(dropped), "bool")
                for which, dropped in outcome.caches_dropped.items()]
    return records


def vhost_records(platform: Platform, phases: Sequence[str]) -> list[MeasurementRecord]:
    """Per phase, whether a guest's tap NICs had the in-kernel vhost-net backend
    (nothing natively)."""
    vhost = platform.vhost
    if vhost is None:
        return []
    return [MeasurementRecord(phase, "vhost", float(vhost), "bool") for phase in phases]


def guest_vm_of(cell: Cell) -> VmSpec:
    """The VM spec a self-booting cell boots copies of. Raises :class:`SpecError` for a
    platform that declares none (the host)."""
    vm = cell.platform.spec.guest_vm()
    if vm is None:
        raise SpecError(f"cell {cell.name}: {cell.workload.spec.kind} needs a qemu platform")
    return vm
