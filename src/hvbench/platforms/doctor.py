"""``hvbench doctor``: what this host can do, as one JSON-ready report.

The keys of :func:`collect` are stable; docs/doctor.md documents each one. The KVM
verdict comes from :mod:`hvbench.platforms.kvm_probe` (a real boot, cached per boot).
"""

from __future__ import annotations

from typing import Any

from hvbench import __version__
from hvbench.host import facts
from hvbench.host.paths import work_dir
from hvbench.image.builder import find_image
from hvbench.platforms.kvm_probe import DEFAULT_PROBE_TIMEOUT, kvm_status
from hvbench.platforms.libvirt import is_local, libvirt_facts
from hvbench.platforms.libvirt_start import start_verdict
from hvbench.platforms.qemu import QEMU_BINARY

SCHEMA_VERSION = 1
TCG_WARNING = (
    "guests run under TCG (software emulation): their numbers measure emulation, "
    "not virtualization"
)


def _qemu_section() -> dict[str, Any]:
    info = facts.qemu_info(QEMU_BINARY)
    directory = str(work_dir())
    return {
        "binary": info.binary,
        "version": info.version,
        "package": info.package,
        "aio": {
            mode: facts.qemu_supports_aio(mode, QEMU_BINARY, directory)
            for mode in ("threads", "native", "io_uring")
        } if info.binary else {},
    }


def _image_section() -> dict[str, Any]:
    image = find_image()
    if image is None:
        return {"built": False}
    return {
        "built": True, "key": image.key, "kernel_release": image.kernel_release,
        "kernel": str(image.kernel), "initrd": str(image.initrd),
    }


def collect(refresh: bool = False, timeout: float = DEFAULT_PROBE_TIMEOUT) -> dict[str, Any]:
    """Everything doctor reports. Probes KVM (``timeout`` s) unless a verdict is cached
    for this boot and ``refresh`` is False. Never raises for a missing capability."""
    kvm = kvm_status(refresh=refresh, timeout=timeout)
    root = facts.is_root()
    return {
        "schema": SCHEMA_VERSION,
        "hvbench_version": __version__,
        "host": facts.host_summary(),
        "root": root,
        "unavailable_without_root": [] if root else list(facts.NEEDS_ROOT),
        "qemu": _qemu_section(),
        "kvm": {
            "present": kvm.present, "present_reason": kvm.present_reason,
            "usable": kvm.usable, "reason": kvm.reason,
            "probe_seconds": kvm.probe_seconds, "probe_timeout_seconds": timeout,
            "probed_at": kvm.probed_at, "cached": kvm.cached,
        },
        "accelerator": "kvm" if kvm.usable else "tcg",
        "vhost_net": facts.vhost_net_available(),
        "tools": facts.tools(),
        "cgroup": facts.cgroup_info(),
        "work_dir": facts.free_disk(work_dir()),
        "guest_image": _image_section(),
        "libvirt": _libvirt_section(refresh),
    }


def _libvirt_section(refresh: bool) -> dict[str, Any]:
    """The libvirt URIs, and for each reachable local one libvirt's own time to
    define and start a tiny domain, with the cause when slow (cached per boot)."""
    section = libvirt_facts()
    for uri, info in section["uris"].items():
        if info.get("reachable") and is_local(uri):
            info["start"] = start_verdict(uri, refresh=refresh)
    return section


def _fmt_bytes(value: object) -> str:
    return f"{int(value) / (1 << 30):.1f} GiB" if isinstance(value, int) else "?"


def _kvm_line(kvm: dict[str, Any]) -> str:
    present = "present" if kvm["present"] else "absent"
    usable = {True: "usable", False: "unusable", None: "not probed"}[kvm["usable"]]
    cached = " (cached for this boot)" if kvm["cached"] else ""
    return f"{present}, {usable}: {kvm['reason']}{cached}"


def _tool_lines(tools: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (name, "MISSING" if info is None else f"{info['version']}  ({info['path']})")
        for name, info in tools.items()
    ]


def render(report: dict[str, Any]) -> list[tuple[str, str]]:
    """The report as (label, value) rows for a terminal table (pure)."""
    host, qemu, cg, wd = report["host"], report["qemu"], report["cgroup"], report["work_dir"]
    aio = ", ".join(k for k, v in qemu.get("aio", {}).items() if v) or "-"
    rows = [
        ("hvbench", report["hvbench_version"]),
        ("host", f"{host['hostname']}  kernel {host['kernel']}"),
        ("cpu", f"{host['cpu_model']}  x{host['cpus']}"),
        ("memory", _fmt_bytes(host["memory_bytes"])),
        ("root", "yes" if report["root"] else
         "no; unavailable: " + "; ".join(report["unavailable_without_root"])),
        ("qemu", f"{qemu['version']} ({qemu['package']})  {qemu['binary']}"
         if qemu["binary"] else "MISSING (Debian package qemu-system-x86)"),
        ("qemu aio modes", aio),
        ("kvm", _kvm_line(report["kvm"])),
        ("accelerator", report["accelerator"].upper()
         + ("  <- " + TCG_WARNING if report["accelerator"] == "tcg" else "")),
        ("vhost-net", "yes" if report["vhost_net"] else "no (/dev/vhost-net absent)"),
        *_tool_lines(report["tools"]),
        ("cgroup", f"{cg['version']}; v1: {' '.join(cg['v1_controllers']) or '-'}; "
         f"v2: {' '.join(cg['v2_controllers']) or '-'}"),
        ("work dir", f"{wd['path']} ({wd['filesystem']}): {_fmt_bytes(wd['free_bytes'])} free"),
    ]
    rows += _libvirt_lines(report.get("libvirt"))
    image = report["guest_image"]
    rows.append(("guest image", f"{image['kernel_release']}  key {image['key'][:12]}"
                 if image["built"] else "not built (run `hvbench image build`)"))
    return rows


def _libvirt_lines(section: dict[str, Any] | None) -> list[tuple[str, str]]:
    """One row per libvirt URI: unreachable (why), or its domains and their states."""
    rows = []
    for uri, info in (section or {}).get("uris", {}).items():
        if not info.get("reachable"):
            rows.append((f"libvirt {uri}", f"not reachable: {info.get('error', '?')}"))
            continue
        domains = info.get("domains", {})
        listed = ", ".join(f"{n} ({s})" for n, s in domains.items()) or "no domains"
        rows.append((f"libvirt {uri}", f"reachable; {listed}"))
        if "start" in info:
            rows.append((f"libvirt {uri} start", _start_line(info["start"])))
    return rows


def _start_line(start: dict[str, Any]) -> str:
    """libvirt's own define and start times of a tiny domain, and why when slow."""
    if "error" in start:
        return f"not measured: {start['error']}"
    cached = " (cached for this boot)" if start.get("cached") else ""
    line = (f"a tiny domain: define {start['define_s']:.1f} s, start {start['start_s']:.1f} s"
            f"{cached}")
    return f"{line}; SLOW: {start['cause']}" if start["slow"] else line
