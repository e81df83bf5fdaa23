"""The native platform kind's spec (``kind = "native"``): the host itself, optionally
limited to a guest's memory and measuring a device of its own."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from hvbench.model.platform import DiskSource, PlatformSpec, validated
from hvbench.model.problems import Where, did_you_mean, joined
from hvbench.model.spec import source_kind

#: The fields of a native platform besides kind and name.
NATIVE_FIELDS = ("memory_mib", "disk")


class NativeDiskSpec(BaseModel):
    """``disk = { source = ... }`` of a native platform: the storage the host itself
    measures in place of a file in its scratch directory, the same a guest is given
    (a host block device ``/dev/...``, or a lab host's NBD export ``nbd:HOST``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str

    @field_validator("source")
    @classmethod
    def _check_source(cls, value: str) -> str:
        kind = source_kind(value)
        if kind == "image":
            raise ValueError("expected a host block device (/dev/...) or nbd:HOST")
        if kind.startswith("aoe"):
            raise ValueError(f"{value}: this host's kernel has no aoe module, so only a "
                             "guest can attach an AoE export (initiator = \"guest\")")
        return value


class NativePlatformSpec(PlatformSpec):
    """The host. ``memory_mib``: its commands run in a memory cgroup limited to that
    much (a guest's RAM), so a buffered test sees the page cache a guest of that size
    would; ``disk``: measure that storage instead of a scratch file."""

    kind: Literal["native"] = "native"
    memory_mib: int | None = Field(default=None, ge=64, le=1 << 20)
    disk: NativeDiskSpec | None = None

    IS_HOST: ClassVar[bool] = True

    def memory_limit_mib(self) -> int | None:
        return self.memory_mib

    def host_device(self) -> str | None:
        return self.disk.source if self.disk is not None else None

    def disk_sources(self) -> list[DiskSource]:
        return [("disk.source", None, self.disk.source)] if self.disk is not None else []


def parse(concrete: dict[str, Any], where: Where) -> PlatformSpec:
    """A ``kind = "native"`` entry (without its kind). Raises :class:`SpecError`
    naming every field a native platform does not take, or the field a value fails."""
    extra = sorted(set(concrete) - set(NATIVE_FIELDS))
    if extra:
        raise joined([where.error(key, "a native platform takes no fields besides "
                                       "kind, name, memory_mib and disk"
                                  + did_you_mean(key, NATIVE_FIELDS)) for key in extra])
    return validated(NativePlatformSpec, concrete, where)
