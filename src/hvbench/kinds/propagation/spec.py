"""The propagation workload kind's spec (``kind = "propagation"``): an image fetched
from a repository host, verified, booted and terminated."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from hvbench.model.lab import LabHostSpec, parse_rate
from hvbench.model.platform import PlatformSpec
from hvbench.model.spec import ByteSize
from hvbench.model.study import guest_vm
from hvbench.model.workload import IdentityFacts, WorkloadSpec, stored_int

#: The phases of one propagation, in order (seed 000 §5.1 plus the VM's termination).
PROPAGATION_PHASES = ("initial", "transfer", "terminal", "shutdown")
#: The lab host that serves images to propagation workloads unless one is named.
REPOSITORY_HOST = "headnode"


class PropagationWorkloadSpec(WorkloadSpec):
    """``kind = "propagation"``: fetch a system image from a repository host, verify
    it, boot it and terminate it (seed 000 §5.1, Figs. 3-4).

    Phases: ``initial`` (request to first byte), ``transfer`` (first to last byte),
    ``terminal`` (last byte to the guest's agent answering: checksum, image set-up,
    boot) and ``shutdown``. ``method``: ``scp``, ``http``, ``rsync``, ``gridftp`` (the
    seeds' GSIFTP: globus-url-copy from an anonymous GridFTP server); the modern ones
    the seeds lacked: ``http-zstd`` (compressed on the wire) and ``overlay`` (the node
    keeps the base image in a cache and boots a qcow2 copy-on-write overlay over it;
    only a checksum-verified first fetch moves bytes).
    """

    kind: Literal["propagation"] = "propagation"
    #: Its ``shutdown`` goes after the lifecycle's ``agent`` (that kind's group is 2).
    ORDERED_PHASES: ClassVar[tuple[str, ...]] = PROPAGATION_PHASES
    PHASE_GROUP: ClassVar[int] = 1
    SELF_BOOTING: ClassVar[bool] = True
    method: Literal["scp", "http", "rsync", "gridftp", "http-zstd", "overlay"] = "scp"
    image_size: ByteSize = 256 << 20
    #: The [[lab.host]] that serves images; added with ``link_rate`` if not declared.
    repository: str = Field(default=REPOSITORY_HOST, min_length=1)
    #: The repository's link, when hvbench adds the repository host itself.
    link_rate: str = "1gbit"
    verify: bool = True
    timeout_s: float = Field(default=1800.0, gt=0)

    @field_validator("link_rate")
    @classmethod
    def _check_rate(cls, value: str) -> str:
        parse_rate(value)
        return value.strip().lower()

    def phase_list(self) -> tuple[str, ...]:
        return PROPAGATION_PHASES

    def runs_on(self, platform: PlatformSpec) -> bool:
        """A guest hvbench boots itself: never natively, never the user's domain."""
        return guest_vm(platform) is not None

    def needs_lab(self) -> bool:
        return True

    def lab_host(self) -> LabHostSpec:
        """The repository host, on a link shaped to ``link_rate``."""
        return LabHostSpec(name=self.repository, rate=self.link_rate)


def identity(workload: Mapping[str, Any]) -> IdentityFacts:
    """A stored propagation definition's identity facts: its transfer method (None when
    missing or empty) and the image's size."""
    return IdentityFacts(method=str(workload.get("method", "")) or None,
                         image_size=stored_int(workload.get("image_size")))


def default_name(entry: Mapping[str, Any]) -> str:
    """A propagation entry's name: ``propagation``."""
    del entry
    return "propagation"
