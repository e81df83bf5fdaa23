"""Wait for an event instead of sleeping a fixed time: a loaded xdist worker overruns
any fixed sleep, so a test polls for what it needs, up to a deadline."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(done: Callable[[], bool], seconds: float = 5.0,
               interval: float = 0.01) -> bool:
    """Poll ``done`` every ``interval`` s until it is true or ``seconds`` have passed;
    return its last value (the caller asserts on it)."""
    deadline = time.monotonic() + seconds
    while not done() and time.monotonic() < deadline:
        time.sleep(interval)
    return done()
