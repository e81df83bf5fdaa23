"""The machine-wide guest lock that the integration tests take
(tests/integration/conftest.py): a benchmark that boots guests holds it for each study,
so a test session on the same machine neither waits on hvbench's per-work-directory run
lock forever nor shares the host (taps, ports, CPU) with the benchmark's guests."""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK_FILE = Path("/run/lock" if Path("/run/lock").is_dir() else "/tmp") / "hvbench-tests.lock"


@contextmanager
def machine_lock() -> Iterator[None]:
    """Hold the lock (waiting as long as it takes) for the ``with`` block."""
    with LOCK_FILE.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
