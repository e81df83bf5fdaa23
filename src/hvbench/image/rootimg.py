"""Pack the guest's root tree into a read-only file system image, without being root.

The guest mounts the image read-only from a virtio disk and overlays it with a tmpfs,
so the kernel only reads the blocks of the files the guest actually opens, instead of
unpacking every byte of a large initramfs on every boot.
"""

from __future__ import annotations

from pathlib import Path

from hvbench.image import apt

#: mksquashfs and mke2fs need well under a minute for the ~130 MB tree.
_TOOL_TIMEOUT_S = 600.0


def make_squashfs(tree: Path, image: Path) -> None:
    """Write ``tree`` to ``image`` as an uncompressed squashfs owned by root.

    Uncompressed on purpose: under TCG the guest's decompressor runs emulated, while
    reading more bytes from the host's page cache through virtio costs almost nothing.
    Timestamps are fixed for a reproducible image. Limited to 10 min.

    Raises:
        ToolMissingError: mksquashfs (squashfs-tools) is not installed.
        ImageError: mksquashfs failed or timed out.
    """
    image.unlink(missing_ok=True)  # mksquashfs would append to an existing image
    apt.run_tool(
        [
            "mksquashfs", str(tree), str(image),
            "-noappend", "-all-root", "-no-progress", "-quiet",
            "-noI", "-noD", "-noF", "-noX", "-no-xattrs",
            "-mkfs-time", "0", "-all-time", "0",
        ],
        what="building the root file system image",
        timeout=_TOOL_TIMEOUT_S,
        package="squashfs-tools",
    )

