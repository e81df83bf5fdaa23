"""The cpu workload kind (``kind = "cpu"``): stress-ng's CPU stressor on the platform,
its bogo operations per second read from stress-ng's YAML report; its spec
(:mod:`.spec`), driver (:mod:`.driver`), cell (:mod:`.cell`) and catalogue slice
(:mod:`.metrics`)."""

from __future__ import annotations

from hvbench.analysis.metrics import register_metrics, register_producers
from hvbench.analysis.resources import register_kind_class
from hvbench.kinds.cpu import spec
from hvbench.kinds.cpu.cell import CpuCell
from hvbench.kinds.cpu.metrics import cpu_metrics
from hvbench.model.workload import WorkloadKind, register_workload_kind
from hvbench.run.cells.registry import register_cell_kind

KIND = WorkloadKind("cpu", spec.CpuWorkloadSpec, spec.default_name)


def register() -> None:
    """Register the cpu kind into the core's registries."""
    register_workload_kind(KIND)
    register_cell_kind(CpuCell.kind, CpuCell)
    register_producers({"stress-ng": "workload"})
    register_metrics(cpu_metrics())
    # No I/O rule reads computation: the "other" class, as a lifecycle's.
    register_kind_class("cpu", "other", evidence=("bogo_ops_s",))
