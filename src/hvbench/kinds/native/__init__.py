"""The native platform kind (``kind = "native"``): the host itself, the baseline guests
are measured against; its spec and checks (:mod:`.spec`) and how it is built, checked
and previewed (:mod:`.kind`)."""

from __future__ import annotations

from hvbench.kinds.native import spec
from hvbench.kinds.native.kind import NativeKind
from hvbench.model.platform import PlatformSpecKind, register_platform_spec
from hvbench.platforms.kinds import register_platform_kind

SPEC = PlatformSpecKind("native", spec.NativePlatformSpec, spec.parse, default_name="native")
BUILDER = NativeKind()


def register() -> None:
    """Register the native platform kind into the core's registries."""
    register_platform_spec(SPEC)
    register_platform_kind(BUILDER)
