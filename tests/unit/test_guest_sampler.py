"""The guest sampler's output parsed with the host monitors' parsers (stored output of
a real TCG guest: 32 MiB of 16 kB O_DIRECT writes, libaio, 8 in flight; and an iperf3
sender), the layer split of the latency, and fio's own view of its I/O path."""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path

import pytest

from hvbench.analysis.layers import guest_await_ms, latency_layers
from hvbench.analysis.metrics import is_known
from hvbench.analysis.resources import derive
from hvbench.errors import HvbenchError
from hvbench.host import interrupt
from hvbench.monitors.diskstats import DiskCounters
from hvbench.monitors.guest import (
    GuestSample,
    GuestSampler,
    GuestWindow,
    disk_metrics,
    guest_reports,
    parse_sampler_output,
)
from hvbench.monitors.sampler import MonitorResult
from hvbench.monitors.session import merge_guest
from hvbench.platforms.base import ExecResult
from hvbench.platforms.registry import REGISTRY
from hvbench.report.html import render_html
from hvbench.report.model import build_run_report
from hvbench.report.render import html_input, report_json, section_titles, terminal_tables
from hvbench.store.records import MeasurementRow, RunRecord
from hvbench.workloads.fio import depth_mean, parse_fio_json

FIXTURES = Path(__file__).parent.parent / "fixtures"
DISK = (FIXTURES / "monitors" / "guest-sampler-disk.txt").read_text()
NET = (FIXTURES / "monitors" / "guest-sampler-net.txt").read_text()
MIB = 1024 * 1024


def test_disk_output_parses_into_samples() -> None:
    samples = parse_sampler_output(DISK, "vdb")
    assert len(samples) == DISK.count("\nT ") + DISK.startswith("T ")
    assert all(s.disk is not None and s.cpu is not None for s in samples)
    assert [s.t for s in samples] == sorted(s.t for s in samples)
    first, last = samples[0].disk, samples[-1].disk
    assert first is not None and last is not None
    # fio wrote 32 MiB to the device: 65536 sectors more at the end than at the start.
    assert (last.write_sectors - first.write_sectors) * 512 == 32 * MIB


def test_disk_reports_match_what_fio_did() -> None:
    samples = parse_sampler_output(DISK, "vdb")
    t0, t1 = samples[0].t, samples[-1].t
    reports = guest_reports(samples, "vdb", offset=0.0, t0=t0, t1=t1)
    assert set(reports) == {"guest.disk.vdb", "guest.cpu"}
    disk = reports["guest.disk.vdb"].summary
    assert disk["w_kb_s"] * (t1 - t0) == pytest.approx(32 * 1024, rel=1e-9)
    assert disk["avgrq_sz"] == pytest.approx(32.0, abs=0.1)  # 16 kB requests
    # Little's law inside the guest: in flight = requests/s x await.
    assert disk["avgqu_sz"] == pytest.approx(disk["w_s"] * disk["await_ms"] / 1000, rel=0.05)
    assert 0 < disk["util_pct"] <= 100
    cpu = reports["guest.cpu"].summary
    assert cpu["busy_pct"] + cpu["iowait_pct"] + cpu["idle_pct"] == pytest.approx(100.0)
    series = reports["guest.disk.vdb"].series
    # Pairs with the same uptime (10 ms resolution: the last sample right after
    # the one before it) make no row.
    assert len(series) == sum(b.t > a.t for a, b in itertools.pairwise(samples))
    assert series[0][0] == pytest.approx(samples[1].t - t0)


def test_summary_covers_the_host_window_only() -> None:
    samples = parse_sampler_output(DISK, "vdb")
    mid = samples[len(samples) // 2].t
    whole = guest_reports(samples, "vdb", offset=0.0, t0=samples[0].t, t1=samples[-1].t)
    half = guest_reports(samples, "vdb", offset=0.0, t0=samples[0].t, t1=mid)
    assert half["guest.disk.vdb"].summary != whole["guest.disk.vdb"].summary
    # An offset moves the window: the host's t0 = guest t + offset.
    shifted = guest_reports(samples, "vdb", offset=100.0, t0=samples[0].t + 100.0,
                            t1=mid + 100.0)
    assert shifted["guest.disk.vdb"].summary == half["guest.disk.vdb"].summary


def test_network_output_parses_nics_without_lo() -> None:
    samples = parse_sampler_output(NET, None)
    assert samples and all(set(s.net) == {"eth0"} and s.disk is None for s in samples)
    reports = guest_reports(samples, None, offset=0.0, t0=samples[0].t, t1=samples[-1].t)
    assert set(reports) == {"guest.cpu", "guest.net"}
    net = reports["guest.net"].summary
    assert net["eth0.tx_mbit_s"] > 100 * net["eth0.rx_mbit_s"] > 0  # a sender


def test_a_sample_cut_short_is_dropped_and_garbage_is_an_error() -> None:
    cut = "T 1.00\nD " + "0 " * 17 + "\nC cpu 1 0 1 1 0 0 0 0\nT 1.10\nD " + "0 " * 17
    assert [s.t for s in parse_sampler_output(cut, "vdb")] == [1.0]
    with pytest.raises(ValueError):
        parse_sampler_output("hello\n", "vdb")
    with pytest.raises(ValueError):
        parse_sampler_output("T 1.0\nX what\n", "vdb")


def test_per_cpu_lines_give_the_busiest_cpu() -> None:
    """Two CPUs, one doing all the work: the aggregate is half busy, the busiest CPU
    all (its stolen ticks excluded); a sampler of an earlier version (the aggregate line
    only) gives no per-CPU figure, and a line that is no cpu line is an error."""
    def sample(t: float, cpu0: tuple[int, ...], cpu1: tuple[int, ...]) -> str:
        total = tuple(a + b for a, b in zip(cpu0, cpu1, strict=True))
        lines = [f"C {name} {' '.join(map(str, v))}"
                 for name, v in (("cpu", total), ("cpu0", cpu0), ("cpu1", cpu1))]
        return "\n".join([f"T {t}", *lines]) + "\n"
    text = (sample(1.0, (0,) * 8, (0,) * 8)
            + sample(2.0, (90, 0, 0, 0, 0, 0, 0, 10), (0, 0, 0, 100, 0, 0, 0, 0)))
    samples = parse_sampler_output(text, None)
    assert [sorted(s.cpus) for s in samples] == [["cpu0", "cpu1"]] * 2
    cpu = guest_reports(samples, None, offset=0.0, t0=1.0, t1=2.0)["guest.cpu"].summary
    assert cpu["busy_pct"] == pytest.approx(50.0)
    assert cpu["max_busy_pct"] == pytest.approx(90.0)
    aggregate_only = "".join(line + "\n" for line in text.splitlines()
                             if not line.startswith("C cpu0") and not line.startswith("C cpu1"))
    old = guest_reports(parse_sampler_output(aggregate_only, None), None, offset=0.0,
                        t0=1.0, t1=2.0)["guest.cpu"].summary
    assert "max_busy_pct" not in old and old["busy_pct"] == pytest.approx(50.0)
    with pytest.raises(ValueError):
        parse_sampler_output("T 1.0\nC cpux 1 2 3\n", None)


def test_window_errors_are_reported_not_raised() -> None:
    assert GuestWindow("garbage", "vdb", 0.0).reports(0, 1)["guest"].error
    result = MonitorResult(t0=50.0, seconds=1.0)
    merge_guest(result, GuestWindow("", "vdb", 0.0, "guest sampler did not start: x"),
                50.0, "hvb-sampler in vm")
    assert "did not start" in result.errors["guest"] and not result.summary


def test_merge_adds_metrics_series_and_raw() -> None:
    samples = parse_sampler_output(DISK, "vdb")
    t0 = 1000.0
    offset = t0 - samples[0].t
    result = MonitorResult(t0=t0, seconds=samples[-1].t - samples[0].t)
    merge_guest(result, GuestWindow(DISK, "vdb", offset), t0, "hvb-sampler in vm")
    assert result.raw == {"guest-sampler": DISK}
    for name in ("guest.disk.vdb.avgqu_sz", "guest.disk.vdb.avgrq_sz",
                 "guest.disk.vdb.await_ms", "guest.disk.vdb.util_pct",
                 "guest.cpu.busy_pct", "guest.cpu.iowait_pct", "guest.cpu.steal_pct"):
        assert name in result.summary and is_known(name), name
    assert set(result.series) == {"guest.disk.vdb", "guest.cpu"}
    assert not result.errors


def test_await_is_all_requests_time_per_request() -> None:
    a = DiskCounters(10, 0, 80, 20, 10, 0, 80, 30, 0, 0, 0)
    b = DiskCounters(20, 0, 160, 40, 30, 0, 240, 90, 0, 100, 400)
    out = disk_metrics(a, b, 1.0)
    assert out["await_ms"] == pytest.approx((20 + 60) / (10 + 20))
    assert out["avgqu_sz"] == pytest.approx(0.4)
    assert disk_metrics(a, a, 1.0)["await_ms"] == 0.0


def test_fio_view_of_its_path() -> None:
    (deep,) = parse_fio_json((FIXTURES / "fio-libaio-depth8.json").read_text())
    assert deep.depth_mean == pytest.approx(8.0, abs=0.05)
    assert deep.slat_mean_us is not None and deep.clat_mean_us is not None
    assert (deep.slat_mean_us + deep.clat_mean_us) / 1000 == pytest.approx(
        deep.lat_mean_ms, rel=0.01)
    (sync,) = parse_fio_json((FIXTURES / "fio-write.json").read_text())
    assert sync.depth_mean == 1.0 and sync.slat_mean_us is None  # psync: no slat
    assert depth_mean({}) is None
    assert depth_mean({"1": 50.0, ">=64": 50.0}) == pytest.approx(32.5)
    for name in ("depth_mean", "slat_mean_us", "clat_mean_us"):
        assert is_known(name)


def test_layers_split_the_latency() -> None:
    values = {"clat_mean_us": 1342.6, "guest.disk.vdb.w_s": 5000.0,
              "guest.disk.vdb.await_ms": 0.635}
    layers = latency_layers(values, host_await_ms=0.2)
    assert layers == pytest.approx({"res.lat.guest_ms": 1.3426 - 0.635,
                                    "res.lat.virt_ms": 0.435, "res.lat.device_ms": 0.2})
    assert sum(layers.values()) == pytest.approx(1.3426)
    assert all(is_known(name) for name in layers)


def test_a_layer_without_evidence_is_absent() -> None:
    guest_only = {"clat_mean_us": 1000.0, "guest.disk.vdb.w_s": 10.0,
                  "guest.disk.vdb.await_ms": 0.4}
    assert set(latency_layers(guest_only, None)) == {"res.lat.guest_ms"}
    assert set(latency_layers({"clat_mean_us": 1000.0}, 0.3)) == {"res.lat.device_ms"}
    # A guest device that moved nothing has no await to subtract.
    idle = {"clat_mean_us": 1000.0, "guest.disk.vdb.w_s": 0.0, "guest.disk.vdb.await_ms": 0}
    assert guest_await_ms(idle) is None
    # Natively there is no virtualization path to split off.
    host = {"host.disk.sda.w_s": 100.0, "host.disk.sda.w_await_ms": 0.3, "iops": 100.0,
            "clat_mean_us": 500.0, "guest.disk.vdb.w_s": 1.0, "guest.disk.vdb.await_ms": 1.0}
    assert not any(k.startswith("res.lat.") for k in derive(host, native=True))
    assert derive(host, native=False)["res.lat.virt_ms"] == pytest.approx(0.7)


def test_busiest_guest_device_is_chosen() -> None:
    values = {"guest.disk.vdb.r_s": 5.0, "guest.disk.vdb.await_ms": 9.0,
              "guest.disk.vdc.w_s": 50.0, "guest.disk.vdc.await_ms": 1.0}
    assert guest_await_ms(values) == 1.0
    assert GuestSample(1.0).net == {}


class _Guest:
    """Answers the sampler's start and stop commands as a guest would (for the host
    side's logic only; tests/integration/test_guest_evidence.py runs the real one)."""

    name = "vm"

    def __init__(self, start_output: str = "77 9.30\n") -> None:
        self.calls: list[str] = []
        self.start_output = start_output

    def exec(self, argv: list[str], *, timeout: float) -> ExecResult:
        self.calls.append(argv[3])
        out = self.start_output if argv[3] == "hvb-sampler-start" else DISK
        return ExecResult(tuple(argv), 0, out.encode(), b"", 0.1)


def test_sampler_start_stop_and_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    guest = _Guest()
    sampler = GuestSampler(guest, "vdb", net=False)  # type: ignore[arg-type]
    sampler.start()
    assert sampler.pid == 77 and sampler in REGISTRY.live()
    assert sampler.offset == pytest.approx(time.monotonic() - 9.30, abs=1.0)
    sampler.stop()
    sampler.stop()
    assert guest.calls == ["hvb-sampler-start", "hvb-sampler-stop"]
    assert sampler.window is not None and sampler.window.raw == DISK
    assert sampler not in REGISTRY.live()


def test_sampler_stop_without_start_or_when_interrupted(
        monkeypatch: pytest.MonkeyPatch) -> None:
    guest = _Guest()
    never = GuestSampler(guest, "vdb", net=False)  # type: ignore[arg-type]
    never.stop()
    assert guest.calls == [] and never.window is not None
    assert never.window.error == "guest sampler never started"
    bad = GuestSampler(_Guest("garbage"), None, net=True)  # type: ignore[arg-type]
    with pytest.raises(HvbenchError):
        bad.start()
    bad.stop()  # launched: the stop command still runs, and finds it by its pid file
    assert bad.platform.calls == ["hvb-sampler-start", "hvb-sampler-stop"]  # type: ignore[attr-defined]
    monkeypatch.setattr(interrupt, "received", lambda: 2)
    cut = GuestSampler(guest, "vdb", net=False)  # type: ignore[arg-type]
    cut.start()
    cut.stop()
    assert guest.calls[-1] == "hvb-sampler-start"  # no agent round trip once interrupted
    assert cut.window is not None and cut.window.error == "interrupted"


def test_layers_in_every_report_format() -> None:
    run = RunRecord("r", "s", "s.toml", "", 0, "t", None, "complete", "0", None,
                    {"accelerator": "tcg"})
    metrics = {"mb_s": 80.0, "iops": 5000.0, "lat_mean_ms": 1.45, "clat_mean_us": 1340.0,
               "depth_mean": 8.0, "guest.disk.vdb.w_s": 5000.0,
               "guest.disk.vdb.await_ms": 0.64, "guest.disk.vdb.avgqu_sz": 3.2,
               "host.disk.sda.w_s": 4000.0, "host.disk.sda.w_await_ms": 0.3,
               "host.disk.sda.avgqu_sz": 1.2}
    rows = [MeasurementRow(0, "vm/deep", "vm", "deep", r, 0, "write", m, v, "")
            for r in range(2) for m, v in metrics.items()]
    report = build_run_report(run, [], rows)
    (row,) = report.layers
    assert (row.guest_ms, row.virt_ms, row.device_ms) == pytest.approx((0.70, 0.34, 0.3))
    assert (row.depth, row.guest_queue, row.host_queue) == (8.0, 3.2, 1.2)
    titles = [str(t.title) for t in terminal_tables(report)]
    assert "Latency by layer (guest disk cells)" in titles
    assert "Latency by layer (guest disk cells)" in section_titles(report)["extra"]
    doc = json.loads(report_json(report))
    assert doc["latency_layers"][0]["virt_ms"] == pytest.approx(0.34)
    html = render_html(html_input(report, None))
    assert 'id="layers"' in html and "0.34" in html
    # Without guest-side evidence there is no such table, and no key.
    bare = build_run_report(run, [], [r for r in rows if not r.metric.startswith("guest.")])
    assert not bare.layers and "latency_layers" not in json.loads(report_json(bare))
