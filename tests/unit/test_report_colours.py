"""One colour per platform across every figure of an HTML report (issue 29): the
storage fixture run (tests/fixtures/runs/storage.db, three platforms, bar charts and
latency CDFs) rendered with the figure functions watched."""

from __future__ import annotations

import base64
import re
from typing import Any

import pytest

from hvbench.report import html as html_module
from hvbench.report.plots import NATIVE_COLOR, BarChart, LatencyCurve, series_colors
from tests.unit.test_fixture_runs import Rendered

SVG = re.compile(r'src="data:image/svg\+xml;base64,([^"]+)"')


def test_every_figure_gives_a_platform_the_same_colour(
        rendered: dict[str, Rendered]) -> None:
    # The storage fixture's HTML report as test_fixture_runs renders it (`hvbench report
    # RUN --format html -o out.html` on a scratch copy), its figure functions watched.
    storage = rendered["storage"]
    assert storage.html is not None
    seen = storage.figures  # (series -> colour, the SVG drawn)
    platforms = {"native", "vm.virtio-blk-none", "vm.ide-writeback"}
    colours: dict[str, set[str]] = {}
    for mapping, svg in seen:
        for series, colour in mapping.items():
            if series in platforms:
                colours.setdefault(series, set()).add(colour)
                # matplotlib writes the fill or stroke colour as given
                assert colour in svg, (series, colour)
    # Bar charts (MB/s, % of native, boot) and latency CDFs all drew.
    assert len(seen) >= 6
    assert set(colours) == platforms
    assert all(len(c) == 1 for c in colours.values()), colours
    assert colours["native"] == {NATIVE_COLOR}
    assert len({next(iter(c)) for c in colours.values()}) == len(platforms)
    # Every figure watched is on the page (the others, time series, draw repetitions).
    page = {base64.b64decode(data).decode()
            for data in SVG.findall(storage.html.decode())}
    assert {svg for _, svg in seen} <= page


def test_latency_curves_take_the_platforms_bar_colours(monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    """The stored fixtures have no fio histograms: the quick rows with a CDF per
    platform, rendered with both figure kinds watched."""
    from tests.unit.test_report_html import report

    bars: dict[str, set[str]] = {}
    curves: dict[str, set[str]] = {}
    real_bars = html_module.grouped_bars  # type: ignore[attr-defined]
    real_cdf = html_module.latency_cdf  # type: ignore[attr-defined]

    def watch_bars(chart: BarChart) -> str:
        for name, colour in zip(chart.series, series_colors(chart.series, chart.colors),
                                strict=True):
            bars.setdefault(name, set()).add(colour)
        return real_bars(chart)

    def watch_cdf(title: str, lines: list[LatencyCurve], *args: Any) -> str:
        svg = real_cdf(title, lines, *args)
        for line in lines:
            assert line.color is not None and line.color in svg
            curves.setdefault(line.label, set()).add(line.color)
        return svg

    monkeypatch.setattr(html_module, "grouped_bars", watch_bars)
    monkeypatch.setattr(html_module, "latency_cdf", watch_cdf)
    points = [(0.1, 0.2), (0.5, 0.9), (2.0, 1.0)]
    platforms = ("native", "guest.virtio-blk", "guest.ide")
    html_module.render_html(report(latency={("dd", "read"): dict.fromkeys(platforms, points)}))
    assert set(curves) == set(platforms)
    for platform in platforms:
        assert len(bars[platform]) == 1 and curves[platform] == bars[platform]
    assert curves["native"] == {NATIVE_COLOR}
