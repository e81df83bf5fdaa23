"""The libvirt platform kind (``kind = "libvirt"``): a domain hvbench defines, or an
existing one of the user's; its spec and checks (:mod:`.spec`) and how it is built,
checked and previewed (:mod:`.kind`)."""

from __future__ import annotations

from hvbench.kinds.libvirt import spec
from hvbench.kinds.libvirt.kind import LibvirtKind
from hvbench.model.platform import PlatformSpecKind, register_platform_spec
from hvbench.platforms.kinds import register_platform_kind

SPEC = PlatformSpecKind("libvirt", spec.LibvirtPlatformSpec, spec.parse, default_name="qemu")
BUILDER = LibvirtKind()


def register() -> None:
    """Register the libvirt platform kind into the core's registries."""
    register_platform_spec(SPEC)
    register_platform_kind(BUILDER)
