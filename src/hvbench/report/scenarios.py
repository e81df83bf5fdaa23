"""The scenario tables of a report (degradation against alone, aggregated throughput
ratio and its sweep over a neighbour's rate, guests started on demand, CPU weights, the
neighbours' QEMU threads, CoV) as :class:`TextTable` (headers and cells as text, which the
terminal and the HTML report print alike), and the same data as plain JSON.

The numbers come from :mod:`hvbench.analysis.scenarios`; this module only words and
shapes them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from hvbench.analysis.metrics import short_label
from hvbench.analysis.scenarios import (
    MISSING_BASELINE,
    NEIGHBOUR_THREAD_COLUMNS,
    AggregatedRatio,
    CovRow,
    Degradation,
    NeighbourRatio,
    NeighbourThreads,
    OnDemandRow,
    OnDemandStart,
    RateSweep,
    ScenarioReport,
    WeightsTable,
    file_phase,
    is_main_cov,
)
from hvbench.analysis.stats import Summary
from hvbench.analysis.summaries import fmt_value
from hvbench.report.text import TextTable, mean_ci_text


def _metric_label(metric: str) -> str:
    return short_label(metric)


def _pct_text(item: Degradation) -> str:
    value, low, high = item.pct, item.pct_low, item.pct_high
    if item.alone is None:
        return MISSING_BASELINE
    if value is None:
        return "- (alone is 0)"
    if low is None or high is None:
        return f"{value:+.1f}"
    return f"{value:+.1f} [{low:+.1f}, {high:+.1f}]"


def degradation_table(items: Sequence[Degradation]) -> TextTable:
    """One row per (platform, workload/phase, metric, scenario)."""
    rows = tuple(
        (d.platform, f"{d.workload}/{d.phase}", _metric_label(d.metric),
         "-" if d.alone is None else mean_ci_text(d.alone), d.scenario,
         mean_ci_text(d.other), _pct_text(d),
         f"{d.alone.n if d.alone else 0}/{d.other.n}")
        for d in items)
    return TextTable(
        "Degradation against alone", ("platform", "workload/phase", "metric",
                                      "alone mean ± 95% CI", "scenario",
                                      "in scenario", "degradation % [95% CI]", "n alone/sc."),
        rows, left=3,
        note="degradation: (alone - scenario) / alone for throughputs, (scenario - alone) / "
             "alone for times; positive = worse. Interval: delta method (none with a "
             "single repetition).")


def rate_sweep_table(sweep: RateSweep) -> TextTable:
    """Seed 003 Fig. 20: one row per neighbour rate."""
    rows = tuple(
        ("; ".join(r.rates), r.platform,
         MISSING_BASELINE if r.ratio.target_ratio is None else mean_ci_text(r.ratio.target_ratio),
         "; ".join(f"{nb.label}: {_ratio_text(nb.ratio)}" for nb in r.ratio.neighbours),
         ("; ".join(r.ratio.missing) if r.ratio.aggregated is None
          else mean_ci_text(r.ratio.aggregated)),
         _ratio_text(r.ratio.fairness),
         str(r.ratio.aggregated.n if r.ratio.aggregated else 0))
        for r in sweep.rows)
    return TextTable(
        f"Aggregated throughput ratio over neighbour rate (seed 003 Fig. 20): "
        f"{sweep.platform} {sweep.workload}/{sweep.phase}",
        ("neighbour rate", "platform", "target / alone max", "neighbours / alone max",
         "aggregated ratio ± 95% CI", "Jain fairness", "n"), rows, left=2,
        note="neighbour rate as declared (a % is of the maximum the platform sustained "
             "alone for the neighbour's file size, in the same round; the offered req/s "
             "is stored as nb<i>.load.offered_rps); each side's replies/s / the alone best "
             "for its file size, summed per repetition (see the aggregated ratio table).")


def _ratio_text(summary: Summary | None) -> str:
    return "-" if summary is None else mean_ci_text(summary)


def _neighbour_text(nb: NeighbourRatio) -> str:
    size = "?" if nb.file_kb is None else file_phase(nb.file_kb)
    ratio = MISSING_BASELINE if nb.ratio is None else mean_ci_text(nb.ratio)
    base = "" if nb.baseline is None else f" / {fmt_value(nb.baseline)}"
    return f"{nb.label} {size}: {fmt_value(nb.rate.mean)}{base} = {ratio}"


def aggregated_ratio_table(items: Sequence[AggregatedRatio]) -> TextTable:
    """One row per (cell, phase): each side's ratio and their sum."""
    rows = tuple(
        (a.platform, f"{a.workload}/{a.phase}",
         "-" if a.target is None else fmt_value(a.target.mean),
         MISSING_BASELINE if a.target_baseline is None else fmt_value(a.target_baseline),
         MISSING_BASELINE if a.target_ratio is None else mean_ci_text(a.target_ratio),
         "; ".join(_neighbour_text(nb) for nb in a.neighbours),
         ("; ".join(a.missing) if a.aggregated is None else mean_ci_text(a.aggregated)),
         _ratio_text(a.fairness),
         str(a.aggregated.n if a.aggregated else 0))
        for a in items)
    return TextTable(
        "Aggregated throughput ratio (seed 003 Fig. 20)",
        ("platform", "workload/phase", "target replies/s", "alone best",
         "target ratio", "neighbours: replies/s / alone best = ratio",
         "aggregated ratio ± 95% CI", "Jain fairness", "n"), rows, left=2,
        note="alone best: the highest mean replies/s of the base platform alone over "
             "any web workload, for the same file size; ratios per repetition, then "
             "mean ± 95% CI (the baselines are taken as exact). Jain fairness: "
             "(Σx)² / (n Σx²) of the sides' replies/s per repetition (1 = equal shares, "
             "1/n = one side takes all), only when every side serves the same file size.")


def _start_text(start: OnDemandStart) -> str:
    at = "" if start.asked_at is None else f" (asked at {fmt_value(start.asked_at.mean)} s)"
    return mean_ci_text(start.startup) + at


def ondemand_table(items: Sequence[OnDemandRow]) -> TextTable:
    """One row per (cell, phase): each started guest's start-up time and the dip."""
    most = max((len(o.starts) for o in items), default=0)
    rows = []
    for o in items:
        starts = [_start_text(s) for s in o.starts] + ["-"] * (most - len(o.starts))
        rows.append((o.platform, f"{o.workload}/{o.phase}", *starts,
                     "-" if o.depth_pct is None else mean_ci_text(o.depth_pct),
                     "-" if o.length_s is None else mean_ci_text(o.length_s),
                     "-" if o.min_normalized is None else mean_ci_text(o.min_normalized),
                     str(o.n)))
    headers = ("platform", "workload/phase",
               *(f"guest {k + 1} start-up s" for k in range(most)),
               "dip depth %", "dip length s", "lowest normalized", "n")
    return TextTable("Guests started on demand (seed 003 Fig. 14)", headers, tuple(rows),
                     left=2, note="start-up: create -> agent ready; dip: the target's 1 s "
                     "throughput buckets against the median before the first start.")


def _series_order(name: str) -> tuple[int, str]:
    """Throughput first, then NICs, host CPU and the thread monitors (qemu, nb<i>)."""
    monitor = name.split(":", 1)[0]
    rank = {"throughput": 0, "net": 1, "host.cpu": 2, "qemu": 3}.get(monitor, 4)
    return rank, name


def cov_table(items: Sequence[CovRow]) -> TextTable:
    """The main series' CoV (mean over the repetitions ± 95 % CI): one row per (cell,
    phase), one column per series, so scenarios read side by side (seed 003 Fig. 11)."""
    main = [c for c in items if is_main_cov(c)]
    columns = sorted({f"{c.monitor}:{c.key}" for c in main}, key=_series_order)
    grouped: dict[tuple[str, str, str], dict[str, CovRow]] = defaultdict(dict)
    for c in main:
        grouped[(c.platform, c.workload, c.phase)][f"{c.monitor}:{c.key}"] = c
    rows = []
    for (platform, workload, phase), found in grouped.items():
        reps = max(c.summary.n for c in found.values())
        rows.append((platform, f"{workload}/{phase}",
                     *(mean_ci_text(found[n].summary) if n in found else "-"
                       for n in columns), str(reps)))
    return TextTable("CoV % over the measured window (seed 003 §4.3)",
                     ("platform", "workload/phase", *columns, "n"), tuple(rows), left=2,
                     note="CoV = sd / mean of one repetition's samples, then mean ± 95% CI "
                          "over the repetitions; every series is in `hvbench report "
                          "--format json`.")


def weights_text_table(table: WeightsTable) -> TextTable:
    """Metrics as rows, weights variants (``io:target:neighbours``) as columns."""
    headers = ("metric", *(f"{label} ({name})" for label, name in table.columns))
    rows = tuple((label, *("-" if s is None else mean_ci_text(s) for s in cells))
                 for label, cells in table.rows)
    return TextTable(f"CPU weights io:target:neighbours, {table.platform} "
                     f"{table.workload}/{table.phase} (seed 003 Table 5)", headers, rows)


def neighbour_threads_table(item: NeighbourThreads) -> TextTable:
    """Neighbour and thread class as rows, the thread metrics as columns (means over
    the repetitions; ``--format json`` has each one's 95 % CI)."""
    rows = tuple((nb, cls, *("-" if s is None else fmt_value(s.mean) for s in cells))
                 for nb, cls, cells in item.rows)
    n = max((s.n for _, _, cells in item.rows for s in cells if s is not None), default=0)
    note = (f"mean of {n} repetition(s); cs = context switches (voluntary: the thread "
            "blocked or slept; involuntary: it was preempted)")
    if item.wakeups_known is None:
        note += "; context switches and wake-ups were not sampled by this run's hvbench"
    elif not item.wakeups_known:
        note += ("; wake-ups not measured: this kernel keeps no nr_wakeups in "
                 "/proc/PID/sched (CONFIG_SCHEDSTATS, kernel.sched_schedstats)")
    return TextTable(f"QEMU threads of the neighbours, {item.platform} "
                     f"{item.workload}/{item.phase} (seed 003 Figs 11-14)",
                     ("neighbour", "class", *(h for _, h in NEIGHBOUR_THREAD_COLUMNS)),
                     rows, left=2, note=note)


def scenario_tables(report: ScenarioReport, *, cov: bool = False) -> list[TextTable]:
    """The tables present, in the order the reports print them (the CoV table only on
    request: the terminal report does not load samples)."""
    tables = []
    if report.degradation:
        tables.append(degradation_table(report.degradation))
    if report.ratios:
        tables.append(aggregated_ratio_table(report.ratios))
    tables += [rate_sweep_table(s) for s in report.sweeps]
    if report.ondemand:
        tables.append(ondemand_table(report.ondemand))
    tables += [weights_text_table(w) for w in report.weights]
    tables += [neighbour_threads_table(n) for n in report.neighbours]
    return tables + cov_tables(report) if cov else tables


def cov_tables(report: ScenarioReport) -> list[TextTable]:
    """The CoV table, when a main series has one (else nothing)."""
    return [cov_table(report.cov)] if any(is_main_cov(c) for c in report.cov) else []


def _s(summary: Summary | None) -> dict[str, Any] | None:
    return None if summary is None else asdict(summary)


def scenario_json(report: ScenarioReport) -> dict[str, Any]:
    """The scenario tables as plain data (``--format json``), every CoV series included."""
    return {
        "degradation": [
            {"platform": d.platform, "scenario": d.scenario, "workload": d.workload,
             "phase": d.phase, "metric": d.metric, "higher_is_better": d.higher_is_better,
             "alone": _s(d.alone), "in_scenario": _s(d.other), "degradation_pct": d.pct,
             "degradation_pct_ci95": [d.pct_low, d.pct_high], "pct_of_alone": d.pct_of_alone}
            for d in report.degradation],
        "aggregated_ratio": [
            {"cell": a.cell, "platform": a.platform, "workload": a.workload,
             "phase": a.phase, "target_replies_s": _s(a.target),
             "target_baseline": a.target_baseline, "target_ratio": _s(a.target_ratio),
             "neighbours": [{"label": n.label, "file_kb": n.file_kb,
                             "replies_per_s": _s(n.rate), "baseline": n.baseline,
                             "ratio": _s(n.ratio)} for n in a.neighbours],
             "aggregated": _s(a.aggregated), "missing": list(a.missing),
             "jain_fairness": _s(a.fairness)}
            for a in report.ratios],
        "rate_sweeps": [
            {"platform": w.platform, "workload": w.workload, "phase": w.phase,
             "rows": [{"neighbour_rates": list(r.rates), "platform": r.platform,
                       "cell": r.ratio.cell, "target_ratio": _s(r.ratio.target_ratio),
                       "neighbour_ratios": [{"label": n.label, "file_kb": n.file_kb,
                                             "ratio": _s(n.ratio)}
                                            for n in r.ratio.neighbours],
                       "aggregated": _s(r.ratio.aggregated),
                       "jain_fairness": _s(r.ratio.fairness)} for r in w.rows]}
            for w in report.sweeps],
        "ondemand": [
            {"cell": o.cell, "platform": o.platform, "workload": o.workload, "phase": o.phase,
             "starts": [{"index": s.index, "asked_at_s": _s(s.asked_at),
                         "startup_s": _s(s.startup)} for s in o.starts],
             "dip_depth_pct": _s(o.depth_pct), "dip_length_s": _s(o.length_s),
             "dip_min_normalized": _s(o.min_normalized), "dip_baseline": _s(o.baseline),
             "n": o.n}
            for o in report.ondemand],
        "weights": [
            {"platform": w.platform, "workload": w.workload, "phase": w.phase,
             "columns": [{"weights": label, "scenario": name} for label, name in w.columns],
             "rows": [{"metric": label, "values": [_s(s) for s in cells]}
                      for label, cells in w.rows]}
            for w in report.weights],
        "cov": [
            {"cell": c.cell, "platform": c.platform, "workload": c.workload, "phase": c.phase,
             "monitor": c.monitor, "key": c.key, "cov_pct_per_repetition":
             list(c.per_repetition), "cov_pct": _s(c.summary), "points": c.points,
             "main": is_main_cov(c)}
            for c in report.cov],
        "neighbour_threads": [
            {"platform": n.platform, "workload": n.workload, "phase": n.phase,
             "wakeups_known": n.wakeups_known,
             "rows": [{"neighbour": nb, "class": cls,
                       **{key: _s(cell) for (key, _), cell
                          in zip(NEIGHBOUR_THREAD_COLUMNS, cells, strict=True)}}
                      for nb, cls, cells in n.rows]}
            for n in report.neighbours],
    }
