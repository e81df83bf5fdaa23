"""What a study's guest platform would run, without running it (``hvbench show``): the
QEMU argv of ``kind = "qemu"`` and the domain XML of ``kind = "libvirt"``, built by the
same functions the platforms launch with.

What only exists once a guest starts is a placeholder in capitals: the per-guest work
directory (``WORKDIR``), the socket directory (``SOCKDIR``), tap names and MACs. The
kernel, initrd and root image are the cached guest image's when one is built. Nothing is
created, probed or started: an ``accel = "auto"`` guest uses the cached KVM verdict of
this boot, and TCG when there is none (what a run would choose without a usable KVM).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from hvbench.host import facts
from hvbench.host.tsc import tsc_khz
from hvbench.image.builder import RECOMMENDED_CMDLINE, find_image
from hvbench.model.libvirt_xml import DomainPlan, build_domain_xml, check_libvirt_spec
from hvbench.model.qemu_argv import (
    LaunchPlan,
    ResolvedAccel,
    build_qemu_argv,
    wants_host_tsc,
)
from hvbench.model.spec import VmSpec
from hvbench.platforms.kvm_probe import cached_kvm_status
from hvbench.platforms.libvirt import IMAGES_DIR
from hvbench.platforms.qemu import QEMU_BINARY

WORKDIR = "WORKDIR"
SOCKDIR = "SOCKDIR"


@dataclass(frozen=True)
class GuestFiles:
    """The guest image's files as a preview names them."""

    kernel: str
    initrd: str
    rootfs: str | None


def guest_files() -> GuestFiles:
    """The cached guest image's kernel, initrd and root image; placeholders
    (``IMAGE/vmlinuz`` ...) when none is built. Reads the cache only."""
    image = find_image()
    if image is None:
        return GuestFiles("IMAGE/vmlinuz", "IMAGE/initrd.img", "IMAGE/rootfs.img")
    return GuestFiles(str(image.kernel), str(image.initrd),
                      str(image.rootfs) if image.rootfs else None)


def preview_accel(vm: VmSpec) -> tuple[ResolvedAccel, str]:
    """The accelerator a run would give ``vm`` and why, without probing."""
    if vm.accel != "auto":
        return vm.accel, f"accel = {vm.accel!r} in the study"
    status = cached_kvm_status()
    if status is not None and status.usable:
        return "kvm", "accel = 'auto': this boot's KVM probe booted a guest"
    reason = status.reason if status is not None else "KVM not probed on this boot"
    return "tcg", f"accel = 'auto': TCG ({reason})"


def _disks(vm: VmSpec, directory: str) -> tuple[str, ...]:
    """Each benchmark disk's source: the host device or NBD export the study names,
    else the image file the platform would create in ``directory``."""
    return tuple(d.source or f"{directory}/disk{i}.{d.format}" for i, d in enumerate(vm.disks))


def qemu_argv(vm: VmSpec, name: str, accel: ResolvedAccel, files: GuestFiles) -> list[str]:
    """The argv a ``kind = "qemu"`` platform named ``name`` would launch; reads, as the
    platform does, whether this host has vhost-net and its TSC rate (microvm)."""
    plan = LaunchPlan(
        spec=vm, accel=accel, name=name, kernel=files.kernel, initrd=files.initrd,
        kernel_cmdline=RECOMMENDED_CMDLINE, qmp_socket=f"{SOCKDIR}/qmp.sock",
        agent_socket=f"{SOCKDIR}/agent.sock", console_log=f"{WORKDIR}/console.log",
        disk_images=_disks(vm, WORKDIR),
        tap_names=tuple(f"TAP{i}" if n.backend == "tap" else None
                        for i, n in enumerate(vm.nics)),
        macs=tuple(n.mac or f"52:54:00:00:00:{i:02x}" for i, n in enumerate(vm.nics)),
        qemu_binary=QEMU_BINARY, root_disk=files.rootfs, vhost=facts.vhost_net_available(),
        host_tsc_khz=tsc_khz() if wants_host_tsc(vm, accel) else None)
    return build_qemu_argv(plan)


def domain_xml(vm: VmSpec, name: str, accel: ResolvedAccel, files: GuestFiles) -> str:
    """The domain XML a ``kind = "libvirt"`` platform named ``name`` would define
    (its files staged under libvirt's images directory) (pure). Raises
    :class:`SpecError` when libvirt cannot express ``vm``."""
    check_libvirt_spec(vm)
    stage = f"{IMAGES_DIR}/{name}-STAGE"

    def staged(path: str) -> str:
        return f"{stage}/{path.rsplit('/', 1)[-1]}"

    plan = DomainPlan(
        spec=vm, accel=accel, name=name, owner_pid=0, kernel=staged(files.kernel),
        initrd=staged(files.initrd), kernel_cmdline=RECOMMENDED_CMDLINE,
        root_disk=staged(files.rootfs or "rootfs.img"), console_log=f"{stage}/console.log",
        disk_images=_disks(vm, stage),
        tap_names=tuple(f"TAP{i}" if n.backend == "tap" else None
                        for i, n in enumerate(vm.nics)),
        macs=tuple(n.mac or f"52:54:01:00:00:{i:02x}" for i, n in enumerate(vm.nics)))
    return build_domain_xml(plan)


def argv_lines(argv: Sequence[str]) -> list[str]:
    """``argv`` as a shell command, one option and its value per line (pure)."""
    lines: list[str] = [shlex.quote(argv[0])] if argv else []
    for arg in argv[1:]:
        if arg.startswith("-") or len(lines) == 1:
            lines.append(shlex.quote(arg))
        else:
            lines[-1] += " " + shlex.quote(arg)
    return [line + " \\" for line in lines[:-1]] + lines[-1:]
