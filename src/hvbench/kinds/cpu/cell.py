"""Cpu cells: one stress-ng run on the started platform, the host monitors around it."""

from __future__ import annotations

from hvbench.kinds.cpu.driver import run_cpu
from hvbench.kinds.cpu.spec import CpuWorkloadSpec
from hvbench.model.workload import WorkloadSpec
from hvbench.run.cells.base import (
    CellContext,
    CellResult,
    MonitorWindow,
    Simple,
    as_spec,
    cell_result,
)

#: Rough seconds besides ``duration_s``: stress-ng's start-up, its report, the window.
OVERHEAD_S = 3.0


class CpuCell(Simple):
    """``run`` measures one window around stress-ng; nothing to prepare or release."""

    kind = "cpu"
    boots_platform = True
    needs_lab = False

    def estimate_s(self, spec: WorkloadSpec) -> float:
        return as_spec(spec, CpuWorkloadSpec).duration_s + OVERHEAD_S

    def run(self, ctx: CellContext) -> CellResult:
        spec = ctx.spec(CpuWorkloadSpec)
        platform = ctx.started()
        with MonitorWindow(ctx.monitors(platform, None)) as window:
            outcome = run_cpu(platform, spec)
        return cell_result([window.measured([outcome])])
