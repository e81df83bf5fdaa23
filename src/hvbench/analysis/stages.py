"""Stages of one measured window (seed 004 Figs. 1-7): host per-core CPU while the CPU
test goes idle -> one guest busy -> both busy, and each guest's bandwidth while a second
guest's iperf3 starts next to the first.

A scenario's cpu and net neighbours with ``start_after_s`` start their load that many
seconds into every measured window; the run stores when each really started
(``nb<i>.cpu.started_at_s``, ``nb<i>.net.started_at_s``: seconds on the window's sample
axis). Those marks, not the series, cut the window into stages: ``idle`` (before the
first start), then one stage per start named by the neighbours busy in it (``nb0``,
``nb0+nb1``). Each stage's mean of the host CPU series (``host.cpu``: ``busy_pct`` and
``cpu<n>.busy_pct``), of each guest's vCPU threads (monitor ``qemu`` for the target,
``nb<i>`` for a neighbour: ``vcpu.cpu_pct``) and, when a net neighbour is staged, of
each guest's traffic (monitor ``net``: rx + tx Mbit/s of its taps, ``guest-tap<j>`` for
the target, ``nb<i>-tap<j>`` for a neighbour, and the guests' sum) is computed per
repetition, then summarized over the repetitions. A series row covers the interval
since the previous row; rows whose interval spans a mark are left out, so a stage mean
never mixes two stages. Pure.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from hvbench.analysis.scenarios import SampleLike
from hvbench.analysis.stats import Summary, summarize
from hvbench.analysis.summaries import Row, phase_key

__all__ = [
    "GUESTS_MBIT",
    "STAGE_MONITORS",
    "Stage",
    "StageRow",
    "StageWindow",
    "column_key",
    "is_stage_mark",
    "stage_rows",
    "stage_windows",
    "window_stages",
]

_MARK = re.compile(r"^(nb\d+)\.(cpu|net)\.started_at_s$")
_CORE = re.compile(r"^cpu(\d+)\.busy_pct$")
_GUEST = re.compile(r"^(qemu|nb\d+)$")
_TAP = re.compile(r"^(guest|nb\d+)-tap\d+\.(?:rx|tx)_mbit_s$")
#: The column of the guests' summed traffic.
GUESTS_MBIT = "guests Mbit/s"
#: The stage before the first staged start.
IDLE = "idle"
#: The sample monitors (fnmatch patterns) the stages read.
STAGE_MONITORS = ("host.cpu", "qemu", "nb[0-9]*", "net")


def is_stage_mark(metric: str) -> bool:
    """True for a stored stage start (``nb<i>.cpu.started_at_s``, ``nb<i>.net...``)."""
    return _MARK.match(metric) is not None


@dataclass(frozen=True)
class Stage:
    """One stage of a window: its name and [start, end) in seconds on the sample axis."""

    name: str
    start: float
    end: float


def window_stages(marks: Mapping[str, float], end: float) -> list[Stage]:
    """The stages of a window from its marks (neighbour label -> started at s) and its
    last sample time: ``idle`` up to the first mark, then one stage per mark named by
    every neighbour started so far, in start order."""
    order = sorted(marks.items(), key=lambda kv: (kv[1], _label_key(kv[0])))
    bounds = [0.0, *(at for _, at in order), max(end, *(at for _, at in order), 0.0)]
    names = [IDLE] + ["+".join(label for label, _ in order[:k + 1]) for k in range(len(order))]
    return [Stage(name, bounds[k], bounds[k + 1]) for k, name in enumerate(names)]


def _label_key(label: str) -> int:
    return int(label[2:]) if label[2:].isdigit() else 0


def _column(monitor: str, key: str) -> str | None:
    """The table column a sampled value belongs to, or None."""
    if monitor == "host.cpu":
        if key == "busy_pct":
            return "host busy %"
        core = _CORE.match(key)
        return f"cpu{core.group(1)} busy %" if core else None
    if _GUEST.match(monitor) and key == "vcpu.cpu_pct":
        return f"{'target' if monitor == 'qemu' else monitor} vCPU %"
    if monitor == "net":
        tap = _TAP.match(key)
        return f"{'target' if tap.group(1) == 'guest' else tap.group(1)} Mbit/s" if tap \
            else None
    return None


def _row_columns(monitor: str, values: Mapping[str, object]) -> dict[str, float]:
    """One sample's values by column: a guest's taps, rx and tx, add up to its Mbit/s,
    and every guest's to the guests' sum (one row of the NIC sampler holds them all)."""
    out: dict[str, float] = {}
    for name, value in values.items():
        column = _column(monitor, name)
        if column is not None and isinstance(value, int | float):
            out[column] = out.get(column, 0.0) + float(value)
    traffic = [v for c, v in out.items() if c.endswith(" Mbit/s")]
    if traffic:
        out[GUESTS_MBIT] = sum(traffic)
    return out


def column_key(column: str) -> tuple[int, int, str]:
    """Sort key of a stage column: host busy %, the cores in order, the guests' vCPU %,
    then their Mbit/s and the guests' sum."""
    if column == "host busy %":
        return (0, 0, column)
    core = re.match(r"^cpu(\d+) ", column)
    if core:
        return (1, int(core.group(1)), column)
    if column == GUESTS_MBIT:
        return (4, 0, column)
    who = column.split(maxsplit=1)[0]
    group = 3 if column.endswith(" Mbit/s") else 2
    return (group, 0 if who == "target" else 1 + _label_key(who), column)


@dataclass(frozen=True)
class StageWindow:
    """One repetition's window with stages: its stages and its series per column
    (``(t, value)`` rows, time-ordered)."""

    cell: str
    platform: str
    workload: str
    phase: str
    repetition: int
    stages: tuple[Stage, ...]
    series: Mapping[str, tuple[tuple[float, float], ...]]

    def stage_means(self) -> dict[str, dict[str, float]]:
        """stage -> column -> mean of the rows whose whole interval lies in the stage."""
        out: dict[str, dict[str, float]] = {}
        for stage in self.stages:
            means: dict[str, float] = {}
            for column, points in self.series.items():
                inside = [v for (t0, _), (t1, v) in zip(((0.0, 0.0), *points), points,
                                                        strict=False)
                          if t0 >= stage.start and t1 <= stage.end]
                if inside:
                    means[column] = sum(inside) / len(inside)
            out[stage.name] = means
        return out


def stage_windows(rows: Sequence[Row], samples: Iterable[SampleLike],
                  cells: Mapping[str, tuple[str, str]]) -> list[StageWindow]:
    """Every (cell, repetition, phase) window that has stage marks, with its host CPU
    and vCPU series, and its guests' traffic where a net neighbour's start is among the
    marks (a CPU test's stages leave the target's own traffic out); windows without
    marks are left out."""
    marks: dict[tuple[str, int, str], dict[str, float]] = defaultdict(dict)
    net_staged: set[tuple[str, int, str]] = set()
    for row in rows:
        found = _MARK.match(row.metric)
        if found and row.cell in cells:
            key = (row.cell, row.repetition, row.phase)
            marks[key][found.group(1)] = row.value
            if found.group(2) == "net":
                net_staged.add(key)
    series: dict[tuple[str, int, str], dict[str, list[tuple[float, float]]]] = defaultdict(
        lambda: defaultdict(list))
    for s in samples:
        key = (s.cell, s.repetition, s.phase)
        if key not in marks or (s.monitor == "net" and key not in net_staged):
            continue
        for column, value in _row_columns(s.monitor, s.values).items():
            series[key][column].append((s.t, value))
    out = []
    for key in sorted(marks, key=lambda k: (k[0], phase_key(k[2]), k[1])):
        cell, rep, phase = key
        columns = {c: tuple(sorted(p)) for c, p in sorted(
            series.get(key, {}).items(), key=lambda kv: column_key(kv[0]))}
        end = max((p[-1][0] for p in columns.values() if p), default=0.0)
        out.append(StageWindow(cell, *cells[cell], phase, rep,
                               tuple(window_stages(marks[key], end)), columns))
    return out


@dataclass(frozen=True)
class StageRow:
    """One stage of a cell's phase over the repetitions: its length and each column's
    stage mean (mean ± CI over the repetitions)."""

    cell: str
    platform: str
    workload: str
    phase: str
    stage: str
    seconds: Summary
    means: Mapping[str, Summary]


def stage_rows(windows: Sequence[StageWindow]) -> list[StageRow]:
    """Per (cell, phase, stage) in stage order: the repetitions' stage means summarized."""
    grouped: dict[tuple[str, str], list[StageWindow]] = defaultdict(list)
    for w in windows:
        grouped[(w.cell, w.phase)].append(w)
    out = []
    for (cell, phase), reps in grouped.items():
        names = list(dict.fromkeys(s.name for w in reps for s in w.stages))
        columns = list(dict.fromkeys(c for w in reps for c in w.series))
        per_rep = [w.stage_means() for w in reps]
        for name in names:
            lengths = [s.end - s.start for w in reps for s in w.stages if s.name == name]
            means = {c: summarize(values) for c in columns if (values := [
                m[name][c] for m in per_rep if c in m.get(name, {})])}
            out.append(StageRow(cell, reps[0].platform, reps[0].workload, phase, name,
                                summarize(lengths), means))
    return out

