"""The libvirt platform kind's spec (``kind = "libvirt"``): a transient domain hvbench
defines from a VM spec, or an existing domain of the user's, attached as it is."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, model_validator

from hvbench.model.libvirt_xml import check_libvirt_spec
from hvbench.model.platform import PlatformSpec, entry_vm, validated
from hvbench.model.problems import Where
from hvbench.model.spec import VmSpec

#: A libvirt URI: ``driver[+transport]://[host]/path`` (``qemu:///system``,
#: ``qemu+ssh://host/system``).
_URI_RE = r"^[a-z0-9]+(\+[a-z0-9]+)?://[^\s]*$"
#: A disk's target name in a domain (``vdb``, ``sdb``, ``hdc``).
_TARGET_RE = r"^[a-z]{2,3}[a-z]{1,2}$"


class LibvirtPlatformSpec(PlatformSpec):
    """A guest run by libvirt: either ``vm`` (hvbench defines a transient domain from the
    same axes as ``kind = "qemu"``) or ``domain`` (an existing domain of the user's,
    measured as it is, on the disk ``disk`` (a target such as ``vdb``) or under the
    guest directory ``path``). A ``disk`` that holds a mounted file system, swap or the
    guest's root, or whose contents cannot be checked, is refused unless
    ``destroy_contents`` is true: the study then says the disk's contents may be
    destroyed."""

    kind: Literal["libvirt"] = "libvirt"
    uri: str = Field(default="qemu:///system", pattern=_URI_RE)
    vm: VmSpec | None = None
    domain: str | None = Field(default=None, min_length=1, max_length=200)
    disk: str | None = Field(default=None, pattern=_TARGET_RE)
    path: str | None = Field(default=None, pattern=r"^/[^\s]*$")
    destroy_contents: bool = False

    @model_validator(mode="after")
    def _check_mode(self) -> LibvirtPlatformSpec:
        if (self.vm is None) == (self.domain is None):
            raise ValueError("give either the guest's axes (hvbench defines the domain) "
                             "or domain = \"NAME\" (an existing domain), not both")
        if self.domain is None and (self.disk or self.path):
            raise ValueError("disk = \"vdb\" / path = \"/dir\" name where an existing "
                             "domain is measured: they need domain = \"NAME\"")
        if self.disk and self.path:
            raise ValueError("give either disk (a target such as vdb) or path, not both")
        if self.destroy_contents and not self.disk:
            raise ValueError("destroy_contents = true allows hvbench to destroy what is on "
                             "an existing domain's disk: it needs disk = \"vdb\"")
        return self

    @property
    def existing(self) -> bool:
        """Whether this measures a domain the user already has."""
        return self.domain is not None

    def guest_vm(self) -> VmSpec | None:
        return self.vm

    def attached(self) -> bool:
        return self.existing

    def attached_path(self) -> str | None:
        return self.path if self.existing else None

    def with_vm(self, vm: VmSpec) -> PlatformSpec:
        """A transient domain of ``vm`` at the same URI. Raises :class:`SpecError` for a
        setting a domain's XML cannot express (:func:`check_libvirt_spec`)."""
        check_libvirt_spec(vm)
        return self.model_copy(update={"vm": vm})

    def location_fields(self) -> Mapping[str, Any]:
        return {"uri": self.uri}


def parse(concrete: dict[str, Any], where: Where) -> PlatformSpec:
    """A ``kind = "libvirt"`` entry (without its kind): ``uri``, then either an existing
    ``domain`` and its fields, or the axes of the VM hvbench defines. Raises
    :class:`SpecError` naming the field."""
    uri = concrete.pop("uri", None)
    fields: dict[str, Any] = {} if uri is None else {"uri": uri}
    if "domain" in concrete:
        fields.update(concrete)
    else:
        fields["vm"] = entry_vm(concrete, where)
    return validated(LibvirtPlatformSpec, fields, where)
