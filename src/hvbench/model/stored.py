"""Stored definitions read back into the typed specs the study parser produced.

A cell is stored with its platform and workload specs dumped to JSON (plus, for a cell
in a scenario, the scenario under ``scenario`` in the platform's). :func:`load_platform`
and :func:`load_workload` validate such a definition as the study parser validates a
study's entries, so that a reader holds a :class:`~hvbench.model.platform.PlatformSpec` or a
:class:`~hvbench.model.workload.WorkloadSpec` of its kind again (through the registry of
workload kinds) instead of keys in a dict. Single settings of a stored
platform, without validating the whole of it, are read with :mod:`hvbench.model.settings`.

Pure: no file, no process.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from hvbench.errors import SpecError
from hvbench.model import settings
from hvbench.model.platform import DEFAULT_PLATFORM_KIND, PlatformSpec, platform_spec_kinds
from hvbench.model.problems import did_you_mean
from hvbench.model.spec import VmSpec, spec_error
from hvbench.model.workload import WorkloadSpec, spec_classes

__all__ = ["StoredPlatform", "load_platform", "load_workload"]


@dataclass(frozen=True)
class StoredPlatform:
    """A stored platform definition read back: the spec the study parser produced for
    it, and the scenario the cell ran in (None: alone)."""

    spec: PlatformSpec
    scenario: str | None = None

    @property
    def vm(self) -> VmSpec | None:
        """The VM hvbench defined (None natively and for an existing libvirt domain)."""
        return self.spec.guest_vm()


def _validate(kinds: Mapping[str, type[BaseModel]], data: dict[str, Any], source: str,
              what: str) -> BaseModel:
    kind = data["kind"]
    model = kinds.get(kind) if isinstance(kind, str) else None
    if model is None:
        raise SpecError(f"{source}: kind: {kind!r} is not a {what} kind (expected one of "
                        f"{', '.join(kinds)}){did_you_mean(str(kind), list(kinds))}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise spec_error(exc, source, model=model) from exc


def load_platform(platform: Mapping[str, Any], source: str = "stored platform"
                  ) -> StoredPlatform:
    """The typed platform spec of a stored definition (what the store's ``cell_record``
    dumped), validated as the study parser validates it. Raises :class:`SpecError`
    naming ``source`` and the field when the definition is not one this version can
    read (a field since removed, a value since renamed, an unknown kind)."""
    data = {k: v for k, v in platform.items() if k != "scenario"}
    data.setdefault("kind", DEFAULT_PLATFORM_KIND)
    # The registered kinds' (hvbench.model.platform), in registration order.
    classes = {name: kind.spec for name, kind in platform_spec_kinds().items()}
    spec = _validate(classes, data, source, "platform")
    if not isinstance(spec, PlatformSpec):
        raise SpecError(f"{source}: kind: {data['kind']!r} is not a platform kind")
    return StoredPlatform(spec, settings.get(platform, "scenario"))


def _json(value: Any) -> Any:
    """A default as the store dumps it (tuples are JSON lists)."""
    if isinstance(value, tuple | list):
        return [_json(v) for v in value]
    return value


def _declared(model: type[BaseModel], data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` without the fields that hold their default. The store dumps every field,
    and a spec's checks read which fields a study set (``runtime`` only with a job
    file): a stored default must read back as not set."""
    fields = model.model_fields
    return {k: v for k, v in data.items() if k == "kind" or k not in fields
            or fields[k].is_required() or _json(fields[k].get_default(
                call_default_factory=True)) != v}


def load_workload(workload: Mapping[str, Any], source: str = "stored workload"
                  ) -> WorkloadSpec:
    """The typed workload spec of a stored definition, validated as the study parser
    validates it. A field stored with its default value reads back as not set by the
    study (``file_size_given`` of a disk workload is then False). Raises
    :class:`SpecError` naming ``source`` and the field when this version cannot read
    it, or when it carries no ``kind``."""
    kind = workload.get("kind")
    if kind is None:
        raise SpecError(f"{source}: kind: missing (a definition stored without its kind)")
    classes = spec_classes()  # the registered kinds' (hvbench.model.workload)
    model = classes.get(kind) if isinstance(kind, str) else None
    data = _declared(model, workload) if model is not None else dict(workload)
    spec = _validate(classes, data, source, "workload")
    if not isinstance(spec, WorkloadSpec):
        raise SpecError(f"{source}: kind: {kind!r} is not a workload kind")
    return spec
