"""Lifecycle cells: one guest's life, each step timed; the cell boots (and stops) its
own guests from the platform's VM spec, so the runner boots nothing for it."""

from __future__ import annotations

from hvbench.host.paths import work_dir
from hvbench.kinds.lifecycle import driver as lifecycle
from hvbench.kinds.lifecycle.driver import RepositoryCache
from hvbench.kinds.lifecycle.spec import LifecycleWorkloadSpec
from hvbench.model.workload import WorkloadSpec
from hvbench.platforms.accel import choose_accel
from hvbench.run.cells.base import (
    CellContext,
    CellResult,
    MeasuredWindow,
    Simple,
    as_spec,
    cell_result,
    guest_vm_of,
)

#: Rough seconds of one life under TCG besides its guests' boots (which a plan adds):
#: the image's creation, the shutdown, removing files; idle sampling aside.
LIFE_ESTIMATE_S = 15.0


class RepositoryImages:
    """The lifecycle kind's run-wide state (a
    :class:`~hvbench.run.cells.base.RunState`): the repository images its cells take
    their system images from, written once per run, size and format."""

    def __init__(self) -> None:
        self.cache: RepositoryCache = {}

    def close(self) -> None:
        """Remove every repository image (never raises; safe twice)."""
        lifecycle.remove_repository(self.cache)


class LifecycleCell(Simple):
    """Runs :func:`~hvbench.kinds.lifecycle.driver.run_lifecycle` (bounded by the
    workload's ``timeout_s``); the raw document is stored once, under ``lifecycle``."""

    kind = "lifecycle"
    boots_platform = False
    needs_lab = False

    def estimate_s(self, spec: WorkloadSpec) -> float:
        typed = as_spec(spec, LifecycleWorkloadSpec)
        return LIFE_ESTIMATE_S + (typed.idle_s if typed.idle_guests else 0.0)

    def guests(self, spec: WorkloadSpec) -> int:
        return 1 + as_spec(spec, LifecycleWorkloadSpec).idle_guests

    def run(self, ctx: CellContext) -> CellResult:
        spec = ctx.spec(LifecycleWorkloadSpec)
        vm = guest_vm_of(ctx.cell)
        outcomes = lifecycle.run_lifecycle(spec, vm, name=ctx.guest_name, scratch=work_dir(),
                                           source_cache=ctx.run_state(RepositoryImages).cache,
                                           accel=choose_accel(vm))
        return cell_result([MeasuredWindow(outcomes)], raw_once="lifecycle")

