"""Remember the resolved package versions while apt's state is unchanged.

Resolving the guest's package closure with apt-cache takes about 2 s, too slow for
``find_image()``, which runs on every guest launch. apt can only change its answer when
its inputs change: the package lists (``apt-get update``), the installed packages, the
sources and the pinning. So we fingerprint those files by name, size and mtime (a few
dozen stat() calls) and keep the last resolution in a small JSON file next to the
images, keyed by that fingerprint.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

#: The files whose change can change apt-cache's candidate versions. The lists may be
#: stored compressed (``Acquire::GzipIndexes``), hence the ``_Packages.*`` pattern.
APT_STATE_GLOBS: tuple[tuple[str, str], ...] = (
    ("/var/lib/apt/lists", "*_Packages"),
    ("/var/lib/apt/lists", "*_Packages.*"),
    ("/var/lib/dpkg", "status"),
    ("/etc/apt", "sources.list"),
    ("/etc/apt/sources.list.d", "*"),
    ("/etc/apt", "preferences"),
    ("/etc/apt/preferences.d", "*"),
)
CACHE_FILE = "resolution.json"


def _state_files(globs: Iterable[tuple[str, str]]) -> list[Path]:
    found: set[Path] = set()
    for directory, pattern in globs:
        base = Path(directory)
        with contextlib.suppress(OSError):
            found.update(p for p in base.glob(pattern) if p.is_file())
    return sorted(found)


def apt_fingerprint(
    extra: Iterable[str] = (),
    globs: Iterable[tuple[str, str]] | None = None,
) -> str:
    """Return a hash of apt's state files (name, size, mtime_ns) and of ``extra``.

    ``extra`` carries whatever else decides the resolution (the root packages, the
    image format); ``globs`` defaults to APT_STATE_GLOBS. A file that vanishes between
    listing and stat() counts as absent.
    """
    if globs is None:
        globs = APT_STATE_GLOBS
    digest = hashlib.sha256()
    for item in extra:
        digest.update(item.encode() + b"\0")
    for path in _state_files(globs):
        try:
            st = path.stat()
        except OSError:
            continue
        digest.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    return digest.hexdigest()


def load(cache_file: Path, fingerprint: str) -> dict[str, str] | None:
    """Return the packages stored in ``cache_file`` for ``fingerprint``, or None."""
    try:
        data: dict[str, Any] = json.loads(cache_file.read_text())
        if data.get("fingerprint") != fingerprint:
            return None
        packages = data["packages"]
        if not isinstance(packages, dict) or not packages:
            return None
        return {str(k): str(v) for k, v in packages.items()}
    except (OSError, ValueError, KeyError):
        return None


def store(cache_file: Path, fingerprint: str, packages: dict[str, str]) -> None:
    """Write the resolution atomically (temp file + rename); errors are ignored.

    Losing the cache only costs the next caller one apt-cache resolution, so a
    read-only or full cache directory must not fail a guest launch.
    """
    payload = json.dumps({"fingerprint": fingerprint, "packages": packages}, sort_keys=True)
    with contextlib.suppress(OSError):
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".resolution-", dir=cache_file.parent)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(payload)
            Path(tmp).replace(cache_file)
        except BaseException:
            # Also on Ctrl-C: no stray temporary file in the cache directory.
            Path(tmp).unlink(missing_ok=True)
            raise


def resolve_cached(
    cache_file: Path, extra: Iterable[str], resolve: Callable[[], dict[str, str]]
) -> dict[str, str]:
    """Return the stored resolution if apt's state is unchanged, else ``resolve()`` it.

    Raises whatever ``resolve`` raises (only when the cache misses).
    """
    # Fingerprint before resolving: if apt's state changes meanwhile, the stored entry
    # is merely stale and misses next time, never a new fingerprint with old versions.
    fingerprint = apt_fingerprint(extra)
    packages = load(cache_file, fingerprint)
    if packages is None:
        packages = resolve()
        store(cache_file, fingerprint, packages)
    return packages
