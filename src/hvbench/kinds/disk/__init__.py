"""The disk workload kind (``kind = "disk"``): fio reproducing IOzone, Bonnie++ or dd,
or the user's job file, on the platform's benchmark disk, a file system on it, or a
shared directory; its spec and checks (:mod:`.spec`), its fio driver (:mod:`.driver`),
its cell (:mod:`.cell`) and its slice of the metric catalogue (:mod:`.metrics`)."""

from __future__ import annotations

from hvbench.analysis.metrics import register_metrics, register_producers
from hvbench.analysis.resources import register_kind_class
from hvbench.kinds.disk import spec
from hvbench.kinds.disk.cell import DiskCell
from hvbench.kinds.disk.metrics import disk_metrics
from hvbench.model.tune import register_disk_kind
from hvbench.model.workload import WorkloadKind, register_workload_kind
from hvbench.run.cells.registry import register_cell_kind

KIND = WorkloadKind("disk", spec.DiskWorkloadSpec, spec.default_name,
                    check_cell=spec.check_cell, check_study=spec.check_study,
                    identity=spec.identity, intent=spec.intent)


def register() -> None:
    """Register the disk kind into the core's registries."""
    register_workload_kind(KIND)
    register_cell_kind(DiskCell.kind, DiskCell)
    register_producers({"fio": "workload"})
    register_metrics(disk_metrics())
    # The disk rules; an old stored cell without a kind is disk by fio's throughputs.
    register_kind_class("disk", "disk", evidence=("mb_s", "ops_s"))
    register_disk_kind("disk")  # tune searches the disk axes for it
