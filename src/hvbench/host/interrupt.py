"""The run-wide "a signal asked us to stop" flag.

The CLI's SIGINT/SIGTERM handler records the signal here before raising
:class:`~hvbench.errors.InterruptedRun`. Code that catches :class:`HvbenchError` to
record a failure and go on (the runner, a cell) asks :func:`check` first, so an
interruption is never mistaken for a failed measurement, even when a lower layer
wrapped or swallowed the exception.
"""

from __future__ import annotations

from hvbench.errors import InterruptedRun

_received: list[int] = []


def request(signum: int) -> bool:
    """Record that ``signum`` arrived. True for the first signal, False for later ones
    (the caller then lets the stop already under way finish)."""
    _received.append(signum)
    return len(_received) == 1


def received() -> int | None:
    """The first signal that asked to stop, or None."""
    return _received[0] if _received else None


def check(cause: BaseException | None = None) -> None:
    """Raise :class:`InterruptedRun` if a stop was requested (``cause`` chained), or
    re-raise ``cause`` itself if it is one."""
    if isinstance(cause, InterruptedRun):
        raise cause
    signum = received()
    if signum is not None:
        raise InterruptedRun(signum) from cause


def reset() -> None:
    """Forget received signals (a new command in the same process, tests)."""
    _received.clear()
