"""Workload kinds -> the class that runs their cells; the one place that maps them."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from hvbench.errors import SpecError
from hvbench.model.study import Cell, Study
from hvbench.platforms.kinds import platform_kind
from hvbench.run.cells.base import CellKind
from hvbench.run.cells.disk import DiskCell
from hvbench.run.cells.lifecycle import LifecycleCell
from hvbench.run.cells.network import NetworkCell
from hvbench.run.cells.propagation import PropagationCell
from hvbench.run.cells.web import WebCell

#: ``spec.kind`` -> a fresh cell kind (one per (cell, repetition): it holds what its
#: ``prepare`` set up).
CELL_KINDS: Mapping[str, Callable[[], CellKind]] = {
    DiskCell.kind: DiskCell, NetworkCell.kind: NetworkCell, WebCell.kind: WebCell,
    LifecycleCell.kind: LifecycleCell, PropagationCell.kind: PropagationCell,
}


def kind_of(kind: str) -> CellKind:
    """A fresh :class:`CellKind` for workload kind ``kind``. Raises :class:`SpecError`
    for a kind no module runs."""
    make = CELL_KINDS.get(kind)
    if make is None:
        raise SpecError(f"workload kind {kind!r}: expected one of {', '.join(CELL_KINDS)}")
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
