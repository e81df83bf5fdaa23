"""The network workload kind's spec (``kind = "network"``): iperf3 between the platform
and a peer, and its checks of the peer and the guest's NIC."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, model_validator

from hvbench.errors import SpecError
from hvbench.model.platform import PlatformSpec
from hvbench.model.study import (
    Cell,
    guest_vm,
    require_nic,
)
from hvbench.model.workload import StudyChecks, WorkloadSpec

#: The peers a network workload can talk to besides the study's lab hosts.
BUILTIN_PEERS = ("host", "guest")


class NetworkWorkloadSpec(WorkloadSpec):
    """``kind = "network"``: iperf3 between the platform and a peer (seed 001 §3.4).

    The platform runs the iperf3 client; ``direction = "tx"`` means it sends,
    ``"rx"`` that it receives (``iperf3 -R``). ``peer`` is ``host`` (the root
    namespace, the seeds' driver domain), a ``[[lab.host]]`` name (an external host), or
    ``guest`` (a second guest of the same platform spec on the same bridge).
    """

    kind: Literal["network"] = "network"
    tool: Literal["iperf3"] = "iperf3"
    peer: str = Field(default="host", min_length=1)
    direction: Literal["tx", "rx"] = "tx"
    protocol: Literal["tcp", "udp"] = "tcp"
    streams: int = Field(default=1, ge=1, le=128)
    duration_s: float = Field(default=10.0, gt=0, le=3600)
    #: Seconds at the start that iperf3 leaves out (TCP slow start).
    omit_s: float = Field(default=1.0, ge=0, le=60)
    #: UDP only: the offered rate in bits/s (iperf3 -b), e.g. "1G" or "100M".
    udp_bitrate: str | None = Field(default=None, pattern=r"^\d+(\.\d+)?[KMG]?$")
    #: TCP only: a ceiling per stream in bits/s (iperf3 -b paces the sender), e.g.
    #: "200M"; None: as fast as the path allows.
    bitrate: str | None = Field(default=None, pattern=r"^\d+(\.\d+)?[KMG]?$")
    port: int = Field(default=5201, ge=1024, le=65535)
    timeout_s: float = Field(default=300.0, gt=0)

    @model_validator(mode="after")
    def _check(self) -> NetworkWorkloadSpec:
        if self.udp_bitrate is not None and self.protocol != "udp":
            raise ValueError("udp_bitrate is only valid with protocol = \"udp\"")
        if self.bitrate is not None and self.protocol != "tcp":
            raise ValueError("bitrate is the TCP ceiling; with protocol = \"udp\" "
                             "use udp_bitrate")
        if self.omit_s >= self.duration_s:
            raise ValueError(f"omit_s ({self.omit_s:g}) must be shorter than duration_s "
                             f"({self.duration_s:g})")
        return self

    def phase_list(self) -> tuple[str, ...]:
        return (self.direction,)

    def runs_on(self, platform: PlatformSpec) -> bool:
        """Guest-to-guest traffic has no native counterpart, and hvbench peers no
        existing libvirt domain."""
        return platform.guest_vm() is not None or self.peer != "guest"

    def needs_lab(self) -> bool:
        return True


def default_name(entry: Mapping[str, Any]) -> str:
    """A network entry's name: its tool's."""
    del entry
    return "iperf3"


def check_cell(cell: Cell, checks: StudyChecks) -> None:
    """A network cell names a peer the lab has, and a guest has a NIC to use (a
    ``guest`` peer: a tap one). Raises :class:`SpecError`."""
    workload = cell.workload.spec
    if not isinstance(workload, NetworkWorkloadSpec):
        return
    lab, path = checks.lab, checks.path
    hosts = [h.name for h in lab.hosts] if lab else []
    where = f"{path}: cell {cell.name}"
    if workload.peer not in (*BUILTIN_PEERS, *hosts):
        raise SpecError(f"{where}: peer: expected host, guest or a [[lab.host]] name "
                        f"({', '.join(hosts) or 'none declared'}), got {workload.peer!r}")
    vm = guest_vm(cell.platform.spec)
    require_nic(vm, where)
    if vm is not None and workload.peer == "guest" and vm.nics[0].backend != "tap":
        raise SpecError(f"{where}: peer = \"guest\" needs backend = \"tap\" (two "
                        "user-mode guests cannot reach each other)")
