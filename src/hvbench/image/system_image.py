"""System images of a chosen size: what the lifecycle and propagation workloads copy,
convert, transfer and boot.

The bundled guest's root filesystem (``rootfs.img``, squashfs) is written at the start
of the image and the rest is filled up to the requested size. squashfs records its own
length in its superblock, so the guest mounts the same root from an image of any size:
every image boots, and copying or transferring it moves exactly ``size`` bytes.

The filler is pseudo-random (a seeded generator, so the same size gives the same bytes
and checksum): a real system image's free blocks are not zeros, and a zero filler would
let sparse copies and compressed transfers skip work no real image lets them skip.
"""

from __future__ import annotations

import hashlib
import random
import shutil
from pathlib import Path
from typing import Literal

from hvbench.errors import HostError, ImageError
from hvbench.host.commands import run
from hvbench.image.builder import GuestImage
from hvbench.model.spec import format_size

SystemFormat = Literal["raw", "qcow2"]
_CHUNK = 4 << 20
#: Headroom left free on the filesystem after an image is written (logs, the store).
FREE_MARGIN_BYTES = 256 << 20
_CONVERT_TIMEOUT_S = 1800.0


def check_free_disk(directory: Path, needed: int, what: str) -> None:
    """Refuse to write ``needed`` bytes into ``directory`` when its filesystem would be
    left with less than :data:`FREE_MARGIN_BYTES`.

    Raises :class:`HostError` naming the directory, what was to be written and both sizes.
    """
    free = shutil.disk_usage(directory).free
    if free < needed + FREE_MARGIN_BYTES:
        raise HostError(
            f"{what} needs {format_size(needed)} in {directory}, but only "
            f"{_human(free)} is free (keeping {format_size(FREE_MARGIN_BYTES)} spare); "
            "free some space or point HVBENCH_WORKDIR elsewhere")


def _human(size: int) -> str:
    return f"{size / (1 << 20):.0f}M"


def rootfs_of(image: GuestImage) -> Path:
    """The image's root filesystem. Raises :class:`ImageError` for an initramfs-only one."""
    if image.rootfs is None or not image.rootfs.is_file():
        raise ImageError(f"guest image {image.key} has no root disk to build a system "
                         "image from: rebuild it with `hvbench image build`")
    return image.rootfs


def write_raw_image(image: GuestImage, size: int, dest: Path) -> str:
    """Write a raw system image of exactly ``size`` bytes to ``dest``; returns its SHA-256.

    Raises :class:`ImageError` if ``size`` is below the root filesystem's size and
    :class:`HostError` if the disk has no room for it.
    """
    root = rootfs_of(image)
    base = root.stat().st_size
    if size < base:
        raise ImageError(f"a system image of {format_size(size)} cannot hold the guest's "
                         f"root filesystem ({base} bytes)")
    check_free_disk(dest.parent, size, f"a {format_size(size)} system image")
    digest = hashlib.sha256()
    rng = random.Random(size)  # noqa: S311 - filler, not secrets
    with dest.open("wb") as out:
        with root.open("rb") as src:
            while block := src.read(_CHUNK):
                out.write(block)
                digest.update(block)
        left = size - base
        while left > 0:
            block = rng.randbytes(min(_CHUNK, left))
            out.write(block)
            digest.update(block)
            left -= len(block)
    return digest.hexdigest()


def convert_image(src: Path, dest: Path, fmt: SystemFormat, *, timeout: float = _CONVERT_TIMEOUT_S
                  ) -> None:
    """``qemu-img convert`` a raw image to ``fmt``. Raises :class:`CommandError`."""
    run(["qemu-img", "convert", "-q", "-f", "raw", "-O", fmt, str(src), str(dest)],
        timeout=timeout, what=f"converting {src.name} to {fmt}")


def make_overlay(base: Path, base_format: SystemFormat, dest: Path) -> None:
    """A qcow2 copy-on-write overlay over ``base`` (which it reads, never writes).
    Raises :class:`CommandError`."""
    run(["qemu-img", "create", "-q", "-f", "qcow2", "-b", str(base.resolve()),
         "-F", base_format, str(dest)], timeout=60, what=f"creating an overlay over {base.name}")


def sha256_file(path: Path) -> str:
    """The SHA-256 of a file, read in 4 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as src:
        while block := src.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()
