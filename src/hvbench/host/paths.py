"""Where hvbench keeps things on the host."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path


def work_dir() -> Path:
    """Scratch space for guest disk images and native test files.

    ``$HVBENCH_WORKDIR``, else ``/var/tmp/hvbench``: a disk-backed filesystem, because
    /tmp may be tmpfs and a disk benchmark on RAM measures nothing. Created if missing.
    """
    path = Path(os.environ.get("HVBENCH_WORKDIR", "/var/tmp/hvbench"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def cache_dir() -> Path:
    """``$HVBENCH_CACHE_DIR``, else ``$XDG_CACHE_HOME/hvbench``, else ``~/.cache/hvbench``."""
    if "HVBENCH_CACHE_DIR" in os.environ:
        return Path(os.environ["HVBENCH_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "hvbench"


OWNER_FILE = "hvbench-owner.pid"


def make_owned_dir(parent: Path, prefix: str) -> Path:
    """A fresh private directory under ``parent`` that records its owner's pid, so a later
    hvbench can tell it was left behind by a process that died (``kill -9``)."""
    directory = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    (directory / OWNER_FILE).write_text(str(os.getpid()))
    return directory


def remove_orphaned_dirs(parent: Path) -> list[Path]:
    """Remove the directories under ``parent`` whose recorded owner process is gone.
    Directories without an owner file are never touched."""
    removed = []
    for owner in parent.glob(f"*/{OWNER_FILE}"):
        try:
            pid = int(owner.read_text().strip())
        except (OSError, ValueError):
            continue
        if not Path(f"/proc/{pid}").exists():
            shutil.rmtree(owner.parent, ignore_errors=True)
            removed.append(owner.parent)
    return removed
