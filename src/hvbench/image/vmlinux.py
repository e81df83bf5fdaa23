"""Turn Debian's compressed bzImage into an uncompressed vmlinux QEMU can boot via PVH.

Under TCG the kernel's own xz decompressor runs emulated and costs about 4.5 s of every
boot (measured on a 2-core host). QEMU boots an ELF vmlinux that carries a PVH entry note
(CONFIG_PVH=y in Debian) directly with -kernel, skipping the firmware's Linux loader and
the decompressor, so we decompress the payload once at build time with Python's lzma.
"""

from __future__ import annotations

import lzma
import zlib

from hvbench.image.elf import has_pvh_entry

_XZ_MAGIC = b"\xfd7zXZ\x00"
_GZIP_MAGIC = b"\x1f\x8b\x08"


def extract_vmlinux(bzimage: bytes) -> bytes | None:
    """Return the uncompressed, PVH-bootable vmlinux inside ``bzimage``, or None.

    None means the payload is not xz/gzip, is corrupt, or lacks the PVH entry note; the
    caller then boots the bzImage itself, which works, only slower.
    """
    for payload in (_try_xz(bzimage), _try_gzip(bzimage)):
        if payload is not None and payload[:4] == b"\x7fELF" and has_pvh_entry(payload):
            return payload
    return None


def _try_xz(data: bytes) -> bytes | None:
    start = data.find(_XZ_MAGIC)
    if start < 0:
        return None
    try:
        # The payload is followed by other data; the decompressor stops at stream end.
        return lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(data[start:])
    except lzma.LZMAError:
        return None


def _try_gzip(data: bytes) -> bytes | None:
    start = data.find(_GZIP_MAGIC)
    if start < 0:
        return None
    try:
        return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data[start:])
    except zlib.error:
        return None
