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

from rich import box
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
from hvbench.report.propagation import SHARE_HEADERS, propagation_fit_rows
from hvbench.report.text import TextTable, mean_ci_text, phase_rows

# Re-exported: the summaries moved to hvbench.analysis.summaries.
__all__ = [
    "COMPACT_ROWS",
    "MAX_COLUMNS",
    "PROPAGATION_SHARE_NOTE",
    "PROPAGATION_SHARE_TITLE",
    "TCG_BANNER",
    "PhaseStats",
    "Row",
    "fmt_value",
    "mean_ci_text",
    "phase_key",
    "phase_stats",
    "phase_table",
    "propagation_fit_table",
    "propagation_fit_table_of",
    "propagation_share_table_of",
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


PROPAGATION_FIT_TITLE = ("propagation: total time against image size, least-squares fits "
                         "(seed 000 Fig. 3)")
#: The columns of :func:`hvbench.report.propagation.fit_rows`, short enough for an
#: 80-column terminal.
PROPAGATION_FIT_HEADERS = ("platform", "method", "fit", "equation (y s, x bytes)", "R²",
                           "overhead s")
PROPAGATION_FIT_NOTE = ("y = initial + transfer + terminal seconds of a repetition, x = the "
                        "image size in bytes (size_bytes moved, else the variant's size); "
                        "overhead = the intercept, the time at size 0: what the manager "
                        "spends besides moving bytes; the theoretical NIC needs "
                        "x·8 / link_rate_bits seconds. Rows labelled (transfer only) fit the "
                        "transfer phase alone against the bytes moved (seed 000 Fig. 3b).")


def propagation_fit_table(rows: Sequence[Row]) -> Table | None:
    """The propagation fits for the terminal, as the HTML report's table: per
    (platform, method) the linear and quadratic least-squares equation, R² and
    intercept (:func:`hvbench.report.propagation.fit_rows`), then the theoretical NIC line of each
    stored ``link_rate_bits``; None when the run has no propagation workload."""
    return propagation_fit_table_of(propagation_fit_rows(rows))


def propagation_fit_table_of(found: Sequence[Sequence[str]]) -> Table | None:
    """:func:`propagation_fit_table` of rows already computed (None for none)."""
    if not found:
        return None
    # No vertical rules and a wide enough equation column: a linear equation stays
    # on one line in 80 columns.
    table = Table(title=PROPAGATION_FIT_TITLE, title_justify="left",
                  caption=PROPAGATION_FIT_NOTE, caption_justify="left", box=box.SIMPLE_HEAD)
    width = min(32, max(len(texts[3]) for texts in found if texts[2] != "quadratic"))
    for index, header in enumerate(PROPAGATION_FIT_HEADERS):
        table.add_column(header, justify="left" if index < 4 else "right", overflow="fold",
                         min_width=width if index == 3 else None)
    for texts in found:
        table.add_row(*texts)
    return table


PROPAGATION_SHARE_TITLE = ("propagation: share of each phase in the propagation time "
                           "(seed 000 Fig. 4)")
PROPAGATION_SHARE_NOTE = ("% of initial + transfer + terminal per repetition, mean ± 95% CI "
                          "over the n repetitions; shutdown is not counted (propagation "
                          "ends with a running guest); propagation s = that sum.")


def propagation_share_table_of(found: Sequence[Sequence[str]]) -> Table | None:
    """The :data:`~hvbench.report.propagation.SHARE_HEADERS` rows for the terminal (None
    for none)."""
    if not found:
        return None
    table = Table(title=PROPAGATION_SHARE_TITLE, title_justify="left",
                  caption=PROPAGATION_SHARE_NOTE, caption_justify="left",
                  box=box.SIMPLE_HEAD)
    for index, header in enumerate(SHARE_HEADERS):
        table.add_column(header, justify="left" if index < 2 else "right", overflow="fold")
    for texts in found:
        table.add_row(*texts)
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
