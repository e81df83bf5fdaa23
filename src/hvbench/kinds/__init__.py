"""Workload kinds, one package each: a kind's cell, its run-wide memory and what else
it owns, registered into the registries the core layers own.

The core (model, run, analysis, report, store, ...) never imports this package (an
import contract says so); kind packages never import each other (another one). What
starts hvbench (the CLI, the test suite) calls :func:`install` once: the only line
a new kind adds outside its own package is its entry in :data:`KINDS`.
"""

from __future__ import annotations

from functools import cache

from hvbench.kinds import cpu, disk, lifecycle, network, propagation, web

#: Every kind package; each has a ``register()`` that fills the core's registries. The
#: order is the order a study file's unknown-kind message lists them in.
KINDS = (disk, network, web, lifecycle, propagation, cpu)


@cache
def install() -> None:
    """Register every kind (idempotent: later calls do nothing)."""
    for kind in KINDS:
        kind.register()
