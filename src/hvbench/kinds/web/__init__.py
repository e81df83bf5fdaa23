"""The web workload kind (``kind = "web"``): an HTTP server on the platform, httperf
(and wrk for latency) on a lab host; its spec, its checks and the cells its relative
rates refer to (:mod:`.spec`), its cell (:mod:`.cell`), the run-wide memory of
measured maxima its relative rates take a share of (:mod:`.rates`), its slice of the
metric catalogue (:mod:`.metrics`) and its section of the HTML report (:mod:`.report`)."""

from __future__ import annotations

from hvbench.analysis.metrics import register_metrics, register_producers
from hvbench.analysis.resources import register_kind_class
from hvbench.kinds.web import spec
from hvbench.kinds.web.cell import WebCell
from hvbench.kinds.web.metrics import web_metrics
from hvbench.kinds.web.rates import RateMaxima
from hvbench.kinds.web.report import web_latency_section
from hvbench.model.tune import register_nic_kind
from hvbench.model.workload import WorkloadKind, register_workload_kind
from hvbench.report.html import register_workload_section
from hvbench.run.cells.registry import register_cell_kind, register_round_memory

KIND = WorkloadKind("web", spec.WebWorkloadSpec, spec.default_name, check_cell=spec.check_cell,
                    check_variants=spec.check_variants, references=spec.cell_references)


def register() -> None:
    """Register the web kind into the core's registries."""
    register_workload_kind(KIND)
    register_cell_kind(WebCell.kind, WebCell)
    register_round_memory(RateMaxima)
    register_producers({"httperf": "workload", "wrk": "workload"})
    register_metrics(web_metrics())
    # Its own diagnosis class; an old stored cell without a kind is web by these metrics.
    register_kind_class("web", "web", evidence=("max_rate_rps", "replies_s"))
    register_workload_section(web_latency_section)
    register_nic_kind("web")  # tune searches the NIC axes for it
