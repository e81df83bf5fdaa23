"""Running short host commands: argv lists only, a timeout always, errors with context."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from hvbench.errors import CommandError, ToolMissingError

#: Debian package of each external program hvbench uses, for install hints.
PACKAGES = {
    "qemu-system-x86_64": "qemu-system-x86",
    "qemu-img": "qemu-utils",
    "fio": "fio",
    "iperf3": "iperf3",
    "httperf": "httperf",
    "wrk": "wrk",
    "lighttpd": "lighttpd",
    "stress-ng": "stress-ng",
    "ip": "iproute2",
    "apt-get": "apt",
    "dpkg-deb": "dpkg",
    "depmod": "kmod",
    "cpio": "cpio",
    "dropbear": "dropbear-bin",
    "dropbearkey": "dropbear-bin",
    "scp": "openssh-client",
    "ssh-keygen": "openssh-client",
    "rsync": "rsync",
    "curl": "curl",
    "zstd": "zstd",
    "globus-gridftp-server": "globus-gridftp-server-progs",
    "globus-url-copy": "globus-gass-copy-progs",
    "vblade": "vblade",
    "unshare": "util-linux",
}


def require_tool(tool: str) -> str:
    """Absolute path of ``tool`` on PATH. Raises :class:`ToolMissingError` if absent."""
    path = shutil.which(tool)
    if path is None:
        raise ToolMissingError(tool, PACKAGES.get(tool))
    return path


def run(
    argv: Sequence[str], *, timeout: float = 60.0, what: str = "", cwd: Path | None = None
) -> str:
    """Run ``argv``, return its stdout. stderr is folded into the error on failure.

    Raises :class:`ToolMissingError` if the program is absent and :class:`CommandError`
    on a non-zero exit or after ``timeout`` seconds.
    """
    require_tool(argv[0])
    try:
        done = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=timeout, cwd=cwd, check=False
        )
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"") + (exc.stderr or b"")
        text = out.decode(errors="replace") if isinstance(out, bytes) else str(out)
        raise CommandError(argv, None, text, what) from exc
    if done.returncode != 0:
        raise CommandError(argv, done.returncode, done.stdout + done.stderr, what)
    return done.stdout
