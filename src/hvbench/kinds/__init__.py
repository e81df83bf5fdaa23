"""Workload and platform kinds, one package each: a workload kind's spec, cell, run-wide
memory and what else it owns; a platform kind's spec, its checks and how it is built;
each registered into the registries the core layers own.

The core (model, run, analysis, report, store, ...) never imports this package (an
import contract says so); kind packages never import each other (another one). What
starts hvbench (the CLI, the test suite) calls :func:`install` once: the only line
a new kind adds outside its own package is its entry in :data:`KINDS`.
"""

from __future__ import annotations

from functools import cache

from hvbench.kinds import cpu, disk, libvirt, lifecycle, native, network, propagation, qemu, web

#: Every kind package; each has a ``register()`` that fills the core's registries. The
#: order is the order a study file's unknown-kind message lists them in (platform kinds
#: and workload kinds each among their own).
KINDS = (native, qemu, libvirt, disk, network, web, lifecycle, propagation, cpu)


@cache
def install() -> None:
    """Register every kind (idempotent: later calls do nothing)."""
    for kind in KINDS:
        kind.register()
