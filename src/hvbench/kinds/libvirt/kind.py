"""How a ``kind = "libvirt"`` platform is built, checked and previewed."""

from __future__ import annotations

from hvbench.kinds.libvirt.spec import LibvirtPlatformSpec
from hvbench.model.platform import PlatformSpec
from hvbench.platforms import preview
from hvbench.platforms.accel import choose_accel
from hvbench.platforms.base import Platform
from hvbench.platforms.kinds import Resolver, Wiring, guest_instance_name, typed_spec
from hvbench.platforms.libvirt import LibvirtPlatform, check_existing_domain


class LibvirtKind:
    """A libvirt domain: a transient one from the platform's VM spec (named like a qemu
    guest), or the user's own existing domain (``domain = "NAME"``, never booted or
    changed by hvbench)."""

    kind = "libvirt"
    is_guest = True

    def instance_name(self, variant: str, key: str) -> str:
        return guest_instance_name(key)

    def check(self, spec: PlatformSpec, *, name: str) -> None:
        """An existing domain: :func:`~hvbench.platforms.libvirt.check_existing_domain`
        (attaches and lets go; agent commands up to 30 s each)."""
        typed = typed_spec(spec, LibvirtPlatformSpec)
        if typed.existing:
            check_existing_domain(typed, name=name)

    def build(self, spec: PlatformSpec, *, name: str, wire: Wiring | None = None,
              resolve: Resolver | None = None) -> Platform:
        typed = typed_spec(spec, LibvirtPlatformSpec)
        if typed.vm is None:
            return LibvirtPlatform(typed, name=name)
        vm = wire(typed.vm) if wire is not None else typed.vm
        return LibvirtPlatform(typed.model_copy(update={"vm": vm}), name=name,
                               accel_choice=choose_accel(vm))

    def preview(self, spec: PlatformSpec, *, name: str) -> list[str]:
        typed = typed_spec(spec, LibvirtPlatformSpec)
        if typed.vm is None:
            return [f"# platform {name}: the existing domain {typed.domain} at "
                    f"{typed.uri}, attached as it is: `virsh -c {typed.uri} dumpxml "
                    f"{typed.domain}` prints its XML"]
        accel, why = preview.preview_accel(typed.vm)
        xml = preview.domain_xml(typed.vm, name, accel, preview.guest_files())
        return [f"<!-- platform {name}: kind = \"libvirt\" at {typed.uri}; {why} -->",
                xml.rstrip("\n")]
