"""Platform kinds: a study's ``[[platform]] kind`` -> how to build that platform.

The one place that knows which class runs which platform spec. A new kind (libvirt, a
remote host) is one class implementing :class:`~hvbench.platforms.base.Platform` and
one :class:`PlatformKind` entry in :data:`PLATFORM_KINDS`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel

from hvbench.errors import HvbenchError, SpecError
from hvbench.model.platform import PlatformSpec
from hvbench.model.spec import VmSpec
from hvbench.model.study import LibvirtPlatformSpec, NativePlatformSpec, QemuPlatformSpec
from hvbench.platforms import preview
from hvbench.platforms.accel import choose_accel
from hvbench.platforms.base import Platform
from hvbench.platforms.libvirt import LibvirtPlatform, check_existing_domain
from hvbench.platforms.native import NativePlatform
from hvbench.platforms.qemu import QemuPlatform

#: Rewrites a guest's VM spec before it is built (the lab wires its NICs and resolves
#: its NBD disk sources).
Wiring = Callable[[VmSpec], VmSpec]
#: A disk source as the run's lab resolves it (``nbd:HOST`` -> ``nbd://...``).
Resolver = Callable[[str | None], str | None]
_Spec = TypeVar("_Spec", bound=BaseModel)


class PlatformKind(Protocol):
    """How one platform kind is named, described and built."""

    kind: str
    #: A guest: it boots (a measured ``boot_s``) and may be a lifecycle's or peer's.
    is_guest: bool

    def instance_name(self, variant: str, key: str) -> str:
        """The running instance's name for platform variant ``variant`` as the store
        sees it, ``key`` (``vm`` or ``vm@scenario``)."""
        ...

    def check(self, spec: Any, *, name: str) -> None:
        """Before a run is created: what platform ``name`` points at outside hvbench (an
        existing domain and its disk) exists and may be used. Changes nothing. Raises
        :class:`SpecError` in one line naming what is wrong (and what exists)."""
        ...

    def build(self, spec: Any, *, name: str, wire: Wiring | None = None,
              resolve: Resolver | None = None) -> Platform:
        """A platform for ``spec``, not started. May run the KVM probe (``auto``:
        up to 20 s when no verdict is cached). ``resolve`` resolves a host platform's
        disk source (a guest's come through ``wire``); it may start the lab's NBD
        server. Raises :class:`HostError` for an accelerator the host lacks."""
        ...

    def preview(self, spec: Any, *, name: str) -> list[str]:
        """What ``hvbench show`` prints for platform variant ``name``: a comment line,
        then what it would launch (an argv, one option per line, or a domain's XML).
        Starts nothing; reads the cached KVM verdict and the guest image's paths."""
        ...


def _typed(spec: Any, model: type[_Spec]) -> _Spec:
    if not isinstance(spec, model):
        raise HvbenchError(f"internal: a {type(spec).__name__} is not a {model.__name__}")
    return spec


class QemuKind:
    """A QEMU guest from the platform's VM spec."""

    kind = "qemu"
    is_guest = True

    def instance_name(self, variant: str, key: str) -> str:
        return f"hvbench-{os.getpid()}-{key[:20]}"

    def check(self, spec: Any, *, name: str) -> None:
        """Nothing outside hvbench: the guest is hvbench's own."""

    def build(self, spec: Any, *, name: str, wire: Wiring | None = None,
              resolve: Resolver | None = None) -> Platform:
        vm = _typed(spec, QemuPlatformSpec).vm
        if wire is not None:
            vm = wire(vm)
        return QemuPlatform(vm, name=name, accel_choice=choose_accel(vm))

    def preview(self, spec: Any, *, name: str) -> list[str]:
        vm = _typed(spec, QemuPlatformSpec).vm
        accel, why = preview.preview_accel(vm)
        argv = preview.qemu_argv(vm, name, accel, preview.guest_files())
        return [f"# platform {name}: kind = \"qemu\"; {why}", *preview.argv_lines(argv)]


class LibvirtKind(QemuKind):
    """A libvirt domain: a transient one from the platform's VM spec (named like a qemu
    guest), or the user's own existing domain (``domain = "NAME"``, never booted or
    changed by hvbench)."""

    kind = "libvirt"

    def check(self, spec: Any, *, name: str) -> None:
        """An existing domain: :func:`~hvbench.platforms.libvirt.check_existing_domain`
        (attaches and lets go; agent commands up to 30 s each)."""
        typed = _typed(spec, LibvirtPlatformSpec)
        if typed.existing:
            check_existing_domain(typed, name=name)

    def build(self, spec: Any, *, name: str, wire: Wiring | None = None,
              resolve: Resolver | None = None) -> Platform:
        typed = _typed(spec, LibvirtPlatformSpec)
        if typed.vm is None:
            return LibvirtPlatform(typed, name=name)
        vm = wire(typed.vm) if wire is not None else typed.vm
        return LibvirtPlatform(typed.model_copy(update={"vm": vm}), name=name,
                               accel_choice=choose_accel(vm))

    def preview(self, spec: Any, *, name: str) -> list[str]:
        typed = _typed(spec, LibvirtPlatformSpec)
        if typed.vm is None:
            return [f"# platform {name}: the existing domain {typed.domain} at "
                    f"{typed.uri}, attached as it is: `virsh -c {typed.uri} dumpxml "
                    f"{typed.domain}` prints its XML"]
        accel, why = preview.preview_accel(typed.vm)
        xml = preview.domain_xml(typed.vm, name, accel, preview.guest_files())
        return [f"<!-- platform {name}: kind = \"libvirt\" at {typed.uri}; {why} -->",
                xml.rstrip("\n")]


class NativeKind:
    """The host itself."""

    kind = "native"
    is_guest = False

    def instance_name(self, variant: str, key: str) -> str:
        return variant

    def check(self, spec: Any, *, name: str) -> None:
        """Host devices are checked by the runner (:func:`check_devices`)."""

    def build(self, spec: Any, *, name: str, wire: Wiring | None = None,
              resolve: Resolver | None = None) -> Platform:
        typed = _typed(spec, NativePlatformSpec)
        source = typed.disk.source if typed.disk is not None else None
        if resolve is not None:
            source = resolve(source)
        return NativePlatform(name=name, disk_source=source, memory_mib=typed.memory_mib)

    def preview(self, spec: Any, *, name: str) -> list[str]:
        return [f"# platform {name}: kind = \"{self.kind}\": the bare host, no guest "
                "(nothing to launch)"]


PLATFORM_KINDS: Mapping[str, PlatformKind] = {
    "qemu": QemuKind(), "native": NativeKind(), "libvirt": LibvirtKind(),
}


def platform_kind(spec: PlatformSpec) -> PlatformKind:
    """The kind of platform spec ``spec`` (by its ``kind`` field). Raises
    :class:`SpecError` for a kind no class implements."""
    found = PLATFORM_KINDS.get(spec.kind)
    if found is None:
        raise SpecError(f"platform kind {spec.kind!r}: expected one of "
                        f"{', '.join(PLATFORM_KINDS)}")
    return found
