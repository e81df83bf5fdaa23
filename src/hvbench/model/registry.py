"""The one rule every registry of kinds keeps: a name is claimed once.

Pure: no file, no process.
"""

from __future__ import annotations

from typing import TypeVar

from hvbench.errors import HvbenchError

T = TypeVar("T")


def register_once(table: dict[str, T], name: str, entry: T, what: str) -> None:
    """Put ``entry`` under ``name`` in ``table``. The same registration again does
    nothing (a kind package registered twice); another entry under a name already taken
    raises :class:`HvbenchError` naming ``what`` (two packages claim one kind)."""
    known = table.get(name)
    if known is not None and known != entry:
        raise HvbenchError(f"internal: {what} {name!r} is registered twice")
    table[name] = entry
