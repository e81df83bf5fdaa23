"""Facts about this host, read from /proc, /sys and the tools' own version output.

These facts are the environment every stored result carries and what ``hvbench doctor``
reports. Each reader is small and tolerant: a fact that cannot be read is ``None``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import platform
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

KVM_DEVICE = "/dev/kvm"
_KVM_GET_API_VERSION = 0xAE00
_KVM_API_VERSION = 12

#: Each tool: the argv that prints its version and a regex that extracts it.
TOOL_VERSION_PROBES: dict[str, tuple[list[str], str]] = {
    "qemu-img": (["qemu-img", "--version"], r"version\s+(\S+)"),
    "fio": (["fio", "--version"], r"fio-(\S+)"),
    "iperf3": (["iperf3", "--version"], r"iperf\s+(\S+)"),
    "httperf": (["httperf", "--version"], r"httperf-(\S+)"),
    # "wrk debian/4.1.0-3+b2 [epoll] ..." (it prints its usage too and exits 1).
    "wrk": (["wrk", "--version"], r"^wrk (?:\S+/)?(\S+)"),
    "stress-ng": (["stress-ng", "--version"], r"version\s+(\S+)"),
    # The storage daemon behind a vhost-user-blk disk, and Debian 12's virtiofsd (not on
    # PATH: QEMU's package keeps it beside its firmware).
    "qemu-storage-daemon": (["qemu-storage-daemon", "--version"], r"version\s+(\S+)"),
    "virtiofsd": (["/usr/lib/qemu/virtiofsd", "--version"], r"version\s+(\S+)"),
    # The GridFTP propagation method's server and client ("globus_gridftp_server: 13.24
    # (...)", "globus-url-copy: 10.12").
    "globus-gridftp-server": (["globus-gridftp-server", "-version"], r"server:\s+(\S+)"),
    "globus-url-copy": (["globus-url-copy", "-version"], r"globus-url-copy:\s+(\S+)"),
}

#: What is unavailable when hvbench does not run as root.
NEEDS_ROOT = (
    "tap networking (creating tap devices and bridges)",
    "network namespaces (the net lab)",
    "cgroups (CPU weights, pinning)",
    "dropping the host page cache between disk phases",
    "opening /dev/kvm when it is root-only",
)


def read_text(path: str | Path) -> str | None:
    """The content of a file, or None if it cannot be read."""
    try:
        return Path(path).read_text()
    except OSError:
        return None


def boot_id() -> str:
    """The kernel's per-boot id: caches keyed by it die with a reboot."""
    return (read_text("/proc/sys/kernel/random/boot_id") or "unknown").strip()


def cpu_model() -> str | None:
    text = read_text("/proc/cpuinfo") or ""
    match = re.search(r"^model name\s*:\s*(.+)$", text, re.MULTILINE)
    return match.group(1).strip() if match else None


def memory_bytes() -> int | None:
    text = read_text("/proc/meminfo") or ""
    match = re.search(r"^MemTotal:\s+(\d+) kB", text, re.MULTILINE)
    return int(match.group(1)) * 1024 if match else None


def host_summary() -> dict[str, Any]:
    """Kernel, CPU model, CPU count, memory and boot id."""
    return {
        "hostname": platform.node(),
        "kernel": platform.release(),
        "cpu_model": cpu_model(),
        "cpus": os.cpu_count(),
        "memory_bytes": memory_bytes(),
        "boot_id": boot_id(),
    }


def tool_version(argv: list[str], pattern: str, timeout: float = 10.0) -> str | None:
    """Run a version command and extract the version; None if absent or unparsable."""
    if shutil.which(argv[0]) is None:
        return None
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(pattern, done.stdout + done.stderr)
    return match.group(1).rstrip(",") if match else None


def tools() -> dict[str, dict[str, str | None] | None]:
    """Path and version of every external tool; None for a missing tool."""
    out: dict[str, dict[str, str | None] | None] = {}
    for name, (argv, pattern) in TOOL_VERSION_PROBES.items():
        path = shutil.which(argv[0])
        out[name] = None if path is None else {"path": path, "version": tool_version(argv, pattern)}
    return out


@dataclass(frozen=True)
class QemuInfo:
    binary: str | None
    version: str | None
    package: str | None


def qemu_info(binary: str = "qemu-system-x86_64") -> QemuInfo:
    """The QEMU binary, its version and the distribution package string."""
    path = shutil.which(binary)
    if path is None:
        return QemuInfo(None, None, None)
    try:
        text = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=10, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return QemuInfo(path, None, None)
    match = re.search(r"version\s+(\S+)(?:\s+\((.+?)\))?", text)
    if not match:
        return QemuInfo(path, None, None)
    return QemuInfo(path, match.group(1), match.group(2))


def kvm_present() -> tuple[bool, str]:
    """Whether /dev/kvm opens and speaks the stable KVM API, with the reason."""
    try:
        fd = os.open(KVM_DEVICE, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return False, f"{KVM_DEVICE} does not exist (no KVM module, or not exposed here)"
    except PermissionError:
        return False, f"{KVM_DEVICE} exists but is not accessible to this user"
    except OSError as exc:
        return False, f"{KVM_DEVICE} cannot be opened: {exc}"
    try:
        api = fcntl.ioctl(fd, _KVM_GET_API_VERSION)
    except OSError as exc:
        return False, f"KVM_GET_API_VERSION failed: {exc}"
    finally:
        os.close(fd)
    if api != _KVM_API_VERSION:
        return False, f"KVM API version {api}, expected {_KVM_API_VERSION}"
    return True, f"{KVM_DEVICE} opens, KVM API version {api}"


def cgroup_info(
    root: Path = Path("/sys/fs/cgroup"), proc_cgroups: Path = Path("/proc/cgroups")
) -> dict[str, Any]:
    """cgroup version (v1, v2 or hybrid) and the controllers each hierarchy offers."""
    v2_file = root / "cgroup.controllers"
    hybrid_file = root / "unified" / "cgroup.controllers"
    v1: list[str] = []
    for line in (read_text(proc_cgroups) or "").splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 4 and fields[3] == "1" and (root / fields[0]).is_dir():
            v1.append(fields[0])
    if v2_file.exists():
        return {"version": "v2", "v2_controllers": (read_text(v2_file) or "").split(),
                "v1_controllers": []}
    v2 = (read_text(hybrid_file) or "").split() if hybrid_file.exists() else []
    version = "hybrid" if hybrid_file.exists() else ("v1" if v1 else "none")
    return {"version": version, "v1_controllers": v1, "v2_controllers": v2}


def free_disk(path: Path) -> dict[str, Any]:
    """Free and total bytes of the filesystem holding ``path``."""
    usage = shutil.disk_usage(path)
    fstype = None
    with contextlib.suppress(OSError):
        fstype = _fstype(path)
    return {"path": str(path), "free_bytes": usage.free, "total_bytes": usage.total,
            "filesystem": fstype}


def _fstype(path: Path) -> str | None:
    """Filesystem type of the longest mount point that contains ``path``."""
    best, fstype = "", None
    resolved = str(path.resolve())
    for line in (read_text("/proc/self/mounts") or "").splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        mount = fields[1]
        inside = resolved == mount or resolved.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) >= len(best):
            best, fstype = mount, fields[2]
    return fstype


def is_root() -> bool:
    return os.geteuid() == 0


def vhost_net_available() -> bool:
    return Path("/dev/vhost-net").exists()


def qemu_supports_aio(
    mode: str, binary: str = "qemu-system-x86_64", directory: str = "/tmp"
) -> bool:
    """Whether this QEMU opens a drive with ``aio=mode`` (io_uring is a build option).

    Starts QEMU with no machine for ~0.1 s on a scratch file; False on any failure.
    """
    if shutil.which(binary) is None:
        return False
    with tempfile.NamedTemporaryFile(dir=directory, prefix="hvb-aio-") as scratch:
        argv = [
            binary, "-machine", "none", "-nodefaults", "-display", "none",
            "-drive", f"file={scratch.name},if=none,format=raw,aio={mode},cache=none",
            "-qmp", "stdio",
        ]
        commands = '{"execute":"qmp_capabilities"}\n{"execute":"quit"}\n'
        try:
            done = subprocess.run(
                argv, input=commands, capture_output=True, text=True, timeout=10, check=False
            )
        except (OSError, subprocess.TimeoutExpired):
            return False
    return done.returncode == 0
