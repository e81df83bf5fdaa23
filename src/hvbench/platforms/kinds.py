"""Platform kinds: a study's ``[[platform]] kind`` -> how to build that platform.

The core finds how to build, check and preview a platform spec through the registry
here. A kind package of :mod:`hvbench.kinds` (``native``, ``qemu``, ``libvirt``)
registers its :class:`PlatformKind` with :func:`register_platform_kind`; its spec is
registered with the study parser in :mod:`hvbench.model.platform`. The classes that run
a platform (:class:`~hvbench.platforms.base.Platform`) stay in this package: the lab,
the runner and the workload kinds that boot their own guests use them too.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Protocol, TypeVar

from hvbench.errors import HvbenchError, SpecError
from hvbench.model.platform import PlatformSpec
from hvbench.model.registry import register_once
from hvbench.model.spec import VmSpec
from hvbench.platforms.base import Platform

#: Rewrites a guest's VM spec before it is built (the lab wires its NICs and resolves
#: its NBD disk sources).
Wiring = Callable[[VmSpec], VmSpec]
#: A disk source as the run's lab resolves it (``nbd:HOST`` -> ``nbd://...``).
Resolver = Callable[[str | None], str | None]
_Spec = TypeVar("_Spec", bound=PlatformSpec)


class PlatformKind(Protocol):
    """How one platform kind is named, described and built."""

    kind: str
    #: A guest: it boots (a measured ``boot_s``) and may be a lifecycle's or peer's.
    is_guest: bool

    def instance_name(self, variant: str, key: str) -> str:
        """The running instance's name for platform variant ``variant`` as the store
        sees it, ``key`` (``vm`` or ``vm@scenario``)."""
        ...

    def check(self, spec: PlatformSpec, *, name: str) -> None:
        """Before a run is created: what platform ``name`` points at outside hvbench (an
        existing domain and its disk) exists and may be used. Changes nothing. Raises
        :class:`SpecError` in one line naming what is wrong (and what exists)."""
        ...

    def build(self, spec: PlatformSpec, *, name: str, wire: Wiring | None = None,
              resolve: Resolver | None = None) -> Platform:
        """A platform for ``spec``, not started. May run the KVM probe (``auto``:
        up to 20 s when no verdict is cached). ``resolve`` resolves a host platform's
        disk source (a guest's come through ``wire``); it may start the lab's NBD
        server. Raises :class:`HostError` for an accelerator the host lacks."""
        ...

    def preview(self, spec: PlatformSpec, *, name: str) -> list[str]:
        """What ``hvbench show`` prints for platform variant ``name``: a comment line,
        then what it would launch (an argv, one option per line, or a domain's XML).
        Starts nothing; reads the cached KVM verdict and the guest image's paths."""
        ...


def typed_spec(spec: PlatformSpec, model: type[_Spec]) -> _Spec:
    """``spec`` as its kind's class. Raises :class:`HvbenchError` when a kind is handed
    another kind's spec (a registry mix-up, not bad input)."""
    if not isinstance(spec, model):
        raise HvbenchError(f"internal: a {type(spec).__name__} is not a {model.__name__}")
    return spec


def guest_instance_name(key: str) -> str:
    """The name of a guest hvbench boots for platform ``key`` (``vm`` or
    ``vm@scenario``): this process's, so that two runs never share one."""
    return f"hvbench-{os.getpid()}-{key[:20]}"


#: Every registered kind by ``kind`` value, in registration order.
_KINDS: dict[str, PlatformKind] = {}


def register_platform_kind(kind: PlatformKind) -> None:
    """Make the runner build ``kind = "<kind.kind>"`` platforms with ``kind``. The same
    registration again does nothing; another under a taken name raises
    :class:`HvbenchError`."""
    register_once(_KINDS, kind.kind, kind, "platform kind")


def platform_kinds() -> Mapping[str, PlatformKind]:
    """The registered kinds by name, in registration order."""
    return dict(_KINDS)


def platform_kind(spec: PlatformSpec) -> PlatformKind:
    """The kind of platform spec ``spec`` (by its ``kind`` field). Raises
    :class:`SpecError` for a kind no class implements."""
    found = _KINDS.get(spec.kind)
    if found is None:
        raise SpecError(f"platform kind {spec.kind!r}: expected one of "
                        f"{', '.join(_KINDS)}")
    return found
