"""The network lab: a study's extra hosts as network namespaces on one Linux bridge.

:mod:`~hvbench.netlab.names` (names and addresses) and :mod:`~hvbench.netlab.tc`
(shaping commands) are pure; :mod:`~hvbench.netlab.lab` builds and removes labs. See
docs/netlab.md.
"""

from hvbench.netlab.lab import (
    LabHost,
    LabRecord,
    NetLab,
    cleanup_orphaned_labs,
    netem_support,
    teardown,
)

__all__ = [
    "LabHost",
    "LabRecord",
    "NetLab",
    "cleanup_orphaned_labs",
    "netem_support",
    "teardown",
]
