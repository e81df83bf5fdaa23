"""The qemu platform kind (``kind = "qemu"``, the default): a guest hvbench boots with
QEMU; its spec (:mod:`.spec`) and how it is built and previewed (:mod:`.kind`)."""

from __future__ import annotations

from hvbench.kinds.qemu import spec
from hvbench.kinds.qemu.kind import QemuKind
from hvbench.model.platform import PlatformSpecKind, register_platform_spec
from hvbench.platforms.kinds import register_platform_kind

SPEC = PlatformSpecKind("qemu", spec.QemuPlatformSpec, spec.parse, default_name="qemu")
BUILDER = QemuKind()


def register() -> None:
    """Register the qemu platform kind into the core's registries."""
    register_platform_spec(SPEC)
    register_platform_kind(BUILDER)
