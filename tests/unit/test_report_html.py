"""The HTML report: self-contained, escaped, with every section, on a stored real run
and on synthetic rows (many platforms, time series, propagation, lifecycle,
scenarios)."""

from __future__ import annotations

import base64
import functools
import html
import json
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest

from hvbench.errors import SpecError
from hvbench.kinds.lifecycle.analysis import lifecycle_series, lifecycle_workloads
from hvbench.kinds.lifecycle.driver import LIFECYCLE_PHASES
from hvbench.kinds.lifecycle.report import lifecycle_idle_rows
from hvbench.kinds.propagation.analysis import (
    link_rates,
    nic_lines,
    propagation_series,
    propagation_workloads,
    transfer_series,
)
from hvbench.kinds.propagation.report import propagation_points, propagation_segments
from hvbench.kinds.propagation.text import propagation_fit_rows
from hvbench.kinds.web.report import WEB_LATENCY_METRICS, web_latency_rows
from hvbench.report.fits import fit_rows
from hvbench.report.html import (
    CSP,
    FIGURE_SCALE,
    ReportInput,
    bar_charts,
    cell_name_html,
    grouped_warnings,
    host_disk_rows,
    ondemand_figures,
    parse_series_choice,
    phase_key,
    phase_segments,
    render_html,
    scenario_charts,
    series_figures,
    summary_rows,
)
from hvbench.report.tables import phase_stats
from hvbench.store.records import MeasurementRow, SampleRow, identity_of

FIXTURES = Path(__file__).parent.parent / "fixtures"
ENV = {"hostname": "vm", "kernel": "6.1.0", "cpu_model": "EPYC", "cpus": 2,
       "memory_bytes": 25 << 30, "qemu_version": "7.2.22", "accelerator": "tcg",
       "hvbench_version": "0.1.0",
       "work_dir": {"path": "/var/tmp/hvbench", "filesystem": "ext4", "free_bytes": 80 << 30}}


def load() -> tuple[str, dict[str, str | None], list[MeasurementRow]]:
    data = json.loads((FIXTURES / "quick-rows.json").read_text())
    return data["run"], data["natives"], [MeasurementRow(**r) for r in data["rows"]]


#: The identity fields the store would hold for the synthetic workloads of these tests
#: (the study's method and image_size), keyed by workload name.
IDENTITY: dict[str, tuple[str, float | None]] = {
    **{f"prop.{gb}G": ("prop", float(gb << 30)) for gb in range(1, 5)},
    **{f"propagation.{m}-{gb}G": (m, float(gb << 30)) for m in ("scp", "overlay")
       for gb in (1, 2)},
    **{f"lifecycle.{mib}M-{mode}": (mode, float(mib << 20)) for mib in (256, 512)
       for mode in ("raw-copy", "qcow2-overlay")},
    **{f"lifecycle.1G-{mode}": (mode, float(1 << 30)) for mode in ("raw-copy", "qcow2-overlay")},
}


def row(platform: str, workload: str, phase: str, metric: str, value: float, *,
        rep: int = 0) -> MeasurementRow:
    method, size = IDENTITY.get(workload, (None, None))
    # A scenario cell is stored as platform "vm@idle3" with base vm and scenario idle3.
    base, _, scenario = platform.partition("@")
    return MeasurementRow(cell_id=0, cell=f"{platform}/{workload}", platform=platform,
                          workload=workload, repetition=rep, position=0, phase=phase,
                          metric=metric, value=value, unit="", base_platform=base,
                          scenario=scenario or None, method=method, image_size=size)


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


@functools.cache
def default_document() -> str:
    """``render_html(report())``, rendered once for the tests that read it (each render
    draws its charts, about 0.5 s); :func:`test_rendering_is_deterministic` renders it
    again and compares."""
    return render_html(report())


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
    text = default_document()
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
    doc = parse(default_document())
    images = [a for t, a in doc.tags if t == "img"]
    # dd: boot s bars, MB/s bars, MB/s in % of native (no samples in the fixture)
    assert len(images) == 3
    for attrs in images:
        src = attrs["src"] or ""
        assert src.startswith("data:image/svg+xml;base64,")
        root = ET.fromstring(base64.b64decode(src.split(",", 1)[1]))  # noqa: S314 - ours
        assert root.tag.endswith("svg") and attrs["alt"]


def test_a_sections_figures_share_one_row_at_one_scale() -> None:
    # Issue 29: the figures used under 40 % of the page. A run of figures is one
    # wrapping row (side by side as far as the page allows), each figure at the same
    # multiple of its own size, so the text of every figure has one size.
    text = render_html(report())
    rows = re.findall(r'<div class="figs">(.*?)</div>', text, flags=re.S)
    assert len(rows) == 1 and rows[0].count("<figure") == 3
    for style, data in re.findall(r'<figure style="width:(\d+)px"><img[^>]*?'
                                  r'src="data:image/svg\+xml;base64,([^"]+)"', rows[0]):
        svg = ET.fromstring(base64.b64decode(data))  # noqa: S314 - ours
        points = float(svg.attrib["width"].removesuffix("pt"))
        assert int(style) == round(points * 4 / 3 * FIGURE_SCALE)
    assert len(re.findall(r'<figure style="width:\d+px">', rows[0])) == 3
    assert "figure img{width:100%" in text and "figure{margin:0;max-width:100%}" in text


def test_tcg_banner_only_under_tcg() -> None:
    assert 'class="banner"' in default_document()
    assert "guest numbers measure emulation" in default_document()
    kvm = render_html(report(env={**ENV, "accelerator": "kvm"}))
    assert 'class="banner"' not in kvm


def test_environment_warnings_and_study_are_shown_escaped() -> None:
    text = render_html(report(failures=[("guest.ide/dd", 1, "guest <died>")]))
    doc = parse(text)
    body = "".join(doc.text)
    for expected in ("EPYC", "7.2.22", "25.0 GiB", "/var/tmp/hvbench (ext4, 80 GiB free)",
                     "dd/read on native (CoV 41.3 %)", "mb_s: CoV > 10 %",
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
    assert ("<summary>3 places</summary>w/read on a (n=2), w/read on b (n=2), "
            "w/read on c (n=2)") in text


def test_rendering_is_deterministic() -> None:
    # Two renders of equal input: a fresh one and the shared one (rendered here, after
    # the fresh one, when this test runs first).
    assert render_html(report()) == default_document()


# -- tables and charts -----------------------------------------------------------------------
def _mean(rows: list[MeasurementRow], platform: str, phase: str, metric: str) -> float:
    """The mean of the stored rows of one (platform, phase, metric)."""
    values = [r.value for r in rows
              if (r.platform, r.phase, r.metric) == (platform, phase, metric)]
    assert values, (platform, phase, metric)
    return sum(values) / len(values)


def test_summary_and_host_disk_tables_native_first() -> None:
    _, _, rows = load()
    items = [s for s in phase_stats(rows) if s.phase == "write"]
    summary = summary_rows(items, "native")
    assert [r[1] for r in summary] == ["native", "guest.virtio-blk", "guest.ide"]
    # % of native: the means of the stored rows, then the CI around it.
    pct = 100 * _mean(rows, "guest.virtio-blk", "write", "mb_s") / _mean(
        rows, "native", "write", "mb_s")
    shown = re.fullmatch(r"([0-9.]+) % \[([0-9]+)-([0-9]+)\]", summary[1][3])
    assert shown, summary[1][3]
    assert shown.group(1) == f"{pct:.1f}"
    assert float(shown.group(2)) < pct < float(shown.group(3))
    disk = host_disk_rows(items, "native")
    assert disk[0][:2] == ["write", "native"]
    # %util, as in the terminal report: the mean of the stored device rows.
    assert disk[0][-1] == f"{_mean(rows, 'native', 'write', 'host.disk.vda.util_pct'):.1f}"
    assert len(disk[0]) == 2 + 11


def test_bar_charts_of_the_quick_run() -> None:
    _, natives, rows = load()
    charts = bar_charts(phase_stats(rows), natives)
    titles = [c.title for _, c in charts]
    # The headline metric's figures first, boot time's last (issue 29).
    assert titles == ["dd: MB/s, mean with 95 % CI", "dd: MB/s in % of native",
                      "dd: boot s, mean with 95 % CI"]
    mb = charts[0][1]
    assert mb.groups == ["write", "read"]  # profile order, not alphabetical
    assert mb.series == ["native", "guest.virtio-blk", "guest.ide"]
    pct = charts[1][1]
    assert pct.reference == 100.0 and "native" not in pct.series
    assert pct.values[("write", "guest.virtio-blk")].value == pytest.approx(
        100 * _mean(rows, "guest.virtio-blk", "write", "mb_s")
        / _mean(rows, "native", "write", "mb_s"))


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
def table_rows(text: str, header: str) -> list[list[str]]:
    """The body cells of the first table whose header row contains ``header``."""
    start = text.index(header)
    table = text[text.rindex("<table>", 0, start):text.index("</table>", start)]
    body = table.split("<tbody>", 1)[1]
    return [[html.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]
            for row in body.split("<tr>")[1:]]


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
    # one method ("prop", the variants only change the size): one series per platform
    series = {s.label: s.points for s in propagation_points(rows, workloads)}
    assert series["native prop"][0][0] == 1e9
    assert series["native prop"][0][1] == pytest.approx(1.75)
    assert len(series["vm prop"]) == 8


def test_propagation_section_with_fits() -> None:
    text = render_html(report(rows=propagation_rows(), natives={}))
    doc = parse(text)
    body = "".join(doc.text)
    assert "Propagation" in body and "intercept: the manager's overhead s" in body
    cells = table_rows(text, "intercept: the manager")
    # native time is exactly linear in the size: R² = 1 for both fits; intercept 0.75 s
    assert ["native", "prop", "linear", "y = 0.75 + 1e-09·x", "1.0000", "0.75"] in cells
    assert any(r[:3] == ["vm", "prop", "quadratic"] and r[3].endswith("+ 2.5e-19·x²")
               and r[4] == "1.0000" for r in cells)


def method_rows() -> list[MeasurementRow]:
    """scp and overlay at 1G and 2G on one platform; the overlay's later repetitions are
    cache hits (nothing moved, size_bytes 0); a 1 Gbit/s link."""
    out = []
    for method, per_gb in (("scp", 8.0), ("overlay", 4.0)):
        for gb in (1, 2):
            workload = f"propagation.{method}-{gb}G"
            for rep in range(3):
                hit = method == "overlay" and rep > 0
                size = 0.0 if hit else gb * float(1 << 30)
                out += [row("vm", workload, "initial", "duration_s", 0.5, rep=rep),
                        row("vm", workload, "transfer", "duration_s",
                            0.01 if hit else per_gb * gb, rep=rep),
                        row("vm", workload, "terminal", "duration_s", 1.0, rep=rep),
                        row("vm", workload, "shutdown", "duration_s", 0.3, rep=rep),
                        row("vm", workload, "transfer", "size_bytes", size, rep=rep),
                        row("vm", workload, "transfer", "link_rate_bits", 1e9, rep=rep)]
                if method == "overlay":
                    out.append(row("vm", workload, "transfer", "cache_hit", float(hit),
                                   rep=rep))
    return out


@pytest.mark.parametrize(("workload", "method", "size"), [
    ({"kind": "propagation", "method": "scp", "image_size": 128 << 20}, "scp", 128 << 20),
    ({"kind": "propagation", "method": "http-zstd", "image_size": 1 << 30}, "http-zstd",
     1 << 30),
    ({"kind": "lifecycle", "image_format": "qcow2", "create": "convert",
      "image_size": 256 << 20}, "qcow2-convert", 256 << 20),
    ({"kind": "disk", "profile": "dd", "file_size": 1 << 30}, None, None)])
def test_method_and_size_are_identity_fields(workload: dict[str, object], method: str | None,
                                             size: int | None) -> None:
    found = identity_of("vm", {"kind": "qemu"}, workload)
    assert (found.base_platform, found.method, found.image_size) == ("vm", method, size)


def test_propagation_series_per_platform_and_method() -> None:
    rows = method_rows()
    workloads = propagation_workloads(rows)
    series = {(s.platform, s.method): s.points for s in propagation_series(rows, workloads)}
    assert set(series) == {("vm", "scp"), ("vm", "overlay"), ("vm", "overlay (cache hit)")}
    assert sorted(series[("vm", "scp")])[0] == pytest.approx((float(1 << 30), 9.5))
    # cache hits moved nothing: x is the variant's size, the time has no transfer
    hits = sorted(series[("vm", "overlay (cache hit)")])
    assert [x for x, _ in hits] == [float(1 << 30)] * 2 + [float(2 << 30)] * 2
    assert [y for _, y in hits] == pytest.approx([1.51] * 4)
    # shutdown is not part of the propagation time (nor of the stacked bars)
    assert propagation_segments(rows, workloads)[1] == ["initial", "transfer", "terminal"]


def test_nic_line_and_fit_rows() -> None:
    rows = method_rows()
    workloads = propagation_workloads(rows)
    assert link_rates(rows, workloads) == [1e9]
    (nic,) = nic_lines([1e9])
    assert nic.label == "theoretical NIC 1000 Mbit/s" and nic.slope == 8e-9
    series = [s for s in propagation_series(rows, workloads) if s.method == "scp"]
    fits = fit_rows(series, [nic])
    assert [r[2] for r in fits] == ["linear", "line rate"]  # 2 sizes: no quadratic
    assert fits[0][5] == "1.5"  # the intercept: initial + terminal, the manager's overhead
    assert fits[1] == ["theoretical NIC 1000 Mbit/s", "-", "line rate", "y = 0 + 8e-09·x",
                       "1", "0"]
    text = render_html(report(rows=rows, natives={}))
    cells = table_rows(text, "intercept: the manager")
    assert [r[:3] for r in cells] == [["vm", "scp", "linear"], ["vm", "overlay", "linear"],
                                      ["vm", "overlay (cache hit)", "linear"],
                                      ["vm", "scp (transfer only)", "linear"],
                                      ["vm", "overlay (transfer only)", "linear"],
                                      ["theoretical NIC 1000 Mbit/s", "-", "line rate"]]


def test_transfer_only_series_and_fits() -> None:
    """Seed 000 Fig. 3(b): the transfer phase alone against the bytes moved, without the
    cache hits, fitted next to the NIC line; the HTML draws it in its own figure."""
    rows = method_rows()
    workloads = propagation_workloads(rows)
    series = {(s.platform, s.method): sorted(s.points) for s in transfer_series(rows, workloads)}
    assert set(series) == {("vm", "scp (transfer only)"), ("vm", "overlay (transfer only)")}
    # scp moved 1 and 2 GiB in 8 and 16 s; the overlay's hits (nothing moved) are left out
    assert series[("vm", "scp (transfer only)")] == [
        (float(1 << 30), 8.0), (float(1 << 30), 8.0), (float(1 << 30), 8.0),
        (float(2 << 30), 16.0), (float(2 << 30), 16.0), (float(2 << 30), 16.0)]
    assert series[("vm", "overlay (transfer only)")] == [(float(1 << 30), 4.0),
                                                         (float(2 << 30), 8.0)]
    fits = {r[1]: r for r in propagation_fit_rows(rows)}
    # no fixed cost in the transfer alone: intercept 0 (to rounding), slope 8 s per GiB
    scp = fits["scp (transfer only)"]
    assert scp[2] == "linear" and scp[4] == "1.0000" and abs(float(scp[5])) < 1e-9
    assert scp[3].endswith(f"{8 / (1 << 30):.4g}·x")
    # the total's intercept is the overhead: initial + terminal = 1.5 s
    assert fits["scp"][5] == "1.5"
    text = render_html(report(rows=rows, natives={}))
    assert "transfer time alone against bytes moved, with the theoretical NIC" in text


# -- lifecycle -------------------------------------------------------------------------------
def lifecycle_rows() -> list[MeasurementRow]:
    """copy at 256M, 512M and 1G (create time linear in the size) and an overlay."""
    out = []
    steps = {"qemu": 0.2, "kernel": 1.5, "agent": 0.8, "shutdown": 0.4, "exit": 0.1}
    for mode, sizes in (("raw-copy", (256, 512, 1024)), ("qcow2-overlay", (256, 1024))):
        for mib in sizes:
            workload = f"lifecycle.{mib}M-{mode}" if mib < 1024 else f"lifecycle.1G-{mode}"
            for rep in range(2):
                create = 0.05 if mode == "qcow2-overlay" else 0.1 + mib / 256
                written = 200e3 if mode == "qcow2-overlay" else mib * float(1 << 20)
                out += [row("vm", workload, "create", "duration_s", create, rep=rep),
                        row("vm", workload, "create", "size_bytes", written, rep=rep),
                        row("vm", workload, "create", "mb_s", written / create / 1e6, rep=rep),
                        *(row("vm", workload, p, "duration_s", d, rep=rep)
                          for p, d in steps.items())]
    out += [row("vm", "lifecycle.256M-raw-copy", "idle", metric, value, rep=rep)
            for rep in range(2) for metric, value in (("host_busy_pct", 3.0 + rep),
                                                      ("guests", 4.0), ("extra_metric", 1.0),
                                                      ("qemu_cpu_pct", 2.0))]
    return out


def test_lifecycle_detection_segments_and_series() -> None:
    rows = lifecycle_rows()
    workloads = lifecycle_workloads(rows)
    assert len(workloads) == 5 and propagation_workloads(rows) == []
    assert lifecycle_workloads(propagation_rows()) == []
    bars, segments, values = phase_segments(rows, workloads, LIFECYCLE_PHASES)
    assert segments == ["create", "qemu", "kernel", "agent", "shutdown", "exit"]
    assert values[("vm/lifecycle.512M-raw-copy", "create")] == pytest.approx(2.1)
    assert len(bars) == 5
    series = {s.method: sorted(s.points) for s in lifecycle_series(rows, workloads)}
    assert series["raw-copy"][0] == pytest.approx((float(256 << 20), 1.1))
    # an overlay's x is the image size (its file is 200 kB whatever the image)
    assert [x for x, _ in series["qcow2-overlay"]] == [float(256 << 20)] * 2 + \
        [float(1 << 30)] * 2


def test_lifecycle_idle_table() -> None:
    rows = lifecycle_rows()
    headers, cells = lifecycle_idle_rows(rows, lifecycle_workloads(rows))
    assert headers == ["cell", "guests", "host_busy_pct", "qemu_cpu_pct", "extra_metric"]
    assert cells == [["vm/lifecycle.256M-raw-copy", "4 ± 0", "3.5 ± 6.4", "2 ± 0", "1 ± 0"]]


def test_lifecycle_section_in_the_document() -> None:
    text = render_html(report(rows=lifecycle_rows(), natives={}))
    body = "".join(parse(text).text)
    assert '<a href="#lifecycle">Lifecycle</a>' in text
    for expected in ("Lifecycle", "Idle guests: host CPU they use", "intercept: fixed cost s"):
        assert expected in body, expected
    cells = table_rows(text, "intercept: fixed cost s")
    assert [r[:3] for r in cells] == [["vm", "raw-copy", "linear"],
                                      ["vm", "raw-copy", "quadratic"],
                                      ["vm", "qcow2-overlay", "linear"]]
    assert cells[0][5] == "0.1" and cells[0][4] == "1.0000"


def test_phase_order_of_lifecycle_and_propagation() -> None:
    assert sorted(["exit", "idle", "shutdown", "agent", "create", "kernel", "qemu"],
                  key=phase_key) == ["create", "qemu", "kernel", "agent", "shutdown", "exit",
                                     "idle"]
    assert sorted(["shutdown", "terminal", "transfer", "initial"], key=phase_key) == [
        "initial", "transfer", "terminal", "shutdown"]


# -- scenarios -------------------------------------------------------------------------------
def scenario_rows() -> list[MeasurementRow]:
    out = []
    for rep in range(3):
        out += [row("vm", "web", "1kB", "replies_s", 1000.0 + rep, rep=rep),
                row("vm", "web", "70kB", "replies_s", 160.0 + rep, rep=rep),
                row("vm@idle3", "web", "1kB", "replies_s", 900.0 + rep, rep=rep),
                row("vm@idle3", "web", "70kB", "replies_s", 160.0 + rep, rep=rep),
                row("vm@nb", "web", "1kB", "replies_s", 600.0 + rep, rep=rep),
                row("vm@nb", "web", "1kB", "nb0.load.replies_per_s", 80.0, rep=rep),
                row("vm@nb", "web", "1kB", "nb0.load.file_kb", 70.0, rep=rep),
                row("vm@od", "steady", "1kB", "replies_s", 100.0, rep=rep),
                row("vm@od", "steady", "1kB", "ondemand.0.asked_at_s", 4.0 + 0.1 * rep,
                    rep=rep),
                row("vm@od", "steady", "1kB", "ondemand.0.startup_s", 3.0, rep=rep),
                row("vm@od", "steady", "1kB", "dip.baseline", 10.0, rep=rep),
                row("vm@od", "steady", "1kB", "dip.depth_pct", 30.0 + rep, rep=rep),
                row("vm@od", "steady", "1kB", "dip.length_s", 2.0, rep=rep)]
    return out


def throughput(cell: str, reps: int = 3) -> list[SampleRow]:
    return [SampleRow(cell, rep, "1kB", "throughput", float(t), {"value": 10.0 - (t == 5)})
            for rep in range(reps) for t in range(12)]


def test_scenario_charts_in_percent_of_alone() -> None:
    from hvbench.analysis.scenarios import degradation_rows

    (chart,) = scenario_charts(degradation_rows(scenario_rows()))
    assert chart.title == "web: replies/s in % of alone" and chart.reference == 100.0
    assert chart.groups == ["1kB", "70kB"] and chart.series == ["vm@idle3", "vm@nb"]
    assert chart.values[("1kB", "vm@idle3")].value == pytest.approx(90.0, abs=0.01)
    assert ("70kB", "vm@nb") not in chart.values


def test_ondemand_figures() -> None:
    from hvbench.analysis.scenarios import ondemand_series

    cells = {"vm@od/steady": ("vm@od", "steady")}
    series = ondemand_series(scenario_rows(), throughput("vm@od/steady"), cells)
    ((workload, phase, panels),) = ondemand_figures(series)
    assert (workload, phase) == ("steady", "1kB")
    (panel,) = panels
    assert panel.title == "vm@od" and len(panel.lines) == 3
    assert panel.lines[0].ys[5] == pytest.approx(0.9)
    dashed = [v.x for v in panel.vlines if not v.dotted]
    dotted = [v.x for v in panel.vlines if v.dotted]
    assert dashed == pytest.approx([4.0, 4.1, 4.2]) and dotted == pytest.approx([7.0, 7.1, 7.2])


def test_scenario_section_in_the_document() -> None:
    samples = throughput("vm@od/steady")
    text = render_html(report(rows=scenario_rows(), natives={}, samples=samples))
    body = "".join(parse(text).text)
    assert '<a href="#scenarios">Scenarios</a>' in text
    for expected in ("Degradation against alone", "Aggregated throughput ratio",
                     "Guests started on demand", "CoV % over the measured window",
                     "Normalized throughput: the target's traffic per 1 s bucket"):
        assert expected in body, expected
    assert "CPU weights" not in body  # no stored platform definitions with weights
    degradation = table_rows(text, "degradation % [95% CI]")
    assert degradation[0][:7] == ["vm", "steady/1kB", "replies/s", "-", "od", "100 ± 0",
                                  "no alone baseline"]
    assert degradation[1][:5] == ["vm", "web/1kB", "replies/s", "1001.0 ± 2.5", "idle3"]
    # web bars, the same in % of ... (no native: none), steady bars; % of alone bars;
    # the on-demand grid
    images = [a["alt"] for t, a in parse(text).tags if t == "img"]
    assert "web: replies/s in % of alone" in images
    assert "steady / 1kB: normalized throughput, guests started on demand" in images


def test_wide_tables_scroll_and_long_headers_may_wrap() -> None:
    series = throughput("vm@od/steady") + samples("vm@od/steady", "1kB", "qemu",
                                                  "vcpu.cpu_pct")
    text = render_html(report(rows=scenario_rows(), natives={}, samples=series))
    assert text.count('<div class="tw"><table>') == text.count("<table>") > 0
    # the CoV table's series: breaks after ':' and '.' inside a name, not before a digit
    assert "throughput:<wbr>value" in text and "qemu:<wbr>vcpu.<wbr>cpu_pct" in text
    assert "<wbr>" not in "".join(re.findall(r"<td[^>]*>.*?</td>", text))


def test_weights_table_in_the_document() -> None:
    rows = [row(f"vm@w.{io}", "web", "1kB", metric, value, rep=rep)
            for io in (2, 1) for rep in range(2)
            for metric, value in (("replies_s", 500.0 * io), ("qemu.main.cpu_pct", 10.0 * io))]
    platforms = {f"vm@w.{io}": {"scenario": {"weights": {"io": io, "target": 1,
                                                         "neighbours": 1}}} for io in (1, 2)}
    text = render_html(report(rows=rows, natives={}, platforms=platforms))
    assert "CPU weights io:target:neighbours, vm web/1kB (seed 003 Table 5)" in text
    assert table_rows(text, "1:1:1 (w.1)")[1] == ["target QEMU main loop CPU %", "10 ± 0",
                                                 "20 ± 0"]


def test_no_scenario_lifecycle_sections_for_a_storage_run() -> None:
    text = default_document()
    for anchor in ("scenarios", "lifecycle", "propagation"):
        assert f'id="{anchor}"' not in text


def test_web_latency_table_next_to_httperf_means() -> None:
    rows = [row(p, "web", phase, metric, value + rep, rep=rep)
            for p, scale in (("native", 1.0), ("vm", 20.0)) for rep in range(3)
            for phase in ("1kB", "10kB")
            for metric, value in (("replies_s", 40.0), ("reply_ms", 0.5 * scale),
                                  ("wrk_lat_p50_ms", 0.3 * scale),
                                  ("wrk_lat_p99_ms", 2.0 * scale), ("wrk_rps", 900 / scale))]
    rows += [row("native", "other", "read", "mb_s", 100.0)]
    stats = [s for s in phase_stats(rows) if s.workload == "web"]
    table = web_latency_rows(stats, "native")
    assert [r[:2] for r in table] == [["1kB", "native"], ["1kB", "vm"], ["10kB", "native"],
                                      ["10kB", "vm"]]
    header = ["phase", "platform", *WEB_LATENCY_METRICS]
    first = dict(zip(header, table[0], strict=True))
    # Mean ± 95 % CI over the three repetitions (values v, v+1, v+2: ± 2.48).
    assert first["reply_ms"] == "1.5 ± 2.5" and first["wrk_lat_p99_ms"] == "3.0 ± 2.5"
    assert first["transfer_ms"] == "-"
    assert web_latency_rows([s for s in phase_stats(rows) if s.workload == "other"],
                            None) == []
    document = render_html(report(rows, natives={"web": "native", "other": "native"}))
    assert "Web latency: httperf's means and wrk's percentiles (ms)" in document
    assert "wrk p99 ms" in document and "coordinated-omission correction" in document


def test_a_card_name_wraps_only_between_its_names() -> None:
    """virtio-blk-iothread stays whole (no break at its hyphens); the text copies back as
    the cell's name (no look-alike hyphen)."""
    name = "virtio-blk-iothread@busy/fio-randread"
    shown = cell_name_html(name)
    assert shown.count('<span class="nw">') == 3 and shown.count("<wbr>") == 2
    assert re.sub(r"<[^>]+>", "", shown) == name
    assert '<span class="nw">virtio-blk-iothread</span>@<wbr>' in shown
