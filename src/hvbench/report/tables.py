"""Turning stored measurements into what people read: rich tables, CSV, JSON.

Pure: every function takes rows or summaries (:mod:`hvbench.analysis.summaries`) and
returns a table or a string; the CLI prints.
One table per workload phase with the platforms as columns (as the seeds' Figures 5-10
put bars side by side); with more than :data:`MAX_COLUMNS` platforms the table turns so
that platforms are rows, which a terminal can still show.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rich.table import Table

from hvbench.analysis.layers import LayerRow
from hvbench.analysis.stats import Summary, percent_of_summary
from hvbench.analysis.summaries import (
    PhaseStats,
    Row,
    fmt_value,
    phase_key,
    phase_stats,
    warnings_for,
)
from hvbench.report.text import TextTable, mean_ci_text, phase_rows

# Re-exported: the summaries moved to hvbench.analysis.summaries.
__all__ = [
    "COMPACT_ROWS",
    "MAX_COLUMNS",
    "TCG_BANNER",
    "PhaseStats",
    "Row",
    "fmt_value",
    "mean_ci_text",
    "phase_key",
    "phase_stats",
    "phase_table",
    "rich_table",
    "rows_csv",
    "summary_json",
    "warnings_for",
]

MAX_COLUMNS = 5
#: The rows kept (with their short column names) when platforms become rows.
COMPACT_ROWS = {"% of native": "% native", "CoV %": "CoV%", "host avgrq-sz": "avgrq-sz",
                "host avgqu-sz": "avgqu-sz", "host %util": "%util", "n": "n", "Why": "why"}
TCG_BANNER = (
    "TCG (software emulation): guest numbers measure emulation, not virtualization"
)


def phase_table(stats: PhaseStats, native: str | None,
                why: Mapping[str, str] | None = None, *, extra: bool = False) -> Table:
    """One phase as a rich Table: platforms as columns, or as rows when there are many.
    ``why``: platform -> the dominant cause of its verdict, the last row when a guest
    has one; ``extra``: the headline's median, min and max rows too."""
    rows = phase_rows(stats, native, extra=extra)
    if why and any(w not in ("-", "baseline") for w in why.values()):
        rows.append(("Why", [why.get(p, "-") for p in stats.platforms]))
    title = f"{stats.workload} / {stats.phase}"
    if len(stats.platforms) <= MAX_COLUMNS:
        table = Table(title=title, title_justify="left")
        table.add_column("")
        for platform in stats.platforms:
            table.add_column(platform, justify="right", overflow="fold")
        for label, texts in rows:
            table.add_row(label, *texts)
        return table
    # Many platforms: one row each, with only the columns a terminal can hold.
    rows = [(label, texts) for label, texts in rows if label.split(" (")[0] in COMPACT_ROWS
            or label.endswith(("95% CI", " median", " min", " max"))]
    table = Table(title=title, title_justify="left")
    table.add_column("platform", overflow="fold")
    for label, _ in rows:
        header = COMPACT_ROWS.get(label.split(" (")[0], label.replace(" mean ± 95% CI", " ±CI"))
        table.add_column(header, justify="right", overflow="fold")
    for index, platform in enumerate(stats.platforms):
        table.add_row(platform, *(texts[index] for _, texts in rows))
    return table


def rows_csv(rows: Iterable[Row], run_id: str) -> str:
    """One CSV line per measurement with all its dimensions."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["run", "cell", "platform", "workload", "repetition", "phase", "metric",
                     "value", "unit"])
    for r in rows:
        writer.writerow([run_id, r.cell, r.platform, r.workload, r.repetition, r.phase,
                         r.metric, repr(r.value), r.unit])
    return buffer.getvalue()


def summary_json(stats: Sequence[PhaseStats], natives: Mapping[str, str | None],
                 run: Mapping[str, Any], extra: Mapping[str, Any] | None = None) -> str:
    """Every summary with its % of native, plus the run's environment and, under their
    own keys, ``extra`` sections (the scenario tables)."""
    phases = []
    for phase in stats:
        native = natives.get(phase.workload)
        metrics: dict[str, Any] = {}
        for metric, per in phase.metrics.items():
            metrics[metric] = {p: _summary_dict(s, per, native, p) for p, s in per.items()}
        phases.append({"workload": phase.workload, "phase": phase.phase,
                       "platforms": phase.platforms, "metrics": metrics})
    return json.dumps({"run": run, "phases": phases, **(extra or {})}, indent=2)


def _summary_dict(summary: Summary, per: Mapping[str, Summary], native: str | None,
                  platform: str) -> dict[str, Any]:
    data: dict[str, Any] = dict(summary.__dict__)
    if native and native in per and per[native].mean:
        pct, low, high = percent_of_summary(summary, per[native])
        data.update(pct_of_native=pct, pct_of_native_ci95=[low, high])
    data["platform"] = platform
    return data


def rich_table(table: TextTable) -> Table:
    """A :class:`~hvbench.report.text.TextTable` for the terminal."""
    out = Table(title=table.title, title_justify="left", caption=table.note or None,
                caption_justify="left")
    for index, header in enumerate(table.headers):
        out.add_column(header, justify="left" if index < table.left else "right",
                       overflow="fold")
    for row in table.rows:
        out.add_row(*row)
    return out


LAYER_TITLE = "Latency by layer (guest disk cells)"
LAYER_HEADERS = ("cell", "fio clat ms", "in the guest ms", "virt. path ms",
                 "host device ms", "in flight: fio, guest, host")


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def layer_table(rows: Sequence[LayerRow]) -> TextTable:
    """The latency split of every guest disk cell (``res.lat.*``): what fio waited per
    request, and how much of it each measured layer held; a layer not measured is
    ``-``, never estimated."""
    body = tuple(
        (f"{r.platform}/{r.workload}/{r.phase}", _ms(r.clat_ms), _ms(r.guest_ms),
         _ms(r.virt_ms), _ms(r.device_ms),
         ", ".join(_ms(v) for v in (r.depth, r.guest_queue, r.host_queue)))
        for r in rows)
    return TextTable(LAYER_TITLE, LAYER_HEADERS, body, note=(
        "in the guest = fio completion latency - guest device await; virt. path "
        "(virtualization) = guest await - host device await; host device = its await. "
        "In flight: fio's "
        "mean iodepth, the guest's and the host device's avgqu-sz over the window. The "
        "host device is device-wide: others' I/O on it, or the host page cache, shows "
        "as a small or negative virtualization path."))
