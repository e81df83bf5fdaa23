"""Scenarios: what runs next to the measured guest (seed 003 §4-6, seed 004).

A study's ``[[scenario]]`` entries each declare an environment for its qemu cells:

- ``neighbours``: other guests, each with its own vCPUs, memory and a role: ``idle``;
  ``cpu`` (stress-ng in the guest, for the whole group or from ``start_after_s`` into
  each measured window: stages); ``net`` (a server in the guest driven from a lab
  host: iperf3, or HTTP at a fixed rate; also staged with ``start_after_s``);
  ``disk`` (fio on its own disk);
- ``start``: guests started on demand while the target is measured (start-up time
  and the dip of the target's throughput, seed 003 Fig. 14);
- ``weights``: CPU weights of the host-side I/O threads (QEMU main loops, iothreads
  and workers: the analog of the seeds' driver domain Dom0), the target's vCPUs and
  the neighbours' vCPUs, as seed 003 §6's Dom0:Dom1:Dom2 ratios, with optional pinning
  and a quota.

Every qemu cell is measured alone and with each scenario; the report gives the
degradation against alone. Pure: validation only.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from hvbench.model.rates import Rate, check_rate, is_relative
from hvbench.model.spec import ByteSize, DiskSpec, NicSpec, VmSpec
from hvbench.model.workload import DEFAULT_REPLY_TIMEOUT_S

NeighbourRole = Literal["idle", "cpu", "net", "disk"]
#: The name of the implicit scenario every qemu cell is also measured in.
ALONE = "alone"
SCENARIO_NAME_PATTERN = r"^[a-z][a-z0-9_-]{0,23}$"
_CPUS_RE = re.compile(r"^\d+(-\d+)?(,\d+(-\d+)?)*$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NeighbourSpec(_Strict):
    """``count`` guests of one role. Fields a role does not use are refused."""

    role: NeighbourRole = "idle"
    count: int = Field(default=1, ge=1, le=16)
    vcpus: int = Field(default=1, ge=1, le=64)
    memory_mib: int = Field(default=256, ge=128, le=1 << 20)
    #: cpu: the load each stress-ng worker offers (one worker per vCPU), %.
    cpu_load_pct: int = Field(default=100, ge=1, le=100)
    #: cpu, net: start stress-ng (net: the load generator) this many seconds into every
    #: measured window (and stop it when the window ends) instead of for the whole
    #: group: staggered values give one window with stages idle -> one busy -> both
    #: busy (seed 004 Figs. 1-4), or one guest's stream, then a second's next to it
    #: (Figs. 5-7). None: busy from the group's start.
    start_after_s: float | None = Field(default=None, ge=0, le=3600)
    #: net: the load: ``iperf3`` (a TCP stream) or ``web`` (httperf at ``rate``).
    load: Literal["iperf3", "web"] = "iperf3"
    #: net: the [[lab.host]] that drives the load.
    client: str = Field(default="client", min_length=1)
    #: net, iperf3: ``to-guest`` (the neighbour receives) or ``from-guest``.
    direction: Literal["to-guest", "from-guest"] = "to-guest"
    #: net, iperf3: offered rate such as "100M"; None: as fast as TCP goes.
    bitrate: str | None = Field(default=None, pattern=r"^\d+(\.\d+)?[KMG]?$")
    #: net, web: the served file's size (kB) and the offered request rate: requests/s,
    #: or ``"90%"`` of the maximum the target's platform sustained alone for that size
    #: (:mod:`hvbench.model.rates`). A list of rates in the study file is an axis: one
    #: scenario per rate.
    file_kb: int = Field(default=70, ge=1, le=1 << 16)
    rate: Annotated[Rate, BeforeValidator(check_rate)] = 100.0
    #: net, web, relative rate: the max-rate web workload whose maximum it takes.
    rate_of: str | None = Field(default=None, min_length=1)
    #: net, web: how long each httperf run waits for a reply, as a web workload's
    #: ``reply_timeout_s`` (same range and default): a neighbour compared with the
    #: target is only measured alike when both wait as long (seed 004 Figs. 12-14).
    reply_timeout_s: float = Field(default=DEFAULT_REPLY_TIMEOUT_S, gt=0, le=600)
    #: disk: fio's pattern, block size and queue depth on the neighbour's own disk.
    rw: Literal["randrw", "randread", "randwrite", "read", "write"] = "randrw"
    block_size: ByteSize = 4096
    iodepth: int = Field(default=4, ge=1, le=1024)
    disk: DiskSpec = DiskSpec(size=1 << 30)

    @model_validator(mode="after")
    def _check(self) -> NeighbourSpec:
        given = self.model_fields_set
        allowed = {"role", "count", "vcpus", "memory_mib"} | _ROLE_FIELDS[self.role]
        extra = sorted(given - allowed)
        if extra:
            verb = "does" if len(extra) == 1 else "do"
            raise ValueError(f"{', '.join(extra)} {verb} not apply to role = \"{self.role}\"")
        if self.bitrate is not None and self.load != "iperf3":
            raise ValueError("bitrate applies to load = \"iperf3\" only")
        if "reply_timeout_s" in given and self.load != "web":
            raise ValueError("reply_timeout_s applies to load = \"web\" only")
        if self.rate_of is not None and not is_relative(self.rate):
            raise ValueError("rate_of applies to a relative rate such as \"90%\"")
        return self

    def vm(self) -> VmSpec:
        """The neighbour guest: a tap NIC for a network role, a disk for a disk role."""
        nics = (NicSpec(model="virtio-net", backend="tap"),) if self.role == "net" else ()
        disks = (self.disk,) if self.role == "disk" else ()
        return VmSpec(vcpus=self.vcpus, memory_mib=self.memory_mib, nics=nics, disks=disks)


_ROLE_FIELDS: dict[str, set[str]] = {
    "idle": set(),
    "cpu": {"cpu_load_pct", "start_after_s"},
    "net": {"load", "client", "direction", "bitrate", "file_kb", "rate", "rate_of",
            "reply_timeout_s", "start_after_s"},
    "disk": {"rw", "block_size", "iodepth", "disk"},
}


class StartOnDemandSpec(_Strict):
    """``count`` idle guests started while the target is measured, the first ``at_s``
    seconds into each measured window, then one every ``interval_s`` seconds."""

    count: int = Field(default=1, ge=1, le=8)
    at_s: float = Field(default=5.0, ge=0, le=3600)
    interval_s: float = Field(default=0.0, ge=0, le=3600)
    vcpus: int = Field(default=1, ge=1, le=64)
    memory_mib: int = Field(default=256, ge=128, le=1 << 20)
    #: Each new guest first copies a system image of this size (the seeds' instance
    #: creation is I/O heavy: a 2 GB image); None boots the bundled image directly.
    image_size: ByteSize | None = None

    def vm(self) -> VmSpec:
        return VmSpec(vcpus=self.vcpus, memory_mib=self.memory_mib)


class WeightsSpec(_Strict):
    """CPU weights, relative (1 = the default share): ``io`` for the host-side I/O
    threads of every guest (the seeds' Dom0), ``target`` for the measured guest's vCPUs,
    ``neighbours`` for the other guests' vCPUs. ``cpus`` pins every group to those
    host CPUs (a list such as "0" or "0-1"); ``target_quota_pct`` caps the target's
    vCPUs at that % of one CPU."""

    io: float = Field(default=1.0, gt=0, le=100)
    target: float = Field(default=1.0, gt=0, le=100)
    neighbours: float = Field(default=1.0, gt=0, le=100)
    cpus: str | None = None
    target_quota_pct: float | None = Field(default=None, gt=0, le=6400)

    @field_validator("cpus")
    @classmethod
    def _check_cpus(cls, value: str | None) -> str | None:
        if value is not None and not _CPUS_RE.match(value):
            raise ValueError(f"cpus {value!r}: expected a CPU list such as 0, 0-1 or 0,2")
        return value

    def ratio_label(self) -> str:
        """``io:target:neighbours``, as the seeds write ``0.5:1:1``."""
        return ":".join(f"{v:g}" for v in (self.io, self.target, self.neighbours))


class ScenarioSpec(_Strict):
    """One ``[[scenario]]``: neighbours, guests started on demand and CPU weights.
    ``workloads``: the workload names it applies to (all when empty)."""

    neighbours: tuple[NeighbourSpec, ...] = ()
    start: StartOnDemandSpec | None = None
    weights: WeightsSpec | None = None
    workloads: tuple[str, ...] = ()
    #: N identical guests (seed 003 Figs 15-17): N - 1 neighbours with the target
    #: platform's vCPUs, memory and NIC, each serving the target's own web workload
    #: (its file size and rate) while the target is measured.
    identical: int | None = Field(default=None, ge=2, le=16)

    @model_validator(mode="after")
    def _check(self) -> ScenarioSpec:
        if (not self.neighbours and self.start is None and self.weights is None
                and self.identical is None):
            raise ValueError("a scenario needs neighbours, start or weights (or identical)")
        return self

    def guest_count(self) -> int:
        return sum(n.count for n in self.neighbours) + (self.identical or 1) - 1

    def lab_clients(self) -> set[str]:
        """The lab hosts that drive the neighbours' network load."""
        return {n.client for n in self.neighbours if n.role == "net"}
