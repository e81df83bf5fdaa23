"""What the core knows of a platform: a typed base every platform kind's spec derives
from, and the registry of platform kinds the study parser reads ``[[platform]]``
entries through.

A platform kind package of :mod:`hvbench.kinds` (``native``, ``qemu``, ``libvirt``)
defines its spec (a :class:`PlatformSpec` subclass: its fields, their checks and its
answers to the few questions the core asks of every platform) and registers it with
:func:`register_platform_spec`, with how a raw entry becomes that spec and the name an
entry of that kind takes by default. :mod:`hvbench.model.study` and
:mod:`hvbench.model.stored` parse and load platforms through this registry only: they
know no kind's fields. What builds a running platform from a spec is registered
separately, in :mod:`hvbench.platforms.kinds`.

Pure: no file, no process.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError

from hvbench.errors import HvbenchError, SpecError
from hvbench.model.problems import Loc, Where
from hvbench.model.registry import register_once
from hvbench.model.spec import DiskSpec, VmSpec, spec_error

#: The kind of a ``[[platform]]`` entry, or a stored definition, that names none.
DEFAULT_PLATFORM_KIND = "qemu"
#: A disk source a platform names: (the field as the study spells it, the guest disk
#: that names it or None for the host, the source).
DiskSource = tuple[str, DiskSpec | None, str]


class PlatformSpec(BaseModel):
    """One ``[[platform]]`` entry, validated: the base of every platform kind's spec.

    Frozen, unknown fields refused. A kind's spec sets ``kind`` (a ``Literal``) and
    overrides what differs from the answers here, which are those of a platform that
    declares no guest and no storage of its own.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str

    #: True for the host itself (the baseline "native" results are relative to).
    IS_HOST: ClassVar[bool] = False
    #: True when its cells also run in the study's scenarios, beside neighbour guests
    #: hvbench boots next to it.
    HOSTS_SCENARIOS: ClassVar[bool] = False
    #: True when hvbench serves its guest's virtio-fs shares (``target = "filesystem"``).
    SERVES_SHARES: ClassVar[bool] = False
    #: True when ``hvbench verify`` can re-run it with a fix applied to its VM spec.
    RERUNS_WITH_FIX: ClassVar[bool] = False
    #: True when hvbench sets a lab MTU above 1500 on its guest's NICs itself (from
    #: inside the guest); a platform that leaves them alone is refused a jumbo lab.
    SETS_NIC_MTU: ClassVar[bool] = False

    def guest_vm(self) -> VmSpec | None:
        """The VM this platform declares (hvbench defines the guest); None for the host
        and for a guest of the user's that hvbench attaches to."""
        return None

    def attached(self) -> bool:
        """True for a running guest of the user's that hvbench attaches to: it is never
        booted, stopped or changed, and attaching is no boot."""
        return False

    def attached_path(self) -> str | None:
        """The directory of an attached guest the study names for its workloads; None:
        hvbench's own (or none named)."""
        return None

    def memory_limit_mib(self) -> int | None:
        """The memory the host's commands are limited to (a guest's RAM, so a buffered
        test sees the page cache a guest would); None: no limit, or a guest."""
        return None

    def host_device(self) -> str | None:
        """The storage the host itself measures in place of a scratch file (a block
        device or ``nbd:HOST``); None: a scratch file, or a guest."""
        return None

    def disk_sources(self) -> list[DiskSource]:
        """Each disk source this platform names (:data:`DiskSource`): its guest's disks
        that name one, with the field as the study spells it (``disk.source`` for the
        only disk, ``disks[1].source``)."""
        vm = self.guest_vm()
        disks = vm.disks if vm is not None else ()
        return [("disk.source" if len(disks) == 1 else f"disks[{i}].source", d, d.source)
                for i, d in enumerate(disks) if d.source is not None]

    def with_vm(self, vm: VmSpec) -> PlatformSpec:
        """This platform with its guest's VM replaced by ``vm`` (a tune trial). Raises
        :class:`SpecError` when the kind declares no guest or cannot run ``vm``."""
        del vm
        raise SpecError(f"a {self.kind} platform declares no guest here")

    def location_fields(self) -> Mapping[str, Any]:
        """The fields besides the VM that say where its guest runs (a libvirt URI): a
        copy of the platform with another VM keeps them."""
        return {}


#: How an expanded ``[[platform]]`` entry (without ``kind``) becomes a kind's spec.
#: Raises :class:`SpecError` naming the entry and the field.
ParsePlatform = Callable[[dict[str, Any], Where], PlatformSpec]


def validated(model: type[PlatformSpec], data: Mapping[str, Any], where: Where) -> PlatformSpec:
    """``data`` validated as ``model``. Raises :class:`SpecError` naming the field."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise spec_error(exc, where, model=model) from exc


def entry_vm(concrete: dict[str, Any], where: Where) -> VmSpec:
    """The VM of a guest platform's entry: its fields, with ``disk``, ``nic`` and
    ``filesystem`` as shorthands for a list of one (``concrete`` is changed so).
    Raises :class:`SpecError` naming the field as the study wrote it."""
    renames: dict[Loc, Loc] = {}
    for one, many in (("disk", "disks"), ("nic", "nics"), ("filesystem", "filesystems")):
        if one in concrete:
            if many in concrete:
                raise where.error(one, f"give either {one} (one) or {many}, not both")
            concrete[many] = [concrete.pop(one)]
            # The study wrote one table: name it as written, not as the model's list.
            renames[(many, 0)] = (one,)
    try:
        return VmSpec.model_validate(concrete)
    except ValidationError as exc:
        raise spec_error(exc, where, model=VmSpec, renames=renames) from exc


@dataclass(frozen=True)
class PlatformSpecKind:
    """A registered platform kind as the study parser sees it: its spec class, how an
    entry becomes one, and the name an entry of the kind takes when it gives none."""

    name: str
    spec: type[PlatformSpec]
    parse: ParsePlatform
    default_name: str


#: Every registered kind by ``kind`` value, in registration order.
_KINDS: dict[str, PlatformSpecKind] = {}


def register_platform_spec(kind: PlatformSpecKind) -> None:
    """Make the study parser and the store read ``kind = "<kind.name>"`` platforms with
    ``kind``. Registering the same name again with another kind raises
    :class:`HvbenchError` (two packages claim one kind); the same registration again
    does nothing."""
    register_once(_KINDS, kind.name, kind, "platform kind")


def platform_spec_kinds() -> Mapping[str, PlatformSpecKind]:
    """The registered platform kinds by name, in registration order."""
    return dict(_KINDS)


def kind_spec(kind: object) -> type[PlatformSpec] | None:
    """The spec class of the registered kind ``kind`` names (a stored definition's
    ``kind``); None for a value that names none. Raises :class:`HvbenchError` when no
    platform kind is registered at all (the caller forgot
    :func:`hvbench.kinds.install`: a native baseline would silently be no baseline)."""
    if not _KINDS:
        raise HvbenchError("internal: no platform kind is registered (call "
                           "hvbench.kinds.install() first)")
    found = _KINDS.get(kind) if isinstance(kind, str) else None
    return found.spec if found is not None else None


def is_host_kind(kind: object) -> bool:
    """Whether ``kind`` (a stored definition's ``kind``) names a registered kind whose
    platform is the host itself (:attr:`PlatformSpec.IS_HOST`): the baseline cells."""
    spec = kind_spec(kind)
    return spec is not None and spec.IS_HOST
