"""Tracks every external process hvbench starts, so teardown can stop them all.

Each process class registers itself on start and unregisters in its ``stop``. The CLI
calls :func:`stop_all` on SIGINT/SIGTERM; an ``atexit`` hook does the same as a last
resort. QEMU additionally gets PR_SET_PDEATHSIG, so even ``kill -9`` of hvbench takes
its guests down with it.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
from typing import Protocol


class Stoppable(Protocol):
    name: str

    def stop(self) -> None: ...


class ProcessRegistry:
    """The live external processes, in start order."""

    def __init__(self) -> None:
        self._live: list[Stoppable] = []
        self._lock = threading.Lock()

    def add(self, item: Stoppable) -> None:
        with self._lock:
            self._live.append(item)

    def discard(self, item: Stoppable) -> None:
        with self._lock, contextlib.suppress(ValueError):
            self._live.remove(item)

    def live(self) -> list[Stoppable]:
        with self._lock:
            return list(self._live)

    def stop_all(self) -> list[str]:
        """Stop every live process, newest first; returns the names stopped.

        Never raises: teardown must reach every process even if one stop fails.
        """
        stopped = []
        for item in reversed(self.live()):
            with contextlib.suppress(Exception):
                item.stop()
            self.discard(item)
            stopped.append(item.name)
        return stopped


REGISTRY = ProcessRegistry()
atexit.register(REGISTRY.stop_all)
