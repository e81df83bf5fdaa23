"""How a ``kind = "native"`` platform (the host) is built, checked and previewed."""

from __future__ import annotations

from hvbench.kinds.native.spec import NativePlatformSpec
from hvbench.model.platform import PlatformSpec
from hvbench.platforms.base import Platform
from hvbench.platforms.kinds import Resolver, Wiring, typed_spec
from hvbench.platforms.native import NativePlatform


class NativeKind:
    """The host itself."""

    kind = "native"
    is_guest = False

    def instance_name(self, variant: str, key: str) -> str:
        return variant

    def check(self, spec: PlatformSpec, *, name: str) -> None:
        """Host devices are checked by the runner (:func:`check_devices`)."""

    def build(self, spec: PlatformSpec, *, name: str, wire: Wiring | None = None,
              resolve: Resolver | None = None) -> Platform:
        typed = typed_spec(spec, NativePlatformSpec)
        source = typed.disk.source if typed.disk is not None else None
        if resolve is not None:
            source = resolve(source)
        return NativePlatform(name=name, disk_source=source, memory_mib=typed.memory_mib)

    def preview(self, spec: PlatformSpec, *, name: str) -> list[str]:
        return [f"# platform {name}: kind = \"{self.kind}\": the bare host, no guest "
                "(nothing to launch)"]
