"""Guest-side evidence against the real thing: one guest, a short fio cell (libaio, 8
in flight) and a short iperf3 cell through the runner, and the sampler's life in a
guest on success, failure and abort.

Wall time here (TCG, 2 shared cores, pytest --durations): 10.5 s for the study (one
boot, a 32 MiB fio phase, a 3 s iperf3 phase) and 3.1 s for the life-cycle test (one
boot); 17 s for the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hvbench.errors import HvbenchError
from hvbench.image.builder import GuestImage
from hvbench.model.spec import DiskSpec, VmSpec
from hvbench.model.study import parse_study
from hvbench.monitors.guest import PROCESS_NAME, RAW_KIND, parse_sampler_output
from hvbench.monitors.session import monitors_for
from hvbench.platforms.qemu import QemuPlatform
from hvbench.platforms.registry import REGISTRY
from hvbench.report.model import load_run_report
from hvbench.report.render import report_json
from hvbench.run.cells.base import MonitorWindow
from hvbench.run.runner import run_study
from hvbench.store.database import Store

pytestmark = pytest.mark.integration

HOST_RAM = 24 << 30
MIB = 1 << 20
STUDY = """
[study]
name = "guest-evidence"
repetitions = 1
seed = 3

[[platform]]
kind = "qemu"
name = "vm"
machine = "pc"
memory_mib = 256
disk = { bus = "virtio-blk", cache = "none", allocation = "preallocated", size = "48M" }
nic = { model = "virtio-net", backend = "tap" }

[[workload]]
name = "deep"
kind = "disk"
profile = "iozone"
target = "device"
file_size = "32M"
record_size = "16K"
direct = true
ioengine = "libaio"
iodepth = 8
phases = ["write"]

[[workload]]
kind = "network"
name = "iperf3"
peer = "host"
direction = "tx"
duration_s = 3
omit_s = 1
"""


def _fio_bytes(raw: str) -> int:
    doc = json.loads(raw[raw.find("{"):])
    return sum(int(job["write"]["io_bytes"]) for job in doc["jobs"])


def test_guest_metrics_stored_and_consistent_with_the_workload(
        image: GuestImage, tmp_path: Path) -> None:
    path = tmp_path / "evidence.toml"
    path.write_text(STUDY)
    store = Store(tmp_path / "r.db")
    try:
        outcome = run_study(parse_study(STUDY, str(path), HOST_RAM), store)
        assert outcome.failures == 0, store.failures(outcome.run_id)
        rows = store.measurements(outcome.run_id)
        raws = store.raw_outputs(outcome.run_id)
        samples = store.samples(outcome.run_id, monitor="guest.cpu")
        report = json.loads(report_json(load_run_report(store, outcome.run_id)))
    finally:
        store.close()
    values = {(r.workload, r.metric): r.value for r in rows}
    disks = {m.split(".")[2] for w, m in values if w == "deep" and m.startswith("guest.disk.")}
    assert len(disks) == 1, disks
    dev = disks.pop()
    for metric in (f"guest.disk.{dev}.avgqu_sz", f"guest.disk.{dev}.avgrq_sz",
                   f"guest.disk.{dev}.await_ms", f"guest.disk.{dev}.util_pct",
                   "guest.cpu.busy_pct", "guest.cpu.iowait_pct", "guest.cpu.steal_pct",
                   "depth_mean", "slat_mean_us", "clat_mean_us"):
        assert ("deep", metric) in values, metric
    # The guest device moved what fio wrote (a raw device: nothing else writes to it).
    raw = {(r.phase, r.kind): r.content for r in raws}
    lines = parse_sampler_output(raw[("write", RAW_KIND)], dev)
    first, last = lines[0].disk, lines[-1].disk
    assert first is not None and last is not None
    moved = (last.write_sectors - first.write_sectors) * 512
    assert moved == pytest.approx(_fio_bytes(raw[("write", "fio-json")]), rel=0.02)
    # 16 kB requests (32 sectors), or larger where the guest merged neighbours.
    assert 31.5 <= values[("deep", f"guest.disk.{dev}.avgrq_sz")] <= 8 * 32
    # fio kept 8 in flight; while busy, the guest block layer held several requests
    # at once, and never more than fio asked for.
    assert values[("deep", "depth_mean")] == pytest.approx(8, abs=0.5)
    busy = values[("deep", f"guest.disk.{dev}.util_pct")] / 100
    in_flight = values[("deep", f"guest.disk.{dev}.avgqu_sz")] / busy
    assert 1.2 < in_flight <= 8.5, in_flight
    # The network cell: the guest's NIC sent what iperf3 counted, and more.
    tx = [v for (w, m), v in values.items() if w == "iperf3" and m.endswith(".tx_bytes")
          and m.startswith("guest.net.")]
    assert tx and tx[0] * 8 / 1e6 >= values[("iperf3", "mbit_s")] * 2 * 0.9
    assert samples, "no guest CPU series stored"
    # One vCPU: the sampler's per-CPU line (cpu0) is the aggregate's CPU, so the
    # busiest CPU is the whole guest's busy share (steal excluded), and on the host the
    # busiest vCPU thread is the only one.
    assert "\nC cpu0 " in raw[("write", RAW_KIND)]
    assert values[("deep", "guest.cpu.max_busy_pct")] == pytest.approx(
        values[("deep", "guest.cpu.busy_pct")] - values[("deep", "guest.cpu.steal_pct")],
        abs=0.5)
    assert values[("deep", "qemu.vcpu.max_cpu_pct")] == pytest.approx(
        values[("deep", "qemu.vcpu.cpu_pct")])
    # The latency split: every layer measured; the guest device's await (fio's clat
    # minus the layer in the guest) is part of what fio waited, the device's positive.
    (layers,) = [r for r in report["latency_layers"] if r["workload"] == "deep"]
    assert None not in [layers[k] for k in ("clat_ms", "guest_ms", "virt_ms", "device_ms")]
    guest_await = layers["clat_ms"] - layers["guest_ms"]
    assert guest_await == pytest.approx(values[("deep", f"guest.disk.{dev}.await_ms")])
    assert 0 < guest_await <= layers["clat_ms"] * 1.05
    assert layers["device_ms"] > 0
    assert layers["guest_queue"] == values[("deep", f"guest.disk.{dev}.avgqu_sz")]


def _leftovers(guest: QemuPlatform) -> str:
    """The guest's sampler processes (its sh loop and awk) and files, as `ps` and `ls`
    see them. Busybox `timeout`, which wraps every agent command, leaves a watchdog
    copy of the command line for up to a second after the command ended: not ours."""
    done = guest.exec(["sh", "-c", f"ps -o pid,args | grep {PROCESS_NAME} | "
                       "grep -v -e grep -e 'timeout -s KILL'; "
                       f"ls /run | grep {PROCESS_NAME}; true"], timeout=30)
    return done.text().strip()


def test_sampler_leaves_nothing_on_success_failure_and_abort(image: GuestImage) -> None:
    spec = VmSpec(accel="tcg", disks=(DiskSpec(size=16 * MIB),))
    with QemuPlatform(spec, image=image) as guest:
        node = guest.bench_disk()
        assert node is not None
        phase = monitors_for(guest)
        phase.start()
        guest.exec(["dd", f"if={node}", "of=/dev/null", "bs=64k", "count=64",
                    "iflag=direct"], timeout=60)
        result = phase.stop()
        assert result.summary[f"guest.disk.{node.removeprefix('/dev/')}.r_kb_s"] > 0
        assert RAW_KIND in result.raw and "guest" not in result.errors
        assert phase.stop().summary == {}  # stopped twice: the second finds nothing
        assert _leftovers(guest) == ""
        # A phase that fails: the cell's window aborts its monitors.
        with pytest.raises(HvbenchError), MonitorWindow(monitors_for(guest)):
            raise HvbenchError("the workload failed")
        assert _leftovers(guest) == ""
        phase.start()
        phase.abort()
        phase.abort()
        assert _leftovers(guest) == ""
        assert not [p for p in REGISTRY.live() if PROCESS_NAME in p.name]
