"""The accelerator of a guest, decided before the guest is built.

``accel = "auto"`` asks the KVM probe (:func:`hvbench.platforms.kvm_probe.kvm_status`:
a verdict cached per kernel boot, or a probe guest booted under a timeout). The probe
boots a :class:`QemuPlatform` itself, so the decision lives here, above both, and a
guest receives a concrete :class:`AccelChoice`: qemu.py never imports the probe.
"""

from __future__ import annotations

from hvbench.model.spec import VmSpec
from hvbench.platforms.kvm_probe import kvm_status
from hvbench.platforms.qemu import AccelChoice, fixed_accel

__all__ = ["AccelChoice", "choose_accel"]


def choose_accel(spec: VmSpec) -> AccelChoice:
    """KVM or TCG for ``spec``: what it names, or for ``auto`` the probe's verdict
    (KVM only when a probe guest answered; else TCG, which the CLI warns about in red).

    May boot a probe guest (bounded by the probe's 20 s timeout) when no verdict is
    cached for this boot. Raises :class:`HostError` when ``accel=kvm`` is requested but
    /dev/kvm is absent.
    """
    fixed = fixed_accel(spec)
    if fixed is not None:
        return fixed
    status = kvm_status()
    if status.usable:
        return AccelChoice("kvm", "auto: KVM probe booted a guest")
    return AccelChoice("tcg", f"auto: KVM unusable ({status.reason}); falling back to TCG")
