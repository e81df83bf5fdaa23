"""Every platform setting, declared once, read and written on every disk and NIC.

A setting is what a study, a tune axis, a diagnosis fix or a report names with a dotted
key: ``disk.cache`` (each benchmark disk's ``cache``), ``nic.model`` (each NIC's
``model``), ``vcpus`` (the VM's), ``kind`` and ``scenario`` (the stored platform's own).
The table :data:`SETTINGS` is derived from the spec models of :mod:`hvbench.model.spec`
(:class:`DiskSpec`, :class:`NicSpec`, :class:`VmSpec`), so a field added there is a
setting here without a second list to keep in step.

Stored platform definitions (the JSON of a cell's platform spec, ``{"kind": "qemu",
"vm": {"disks": [...], ...}, "scenario": {...}}``) are read through :func:`get` (the
benchmark disk's or NIC's value: index 0, where disk and network workloads run),
:func:`values` (every disk's or NIC's) and :func:`flat` (every setting at once, what two
platforms differing in one setting differ in). :func:`with_setting` returns a VM mapping
with one setting changed on every disk or NIC, or on one of them.
(:mod:`hvbench.model.stored` turns a whole stored definition back into the typed spec
the study parser produced.)

Pure: no file, no process.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, get_args, get_origin

from pydantic import BaseModel

from hvbench.errors import SpecError
from hvbench.model.platform import DEFAULT_PLATFORM_KIND
from hvbench.model.problems import did_you_mean
from hvbench.model.spec import DiskSpec, NicSpec, VmSpec

__all__ = [
    "SETTINGS",
    "Scope",
    "Setting",
    "flat",
    "get",
    "lookup",
    "values",
    "vm_of",
    "with_setting",
]

#: Where a setting lives: the stored platform itself, its VM, each of its benchmark
#: disks (``vm.disks[i]``) or each of its NICs (``vm.nics[i]``).
Scope = Literal["platform", "vm", "disk", "nic"]

#: The key of each per-device scope's list in a VM definition.
_LISTS: Mapping[str, str] = {"disk": "disks", "nic": "nics"}


@dataclass(frozen=True)
class Setting:
    """One platform setting: its dotted name, where it lives and what it may hold."""

    name: str
    scope: Scope
    #: The key in its scope's mapping (``cache`` of ``disk.cache``).
    key: str
    #: The type as the spec declares it (``Literal['none', 'writeback', ...]``, ``int |
    #: None``), for messages and documentation.
    type_text: str
    #: Every value it may hold when that is a closed set (a Literal or a bool), else ().
    choices: tuple[Any, ...] = ()

    @property
    def path(self) -> str:
        """Where it lives in a stored definition: ``vm.disks[*].cache``, ``vm.vcpus``."""
        if self.scope == "platform":
            return self.key
        if self.scope == "vm":
            return f"vm.{self.key}"
        return f"vm.{_LISTS[self.scope]}[*].{self.key}"

    @property
    def per_device(self) -> bool:
        """Whether each disk (or NIC) has its own value."""
        return self.scope in _LISTS


def _choices(annotation: Any) -> tuple[Any, ...]:
    """The closed set of values of a field's annotation (() when it is open)."""
    if annotation is bool:
        return (False, True)
    origin = get_origin(annotation)
    if origin is Literal:
        return get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        inner = [_choices(a) for a in get_args(annotation) if a is not type(None)]
        if len(inner) == 1 and inner[0]:
            return (*inner[0], None)
    return ()


def _type_text(annotation: Any) -> str:
    """``int | None``, ``Literal['raw', 'qcow2']``: the annotation without validators."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _type_text(get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_text(a) for a in get_args(annotation))
    if annotation is type(None):
        return "None"
    if isinstance(annotation, type) and origin is None:
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def _from_model(model: type[BaseModel], scope: Scope, prefix: str, skip: tuple[str, ...] = ()
                ) -> dict[str, Setting]:
    out: dict[str, Setting] = {}
    for key, info in model.model_fields.items():
        if key in skip:
            continue
        name = f"{prefix}{key}"
        out[name] = Setting(name, scope, key, _type_text(info.annotation),
                            _choices(info.annotation))
    return out


#: Every platform setting by name: the stored platform's ``kind`` and ``scenario`` (the
#: scenario's name), every scalar field of the VM (its disks, NICs and shared directories
#: are lists, reached through the per-device settings) and every field of a disk and of a
#: NIC.
SETTINGS: Mapping[str, Setting] = {
    "kind": Setting("kind", "platform", "kind", "Literal['native', 'qemu', 'libvirt']",
                    ("native", "qemu", "libvirt")),
    "scenario": Setting("scenario", "platform", "scenario", "str | None"),
    **_from_model(VmSpec, "vm", "", skip=("disks", "nics", "filesystems")),
    **_from_model(DiskSpec, "disk", "disk."),
    **_from_model(NicSpec, "nic", "nic."),
}


def lookup(name: str) -> Setting:
    """The setting called ``name``. Raises :class:`SpecError` (one line naming it, with
    the closest known name) when there is none."""
    found = SETTINGS.get(name)
    if found is None:
        raise SpecError(f"unknown platform setting {name!r}{did_you_mean(name, list(SETTINGS))}")
    return found


def vm_of(platform: Mapping[str, Any]) -> Mapping[str, Any]:
    """The ``vm`` mapping of a stored platform definition ({} natively and for an
    existing libvirt domain)."""
    vm = platform.get("vm")
    return vm if isinstance(vm, Mapping) else {}


def _items(vm: Mapping[str, Any], scope: str) -> list[Mapping[str, Any]]:
    return [i for i in vm.get(_LISTS[scope]) or [] if isinstance(i, Mapping)]


def _platform_value(platform: Mapping[str, Any], key: str) -> Any:
    if key == "kind":
        # Definitions are stored with their kind; a bare VM mapping is a QEMU guest's.
        return platform.get("kind", DEFAULT_PLATFORM_KIND)
    scenario = platform.get("scenario")
    return scenario.get("name") if isinstance(scenario, Mapping) else scenario


def get(platform: Mapping[str, Any], name: str, index: int = 0) -> Any:
    """The value of setting ``name`` in a stored platform definition: for a disk or NIC
    setting, disk (NIC) number ``index``'s (0, the benchmark disk where disk workloads
    run, the NIC network workloads use). None when the definition does not hold it (no
    such device, natively, or a run stored before the field existed). Raises
    :class:`SpecError` for an unknown name."""
    setting = lookup(name)
    if setting.scope == "platform":
        return _platform_value(platform, setting.key)
    vm = vm_of(platform)
    if setting.scope == "vm":
        return vm.get(setting.key)
    items = _items(vm, setting.scope)
    return items[index].get(setting.key) if 0 <= index < len(items) else None


def values(platform: Mapping[str, Any], name: str) -> tuple[Any, ...]:
    """Every disk's (NIC's) value of a per-device setting, in declaration order (the
    one value of a VM or platform setting). Raises :class:`SpecError` for an unknown
    name."""
    setting = lookup(name)
    if not setting.per_device:
        return (get(platform, name),)
    return tuple(i.get(setting.key) for i in _items(vm_of(platform), setting.scope))


#: The settings of each scope, in :data:`SETTINGS` order.
_BY_SCOPE: Mapping[str, tuple[Setting, ...]] = {
    scope: tuple(s for s in SETTINGS.values() if s.scope == scope)
    for scope in ("vm", "disk", "nic")}


def flat(platform: Mapping[str, Any]) -> dict[str, Any]:
    """Every setting of a stored platform definition by name, in :data:`SETTINGS`
    order (the benchmark disk's and first NIC's under ``disk.`` and ``nic.``), then a
    further disk's or NIC's as ``disks[1].cache``, ``nics[1].model``: two platforms
    differing in one setting differ in one key here. Values the definition does not
    hold are None."""
    vm = vm_of(platform)
    out = {"kind": _platform_value(platform, "kind"),
           "scenario": _platform_value(platform, "scenario")}
    out.update({s.name: vm.get(s.key) for s in _BY_SCOPE["vm"]})
    items = {scope: _items(vm, scope) for scope in _LISTS}
    for scope, found in items.items():
        first = found[0] if found else {}
        out.update({s.name: first.get(s.key) for s in _BY_SCOPE[scope]})
    for scope, found in items.items():
        for index, item in enumerate(found[1:], start=1):
            out.update({f"{_LISTS[scope]}[{index}].{s.key}": item.get(s.key)
                        for s in _BY_SCOPE[scope]})
    return out


def with_setting(vm: Mapping[str, Any], name: str, value: Any, index: int | None = None
                 ) -> dict[str, Any]:
    """A copy of a VM mapping (a stored ``vm``, or a dumped :class:`VmSpec`) with
    setting ``name`` set to ``value`` on every disk (NIC), or on number ``index`` only;
    ``value`` None removes the key (the spec's default applies). A guest without any
    disk (NIC) gets one holding the setting: what a search over ``disk.*`` varies.
    Raises :class:`SpecError` for an unknown or platform-level name or an index the VM
    does not have."""
    setting = lookup(name)
    if setting.scope == "platform":
        raise SpecError(f"platform setting {name!r} is not a VM setting: it cannot be changed "
                        "on a VM")
    out = dict(vm)
    if setting.scope == "vm":
        _put(out, setting.key, value)
        return out
    items = [dict(i) for i in _items(vm, setting.scope)] or [{}]
    if index is not None and not 0 <= index < len(items):
        raise SpecError(f"{name}: the VM has {len(items)} {_LISTS[setting.scope]}, no "
                        f"index {index}")
    for position, item in enumerate(items):
        if index is None or position == index:
            _put(item, setting.key, value)
    out[_LISTS[setting.scope]] = items
    return out


def _put(target: dict[str, Any], key: str, value: Any) -> None:
    if value is None:
        target.pop(key, None)
    else:
        target[key] = value
