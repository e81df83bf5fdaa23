"""The report's figures as SVG text: pure functions from numbers to a document.

matplotlib draws them through its object API (``Figure`` and the SVG canvas that
``savefig(format="svg")`` picks): pyplot is never imported, so no GUI backend is ever
loaded and no figure registry or global backend is touched. Style settings apply only
inside :func:`matplotlib.rc_context`, so nothing leaks into the caller's matplotlib
state. Text is drawn as paths (``svg.fonttype = "path"``): the SVG needs no font and
fetches nothing. Ids are salted with a constant and the date left out, so the same
numbers give the same bytes.

The trend plot's fits, equations and reference lines are :mod:`hvbench.analysis.trends`'s
(re-exported here), so the terminal report prints the same equations without matplotlib.

Invalid input (no bars, mismatched lengths) raises :class:`PlotError`, a ``SpecError``:
callers build the inputs from stored rows, so it means a bug or an empty selection.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hvbench.analysis.latency import tail_points
from hvbench.analysis.trends import ReferenceLine, fits_for
from hvbench.errors import SpecError
from hvbench.report.fits import fit_equation, fit_polynomial

# matplotlib (~0.3 s with numpy, fontTools, PIL) is imported by the functions that draw:
# every command imports this module through the kinds' report parts, few draw.
if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "NATIVE_COLOR",
    "BarChart",
    "Interval",
    "LatencyCurve",
    "Line",
    "Panel",
    "PlotError",
    "ReferenceLine",
    "TrendSeries",
    "VLine",
    "fit_equation",
    "fit_polynomial",
    "fits_for",
    "grouped_bars",
    "latency_cdf",
    "latency_figure",
    "platform_colors",
    "series_colors",
    "stacked_bars",
    "time_series_grid",
    "trend_lines",
]

_RC: dict[Any, Any] = {
    "svg.fonttype": "path",
    "svg.hashsalt": "hvbench",
    "font.family": "DejaVu Sans",  # bundled with matplotlib: never a system lookup
    "font.size": 8.5,
    "axes.titlesize": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "axes.grid.axis": "y",
    "grid.alpha": 0.35,
    "legend.fontsize": 7.5,
    "legend.frameon": False,
}
#: Above this max/min ratio of positive values a bar chart switches to a log axis
#: (a page-cache-fed native platform next to TCG guests differs by 100x).
LOG_RATIO = 50.0
_MAX_WIDTH_IN = 22.0


class PlotError(SpecError):
    """The data cannot be drawn: nothing to plot, or inconsistent inputs."""


@dataclass(frozen=True)
class Interval:
    """A mean with an optional interval (e.g. the 95 % CI); None bounds draw no bar."""

    value: float
    low: float | None = None
    high: float | None = None


@dataclass(frozen=True)
class BarChart:
    """Grouped bars: one group per x label, one bar per series inside each group."""

    title: str
    ylabel: str
    groups: Sequence[str]
    series: Sequence[str]
    values: Mapping[tuple[str, str], Interval]
    #: A dashed horizontal line (100 for "% of native").
    reference: float | None = None
    #: series -> colour (the report's :func:`platform_colors`); others get the first
    #: colours this map does not use.
    colors: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Line:
    """One line of a time-series panel."""

    label: str
    xs: Sequence[float]
    ys: Sequence[float]


@dataclass(frozen=True)
class VLine:
    """A vertical marker of a panel (an event, e.g. a guest asked for): dashed, or
    dotted when ``dotted`` (e.g. the same guest ready)."""

    x: float
    dotted: bool = False


@dataclass(frozen=True)
class Panel:
    """One small plot of a grid: its title, its lines and its vertical markers."""

    title: str
    lines: Sequence[Line]
    vlines: Sequence[VLine] = ()


@dataclass(frozen=True)
class TrendSeries:
    """Points of one series (a platform, or a platform and method) for trend fitting:
    (x, y) pairs."""

    label: str
    points: Sequence[tuple[float, float]]


@contextmanager
def _style() -> Iterator[None]:
    from matplotlib import rc_context  # noqa: PLC0415 - deferred

    with rc_context(_RC):
        yield


def _figure(width: float, height: float) -> Figure:
    """A new figure of that size in inches, drawn on matplotlib's SVG canvas."""
    from matplotlib.figure import Figure  # noqa: PLC0415 - deferred

    return Figure(figsize=(width, height))


def _svg(fig: Figure, *, tight: bool = True) -> str:
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None},
                bbox_inches="tight" if tight else None)
    return buffer.getvalue()


def _colors(count: int) -> list[str]:
    """Distinct colours as #rrggbb: tab10 up to 10, tab20 beyond (cycled if still
    more)."""
    from matplotlib import colormaps  # noqa: PLC0415 - deferred
    from matplotlib.colors import to_hex  # noqa: PLC0415 - as colormaps

    cmap = colormaps["tab10" if count <= 10 else "tab20"]
    size = 10 if count <= 10 else 20
    return [to_hex(cmap(i % size)) for i in range(count)]


#: Native's colour in every figure: the baseline reads the same everywhere.
NATIVE_COLOR = "#404040"


def platform_colors(platforms: Sequence[str], natives: Iterable[str | None]
                    ) -> dict[str, str]:
    """One colour per platform for every figure of a report: the native baselines
    :data:`NATIVE_COLOR`, the others the tab10 (tab20 beyond 10) colours in the order
    given."""
    native = {n for n in natives if n}
    guests = [p for p in dict.fromkeys(platforms) if p not in native]
    out = dict(zip(guests, _colors(len(guests)), strict=True))
    out.update({p: NATIVE_COLOR for p in platforms if p in native})
    return out


def series_colors(series: Sequence[str], colors: Mapping[str, str]) -> list[str]:
    """A colour per series: its own from ``colors``, else the first of :func:`_colors`
    that ``colors`` does not give to another series of this figure."""
    taken = {colors[s] for s in series if s in colors}
    spare = iter([c for c in _colors(len(series) + len(taken)) if c not in taken]
                 + _colors(len(series)))
    return [colors[s] if s in colors else next(spare) for s in series]


def _use_log(values: Sequence[float]) -> bool:
    positive = [v for v in values if v > 0]
    return len(positive) >= 2 and max(positive) / min(positive) > LOG_RATIO


#: A bar chart's plot area: this much per bar and per group gap, at least one group's
#: room, at most what :data:`_MAX_WIDTH_IN` leaves; the figure adds fixed margins (the
#: y axis on the left; the title and the legend outside may run past the plot area, the
#: SVG's tight box keeps them). The page shows a figure at its own size, or scaled down
#: to its width: one bar is not drawn as wide as the page.
_BAR_IN, _GROUP_GAP_IN, _MIN_AXES_IN = 0.42, 0.35, 1.0
_LEFT_IN, _RIGHT_IN = 0.8, 0.2


def _bar_axes_in(groups: int, series: int) -> float:
    """Inches of plot area for ``groups`` x ``series`` bars."""
    content = _BAR_IN * groups * series + _GROUP_GAP_IN * groups
    return min(max(_MIN_AXES_IN, content), _MAX_WIDTH_IN - _LEFT_IN - _RIGHT_IN)


def grouped_bars(chart: BarChart) -> str:
    """Grouped bar chart with error bars where an interval is known; SVG text.

    The y axis turns logarithmic (and says so) when values span more than
    :data:`LOG_RATIO`. Raises :class:`PlotError` when there are no groups, series or values.
    """
    if not chart.groups or not chart.series or not chart.values:
        raise PlotError(f"{chart.title}: nothing to draw")
    with _style():
        axes_in = _bar_axes_in(len(chart.groups), len(chart.series))
        width = _LEFT_IN + axes_in + _RIGHT_IN
        fig = _figure(width, 3.6)
        fig.subplots_adjust(left=_LEFT_IN / width, right=(_LEFT_IN + axes_in) / width)
        ax = fig.add_subplot()
        log = _use_log([v.value for v in chart.values.values()])
        _draw_bars(ax, chart, log)
        ax.set_title(chart.title, loc="left")
        ax.set_ylabel(chart.ylabel + (" (log scale)" if log else ""))
        if chart.reference is not None:
            ax.axhline(chart.reference, color="0.3", linestyle="--", linewidth=0.8)
        if not log and all(v.value >= 0 for v in chart.values.values()):
            ax.set_ylim(bottom=0)  # a whisker below 0 is cut: throughputs are not negative
        _group_ticks(ax, chart.groups)
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
        return _svg(fig)


def _draw_bars(ax: Axes, chart: BarChart, log: bool) -> None:
    width = 0.8 / len(chart.series)
    floor = min((v.value for v in chart.values.values() if v.value > 0), default=1.0) / 2
    for index, (name, color) in enumerate(zip(chart.series,
                                              series_colors(chart.series, chart.colors),
                                              strict=True)):
        xs: list[float] = []
        heights: list[float] = []
        errors: tuple[list[float], list[float]] = ([], [])
        for group_index, group in enumerate(chart.groups):
            item = chart.values.get((group, name))
            if item is None:
                continue
            xs.append(group_index - 0.4 + width * (index + 0.5))
            heights.append(item.value)
            low = item.value if item.low is None else item.low
            high = item.value if item.high is None else item.high
            if log:
                low = max(low, floor)
            errors[0].append(max(item.value - low, 0.0))
            errors[1].append(max(high - item.value, 0.0))
        ax.bar(xs, heights, width=width * 0.95, color=color, label=name, log=log,
               yerr=[errors[0], errors[1]], capsize=2, error_kw={"linewidth": 0.8})


def _group_ticks(ax: Axes, groups: Sequence[str]) -> None:
    ax.set_xticks(range(len(groups)))
    long = len(groups) > 8 or max(len(g) for g in groups) > 12
    ax.set_xticklabels(groups, rotation=60 if long else 0, ha="right" if long else "center")
    ax.set_xlim(-0.6, len(groups) - 0.4)


def time_series_grid(title: str, ylabel: str, panels: Sequence[Panel],
                     columns: int = 4, *, xlabel: str = "seconds since the phase started",
                     reference: float | None = None,
                     panel_size: tuple[float, float] = (2.8, 1.9)) -> str:
    """Small multiples sharing their y axis: one panel per cell, one line per
    repetition (x in seconds since the phase started); SVG text. The lines' labels
    (the same in every panel) form one legend for the figure. ``reference`` draws a
    dashed horizontal line in every panel (1.0 for a normalized series); ``panel_size``
    is one panel's (width, height) in inches.

    Raises :class:`PlotError` when there is no panel or a line's xs and ys differ in length.
    """
    if not panels:
        raise PlotError(f"{title}: no time series to draw")
    for panel in panels:
        for line in panel.lines:
            if len(line.xs) != len(line.ys):
                raise PlotError(f"{title}: {panel.title} {line.label}: "
                                f"{len(line.xs)} times but {len(line.ys)} values")
    cols = min(columns, len(panels))
    rows = math.ceil(len(panels) / cols)
    panel_w, panel_h = panel_size
    width, height = panel_w * cols + 0.9, panel_h * rows + 0.9
    with _style():
        fig = _figure(width, height)
        # Fixed margins instead of a layout engine: a grid of 30 panels would cost
        # seconds of text measuring otherwise.
        fig.subplots_adjust(left=0.7 / width, right=0.98, bottom=0.45 / height,
                            top=1 - 0.6 / height, hspace=0.55, wspace=0.12)
        # One time axis for every panel: phases compare at a glance.
        axes = fig.subplots(rows, cols, sharex=True, sharey=True, squeeze=False)
        for index, ax in enumerate(axes.flat):
            if index < len(panels):
                _draw_panel(ax, panels[index], reference)
            else:
                ax.set_visible(False)
        for ax in axes[:, 0]:
            ax.set_ylabel(ylabel)
        handles, labels = axes.flat[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="upper right", ncols=min(len(labels), 8) or 1)
        fig.suptitle(title, x=0.01, y=1 - 0.12 / height, ha="left", va="top", fontsize=10)
        fig.supxlabel(xlabel, fontsize=8, y=0.05 / height, va="bottom")
        return _svg(fig, tight=False)


#: Line styles of a panel's lines (repetitions), cycled with :func:`_line_shades`.
_LINE_STYLES = ("-", "--", ":", "-.")


def _line_shades(count: int) -> list[str]:
    """Shades of purple for a panel's lines (repetitions, not platforms): the
    platforms' tab10 colours would read as platforms."""
    from matplotlib import colormaps  # noqa: PLC0415 - as _colors
    from matplotlib.colors import to_hex  # noqa: PLC0415 - as _colors

    cmap = colormaps["Purples"]
    return [to_hex(cmap(0.95 - 0.5 * i / max(count - 1, 1))) for i in range(count)]


def _draw_panel(ax: Axes, panel: Panel, reference: float | None = None) -> None:
    shades = _line_shades(len(panel.lines))
    for index, line in enumerate(panel.lines):
        ax.plot(line.xs, line.ys, linewidth=0.9, label=line.label, color=shades[index],
                linestyle=_LINE_STYLES[index % len(_LINE_STYLES)])
    for marker in panel.vlines:
        ax.axvline(marker.x, color="0.35", linewidth=0.8,
                   linestyle=":" if marker.dotted else "--")
    if reference is not None:
        ax.axhline(reference, color="0.6", linewidth=0.7, linestyle="--")
    ax.set_title(panel.title, fontsize=7.5, loc="left")
    ax.tick_params(labelsize=7)


def stacked_bars(title: str, ylabel: str, bars: Sequence[str], segments: Sequence[str],
                 values: Mapping[tuple[str, str], float]) -> str:
    """One bar per label, stacked from its segments in order (seed 000 Fig. 4); SVG text.

    A missing (bar, segment) value stacks nothing. Raises :class:`PlotError` when there
    are no bars or segments.
    """
    if not bars or not segments:
        raise PlotError(f"{title}: nothing to stack")
    with _style():
        fig = _figure(min(max(5.0, 1.2 + 0.55 * len(bars)), _MAX_WIDTH_IN), 3.6)
        ax = fig.add_subplot()
        bottoms = [0.0] * len(bars)
        for segment, color in zip(segments, _colors(len(segments)), strict=True):
            heights = [values.get((bar, segment), 0.0) for bar in bars]
            ax.bar(range(len(bars)), heights, bottom=bottoms, color=color, label=segment,
                   width=0.6)
            bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]
        ax.set_title(title, loc="left")
        ax.set_ylabel(ylabel)
        _group_ticks(ax, bars)
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
        return _svg(fig)


def trend_lines(title: str, xlabel: str, ylabel: str, series: Sequence[TrendSeries],
                references: Sequence[ReferenceLine] = ()) -> str:
    """Scatter of each series with its linear (solid) and quadratic (dashed) fits; the
    legend carries each fit's equation and R² (seed 000 Fig. 3). ``references`` are
    drawn dashed grey from x = 0 to the largest x. SVG text.

    Raises :class:`PlotError` when no series has a point.
    """
    if not any(s.points for s in series):
        raise PlotError(f"{title}: no points")
    with _style():
        fig = _figure(8.5, 4.2)
        ax = fig.add_subplot()
        for item, color in zip(series, _colors(len(series)), strict=True):
            _draw_trend(ax, item, color)
        high = max(p[0] for s in series for p in s.points)
        for ref in references:
            ax.plot([0.0, high], [ref.intercept, ref.intercept + ref.slope * high],
                    color="0.45", linestyle=(0, (4, 3)), linewidth=1.0,
                    label=f"{ref.label}: {fit_polynomial((ref.intercept, ref.slope))}")
        ax.set_title(title, loc="left")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
        return _svg(fig)


def _draw_trend(ax: Axes, item: TrendSeries, color: object) -> None:
    if not item.points:
        return
    xs = [p[0] for p in item.points]
    ax.scatter(xs, [p[1] for p in item.points], color=color, s=14, label=item.label)
    low, high = min(xs), max(xs)
    grid = [low + (high - low) * i / 50 for i in range(51)]
    for kind, fit in fits_for(item.points):
        ax.plot(grid, [fit.predict(x) for x in grid], color=color,
                linestyle="-" if kind == "linear" else "--", linewidth=1.0,
                label=f"{item.label} {kind}: {fit_equation(fit)}")


@dataclass(frozen=True)
class LatencyCurve:
    """One platform's completion-latency distribution: (ms, share completed) points."""

    label: str
    points: Sequence[tuple[float, float]]
    #: Drawn dashed: the baseline the others are read against.
    native: bool = False
    #: Its platform's colour in the report (None: the next free one).
    color: str | None = None


def latency_cdf(title: str, curves: Sequence[LatencyCurve], items: str = "I/Os") -> str:
    """Two panels side by side, both on a log latency axis: the CDF (share of ``items``
    done by a latency) and its tail (share still slower, log scale, so p99.9 and p99.99
    are as readable as the median). SVG text.

    Raises :class:`PlotError` when no curve has a point.
    """
    if not any(c.points for c in curves):
        raise PlotError(f"{title}: no latency points")
    with _style():
        return _svg(latency_figure(title, curves, items))


def latency_figure(title: str, curves: Sequence[LatencyCurve], items: str = "I/Os"
                   ) -> Figure:
    """:func:`latency_cdf`'s figure, not yet drawn (its panels share the latency axis)."""
    fig = _figure(10.0, 3.6)
    # One latency axis for both panels: a latency reads at the same place in each.
    body, tail = fig.subplots(1, 2, sharex=True)
    given = {c.label: c.color for c in curves if c.color}
    given.update({c.label: NATIVE_COLOR for c in curves if c.native and not c.color})
    colors = series_colors([c.label for c in curves], given)
    for curve, color in zip(curves, colors, strict=True):
        if not curve.points:
            continue
        style: dict[str, Any] = {"color": color}
        if curve.native:
            style["linestyle"] = "--"
        xs = [p[0] for p in curve.points]
        body.step(xs, [p[1] for p in curve.points], where="post", label=curve.label,
                  linewidth=1.2, **style)
        slow = tail_points(curve.points)
        if slow:
            tail.step([p[0] for p in slow], [p[1] for p in slow], where="post",
                      linewidth=1.2, **style)
    for ax in (body, tail):
        ax.set_xscale("log")
        ax.set_xlabel("completion latency (ms)")
        ax.grid(True, which="major", axis="both", alpha=0.35)
    body.set_ylabel(f"share of {items} completed")
    body.set_ylim(0.0, 1.0)
    tail.set_yscale("log")
    tail.set_ylabel(f"share of {items} slower")
    fig.suptitle(title, x=0.01, ha="left", fontsize=10)
    body.set_title("share completed", loc="left", fontsize=8.5)
    tail.set_title("tail: share still slower", loc="left", fontsize=8.5)
    # Below both panels: a legend inside would sit on the curves.
    fig.legend(loc="lower center", bbox_to_anchor=(0.5, -0.08),
               ncols=min(len(curves), 5) or 1)
    return fig


def objective_timeline(title: str, points: Sequence[tuple[int, str, float]],
                       native: float | None, winner: str | None) -> str:
    """A tuning run's objective per measurement, in the order measured (the winner's
    points highlighted, native as a dashed line); SVG text. Raises :class:`PlotError`
    when there are no points."""
    if not points:
        raise PlotError(f"{title}: nothing to draw")
    with _style():
        fig = _figure(7.5, 3.4)
        ax = fig.add_subplot()
        others = [(x, y) for x, name, y in points if name != winner]
        best = [(x, y) for x, name, y in points if name == winner]
        if others:
            ax.scatter([x for x, _ in others], [y for _, y in others], s=14, color="0.45",
                       label="configurations tried")
        if best:
            ax.scatter([x for x, _ in best], [y for _, y in best], s=22, color="tab:red",
                       label=f"winner ({winner})")
        if native is not None:
            ax.axhline(native, color="0.3", linestyle="--", linewidth=0.8, label="native")
        ax.set_title(title, loc="left")
        ax.set_xlabel("measurement (repetition) in the order run")
        from matplotlib.ticker import MaxNLocator  # noqa: PLC0415 - as _colors

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel("objective")
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
        return _svg(fig)


def axis_effect_bars(title: str, effects: Sequence[Any], native: float | None) -> str:
    """One bar per axis value: the mean objective of the configurations that had it
    (``effects``: :class:`hvbench.analysis.tuning.AxisEffect`); SVG text."""
    groups = [f"{e.axis.split('.')[-1]}={e.value}" for e in effects]
    values = {(g, "mean objective"): Interval(e.mean) for g, e in zip(groups, effects,
                                                                       strict=True)}
    return grouped_bars(BarChart(title, "objective", groups, ["mean objective"], values,
                                 reference=native))
