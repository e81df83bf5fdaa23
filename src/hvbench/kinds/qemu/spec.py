"""The qemu platform kind's spec (``kind = "qemu"``, the default): a guest hvbench boots
with QEMU from its VM spec."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from hvbench.model.platform import PlatformSpec, entry_vm
from hvbench.model.problems import Where
from hvbench.model.spec import VmSpec


class QemuPlatformSpec(PlatformSpec):
    """A guest: every VmSpec field, plus ``disk`` as a shorthand for one benchmark disk."""

    kind: Literal["qemu"] = "qemu"
    vm: VmSpec

    HOSTS_SCENARIOS: ClassVar[bool] = True
    SERVES_SHARES: ClassVar[bool] = True
    RERUNS_WITH_FIX: ClassVar[bool] = True
    SETS_NIC_MTU: ClassVar[bool] = True

    def guest_vm(self) -> VmSpec | None:
        return self.vm

    def with_vm(self, vm: VmSpec) -> PlatformSpec:
        return QemuPlatformSpec(vm=vm)


def parse(concrete: dict[str, Any], where: Where) -> PlatformSpec:
    """A ``kind = "qemu"`` entry (without its kind): every field is the VM's. Raises
    :class:`SpecError` naming the field as the study wrote it."""
    return QemuPlatformSpec(vm=entry_vm(concrete, where))
