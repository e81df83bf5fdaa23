"""The run-wide "a signal asked us to stop" flag.

The CLI's SIGINT/SIGTERM handler records the signal here before raising
:class:`~hvbench.errors.InterruptedRun`. Code that catches :class:`HvbenchError` to
record a failure and go on (the runner, a cell) asks :func:`check` first, so an
interruption is never mistaken for a failed measurement, even when a lower layer
wrapped or swallowed the exception.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from hvbench.errors import InterruptedRun

_received: list[int] = []
#: How many :func:`deferred` blocks are open, and the stop request one of them holds.
_depth: list[int] = [0]
_held: list[int] = []


def request(signum: int) -> bool:
    """Record that ``signum`` arrived. True for the first signal, False for later ones
    (the caller then lets the stop already under way finish)."""
    _received.append(signum)
    return len(_received) == 1


def deliver(signum: int) -> None:
    """What the CLI's signal handler does: record ``signum`` and, for the first signal,
    raise :class:`InterruptedRun`, or hold it until the :func:`deferred` block that is
    running ends. A later signal only records (the stop under way goes on)."""
    if not request(signum):
        return
    if _depth[0]:
        _held.append(signum)
        return
    raise InterruptedRun(signum)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Hold a stop request while the block runs and raise it when the block ends. For
    short steps that an exception raised from a signal handler would leave half done:
    a library's import (asyncio, half-initialised, breaks the next import of it) or its
    event loop mid-handshake (the abandoned task prints its traceback at exit). When the
    block raises, its exception goes on and the held request is dropped: it is still in
    :func:`received` for :func:`check`."""
    _depth[0] += 1
    try:
        yield
    finally:
        _depth[0] -= 1
        # deliver() holds at most one request (only the first signal raises).
        held = _held.pop() if _held and not _depth[0] else None
    if held is not None:
        raise InterruptedRun(held)


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
    _held.clear()
