"""The host page cache: flushed and dropped between disk phases that must start cold."""

from __future__ import annotations

import os
from pathlib import Path

DROP_CACHES = Path("/proc/sys/vm/drop_caches")


def drop_host_caches() -> bool:
    """sync, then drop the page cache, dentries and inodes. Returns False (and does
    nothing) without root, so the caller can record that the host cache stayed warm."""
    if os.geteuid() != 0:
        return False
    os.sync()
    try:
        DROP_CACHES.write_text("3\n")
    except OSError:
        return False
    return True
