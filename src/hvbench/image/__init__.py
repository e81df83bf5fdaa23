"""The bundled guest image: a Debian kernel, a tiny initramfs and a read-only root disk,
built on this machine.

See :mod:`hvbench.image.builder` for how it is built and cached.
"""

from hvbench.image.builder import (
    FORMAT_VERSION,
    RECOMMENDED_CMDLINE,
    GuestImage,
    build_image,
    default_cache_dir,
    find_image,
    resolve_packages,
)

__all__ = [
    "FORMAT_VERSION",
    "RECOMMENDED_CMDLINE",
    "GuestImage",
    "build_image",
    "default_cache_dir",
    "find_image",
    "resolve_packages",
]
