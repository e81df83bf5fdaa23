"""Where hvbench keeps things on the host."""

from __future__ import annotations

import os
import re
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


#: Where owner records of host-wide objects (a lab's namespaces and links) live: one
#: directory for every hvbench on the machine, whatever its work directory, so that any
#: later hvbench finds what a killed one left (a record under a private work directory,
#: such as a test's, is found by nobody once that directory is forgotten). /run is
#: cleared at boot, as the objects are.
RECORDS_DIR = Path("/run/hvbench")


def records_dir() -> Path:
    """:data:`RECORDS_DIR`, created if missing (root: what it records needs root)."""
    RECORDS_DIR.mkdir(parents=True, exist_ok=True)
    return RECORDS_DIR


def cache_dir() -> Path:
    """``$HVBENCH_CACHE_DIR``, else ``$XDG_CACHE_HOME/hvbench``, else ``~/.cache/hvbench``."""
    if "HVBENCH_CACHE_DIR" in os.environ:
        return Path(os.environ["HVBENCH_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "hvbench"


OWNER_FILE = "hvbench-owner.pid"
#: The owner's pid is also in the directory's name (``<prefix>XXXX.hvb<pid>``): a process
#: killed between creating the directory and writing its owner file leaves a directory
#: that is still recognisable.
_OWNER_SUFFIX = re.compile(r"\.hvb(\d+)$")


def make_owned_dir(parent: Path, prefix: str) -> Path:
    """A fresh private directory under ``parent`` that records its owner's pid, so a later
    hvbench can tell it was left behind by a process that died (``kill -9``)."""
    pid = os.getpid()
    directory = Path(tempfile.mkdtemp(prefix=prefix, suffix=f".hvb{pid}", dir=parent))
    (directory / OWNER_FILE).write_text(str(pid))
    return directory


def claim_dir(directory: Path) -> None:
    """Record this process as the owner of an existing ``directory`` it will remove, so
    that a later hvbench removes it if this process dies first (``kill -9``)."""
    (directory / OWNER_FILE).write_text(str(os.getpid()))


def is_claimed(directory: Path) -> bool:
    """Whether ``directory`` records an owner process (live or not)."""
    return _owner(directory) is not None


def _owner(directory: Path) -> int | None:
    try:
        return int((directory / OWNER_FILE).read_text().strip())
    except (OSError, ValueError):
        match = _OWNER_SUFFIX.search(directory.name)
        return int(match.group(1)) if match else None


def orphaned_dirs(parent: Path) -> list[Path]:
    """The directories under ``parent`` whose recorded owner process is gone (those with
    neither an owner file nor an owner suffix are never listed)."""
    found = []
    for directory in sorted(parent.iterdir()) if parent.is_dir() else []:
        if not directory.is_dir() or directory.is_symlink():
            continue
        pid = _owner(directory)
        if pid is not None and not Path(f"/proc/{pid}").exists():
            found.append(directory)
    return found


def remove_orphaned_dirs(parent: Path, *, dry_run: bool = False) -> list[Path]:
    """Remove the directories :func:`orphaned_dirs` lists (``dry_run``: only list
    them); returns them."""
    removed = orphaned_dirs(parent)
    if not dry_run:
        for directory in removed:
            shutil.rmtree(directory, ignore_errors=True)
    return removed
