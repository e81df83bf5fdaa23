"""The report of a fleet run (docs/fleet.md): its hosts with their environments and the
host-to-host spread of every cell (:func:`hvbench.analysis.fleet.host_spread`), read
from the store once; the terminal (``report --fleet``), JSON and HTML render the same
tables from it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from hvbench.analysis.fleet import (
    MIN_HOSTS_FOR_OUTLIERS,
    SPREAD_KEY,
    HostSpread,
    host_spread,
)
from hvbench.analysis.fleet_verdict import (
    VERDICT_NOTE,
    HostVerdict,
    MainRow,
    host_verdict,
    main_rows,
)
from hvbench.analysis.summaries import fmt_value
from hvbench.errors import SpecError
from hvbench.model.platform import is_host_kind
from hvbench.report.text import TextTable

if TYPE_CHECKING:
    from hvbench.store.database import Store


__all__ = ["FleetHost", "FleetReport", "fleet_json", "fleet_tables", "load_fleet_report"]

#: What the outliers column says when there are too few hosts for a verdict.
NO_VERDICT = f"n/a (< {MIN_HOSTS_FOR_OUTLIERS} hosts)"
#: How the outlier verdict is reached, as the tables' note says it.
OUTLIER_NOTE = ("CoV across hosts: of the host means; CoV within hosts: the mean of each "
                "host's CoV over its repetitions. Outlier: Welch's t-test of the host's "
                "repetitions against the other hosts', Bonferroni-corrected p < 0.01 and "
                "more than 5 % off their mean; 3 hosts at least.")
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
    """A fleet run: its hosts (by name), the spread of every cell across them, the main
    metric of every cell per host with its % of native, and with 2 hosts their
    verdict."""

    fleet_id: str
    hosts: tuple[FleetHost, ...]
    spreads: tuple[HostSpread, ...]
    main: tuple[MainRow, ...] = ()
    verdict: HostVerdict | None = None

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
    rows = {h.host: store.measurements(h.run_id) for h in hosts}
    natives = {c.platform_name for h in hosts for c in store.cells(h.run_id)
               if is_host_kind(c.identity.platform_kind)}
    main = main_rows(rows, natives)
    return FleetReport(fleet_id, hosts, tuple(host_spread(rows)), tuple(main),
                       host_verdict(main, [h.host for h in hosts]))


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


def _pct_text(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1f} %"


def _cov(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def main_table(report: FleetReport) -> TextTable:
    """One row per cell and phase: its main metric's mean on each host with the host's
    % of its own native, the two hosts' ratio (with 2 hosts), the CoV across and within
    hosts and the outliers of that metric."""
    hosts = [h.host for h in report.hosts]
    spreads = {(s.cell, s.phase, s.metric): s for s in report.spreads}
    pair = len(hosts) == 2
    rows = []
    for r in report.main:
        spread = spreads.get((r.cell, r.phase, r.metric))
        cells = [f"{fmt_value(r.means[h])}" + (f" ({r.pct_native[h]:.1f} %)"
                                               if h in r.pct_native else "")
                 if h in r.means else "-" for h in hosts]
        ratio = [f"{r.means[hosts[0]] / r.means[hosts[1]]:.3f}"
                 if pair and r.means.get(hosts[1]) and hosts[0] in r.means else "-"] \
            if pair else []
        rows.append((r.cell, r.phase, f"{r.metric} ({r.unit})", *cells, *ratio,
                     _cov(spread.across_cov_pct if spread else None),
                     _cov(spread.within_cov_pct if spread else None),
                     (", ".join(spread.outliers) or ("-" if spread.p_values else NO_VERDICT))
                     if spread else "-"))
    return TextTable(
        f"fleet {report.fleet_id}: main metric per host (% of that host's native)",
        ("cell", "phase", "metric", *hosts, *([f"{hosts[0]}/{hosts[1]}"] if pair else []),
         "CoV across hosts %", "CoV within hosts %", "outliers"), tuple(rows), left=3,
        note=OUTLIER_NOTE)


def verdict_table(verdict: HostVerdict) -> TextTable:
    """The two hosts' verdict: cells paired, how much better the first is with its
    95 % interval, the verdict and why."""
    interval = "-" if verdict.low_pct is None or verdict.high_pct is None else \
        f"[{verdict.low_pct:+.1f}, {verdict.high_pct:+.1f}] %"
    return TextTable(
        f"{verdict.first} vs {verdict.second}",
        ("verdict", "why", "cells paired", f"{verdict.first} better by", "95 % interval"),
        ((verdict.verdict, verdict.reason, str(verdict.cells), _pct_text(verdict.pct),
          interval),), left=2, note=VERDICT_NOTE)


def fleet_tables(report: FleetReport, *, all_metrics: bool = False) -> list[TextTable]:
    """The hosts table, the main metric of every cell per host, the verdict of two
    hosts, and with ``all_metrics`` the host-to-host table of every metric."""
    hosts = [h.host for h in report.hosts]
    tables = [hosts_table(report), main_table(report)]
    if report.verdict is not None:
        tables.append(verdict_table(report.verdict))
    if all_metrics:
        tables.append(spread_table(
            f"fleet {report.fleet_id}: {len(hosts)} hosts, every metric, host to host",
            hosts, report.spreads))
    return tables


def fleet_json(report: FleetReport) -> dict[str, Any]:
    """The fleet as JSON: its hosts (run, status, counts, environment) and the spread
    of every cell, phase and metric."""
    return {"fleet_id": report.fleet_id,
            "hosts": [{"host": h.host, "run": h.run_id, "status": h.status, "ok": h.ok,
                       "failed": h.failed, "env": h.env} for h in report.hosts],
            "main": [asdict(r) for r in report.main],
            "verdict": None if report.verdict is None else asdict(report.verdict),
            "spread": spread_json(report.spreads)}


def fleet_json_text(report: FleetReport) -> str:
    """:func:`fleet_json` as the document ``report --fleet F --format json`` writes."""
    return json.dumps(fleet_json(report), indent=2) + "\n"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def spread_table(title: str, hosts: Sequence[str], spreads: Sequence[HostSpread]
                 ) -> TextTable:
    """One row per cell, phase and metric: each host's mean, the CoV across and within
    hosts, the outliers (what ``report --fleet`` prints and the HTML report shows)."""
    rows = tuple(
        (s.cell, s.phase, f"{s.metric} ({s.unit})",
         *(fmt_value(s.means[h]) if h in s.means else "-" for h in hosts),
         _pct(s.across_cov_pct), _pct(s.within_cov_pct),
         ", ".join(s.outliers) or ("-" if s.p_values else NO_VERDICT))
        for s in spreads)
    return TextTable(title, ("cell", "phase", "metric", *hosts, "CoV across hosts %",
                             "CoV within hosts %", "outliers"), rows, left=3,
                     note=OUTLIER_NOTE)


def spread_json(spreads: Sequence[HostSpread]) -> list[dict[str, Any]]:
    """Every :class:`HostSpread` as a JSON object (``p_values``: the corrected ones)."""
    return [{**asdict(s), "outliers": list(s.outliers)} for s in spreads]
