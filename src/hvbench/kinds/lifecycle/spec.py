"""The lifecycle workload kind's spec (``kind = "lifecycle"``): one guest's life, each
step timed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from hvbench.kinds.lifecycle.driver import LIFECYCLE_PHASES
from hvbench.model.platform import PlatformSpec
from hvbench.model.spec import ByteSize
from hvbench.model.study import guest_vm
from hvbench.model.workload import IdentityFacts, WorkloadSpec, stored_int


class LifecycleWorkloadSpec(WorkloadSpec):
    """``kind = "lifecycle"``: one guest's life, each step timed (seed 003 Fig. 13).

    ``create`` makes the guest's system image of ``image_size`` from a repository copy
    (``copy``: a byte copy; ``convert``: qemu-img convert to ``image_format``;
    ``overlay``: a qcow2 copy-on-write overlay over it), then the guest is started,
    boots, its agent answers, it is shut down and its QEMU process exits. With
    ``idle_guests`` > 0 an ``idle`` phase also measures the host CPU that many idle
    guests use over ``idle_s`` seconds.
    """

    kind: Literal["lifecycle"] = "lifecycle"
    ORDERED_PHASES: ClassVar[tuple[str, ...]] = LIFECYCLE_PHASES
    #: After propagation's (its ``shutdown`` goes after this kind's ``agent``).
    PHASE_GROUP: ClassVar[int] = 2
    SELF_BOOTING: ClassVar[bool] = True
    image_size: ByteSize = 256 << 20
    image_format: Literal["raw", "qcow2"] = "raw"
    create: Literal["copy", "convert", "overlay"] = "copy"
    idle_guests: int = Field(default=0, ge=0, le=32)
    idle_s: float = Field(default=10.0, gt=0, le=3600)
    timeout_s: float = Field(default=600.0, gt=0)

    @model_validator(mode="after")
    def _check(self) -> LifecycleWorkloadSpec:
        if self.create == "overlay" and self.image_format != "qcow2":
            raise ValueError("create = \"overlay\" makes a qcow2 image: set "
                             "image_format = \"qcow2\"")
        return self

    def phase_list(self) -> tuple[str, ...]:
        return LIFECYCLE_PHASES + (("idle",) if self.idle_guests else ())

    def runs_on(self, platform: PlatformSpec) -> bool:
        """A guest hvbench boots itself: never natively, never the user's domain."""
        return guest_vm(platform) is not None


def identity(workload: Mapping[str, Any]) -> IdentityFacts:
    """A stored lifecycle definition's identity facts: the image's format and how it is
    created (``qcow2-overlay``; the defaults for a definition older than the fields) and
    the image's size."""
    return IdentityFacts(
        method=f"{workload.get('image_format', 'raw')}-{workload.get('create', 'copy')}",
        image_size=stored_int(workload.get("image_size")))


def default_name(entry: Mapping[str, Any]) -> str:
    """A lifecycle entry's name: ``lifecycle``."""
    del entry
    return "lifecycle"
