"""The lifecycle workload kind (``kind = "lifecycle"``): one guest's life, each step
timed; its spec and identity facts (:mod:`.spec`), its driver (:mod:`.driver`), its
cell and run-wide repository images (:mod:`.cell`), its slice of the metric catalogue
(:mod:`.metrics`), what it reads in a run's rows (:mod:`.analysis`) and its section of
the HTML report (:mod:`.report`)."""

from __future__ import annotations

from hvbench.analysis.metrics import register_metrics, register_producers
from hvbench.analysis.resources import register_kind_class
from hvbench.kinds.lifecycle import report, spec
from hvbench.kinds.lifecycle.cell import LifecycleCell, RepositoryImages
from hvbench.kinds.lifecycle.metrics import lifecycle_metrics
from hvbench.model.workload import WorkloadKind, register_workload_kind
from hvbench.report.html import register_run_section
from hvbench.run.cells.registry import register_cell_kind, register_run_state

KIND = WorkloadKind("lifecycle", spec.LifecycleWorkloadSpec, spec.default_name,
                    identity=spec.identity)


def register() -> None:
    """Register the lifecycle kind into the core's registries."""
    register_workload_kind(KIND)
    register_cell_kind(LifecycleCell.kind, LifecycleCell)
    register_run_state(LifecycleCell.kind, RepositoryImages)
    # A guest's life is no one device's I/O, but ``create`` copies or converts an image
    # on the host's disk: disk throughput (``mb_s``), read by the disk rules.
    register_kind_class("lifecycle", "other", phases={"create": "disk"})
    register_producers({"lifecycle": "workload"})
    register_metrics(lifecycle_metrics())
    register_run_section(report.SECTION)
