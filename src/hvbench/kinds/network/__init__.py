"""The network workload kind (``kind = "network"``): iperf3 between the platform and
its peer; its spec and checks (:mod:`.spec`), its cell (:mod:`.cell`) and its slice of
the metric catalogue (:mod:`.metrics`)."""

from __future__ import annotations

from hvbench.analysis.metrics import register_metrics, register_producers
from hvbench.analysis.resources import register_kind_class
from hvbench.kinds.network import spec
from hvbench.kinds.network.cell import NetworkCell
from hvbench.kinds.network.metrics import network_metrics
from hvbench.model.tune import register_nic_kind
from hvbench.model.workload import WorkloadKind, register_workload_kind
from hvbench.run.cells.registry import register_cell_kind

KIND = WorkloadKind("network", spec.NetworkWorkloadSpec, spec.default_name,
                    check_cell=spec.check_cell)


def register() -> None:
    """Register the network kind into the core's registries."""
    register_workload_kind(KIND)
    register_cell_kind(NetworkCell.kind, NetworkCell)
    register_producers({"iperf3": "workload"})
    register_metrics(network_metrics())
    # Its own diagnosis class; an old stored cell without a kind is network by Mbit/s.
    register_kind_class("network", "network", evidence=("mbit_s",))
    register_nic_kind("network")  # tune searches the NIC axes for it
