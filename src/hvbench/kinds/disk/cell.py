"""Disk cells: fio phases (IOzone, Bonnie++, dd profiles, or the user's job file) on
the started platform's benchmark disk, the host monitors around each phase."""

from __future__ import annotations

import time

from hvbench.errors import HvbenchError
from hvbench.kinds.disk import driver as disk
from hvbench.kinds.disk.spec import DiskWorkloadSpec, native_share_dir
from hvbench.model.study import Cell
from hvbench.model.workload import WorkloadSpec
from hvbench.monitors.session import PhaseMonitors
from hvbench.platforms.base import Platform
from hvbench.run.cells.base import (
    CellContext,
    CellResult,
    MeasuredWindow,
    Simple,
    as_spec,
    cell_result,
)

#: Rough seconds per phase under TCG (a 256 MiB file), and for a whole job file.
PHASE_ESTIMATE_S = 20.0
JOB_FILE_ESTIMATE_S = 60.0


class DiskCell(Simple):
    """Prepares the target (a file system or the raw disk), runs each phase with the
    caches dropped before it, and releases the target."""

    kind = "disk"
    boots_platform = True
    needs_lab = False

    def __init__(self) -> None:
        self._target: disk.DiskTarget | None = None
        self._platform: Platform | None = None

    def check(self, cell: Cell, study_path: str) -> None:
        """A job file is read, parsed by fio and fitted to the cell's target
        (:func:`~hvbench.workloads.disk.check_job_file`; raises :class:`SpecError`)."""
        typed = as_spec(cell.workload.spec, DiskWorkloadSpec)
        if typed.job_file:
            disk.check_job_file(typed, study_path, cell.platform.spec)

    def estimate_s(self, spec: WorkloadSpec) -> float:
        typed = as_spec(spec, DiskWorkloadSpec)
        if typed.profile == "fio-job":
            return JOB_FILE_ESTIMATE_S
        return PHASE_ESTIMATE_S * len(typed.phase_list())

    def prepare(self, ctx: CellContext) -> None:
        self._platform = ctx.started()
        spec = ctx.spec(DiskWorkloadSpec)
        native_dir = native_share_dir(ctx.study, ctx.cell.workload.name) \
            if spec.target == "filesystem" and not self._platform.is_guest else None
        self._target = disk.prepare_target(self._platform, spec, native_dir)

    def run(self, ctx: CellContext) -> CellResult:
        platform = ctx.started()
        monitors = ctx.monitors(platform, None)
        try:
            return cell_result(self._windows(ctx, platform, monitors))
        except BaseException:
            monitors.abort()
            raise

    def _windows(self, ctx: CellContext, platform: Platform,
                 monitors: PhaseMonitors) -> list[MeasuredWindow]:
        spec = ctx.spec(DiskWorkloadSpec)
        target = self._target
        if target is None:
            raise HvbenchError("internal: a disk cell ran before its prepare()")
        if spec.profile == "fio-job":
            text = disk.job_file_text(spec, ctx.study.path)
            monitors.start()
            started = time.monotonic()
            outcomes = disk.run_job_file(platform, spec, text, target)
            wall = time.monotonic() - started
            return [MeasuredWindow(outcomes, wall, monitors.stop(), "job-file")]
        windows = []
        for phase in spec.phase_list():
            dropped = disk.before_phase(platform, spec, phase, target)
            monitors.start()
            started = time.monotonic()
            outcome = disk.run_phase(platform, spec, phase, target)
            wall = time.monotonic() - started
            outcome.caches_dropped = dropped
            windows.append(MeasuredWindow([outcome], wall, monitors.stop(), phase))
        return windows

    def release(self, ctx: CellContext) -> None:
        target, self._target = self._target, None
        if target is not None and self._platform is not None:
            disk.release_target(self._platform, target)
