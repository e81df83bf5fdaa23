"""Write a Linux initramfs archive (``newc`` cpio format) from a directory tree.

We write the archive ourselves rather than calling ``cpio`` because that lets every
entry be owned by root with a fixed timestamp (a reproducible archive, whoever builds
it) and lets us add device nodes such as ``/dev/console`` without ``mknod`` on the host.
"""

from __future__ import annotations

import os
import stat
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

_MAGIC = b"070701"
_TRAILER = "TRAILER!!!"


@dataclass(frozen=True)
class DeviceNode:
    """A device node to add to the archive (the kernel needs /dev/console before /init)."""

    path: str
    mode: int
    major: int
    minor: int


#: /dev/console must exist in the initramfs: the kernel opens it for init's stdio before
#: init can mount devtmpfs, and without it /init runs with no console output.
CONSOLE = DeviceNode("dev/console", stat.S_IFCHR | 0o600, 5, 1)


def _pad4(length: int) -> bytes:
    return b"\0" * (-length % 4)


def _header(ino: int, mode: int, size: int, name: str, rdev: tuple[int, int], *,
            nlink: int = 1) -> bytes:
    encoded = name.encode("utf-8", "surrogateescape") + b"\0"
    nlink = 2 if stat.S_ISDIR(mode) else nlink
    fields = (ino, mode, 0, 0, nlink, 0, size, 0, 0, rdev[0], rdev[1], len(encoded), 0)
    head = _MAGIC + b"".join(b"%08x" % f for f in fields) + encoded
    return head + _pad4(len(head))


def _walk(root: Path) -> Iterator[Path]:
    # Sorted, parents before children: the kernel creates entries in archive order.
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        base = Path(dirpath)
        for name in sorted(dirnames + filenames):
            yield base / name


def _link_counts(root: Path) -> Counter[tuple[int, int]]:
    """How many names each regular file has under ``root``, by (device, inode)."""
    counts: Counter[tuple[int, int]] = Counter()
    for path in _walk(root):
        st = path.lstat()
        if stat.S_ISREG(st.st_mode):
            counts[(st.st_dev, st.st_ino)] += 1
    return counts


def write_newc(root: Path, out: BinaryIO, devices: tuple[DeviceNode, ...] = (CONSOLE,)) -> None:
    """Write every file, directory and symlink under ``root``, then ``devices``, to ``out``.

    Entries are owned by root:root with mtime 0. Names of one file (hard links within
    ``root``) share an inode number and a link count, and only the first carries the
    data: the kernel's unpacker links the later names to the first, so the file is
    unpacked and held in memory once.
    """
    counts = _link_counts(root)
    first_ino: dict[tuple[int, int], int] = {}
    ino = 1
    for path in _walk(root):
        rel = path.relative_to(root).as_posix()
        st = path.lstat()
        mode = stat.S_IFMT(st.st_mode) | stat.S_IMODE(st.st_mode)
        if stat.S_ISLNK(st.st_mode):
            data = str(path.readlink()).encode("utf-8", "surrogateescape")
            out.write(_header(ino, mode, len(data), rel, (0, 0)) + data + _pad4(len(data)))
        elif stat.S_ISREG(st.st_mode):
            identity = (st.st_dev, st.st_ino)
            links = counts[identity]
            if identity in first_ino:
                out.write(_header(first_ino[identity], mode, 0, rel, (0, 0), nlink=links))
                continue
            first_ino[identity] = ino
            out.write(_header(ino, mode, st.st_size, rel, (0, 0), nlink=links))
            with path.open("rb") as f:
                while chunk := f.read(1 << 20):
                    out.write(chunk)
            out.write(_pad4(st.st_size))
        elif stat.S_ISDIR(st.st_mode):
            out.write(_header(ino, mode, 0, rel, (0, 0)))
        else:
            continue  # sockets/fifos have no business in an initramfs
        ino += 1
    # Device nodes go last: the kernel does not create missing parent directories, so
    # their directory (``root/dev``, which the caller must create) has to come first.
    for node in devices:
        out.write(_header(ino, node.mode, 0, node.path, (node.major, node.minor)))
        ino += 1
    out.write(_header(0, 0, 0, _TRAILER, (0, 0)))
