"""The report of a fleet run (docs/fleet.md): its hosts with their environments and the
host-to-host spread of every cell (:func:`hvbench.analysis.fleet.host_spread`), read
from the store once; the terminal (``report --fleet``), JSON and HTML render the same
tables from it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from hvbench.analysis.fleet import (
    SPREAD_KEY,
    HostSpread,
    host_spread,
    spread_json,
    spread_table,
)
from hvbench.analysis.summaries import TextTable
from hvbench.errors import SpecError
from hvbench.store.database import Store

__all__ = ["FleetHost", "FleetReport", "fleet_json", "fleet_tables", "load_fleet_report"]

#: The environment fields of the hosts table: (key, header).
HOST_FIELDS = (("hostname", "hostname"), ("cpu_model", "CPU"), ("kernel", "kernel"),
               ("qemu_version", "QEMU"), ("accelerator", "accelerator"),
               ("hvbench_version", "hvbench"))


@dataclass(frozen=True)
class FleetHost:
    """One host of a fleet run: its run and the environment it recorded."""

    host: str
    run_id: str
    status: str
    env: dict[str, Any]
    ok: int
    failed: int


@dataclass(frozen=True)
class FleetReport:
    """A fleet run: its hosts (by name) and the spread of every cell across them."""

    fleet_id: str
    hosts: tuple[FleetHost, ...]
    spreads: tuple[HostSpread, ...]

    @property
    def tcg(self) -> bool:
        """Whether any host ran its guests under TCG."""
        return any(h.env.get("accelerator") == "tcg" for h in self.hosts)


def load_fleet_report(store: Store, fleet_id: str) -> FleetReport:
    """The fleet run ``fleet_id`` from ``store`` (its hosts' ok repetitions).

    Raises:
        SpecError: no such fleet run in the store.
    """
    runs = store.fleet_runs(fleet_id)
    if not runs:
        raise SpecError(f"{store.location}: no fleet run {fleet_id!r}")
    hosts = tuple(FleetHost(str(r.host), r.id, r.status, r.env, len(store.done(r.id)),
                            len(store.failures(r.id))) for r in runs)
    spreads = host_spread({h.host: store.measurements(h.run_id) for h in hosts})
    return FleetReport(fleet_id, hosts, tuple(spreads))


def _share(env: dict[str, Any]) -> str:
    share = env.get(SPREAD_KEY)
    if not isinstance(share, dict):
        return "all"
    reps = ", ".join(str(r + 1) for r in share.get("repetitions", []))
    klass = share.get("class")
    return f"{reps} (class {klass})" if klass else reps


def hosts_table(report: FleetReport) -> TextTable:
    """One row per host: its run, status, the repetitions it runs (``all``, or its
    ``--spread`` share, numbered from 1), its environment, then the repetitions ok and
    failed."""
    rows = tuple(
        (h.host, h.run_id, h.status, _share(h.env),
         *(str(h.env.get(key, "-")) for key, _ in HOST_FIELDS), str(h.ok), str(h.failed))
        for h in report.hosts)
    headers = ("host", "run", "status", "repetitions", *(name for _, name in HOST_FIELDS))
    return TextTable(f"fleet {report.fleet_id}: {len(report.hosts)} hosts",
                     (*headers, "ok", "failed"), rows, left=len(headers))


def fleet_tables(report: FleetReport) -> list[TextTable]:
    """The hosts table, then the host-to-host table of every cell."""
    hosts = [h.host for h in report.hosts]
    return [hosts_table(report),
            spread_table(f"fleet {report.fleet_id}: {len(hosts)} hosts, host to host",
                         hosts, report.spreads)]


def fleet_json(report: FleetReport) -> dict[str, Any]:
    """The fleet as JSON: its hosts (run, status, counts, environment) and the spread
    of every cell, phase and metric."""
    return {"fleet_id": report.fleet_id,
            "hosts": [{"host": h.host, "run": h.run_id, "status": h.status, "ok": h.ok,
                       "failed": h.failed, "env": h.env} for h in report.hosts],
            "spread": spread_json(report.spreads)}


def fleet_json_text(report: FleetReport) -> str:
    """:func:`fleet_json` as the document ``report --fleet F --format json`` writes."""
    return json.dumps(fleet_json(report), indent=2) + "\n"

