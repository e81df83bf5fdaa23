"""An opt-in timing trace of the work hvbench waits on: guest boots and the commands it
runs in guests and on the host, one JSON line each.

It exists to answer "where does the time go" across many hvbench processes at once (a
test suite, a fleet worker): set ``HVBENCH_TRACE`` to an absolute file path and every
hvbench process started with it appends to that file; ``HVBENCH_TRACE_TAG`` is copied
into each line (the test suite sets it to the running test's id, so child processes'
lines name their test). Unset, nothing is written and nothing is timed twice: callers
pass the seconds they measured anyway. ``bench/suite_times.py --trace`` reads the file.

A line: ``{"event": "boot" | "guest-exec" | "host-exec", "seconds": float, "tag": str,
"program": str, ...}``. Each line is one ``write`` to a file opened with ``O_APPEND``,
which keeps concurrent writers' lines whole (they are far below a page).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import PurePath

from hvbench.errors import HostError

#: The file to append to; unset or empty: no trace.
TRACE_ENV = "HVBENCH_TRACE"
#: Copied into every line (the test suite: the running test's node id).
TAG_ENV = "HVBENCH_TRACE_TAG"
EVENTS = ("boot", "guest-exec", "host-exec")


def enabled() -> bool:
    """Whether ``HVBENCH_TRACE`` names a file."""
    return bool(os.environ.get(TRACE_ENV))


def program_of(argv: Sequence[str]) -> str:
    """The program ``argv`` runs: its base name (``/usr/bin/fio`` -> ``fio``), past an
    ``ip netns exec NS`` wrapper (a lab host's commands)."""
    words = list(argv)
    if words[:3] == ["ip", "netns", "exec"] and len(words) > 4:
        words = words[4:]
    return PurePath(words[0]).name if words else ""


def record(event: str, seconds: float, argv: Sequence[str], **fields: str | int | float) -> None:
    """Append one line for ``event`` (one of :data:`EVENTS`) that took ``seconds``,
    naming the program ``argv`` runs (:func:`program_of`).

    A no-op unless ``HVBENCH_TRACE`` is set. Raises :class:`HostError` naming the
    variable and the path when the path is relative (another process's working
    directory would put its lines elsewhere) or cannot be appended to: an operator who
    asked for a trace is told it is not being written.
    """
    path = os.environ.get(TRACE_ENV)
    if not path:
        return
    if event not in EVENTS:
        raise HostError(f"internal: trace event {event!r} is not one of {', '.join(EVENTS)}")
    if not PurePath(path).is_absolute():
        raise HostError(f"{TRACE_ENV}={path}: expected an absolute path")
    line = {"event": event, "seconds": round(seconds, 4), "tag": os.environ.get(TAG_ENV, ""),
            "program": program_of(argv), **fields}
    data = (json.dumps(line, sort_keys=True) + "\n").encode()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
    except OSError as exc:
        raise HostError(f"{TRACE_ENV}={path}: cannot append the trace: {exc}") from exc
