"""The propagation workload kind (``kind = "propagation"``): one image from a lab
repository to this host, booted and terminated; its spec and identity facts
(:mod:`.spec`), its driver (:mod:`.driver`), its cell (:mod:`.cell`), its diagnosis
class, its slice of the metric catalogue (:mod:`.metrics`) and its section of the HTML
report (:mod:`.report`)."""

from __future__ import annotations

from hvbench.analysis.metrics import register_metrics, register_producers
from hvbench.analysis.resources import register_kind_class
from hvbench.kinds.propagation import report, spec, text
from hvbench.kinds.propagation.cell import PropagationCell
from hvbench.kinds.propagation.metrics import propagation_metrics
from hvbench.model.workload import WorkloadKind, register_workload_kind
from hvbench.report.html import register_run_section
from hvbench.report.model import register_kind_report
from hvbench.run.cells.registry import register_cell_kind

KIND = WorkloadKind("propagation", spec.PropagationWorkloadSpec, spec.default_name,
                    identity=spec.identity)


def register() -> None:
    """Register the propagation kind into the core's registries."""
    register_workload_kind(KIND)
    register_cell_kind(PropagationCell.kind, PropagationCell)
    # An image's journey is no one device's I/O, but ``transfer`` writes the fetched
    # image to the host's disk: disk throughput, read by the disk rules.
    register_kind_class("propagation", "other", phases={"transfer": "disk"})
    register_producers({"propagation": "workload"})
    register_metrics(propagation_metrics())
    register_run_section(report.SECTION)
    register_kind_report(text.TEXT)
