"""How a ``kind = "qemu"`` platform is built, checked and previewed."""

from __future__ import annotations

from hvbench.kinds.qemu.spec import QemuPlatformSpec
from hvbench.model.platform import PlatformSpec
from hvbench.platforms import preview
from hvbench.platforms.accel import choose_accel
from hvbench.platforms.base import Platform
from hvbench.platforms.kinds import Resolver, Wiring, guest_instance_name, typed_spec
from hvbench.platforms.qemu import QemuPlatform


class QemuKind:
    """A QEMU guest from the platform's VM spec."""

    kind = "qemu"
    is_guest = True

    def instance_name(self, variant: str, key: str) -> str:
        return guest_instance_name(key)

    def check(self, spec: PlatformSpec, *, name: str) -> None:
        """Nothing outside hvbench: the guest is hvbench's own."""

    def build(self, spec: PlatformSpec, *, name: str, wire: Wiring | None = None,
              resolve: Resolver | None = None) -> Platform:
        vm = typed_spec(spec, QemuPlatformSpec).vm
        if wire is not None:
            vm = wire(vm)
        return QemuPlatform(vm, name=name, accel_choice=choose_accel(vm))

    def preview(self, spec: PlatformSpec, *, name: str) -> list[str]:
        vm = typed_spec(spec, QemuPlatformSpec).vm
        accel, why = preview.preview_accel(vm)
        argv = preview.qemu_argv(vm, name, accel, preview.guest_files())
        return [f"# platform {name}: kind = \"qemu\"; {why}", *preview.argv_lines(argv)]
