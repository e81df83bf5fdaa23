"""The HTML report: self-contained, escaped, with every section, on a stored real run
and on synthetic rows (many platforms, time series, propagation)."""

from __future__ import annotations

import base64
import json
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest

from hvbench.errors import SpecError
from hvbench.report import phase_stats
from hvbench.report_html import (
    CSP,
    ReportInput,
    bar_charts,
    grouped_warnings,
    host_disk_rows,
    parse_series_choice,
    phase_key,
    propagation_points,
    propagation_segments,
    propagation_workloads,
    render_html,
    series_figures,
    summary_rows,
)
from hvbench.store.records import MeasurementRow, SampleRow

FIXTURES = Path(__file__).parent.parent / "fixtures"
ENV = {"hostname": "vm", "kernel": "6.1.0", "cpu_model": "EPYC", "cpus": 2,
       "memory_bytes": 25 << 30, "qemu_version": "7.2.22", "accelerator": "tcg",
       "hvbench_version": "0.1.0",
       "work_dir": {"path": "/var/tmp/hvbench", "filesystem": "ext4", "free_bytes": 80 << 30}}


def load() -> tuple[str, dict[str, str | None], list[MeasurementRow]]:
    data = json.loads((FIXTURES / "quick-rows.json").read_text())
    return data["run"], data["natives"], [MeasurementRow(**r) for r in data["rows"]]


def row(platform: str, workload: str, phase: str, metric: str, value: float, *,
        rep: int = 0) -> MeasurementRow:
    return MeasurementRow(cell_id=0, cell=f"{platform}/{workload}", platform=platform,
                          workload=workload, repetition=rep, position=0, phase=phase,
                          metric=metric, value=value, unit="")


def samples(cell: str, phase: str, monitor: str, key: str, reps: int = 2) -> list[SampleRow]:
    return [SampleRow(cell=cell, repetition=rep, phase=phase, monitor=monitor, t=0.1 * i,
                      values={key: float(i + rep), "other": 1.0})
            for rep in range(reps) for i in range(1, 20)]


def report(rows: list[MeasurementRow] | None = None, **kw: object) -> ReportInput:
    run, natives, quick = load()
    base: dict[str, object] = {
        "run_id": run, "study_name": "quick", "status": "complete",
        "created_at": "2026-11-23T01:31:49+00:00", "finished_at": None, "env": ENV,
        "study_text": '[study]\nname = "quick" # <b>not bold</b>\n',
        "rows": quick if rows is None else rows, "natives": natives}
    return ReportInput(**{**base, **kw})  # type: ignore[arg-type]


class Collector(HTMLParser):
    """Tags with their attributes, and the text."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(text: str) -> Collector:
    collector = Collector()
    collector.feed(text)
    return collector


# -- the document ----------------------------------------------------------------------------
def test_document_is_self_contained() -> None:
    text = render_html(report())
    doc = parse(text)
    metas = [a for t, a in doc.tags if t == "meta" and a.get("http-equiv")]
    assert metas == [{"http-equiv": "Content-Security-Policy", "content": CSP}]
    for tag, attrs in doc.tags:
        for name in ("src", "href"):
            value = attrs.get(name) or ""
            assert not re.match(r"(?i)^\s*(https?:|//|file:|ftp:)", value), (tag, attrs)
            if name == "href" and name in attrs:
                assert value.startswith("#"), attrs
    assert tag_names(doc) >= {"img", "table", "h2", "pre"}
    assert "<script" not in text and "<link" not in text and "@import" not in text


def tag_names(doc: Collector) -> set[str]:
    return {t for t, _ in doc.tags}


def test_images_are_svg_data_uris() -> None:
    doc = parse(render_html(report()))
    images = [a for t, a in doc.tags if t == "img"]
    # dd: boot s bars, MB/s bars, MB/s in % of native (no samples in the fixture)
    assert len(images) == 3
    for attrs in images:
        src = attrs["src"] or ""
        assert src.startswith("data:image/svg+xml;base64,")
        root = ET.fromstring(base64.b64decode(src.split(",", 1)[1]))  # noqa: S314 - ours
        assert root.tag.endswith("svg") and attrs["alt"]


def test_tcg_banner_only_under_tcg() -> None:
    assert 'class="banner"' in render_html(report())
    assert "guest numbers measure emulation" in render_html(report())
    kvm = render_html(report(env={**ENV, "accelerator": "kvm"}))
    assert 'class="banner"' not in kvm


def test_environment_warnings_and_study_are_shown_escaped() -> None:
    text = render_html(report(failures=[("guest.ide/dd", 1, "guest <died>")]))
    doc = parse(text)
    body = "".join(doc.text)
    for expected in ("EPYC", "7.2.22", "25.0 GiB", "/var/tmp/hvbench (ext4, 80 GiB free)",
                     "dd/read on native: mb_s: CoV 41.3 % > 10 %",
                     "guest.ide/dd rep 2: guest <died>", '# <b>not bold</b>'):
        assert expected in body, expected
    assert "&lt;b&gt;not bold&lt;/b&gt;" in text and "guest &lt;died&gt;" in text


def test_repeated_warnings_are_grouped() -> None:
    warnings = ["dd/read on a: mb_s: fewer than 3 repetitions (n=2): raise it",
                "dd/read on b: mb_s: CoV 12.0 % > 10 %: lengthen",
                "dd/write on a: mb_s: fewer than 3 repetitions (n=2): raise it"]
    assert grouped_warnings(warnings) == [
        ("mb_s: fewer than 3 repetitions (n=2): raise it", ["dd/read on a", "dd/write on a"]),
        ("mb_s: CoV 12.0 % > 10 %: lengthen", ["dd/read on b"])]
    rows = [row(p, "w", "read", "mb_s", v, rep=r) for p in ("a", "b", "c")
            for r, v in enumerate((10.0, 11.0))]
    text = render_html(report(rows=rows, natives={"w": "a"}))
    assert text.count("fewer than 3 repetitions") == 1
    assert "<summary>3 places</summary>w/read on a, w/read on b, w/read on c" in text


def test_rendering_is_deterministic() -> None:
    assert render_html(report()) == render_html(report())


# -- tables and charts -----------------------------------------------------------------------
def test_summary_and_host_disk_tables_native_first() -> None:
    _, _, rows = load()
    items = [s for s in phase_stats(rows) if s.phase == "write"]
    summary = summary_rows(items, "native")
    assert [r[1] for r in summary] == ["native", "guest.virtio-blk", "guest.ide"]
    assert summary[1][3] == "46.4 % [25-68]"
    disk = host_disk_rows(items, "native")
    assert disk[0][:2] == ["write", "native"]
    assert disk[0][-1] == "53.2"  # %util, as in the terminal report
    assert len(disk[0]) == 2 + 11


def test_bar_charts_of_the_quick_run() -> None:
    _, natives, rows = load()
    charts = bar_charts(phase_stats(rows), natives)
    titles = [c.title for _, c in charts]
    assert titles == ["dd: boot s, mean with 95 % CI", "dd: MB/s, mean with 95 % CI",
                      "dd: MB/s in % of native"]
    mb = charts[1][1]
    assert mb.groups == ["write", "read"]  # profile order, not alphabetical
    assert mb.series == ["native", "guest.virtio-blk", "guest.ide"]
    pct = charts[2][1]
    assert pct.reference == 100.0 and "native" not in pct.series
    assert pct.values[("write", "guest.virtio-blk")].value == pytest.approx(46.4, abs=0.05)


def test_many_platforms_turn_the_chart() -> None:
    rows = [row(f"vm{i}", "w", phase, "mb_s", 10.0 + i + rep, rep=rep)
            for i in range(7) for phase in ("write", "read") for rep in range(2)]
    (_, chart), = bar_charts(phase_stats(rows), {"w": None})
    assert chart.groups == [f"vm{i}" for i in range(7)]
    assert chart.series == ["write", "read"]
    assert ("vm3", "read") in chart.values


def test_phase_order() -> None:
    phases = ["read", "zeta", "10kB", "boot", "write", "1kB", "transfer", "initial"]
    assert sorted(phases, key=phase_key) == ["boot", "write", "read", "initial", "transfer",
                                             "1kB", "10kB", "zeta"]


# -- time series -----------------------------------------------------------------------------
CELLS = {"native/dd": ("native", "dd"), "vm/dd": ("vm", "dd"), "vm/net": ("vm", "net")}


def test_series_default_to_disk_then_iperf3() -> None:
    data = [*samples("native/dd", "write", "host.disk.vda", "w_mb_s"),
            *samples("vm/dd", "write", "host.disk.vda", "r_mb_s"),
            *samples("vm/dd", "write", "host.cpu", "busy_pct"),
            *samples("vm/net", "tx", "host.disk.vda", "w_mb_s"),
            *samples("vm/net", "tx", "iperf3", "mbit_s", reps=3)]
    figures = series_figures(data, CELLS)
    assert [(w, p, c.monitor) for w, p, c, _ in figures] == [
        ("dd", "write", "host.disk.*"), ("net", "tx", "iperf3")]
    panels = figures[0][3]
    assert [p.title for p in panels] == ["native", "vm"]
    assert [line.label for line in panels[0].lines] == ["rep 1", "rep 2"]
    assert panels[1].lines[1].ys[0] == 2.0  # r_mb_s of rep 2 at the first sample
    assert len(figures[1][3][0].lines) == 3


def test_series_choice_sums_keys_and_filters_monitors() -> None:
    data = [SampleRow("vm/dd", 0, "write", "host.disk.vda", 0.1, {"r_mb_s": 1.0, "w_mb_s": 2.0}),
            SampleRow("vm/dd", 0, "write", "host.cpu", 0.1, {"busy_pct": 50.0})]
    disk = series_figures(data, CELLS, parse_series_choice("host.disk.*:r_mb_s+w_mb_s"))
    assert disk[0][3][0].lines[0].ys == [3.0]
    cpu = series_figures(data, CELLS, parse_series_choice("host.cpu:busy_pct"))
    assert cpu[0][3][0].lines[0].ys == [50.0]
    assert series_figures(data, CELLS, parse_series_choice("qemu:vcpu.cpu_pct")) == []


@pytest.mark.parametrize("text", ["host.cpu", ":busy_pct", "host.cpu:", "host.cpu:a+"])
def test_bad_series_choice(text: str) -> None:
    with pytest.raises(SpecError, match="expected MONITOR:KEY"):
        parse_series_choice(text)


def test_time_series_section_in_the_document() -> None:
    data = [*samples("native/dd", "write", "host.disk.vda", "w_mb_s"),
            *samples("guest.ide/dd", "write", "host.disk.vda", "w_mb_s")]
    doc = parse(render_html(report(samples=data)))
    assert "Time series" in "".join(doc.text)
    assert len([a for t, a in doc.tags if t == "img"]) == 4
    assert "dd / write: host disk MB/s (read + write)" in "".join(doc.text)


# -- propagation -----------------------------------------------------------------------------
def propagation_rows() -> list[MeasurementRow]:
    """Two platforms, sizes 1-4 GB as workload variants; time = a + b * size (+ c size²)."""
    out = []
    for platform, slope, curve in (("native", 1.0, 0.0), ("vm", 2.0, 0.25)):
        for gb in (1, 2, 3, 4):
            workload = f"prop.{gb}G"
            for rep in range(2):
                transfer = slope * gb + curve * gb * gb
                out += [row(platform, workload, "initial", "duration_s", 0.5, rep=rep),
                        row(platform, workload, "transfer", "duration_s", transfer, rep=rep),
                        row(platform, workload, "terminal", "phase_wall_s", 0.25, rep=rep),
                        row(platform, workload, "transfer", "size_bytes", gb * 1e9, rep=rep)]
    return out


def test_propagation_detection_segments_and_points() -> None:
    rows = propagation_rows()
    workloads = propagation_workloads(rows)
    assert workloads == ["prop.1G", "prop.2G", "prop.3G", "prop.4G"]
    assert propagation_workloads(load()[2]) == []
    bars, segments, values = propagation_segments(rows, ["prop.2G"])
    assert bars == ["native/prop.2G", "vm/prop.2G"]
    assert len(propagation_segments(rows, workloads)[0]) == 8
    assert segments == ["initial", "transfer", "terminal"]
    assert values[("vm/prop.2G", "transfer")] == pytest.approx(5.0)
    series = {s.label: s.points for s in propagation_points(rows, workloads)}
    assert series["native"][0][0] == 1e9
    assert series["native"][0][1] == pytest.approx(1.75)
    assert len(series["vm"]) == 8


def test_propagation_section_with_fits() -> None:
    text = render_html(report(rows=propagation_rows(), natives={}))
    body = "".join(parse(text).text)
    assert "Propagation" in body
    assert "native" in body and "linear" in body and "quadratic" in body
    # native time is exactly linear in the size: R² = 1 for both fits
    assert "y = 0.75 + 1e-09·x  (R² = 1.0000)" in body
    assert "+ 2.5e-19·x²  (R² = 1.0000)" in body
