"""Figures: valid, self-contained, reproducible SVG; matplotlib state left alone."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET

import matplotlib
import pytest

from hvbench.analysis.stats import Fit
from hvbench.report.plots import (
    BarChart,
    Interval,
    LatencyCurve,
    Line,
    Panel,
    PlotError,
    ReferenceLine,
    TrendSeries,
    VLine,
    _use_log,
    fit_equation,
    fit_polynomial,
    fits_for,
    grouped_bars,
    latency_figure,
    stacked_bars,
    time_series_grid,
    trend_lines,
)

SVG = "{http://www.w3.org/2000/svg}"


def chart(**kw: object) -> BarChart:
    values = {("write", "native"): Interval(230.0, 170.0, 290.0),
              ("write", "vm"): Interval(110.0, 70.0, 150.0),
              ("read", "native"): Interval(720.0),
              ("read", "vm"): Interval(167.0, 145.0, 189.0)}
    base: dict[str, object] = {"title": "dd: MB/s", "ylabel": "MB/s", "groups": ["write", "read"],
                               "series": ["native", "vm"], "values": values}
    return BarChart(**{**base, **kw})  # type: ignore[arg-type]


def check_svg(text: str) -> ET.Element:
    """Parses, has a size, draws text as paths and references nothing outside."""
    root = ET.fromstring(text)  # noqa: S314 - our own output
    assert root.tag == f"{SVG}svg"
    assert float(root.attrib["width"].removesuffix("pt")) > 100
    assert float(root.attrib["height"].removesuffix("pt")) > 100
    assert root.find(f".//{SVG}text") is None  # fonts embedded as paths
    assert 'href="http' not in text and "url(http" not in text and "<image" not in text
    return root


def test_grouped_bars_is_reproducible_svg() -> None:
    first = grouped_bars(chart())
    check_svg(first)
    assert first == grouped_bars(chart())
    assert "Date" not in first


def test_bars_with_error_bars_and_reference_line() -> None:
    root = check_svg(grouped_bars(chart(reference=100.0)))
    assert len(root.findall(f".//{SVG}g[@id]")) > 10


def test_log_axis_only_for_wide_ranges() -> None:
    assert _use_log([18882.0, 122.0]) and not _use_log([230.0, 110.0])
    assert not _use_log([0.0, 5.0])
    check_svg(grouped_bars(chart(values={("read", "native"): Interval(18882.0, 16000.0, 21000.0),
                                         ("read", "vm"): Interval(122.0, -5.0, 250.0)},
                                 groups=["read"])))


def test_empty_chart_is_an_error() -> None:
    with pytest.raises(PlotError, match="nothing to draw"):
        grouped_bars(chart(values={}))
    with pytest.raises(PlotError, match="nothing to stack"):
        stacked_bars("t", "s", [], ["a"], {})
    with pytest.raises(PlotError, match="no points"):
        trend_lines("t", "x", "y", [TrendSeries("a", [])])
    with pytest.raises(PlotError, match="no time series"):
        time_series_grid("t", "y", [])


def test_time_series_grid() -> None:
    panels = [Panel(f"vm{i}", [Line(f"rep {r}", [0.1 * t for t in range(30)],
                                    [float((t * (r + 2)) % 7) for t in range(30)])
                               for r in range(1, 3)]) for i in range(6)]
    check_svg(time_series_grid("dd / write: MB/s", "MB/s", panels))
    with pytest.raises(PlotError, match="2 times but 1 values"):
        time_series_grid("t", "y", [Panel("p", [Line("rep 1", [0.0, 1.0], [1.0])])])


def test_stacked_bars() -> None:
    values = {("a", "initial"): 1.0, ("a", "transfer"): 4.0, ("a", "terminal"): 0.5,
              ("b", "initial"): 1.2, ("b", "transfer"): 6.0}
    check_svg(stacked_bars("propagation", "s", ["a", "b"],
                           ["initial", "transfer", "terminal"], values))


def test_fit_equations() -> None:
    assert fit_equation(Fit((1.0, 2.0), 0.99)) == "y = 1 + 2·x  (R² = 0.9900)"
    assert fit_equation(Fit((0.5, -3e-08, 1.25e-15), 1.0)) == \
        "y = 0.5 - 3e-08·x + 1.25e-15·x²  (R² = 1.0000)"


def test_fits_need_distinct_x() -> None:
    assert fits_for([(1.0, 1.0), (1.0, 2.0)]) == []
    assert [k for k, _ in fits_for([(1.0, 1.0), (2.0, 2.0)])] == ["linear"]
    quad = dict(fits_for([(x, 3.0 + 2.0 * x + 0.5 * x * x) for x in (1.0, 2.0, 3.0, 4.0)]))
    assert quad["quadratic"].coefficients == pytest.approx((3.0, 2.0, 0.5))
    assert quad["quadratic"].r_squared == pytest.approx(1.0)
    assert quad["linear"].r_squared < 1.0


def test_trend_lines() -> None:
    sizes = [64e6, 128e6, 256e6, 512e6]
    series = [TrendSeries("vm", [(s, 0.2 + s / 100e6) for s in sizes]),
              TrendSeries("native", [(s, 0.1 + s / 400e6 + (s / 1e9) ** 2) for s in sizes])]
    check_svg(trend_lines("time against size", "bytes", "s", series))


def rc_params() -> dict[str, object]:
    """Every rc setting but the backend (reading it would import pyplot to resolve it)."""
    return {k: matplotlib.rcParams[k] for k in matplotlib.rcParams if k != "backend"}


def test_no_global_matplotlib_state_changes() -> None:
    before = rc_params()
    grouped_bars(chart())
    time_series_grid("t", "y", [Panel("p", [Line("rep 1", [0.0, 1.0], [1.0, 2.0])])])
    assert rc_params() == before
    # no pyplot: no figure registry, no backend selection
    assert "matplotlib.pyplot" not in sys.modules


def test_time_series_with_markers_and_reference() -> None:
    """Seed 003 Fig. 14's shape: normalized throughput, dashed lines where guests were
    asked for, dotted where they were ready, a reference at 1."""
    panel = Panel("vm@ondemand", [Line("rep 1", [float(t) for t in range(20)],
                                       [1.0 if t < 5 else 0.6 for t in range(20)])],
                  [VLine(5.0), VLine(9.5, dotted=True)])
    plain = time_series_grid("t", "throughput / baseline", [panel], 2)
    marked = time_series_grid("t", "throughput / baseline", [panel], 2, reference=1.0,
                              xlabel="seconds since the window started",
                              panel_size=(6.0, 2.8))
    root = check_svg(marked)
    assert float(root.attrib["width"].removesuffix("pt")) > 400  # the larger panel
    assert marked != plain and "stroke-dasharray" in marked


def test_fit_polynomial_and_reference_lines() -> None:
    assert fit_polynomial((0.0, 8e-09)) == "y = 0 + 8e-09·x"
    assert fit_polynomial((1.5, 2.0, -0.25)) == "y = 1.5 + 2·x - 0.25·x²"
    series = [TrendSeries("vm scp", [(s, 1.5 + s * 1e-8) for s in (1e9, 2e9, 4e9)])]
    with_nic = trend_lines("t", "bytes", "s", series,
                           [ReferenceLine("theoretical NIC 1000 Mbit/s", 0.0, 8e-9)])
    check_svg(with_nic)
    assert with_nic != trend_lines("t", "bytes", "s", series)


def _width_pt(svg: str) -> float:
    return float(check_svg(svg).attrib["width"].removesuffix("pt"))


def test_bar_charts_are_sized_by_their_bars() -> None:
    """One bar is not drawn page-wide (the page shows a figure at its own size): the
    width grows with the bars, up to a cap past which the page scales it down."""
    one = chart(groups=["write"], series=["vm"], values={("write", "vm"): Interval(110.0)})
    many_groups = [f"phase{i}" for i in range(12)]
    many = chart(groups=many_groups, series=["native", "vm"],
                 values={(g, s): Interval(100.0 + i) for i, g in enumerate(many_groups)
                         for s in ("native", "vm")})
    widths = [_width_pt(grouped_bars(c)) for c in (one, chart(), many)]
    assert widths[0] <= widths[1] < widths[2]
    assert widths[0] < 0.5 * widths[2]


def test_latency_panels_share_the_latency_axis() -> None:
    curves = [LatencyCurve("native", [(0.05, 0.5), (0.1, 1.0)], native=True),
              LatencyCurve("vm", [(1.0, 0.5), (40.0, 0.999), (60.0, 1.0)])]
    fig = latency_figure("w / read", curves)
    body, tail = fig.axes
    # The tail stops before the last point (nothing is slower); the CDF does not: one
    # shared axis still puts a latency at the same place in both panels.
    assert body.get_xlim() == tail.get_xlim()
    assert body.get_xlim()[1] >= 60.0
