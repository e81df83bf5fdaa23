"""The boot limit's initramfs: the image's own kernel with an /init that prints one line.

``bench/boot.py`` boots it on the same QEMU configuration as the real guest, alternated
with real boots, to measure what a boot costs before hvbench's own init runs: QEMU's
start, the firmware, the kernel up to /init. The line carries the guest's uptime like
hvbench's init lines (``hvbench-limit: [UPTIME] init reached``), then /init powers the
guest off. busybox comes from the same busybox-static package the image was built from.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from hvbench.errors import ImageError
from hvbench.image import apt
from hvbench.image.cpio import write_newc

#: The line the limit's /init prints (after the uptime in brackets).
LIMIT_MARKER = "hvbench-limit:"
_BUSYBOX_PACKAGE = "busybox-static"
_INIT = f"""#!/bin/sh
/bin/busybox mount -t proc proc /proc
read -r up _ </proc/uptime
echo "{LIMIT_MARKER} [$up] init reached"
exec /bin/busybox poweroff -f
"""
_UNPACK_TIMEOUT_S = 120.0


def _noop(_message: str) -> None:
    return None


def write_limit_initramfs(packages: dict[str, str], deb_dir: Path, out: Path,
                          log: Callable[[str], None] | None = None) -> Path:
    """Write the limit's initramfs (uncompressed newc cpio, as the image's) to ``out``.

    ``packages`` are the image's package versions (``GuestImage.packages``); its
    busybox-static .deb is taken from ``deb_dir`` (downloaded there if missing, up to
    apt's download timeout) and unpacked with dpkg-deb (up to 2 min).

    Raises:
        ImageError: the image names no busybox-static, or it cannot be fetched or unpacked.
        ToolMissingError: apt-get or dpkg-deb is not installed.
    """
    version = packages.get(_BUSYBOX_PACKAGE)
    if version is None:
        raise ImageError(f"the image's packages name no {_BUSYBOX_PACKAGE}")
    deb = apt.download_debs({_BUSYBOX_PACKAGE: version}, deb_dir, log or _noop)
    work = Path(tempfile.mkdtemp(prefix="hvb-limit-"))
    try:
        unpacked, tree = work / "deb", work / "tree"
        apt.run_tool(["dpkg-deb", "-x", str(deb[_BUSYBOX_PACKAGE]), str(unpacked)],
                     what="unpacking busybox-static", timeout=_UNPACK_TIMEOUT_S,
                     package="dpkg")
        for name in ("bin", "proc", "dev"):
            (tree / name).mkdir(parents=True)
        shutil.copy2(unpacked / "bin" / "busybox", tree / "bin" / "busybox")
        (tree / "bin" / "sh").symlink_to("busybox")
        init = tree / "init"
        init.write_text(_INIT)
        init.chmod(0o755)
        with out.open("wb") as f:
            write_newc(tree, f)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out
