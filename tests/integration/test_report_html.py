"""The HTML report as a person sees it: rendered by headless Chromium (Debian's
``chromium``), every figure visible, nothing requested outside the file.

Three pages: the report of a real run of ``examples/storage.toml`` cut down with
``--set`` to the native platform and one TCG guest with small files, one repetition;
the full storage matrix (its 28 platforms, from the real study file) with synthetic
numbers and time series; and a
scenario-shaped run with synthetic numbers: web workloads alone and next to idle,
co-located, weighted and on-demand guests (degradation, aggregated ratio, weights,
CoV, the normalized throughput of seed 003 Fig. 14), lifecycle steps and propagation
by method with its NIC line.

How "requests nothing" is checked, three ways: the page carries a strict CSP and no
URL (static); an instrumented copy records every resource the document loaded and
every CSP violation (none allowed); and Chromium runs behind a recording proxy that
must see no request from the page, only Chromium's own background calls (listed in
:data:`BROWSER_OWN`; a positive control shows a page's request is seen).
"""

from __future__ import annotations

import html
import json
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from hvbench.image.builder import GuestImage
from hvbench.model.study import parse_study
from hvbench.report.html import CSP, ReportInput, render_html
from hvbench.store.records import MeasurementRow, SampleRow
from tests.integration.conftest import hvbench

pytestmark = pytest.mark.integration
HVBENCH = str(Path(sys.executable).parent / "hvbench")
ROOT = Path(__file__).resolve().parents[2]
HOST_RAM = 24 << 30
#: Requests headless Chromium makes on its own whatever the page (component updates,
#: sign-in, network time), even with background networking disabled.
BROWSER_OWN = (b"update.googleapis.com", b"accounts.google.com", b"clients2.google.com/time/",
               b"optimizationguide-pa.googleapis.com", b"content-autofill.googleapis.com")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-breakpad", "--disable-extensions", "--disable-default-apps", "--no-pings",
         "--disable-domain-reliability", "--hide-scrollbars",
         "--disable-features=NetworkTimeServiceQuerying,OptimizationHints,Translate")

# Records document resources and CSP violations, then writes them and every image's
# size into the DOM for --dump-dom.
PROBE_HEAD = """<script>window.hvbViolations = [];
document.addEventListener('securitypolicyviolation', e => hvbViolations.push(e.blockedURI));
</script>"""
PROBE_BODY = """<script>window.addEventListener('load', () => {
  const items = [...document.querySelectorAll('img, svg')].map(e => {
    const r = e.getBoundingClientRect();
    return {tag: e.tagName, alt: e.getAttribute('alt'), width: r.width, height: r.height,
            natural: e.tagName === 'IMG' ? (e.complete ? e.naturalWidth : 0) : -1};
  });
  const pre = document.createElement('pre');
  pre.id = 'hvb-probe';
  pre.textContent = JSON.stringify({items: items, violations: window.hvbViolations,
    resources: performance.getEntriesByType('resource').map(e => e.name)});
  document.body.appendChild(pre);
});</script>"""


@pytest.fixture(scope="module")
def chromium() -> str:
    path = shutil.which("chromium")
    if path is None:
        pytest.fail("Debian's chromium is not installed (apt-get install chromium; "
                    "`make deps` installs it)")
    return path


@contextmanager
def recording_proxy() -> Iterator[tuple[int, list[bytes]]]:
    """A TCP listener standing in for an HTTP proxy: it records the first bytes of
    every connection (the request line) and answers nothing."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(32)
    server.settimeout(0.2)
    seen: list[bytes] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2)
                try:
                    seen.append(conn.recv(300))
                except OSError:
                    seen.append(b"")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1], seen
    finally:
        stop.set()
        thread.join()
        server.close()


def run_chromium(browser: str, page: Path, work: Path, *args: str) -> tuple[str, list[bytes]]:
    """Chromium on ``page`` with a fresh profile, behind the recording proxy; returns
    its stdout and what the proxy saw (minus Chromium's own background requests)."""
    profile = work / f"profile-{len(list(work.glob('profile-*')))}"
    # Chromium's singleton socket lives in TMPDIR and its path must stay short.
    tmp = tempfile.mkdtemp(prefix="hvb-chr-", dir="/tmp")
    try:
        with recording_proxy() as (port, seen):
            done = subprocess.run(
                [browser, *FLAGS, f"--user-data-dir={profile}",
                 f"--proxy-server=http://127.0.0.1:{port}", "--proxy-bypass-list=<-loopback>",
                 *args, page.as_uri()],
                capture_output=True, text=True, timeout=180, check=False,
                env={**os.environ, "HOME": str(work), "TMPDIR": tmp})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, [s for s in seen if not any(own in s for own in BROWSER_OWN)]


def instrumented(text: str) -> str:
    """The page with the probe scripts; its CSP allows inline scripts, nothing else."""
    probe_csp = CSP + "; script-src 'unsafe-inline'"
    assert f'content="{CSP}"' in text
    text = text.replace(f'content="{CSP}"', f'content="{probe_csp}"', 1)
    text = text.replace("<head>", "<head>" + PROBE_HEAD, 1)
    return text.replace("</body>", PROBE_BODY + "</body>", 1)


def probe(browser: str, page: Path, work: Path) -> dict[str, Any]:
    copy = work / f"probe-{page.name}"
    copy.write_text(instrumented(page.read_text()))
    dom, requests = run_chromium(browser, copy, work, "--virtual-time-budget=15000",
                                 "--dump-dom")
    assert requests == [], f"the page requested: {requests}"
    match = re.search(r'<pre id="hvb-probe">(.*?)</pre>', dom, re.S)
    assert match, dom[-2000:]
    result: dict[str, Any] = json.loads(html.unescape(match.group(1)))
    return result


def check_static(text: str) -> None:
    assert f'<meta http-equiv="Content-Security-Policy" content="{CSP}">' in text
    assert "<script" not in text and "<link" not in text and "@import" not in text
    for attribute in re.findall(r'\b(?:src|href)="([^"]*)"', text):
        assert attribute.startswith(("data:image/svg+xml;base64,", "#")), attribute[:80]
    assert not re.search(r"url\(\s*['\"]?(?!data:)", text)


def check_page(browser: str, page: Path, work: Path, images: int) -> dict[str, Any]:
    """Static and runtime checks: at least ``images`` figures, every one decoded and
    laid out with a size; no resource loaded, no CSP violation, nothing through the
    proxy."""
    text = page.read_text()
    check_static(text)
    result = probe(browser, page, work)
    assert result["violations"] == [] and result["resources"] == []
    items = result["items"]
    assert len(items) == text.count("<img ") >= images
    for item in items:
        assert item["width"] > 50 and item["height"] > 50, item
        assert item["tag"] != "IMG" or item["natural"] > 0, item
    return result


def screenshot(browser: str, page: Path, work: Path, height: int) -> Image.Image:
    png = work / f"{page.stem}.png"
    _, requests = run_chromium(browser, page, work, f"--screenshot={png}",
                               f"--window-size=1400,{height}", "--virtual-time-budget=15000")
    assert requests == [], f"the page requested: {requests}"
    return Image.open(png).convert("RGB")


def color_counts(image: Image.Image) -> list[tuple[int, tuple[int, int, int]]]:
    """(pixel count, RGB) of every colour of an RGB image."""
    counts = image.getcolors(image.width * image.height) or []
    return [(n, (int(c[0]), int(c[1]), int(c[2])))  # type: ignore[index]
            for n, c in counts]


def check_not_blank(image: Image.Image) -> None:
    counts = color_counts(image)
    ink = sum(n for n, rgb in counts if sum(rgb) < 600) / (image.width * image.height)
    assert len(counts) > 50 and ink > 0.02, (len(counts), ink)


def red_banner_pixels(image: Image.Image) -> int:
    return sum(n for n, (r, g, b) in color_counts(image) if r > 180 and g < 40 and b < 40)


# -- a real run --------------------------------------------------------------------------------
#: examples/storage.toml with one guest variant, small files, 1 repetition (`--set`; as
#: every reduced example runs: a repetition renders every figure the page has, and the
#: error bars of several are rendered from the full matrix's synthetic rows below).
SMALL_STORAGE = [
    "study.repetitions=1", "platform.vm.disk.size=48M", "platform.vm.exclude=[]",
    'platform.vm.only=[{ bus = "virtio-blk", cache = "none", format = "raw", '
    'allocation = "preallocated" }]',
    "workload.iozone.file_size=16M", "workload.dd.file_size=16M"]


def test_report_of_a_real_storage_run_renders(image: GuestImage, chromium: str,
                                              tmp_path: Path) -> None:
    study = ROOT / "examples" / "storage.toml"
    db, page = tmp_path / "r.db", tmp_path / "report.html"
    parsed = parse_study(study.read_text(), str(study), HOST_RAM, SMALL_STORAGE)
    assert [p.name for p in parsed.platforms] == ["native", "vm.virtio-blk-none-raw-preallocated"]
    assert parsed.study.repetitions == 1
    changes = [arg for change in SMALL_STORAGE for arg in ("--set", change)]
    done = subprocess.run([HVBENCH, "run", str(study), *changes, "--db", str(db)],
                          capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    done = hvbench("report", "--format", "html", "-o", str(page), "--db", str(db))
    assert done.returncode == 0, done.stderr
    text = page.read_text()
    for heading in ("Workload iozone", "Workload dd", "Host disk", "Time series",
                    "Stability warnings", "Study file"):
        assert heading in text, heading
    as_json = hvbench("report", "--format", "json", "--db", str(db))
    assert as_json.returncode == 0, as_json.stderr
    tcg = '"accelerator": "tcg"' in as_json.stdout
    # bars and % of native for iozone and dd, 8 time-series grids (and the boot bars
    # under the workload(s) the guest's boots were stored with)
    work = tmp_path / "browser"
    work.mkdir()
    check_page(chromium, page, work, images=2 * 2 + 1 + 8)
    shot = screenshot(chromium, page, work, height=3000)
    check_not_blank(shot)
    assert (red_banner_pixels(shot) > 5000) == tcg


# -- a real scenario run -----------------------------------------------------------------------
#: The smallest study with both kinds of scenario (seed 003): iperf3 from a guest to an
#: external lab host, alone, next to one idle guest, and while one guest is started on
#: demand 3 s into the window (the window lasts until that guest's agent answers).
SCENARIO_STUDY = """
[study]
name = "scenario-report"
repetitions = 1
seed = 7

[[lab.host]]
name = "client"

[[platform]]
name = "vm"
machine = "pc"
memory_mib = 256
nic = { model = "virtio-net", backend = "tap" }

[[workload]]
kind = "network"
name = "iperf3"
peer = "client"
duration_s = 4
omit_s = 0

[[scenario]]
name = "idle1"
neighbours = [{ role = "idle", count = 1, memory_mib = 256 }]

[[scenario]]
name = "ondemand"
start = { count = 1, at_s = 3, memory_mib = 256 }
"""
#: The tables the Scenarios section of that run must show.
REAL_SCENARIO_HEADINGS = ("<h3>Degradation against alone</h3>",
                          "<h3>Guests started on demand (seed 003 Fig. 14)</h3>",
                          "<h3>CoV % over the measured window (seed 003 §4.3)</h3>")
ONDEMAND_FIGURE = "iperf3 / tx: normalized throughput, guests started on demand"


@pytest.mark.skipif(os.geteuid() != 0, reason="the net lab needs root")
def test_report_of_a_real_scenario_run_renders(image: GuestImage, chromium: str,
                                               tmp_path: Path) -> None:
    study, db, page = tmp_path / "scenario.toml", tmp_path / "r.db", tmp_path / "report.html"
    study.write_text(SCENARIO_STUDY)
    parsed = parse_study(SCENARIO_STUDY, str(study), HOST_RAM)
    assert [c.name for c in parsed.cells] == ["vm/iperf3", "vm@idle1/iperf3",
                                              "vm@ondemand/iperf3"]
    done = subprocess.run([HVBENCH, "run", str(study), "--db", str(db)],
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    # `hvbench run` ends with the report, scenario tables included
    assert "Degradation against alone" in done.stdout, done.stdout[-3000:]
    assert "Guests started on demand" in done.stdout
    done = hvbench("report", "--format", "html", "-o", str(page), "--db", str(db))
    assert done.returncode == 0, done.stderr
    text = page.read_text()
    for heading in ('<h2 id="w-iperf3">Workload iperf3</h2>', '<h2 id="series">Time series</h2>',
                    '<h2 id="scenarios">Scenarios</h2>', *REAL_SCENARIO_HEADINGS):
        assert heading in text, heading
    plain = text.replace("<wbr>", "")  # headers may wrap after ':' and '.'
    for cell in ("vm@idle1", "vm@ondemand", "throughput:value"):  # cells of the tables
        assert re.search(rf'<t[dh] class="l?">{re.escape(cell)}</t[dh]>', plain), cell
    as_json = hvbench("report", "--format", "json", "--db", str(db))
    assert as_json.returncode == 0, as_json.stderr
    doc = json.loads(as_json.stdout)
    scenarios = doc["scenarios"]
    assert {d["scenario"] for d in scenarios["degradation"]} == {"idle1", "ondemand"}
    (started,) = scenarios["ondemand"]
    assert started["starts"][0]["startup_s"]["mean"] > 0
    assert any(c["monitor"] == "throughput" for c in scenarios["cov"])
    work = tmp_path / "browser"
    work.mkdir()
    # iperf3 Mbit/s and boot bars; the iperf3 time series; % of alone; the on-demand dip
    result = check_page(chromium, page, work, images=2 + 1 + 1 + 1)
    shown = {item["alt"]: item for item in result["items"]}
    for alt in (ONDEMAND_FIGURE, "iperf3: Mbit/s in % of alone"):
        assert alt in shown, sorted(shown)
        assert shown[alt]["width"] > 200 and shown[alt]["natural"] > 0, shown[alt]
    shot = screenshot(chromium, page, work, height=4000)
    check_not_blank(shot)
    assert (red_banner_pixels(shot) > 5000) == (doc["run"]["env"]["accelerator"] == "tcg")


# -- the full storage matrix and a scenario, synthetic numbers ---------------------------------
def synthetic_rows(cells: list[tuple[str, str, str]], phases: dict[str, list[str]],
                   reps: int, seed: int) -> list[MeasurementRow]:
    rng = random.Random(seed)
    rows = []
    for index, (cell, platform, workload) in enumerate(cells):
        scale = 1.0 if platform == "native" else rng.uniform(0.1, 0.9)
        for rep in range(reps):
            for phase in phases[workload]:
                for metric, base in (("mb_s", 300.0), ("iops", 3000.0), ("lat_p99_ms", 2.0),
                                     ("host.disk.vda.util_pct", 50.0),
                                     ("host.disk.vda.avgrq_sz", 250.0)):
                    value = base * scale * rng.uniform(0.9, 1.1)
                    rows.append(MeasurementRow(index, cell, platform, workload, rep, 0, phase,
                                               metric, value, ""))
            if platform != "native":
                rows.append(MeasurementRow(index, cell, platform, workload, rep, 0, "boot",
                                           "boot_s", rng.uniform(4, 6), "s"))
    return rows


def synthetic_samples(rows: list[MeasurementRow], monitor: str, key: str,
                      seed: int) -> list[SampleRow]:
    rng = random.Random(seed)
    keys = sorted({(r.cell, r.repetition, r.phase) for r in rows if r.phase != "boot"})
    return [SampleRow(cell, rep, phase, monitor, 0.1 * i, {key: rng.uniform(50, 150)})
            for cell, rep, phase in keys for i in range(1, 30)]


def report_input(name: str, rows: list[MeasurementRow], samples: list[SampleRow],
                 natives: dict[str, str | None], study_text: str) -> ReportInput:
    env = {"hostname": "ci", "kernel": "6.1.0", "cpu_model": "EPYC", "cpus": 2,
           "memory_bytes": 24 << 30, "qemu_version": "7.2.22", "accelerator": "tcg"}
    return ReportInput(run_id=f"{name}-run", study_name=name, status="complete",
                       created_at="2026-11-23T00:00:00+00:00", finished_at=None, env=env,
                       study_text=study_text, rows=rows, natives=natives, samples=samples)


def test_report_of_the_full_storage_matrix_renders(chromium: str, tmp_path: Path) -> None:
    text = (ROOT / "examples" / "storage.toml").read_text()
    study = parse_study(text, "examples/storage.toml", HOST_RAM)
    assert len(study.platforms) == 28
    cells = [(c.name, c.platform.name, c.workload.name) for c in study.cells]
    phases = {"iozone": ["write", "rewrite", "read", "reread", "randread", "randwrite"],
              "dd": ["write", "read"]}
    rows = synthetic_rows(cells, phases, reps=2, seed=1)
    samples = synthetic_samples(rows, "host.disk.vda", "w_mb_s", seed=2)
    page = tmp_path / "storage.html"
    page.write_text(render_html(report_input("storage", rows, samples,
                                             {"iozone": "native", "dd": "native"}, text)))
    work = tmp_path / "browser"
    work.mkdir()
    # per workload: bars, % of native, boot bars; one grid per (workload, phase)
    result = check_page(chromium, page, work, images=3 * 2 + 8)
    widest = max(item["width"] for item in result["items"])
    assert widest <= 1400  # charts scale down to the page, never overflow it
    check_not_blank(screenshot(chromium, page, work, height=2000))


def _identity(workload: str) -> tuple[str | None, float | None]:
    """(method, image size) of a synthetic workload name such as ``propagation.scp-1G``
    or ``lifecycle.256M-raw-copy``: the identity fields the store would carry."""
    kind, _, rest = workload.partition(".")
    units = {"M": 1 << 20, "G": 1 << 30}
    if kind == "propagation":
        method, _, size = rest.rpartition("-")
        return method, float(int(size[:-1]) * units[size[-1]])
    if kind == "lifecycle":
        size, _, method = rest.partition("-")
        return method, float(int(size[:-1]) * units[size[-1]])
    return None, None


def measurement(at: tuple[str, str, int], phase: str, metric: str, value: float
                ) -> MeasurementRow:
    """A row of (platform, workload, repetition) ``at``, with the identity fields a
    stored row has (base platform and scenario of ``vm@scenario``, method, size)."""
    platform, workload, rep = at
    base, _, scenario = platform.partition("@")
    method, size = _identity(workload)
    return MeasurementRow(0, f"{platform}/{workload}", platform, workload, rep, 0, phase,
                          metric, value, "", base_platform=base, scenario=scenario or None,
                          method=method, image_size=size)


def propagation_run(rng: random.Random) -> list[MeasurementRow]:
    """scp and overlay (later repetitions are cache hits) at 1, 2 and 4 GiB on a native
    node and a guest node, over a 1 Gbit/s link."""
    rows = []
    for platform, slope in (("native", 1.0), ("vm", 2.5)):
        for method in ("scp", "overlay"):
            for gb in (1, 2, 4):
                workload = f"propagation.{method}-{gb}G"
                for rep in range(3):
                    hit = method == "overlay" and rep > 0
                    jitter = rng.uniform(0.98, 1.02)
                    transfer = 0.01 if hit else slope * 8.6 * gb * jitter
                    values = (("initial", "duration_s", 0.4 * jitter),
                              ("transfer", "duration_s", transfer),
                              ("terminal", "duration_s", 1.2 * jitter),
                              ("shutdown", "duration_s", 0.3),
                              ("transfer", "size_bytes", 0.0 if hit else gb * float(1 << 30)),
                              ("transfer", "link_rate_bits", 1e9),
                              ("transfer", "mb_s", 0.0 if hit else gb * 1074 / transfer))
                    rows += [measurement((platform, workload, rep), *v) for v in values]
                    if method == "overlay":
                        rows.append(measurement((platform, workload, rep), "transfer",
                                                "cache_hit", float(hit)))
    return rows


def lifecycle_run(rng: random.Random) -> list[MeasurementRow]:
    """Create, boot and stop a guest with a 256M, 512M and 1G image, and idle guests."""
    rows = []
    for mib in (256, 512, 1024):
        workload = f"lifecycle.{mib}M-raw-copy" if mib < 1024 else "lifecycle.1G-raw-copy"
        for rep in range(3):
            create = 0.2 + mib / 300 * rng.uniform(0.95, 1.05)
            steps = {"create": create, "qemu": 0.15, "kernel": rng.uniform(1.2, 1.6),
                     "agent": rng.uniform(0.6, 0.9), "shutdown": 0.4, "exit": 0.05}
            rows += [measurement(("vm", workload, rep), p, "duration_s", d)
                     for p, d in steps.items()]
            rows += [measurement(("vm", workload, rep), "create", "size_bytes", mib * 1048576.0),
                     measurement(("vm", workload, rep), "create", "mb_s", mib * 1.048576 / create),
                     measurement(("vm", workload, rep), "idle", "host_busy_pct",
                                 rng.uniform(2, 4)),
                     measurement(("vm", workload, rep), "idle", "guests", 4.0)]
    return rows


#: Scenario platforms of the web workloads: (workload, platforms measured).
WEB_CELLS = {"max": ("vm", "vm@idle1", "vm@idle3"),
             "fixed": ("vm", "vm@idle3", "vm@nb70k", "vm@w.0.5", "vm@w.1", "vm@w.2"),
             "steady": ("vm", "vm@ondemand")}


def web_metrics(platform: str, phase: str, rng: random.Random) -> dict[str, float]:
    """A web phase's metrics in a scenario: seed 003's magnitudes, slower with company."""
    best = {"1kB": 1070.0, "70kB": 165.0}[phase]
    slow = {"vm": 1.0, "vm@idle1": 0.99, "vm@idle3": 0.94, "vm@nb70k": 0.62,
            "vm@w.0.5": 0.67, "vm@w.1": 0.57, "vm@w.2": 0.5, "vm@ondemand": 0.9}[platform]
    replies = best * slow * rng.uniform(0.98, 1.02)
    out = {"replies_s": replies, "reply_ms": 1.0 / slow * rng.uniform(0.9, 1.1),
           "transfer_ms": 2.0 / slow, "qemu.vcpu.cpu_pct": 60 * slow,
           "qemu.main.cpu_pct": 20.0, "qemu.main.exec_per_s": 950 / slow,
           "qemu.main.cpu_ms_per_exec": 0.3 * slow, "qemu.vcpu.wait_pct": 5 / slow}
    if platform.startswith(("vm@idle", "vm@nb", "vm@w")):
        out |= {"nb0.vcpu.cpu_pct": 1.0, "nb0.main.cpu_pct": 0.5}
    if platform.startswith(("vm@nb", "vm@w")):
        out |= {"nb0.load.replies_per_s": 112.0 * rng.uniform(0.97, 1.03),
                "nb0.load.file_kb": 70.0}
    return out


def ondemand_metrics(rep: int) -> dict[str, float]:
    return {"ondemand.0.asked_at_s": 4.0 + 0.05 * rep, "ondemand.0.startup_s": 6.0 + rep,
            "ondemand.1.asked_at_s": 6.0 + 0.05 * rep, "ondemand.1.startup_s": 7.5 + rep,
            "dip.baseline": 8.0, "dip.depth_pct": 45.0 + rep, "dip.length_s": 6.0,
            "dip.min_normalized": 0.55 - 0.01 * rep}


def web_samples(cell: str, rep: int, phase: str, rng: random.Random) -> list[SampleRow]:
    """10 Hz thread, host CPU and NIC samples of one window."""
    out = []
    for i in range(1, 40):
        t = 0.1 * i
        out += [SampleRow(cell, rep, phase, "qemu", t, {"vcpu.cpu_pct": rng.uniform(40, 60),
                                                        "vcpu.wait_pct": rng.uniform(1, 9)}),
                SampleRow(cell, rep, phase, "host.cpu", t, {"busy_pct": rng.uniform(30, 70)}),
                SampleRow(cell, rep, phase, "net", t,
                          {"guest-tap0.rx_mbit_s": rng.uniform(8, 10),
                           "guest-tap0.tx_mbit_s": rng.uniform(0.5, 1)})]
    return out


def dip_samples(cell: str, rep: int, rng: random.Random) -> list[SampleRow]:
    """The target's 1 s throughput: steady, a dip while guests start, then back."""
    return [SampleRow(cell, rep, "1kB", "throughput", float(t),
                      {"value": 8.0 * (0.55 if 4 <= t < 10 else 1.0) * rng.uniform(0.97, 1.03)})
            for t in range(16)]


def web_run(rng: random.Random) -> tuple[list[MeasurementRow], list[SampleRow]]:
    rows: list[MeasurementRow] = []
    samples: list[SampleRow] = []
    for workload, platforms in WEB_CELLS.items():
        phases = ["1kB"] if workload == "steady" else ["1kB", "70kB"]
        for platform in platforms:
            cell = f"{platform}/{workload}"
            for rep in range(3):
                for phase in phases:
                    metrics = web_metrics(platform, phase, rng)
                    if workload == "max":
                        metrics["max_rate_rps"] = metrics["replies_s"]
                    if platform == "vm@ondemand":
                        metrics |= ondemand_metrics(rep)
                        samples += dip_samples(cell, rep, rng)
                    rows += [measurement((platform, workload, rep), phase, m, v)
                             for m, v in metrics.items()]
                    samples += web_samples(cell, rep, phase, rng)
    return rows, samples


def weights_definitions() -> dict[str, dict[str, Any]]:
    return {f"vm@w.{io}": {"machine": "pc", "scenario": {
        "name": "w", "weights": {"io": float(io), "target": 1.0, "neighbours": 1.0,
                                 "cpus": "0", "target_quota_pct": None}}}
        for io in ("0.5", "1", "2")}


#: Figures the scenario page must show (their alt text), besides the workloads' bars.
SCENARIO_FIGURES = (
    "max: max sustained req/s in % of alone", "fixed: replies/s in % of alone",
    "steady / 1kB: normalized throughput, guests started on demand",
    "time per lifecycle step (mean over repetitions)",
    "create time against image size, with least-squares trends",
    "time per propagation phase (mean over repetitions)",
    "total propagation time against size, with least-squares trends")
SCENARIO_TABLES = ("Degradation against alone", "Aggregated throughput ratio",
                   "Guests started on demand", "CPU weights io:target:neighbours, vm fixed/1kB",
                   "CoV % over the measured window", "Idle guests: host CPU they use",
                   "theoretical NIC 1000 Mbit/s", "intercept: the manager&#x27;s overhead s")


def test_report_of_a_scenario_run_renders(chromium: str, tmp_path: Path) -> None:
    rng = random.Random(4)
    propagation, lifecycle = propagation_run(rng), lifecycle_run(rng)
    web, samples = web_run(rng)
    transfers = [r for r in propagation if r.phase == "transfer" and "scp" in r.workload]
    samples += synthetic_samples(transfers, "iperf3", "mbit_s", seed=3)
    rows = [*propagation, *lifecycle, *web]
    moved = {r.workload for r in propagation}
    natives: dict[str, str | None] = {r.workload: "native" if r.workload in moved else None
                                      for r in rows}
    data = report_input("scenario", rows, samples, natives, "")
    page = tmp_path / "scenario.html"
    page.write_text(render_html(replace(data, platforms=weights_definitions())))
    text = page.read_text()
    for expected in ("Propagation", "Lifecycle", "Scenarios", ">R²</th>",
                     *SCENARIO_TABLES):
        assert expected in text, expected
    work = tmp_path / "browser"
    work.mkdir()
    # 6 propagation workloads x (MB/s bars, % of native), 3 lifecycle and 3 web
    # workloads x bars, 3 iperf3 grids (scp transfers) and 5 host CPU grids (web
    # phases); propagation: stacked bars and trend; lifecycle: the same; scenarios: 3
    # % of alone charts and the on-demand grid
    result = check_page(chromium, page, work, images=6 * 2 + 3 + 3 + 3 + 5 + 2 + 2 + 3 + 1)
    shown = {item["alt"]: item for item in result["items"]}
    for alt in SCENARIO_FIGURES:
        assert alt in shown, alt
        assert shown[alt]["width"] > 200 and shown[alt]["natural"] > 0, shown[alt]
    check_not_blank(screenshot(chromium, page, work, height=2000))


def test_the_proxy_sees_a_page_request(chromium: str, tmp_path: Path) -> None:
    """Positive control of the network check."""
    page = tmp_path / "leaky.html"
    page.write_text('<html><body><img src="http://leak.invalid/x.png"></body></html>')
    _, requests = run_chromium(chromium, page, tmp_path, "--virtual-time-budget=3000",
                               "--dump-dom")
    assert any(b"leak.invalid" in r for r in requests), requests
