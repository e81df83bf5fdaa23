"""Workload kinds -> the class that runs their cells; the one place that maps them.

Every kind is a package of :mod:`hvbench.kinds` that adds itself at
start-up with :func:`register_cell_kind` (and, when its cells keep results for other
cells of the same round, :func:`register_round_memory`). The core never imports a kind.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from hvbench.errors import HvbenchError, SpecError
from hvbench.model.registry import register_once
from hvbench.model.study import Cell, Study
from hvbench.platforms.kinds import platform_kind
from hvbench.run.cells.base import CellKind, RoundMemory, RunState
from hvbench.store.records import MeasurementRow

#: ``spec.kind`` -> a fresh cell kind (one per (cell, repetition): it holds what its
#: ``prepare`` set up). Filled by the kind packages through :func:`register_cell_kind`.
CELL_KINDS: dict[str, Callable[[], CellKind]] = {}
#: A run's stored measurements so far (empty before the run exists): what a
#: :class:`RoundMemory` reads back on ``--resume``.
StoredRows = Callable[[], Iterable[MeasurementRow]]
#: One factory per kind that remembers results across the cells of a round.
ROUND_MEMORIES: list[Callable[[Study, StoredRows], RoundMemory]] = []
#: Workload kind -> the factory of its run-wide state (:func:`register_run_state`).
RUN_STATES: dict[str, Callable[[], RunState]] = {}


def register_cell_kind(kind: str, make: Callable[[], CellKind]) -> None:
    """Make ``make`` run the cells of workload kind ``kind``. Registering a kind twice
    with another class raises :class:`HvbenchError` (two packages claim one kind)."""
    known = CELL_KINDS.get(kind)
    if known is not None and known is not make:
        raise HvbenchError(f"internal: workload kind {kind!r} is registered twice")
    CELL_KINDS[kind] = make


def register_round_memory(make: Callable[[Study, StoredRows], RoundMemory]) -> None:
    """Give every run a :class:`RoundMemory` made by ``make`` (once per factory)."""
    if make not in ROUND_MEMORIES:
        ROUND_MEMORIES.append(make)


def register_run_state(kind: str, make: Callable[[], RunState]) -> None:
    """Give every run one state of workload kind ``kind`` made by ``make`` (what its
    cells share across the run; see :meth:`CellContext.run_state`). Registering a kind
    twice with another factory raises :class:`HvbenchError`."""
    register_once(RUN_STATES, kind, make, "run state of workload kind")


def run_states() -> dict[str, RunState]:
    """A fresh state of every kind that registered one, for one run, by kind."""
    return {kind: make() for kind, make in RUN_STATES.items()}


def round_memories(study: Study, stored: StoredRows) -> list[RoundMemory]:
    """A fresh memory of every registered kind for one run of ``study``."""
    return [make(study, stored) for make in ROUND_MEMORIES]


def kind_of(kind: str) -> CellKind:
    """A fresh :class:`CellKind` for workload kind ``kind``. Raises :class:`SpecError`
    for a kind no module runs."""
    make = CELL_KINDS.get(kind)
    if make is None:
        raise SpecError(f"workload kind {kind!r}: expected one of {', '.join(sorted(CELL_KINDS))}")
    return make()


def cell_kind(cell: Cell) -> CellKind:
    """A fresh :class:`CellKind` for ``cell``'s workload (see :func:`kind_of`)."""
    return kind_of(cell.workload.spec.kind)


def server_ports(study: Study, platform_name: str) -> list[int]:
    """The ports of every server a workload runs on platform variant ``platform_name``
    (forwarded on a guest's user-mode NIC)."""
    ports = {port for c in study.cells if c.platform.name == platform_name
             for port in cell_kind(c).server_ports(c.workload.spec)}
    return sorted(ports)


def needs_native_server(study: Study) -> bool:
    """Whether a cell on the host runs a server (in the lab host ``native``)."""
    return any(cell_kind(c).server_ports(c.workload.spec)
               and not platform_kind(c.platform.spec).is_guest for c in study.cells)
