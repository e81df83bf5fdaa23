"""iostat -x arithmetic on /proc/diskstats snapshots stored from this host.

diskstats-1.txt and diskstats-2.txt were taken around ``dd`` writing 400 x 64 KiB and
reading 300 x 16 KiB with O_DIRECT (plus whatever else the host did: 5 discards). The
vda deltas, by hand, field by field:

    reads 300, read merges 0, read sectors 9600, read ms 11,
    writes 400, write merges 0, write sectors 51200, write ms 67,
    io ms 92, queue ms 90, discards 5, discard sectors 51216, discard ms 12, flushes 0
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hvbench.errors import HostError
from hvbench.monitors import devices
from hvbench.monitors.diskstats import (
    DISK_METRICS,
    DiskCounters,
    iostat_metrics,
    parse_diskstats,
    parse_diskstats_line,
)
from hvbench.monitors.readers import DiskStatsSampler

FIXTURES = Path(__file__).parent.parent / "fixtures" / "monitors"


def _vda(name: str) -> DiskCounters:
    return parse_diskstats((FIXTURES / name).read_text())["vda"]


def test_parse_reads_every_device_and_all_17_counters() -> None:
    stats = parse_diskstats((FIXTURES / "diskstats-1.txt").read_text())
    assert set(stats) == {f"loop{i}" for i in range(8)} | {"vda", "zram0"}
    vda = stats["vda"]
    assert (vda.reads, vda.read_sectors, vda.writes, vda.io_ms, vda.queue_ms) == (
        276732, 39826541, 58465, 64752, 306225)
    assert (vda.discards, vda.discard_sectors, vda.flushes, vda.flush_ms) == (
        66338, 26196176, 3695, 5884)


def test_old_kernel_lines_without_discard_and_flush_counters() -> None:
    parsed = parse_diskstats_line("   8       0 sda 10 1 80 5 20 2 160 7 0 9 12")
    assert parsed is not None
    name, counters = parsed
    assert name == "sda" and counters.queue_ms == 12 and counters.discards == 0
    # Partitions of kernels before 2.6.25 had only 4 counters: no extended statistics.
    assert parse_diskstats_line("   8       1 sda1 35713 1122730 106304 850432") is None
    with pytest.raises(ValueError, match="invalid literal"):
        parse_diskstats_line("   8       0 sda x 1 80 5 20 2 160 7 0 9 12")


def test_iostat_metrics_of_the_stored_interval() -> None:
    m = iostat_metrics(_vda("diskstats-1.txt"), _vda("diskstats-2.txt"), 1.0)
    expected = {
        "r_s": 300.0, "w_s": 400.0, "d_s": 5.0, "f_s": 0.0,
        "r_kb_s": 4800.0, "w_kb_s": 25600.0, "d_kb_s": 25608.0,
        "r_mb_s": 4.6875, "w_mb_s": 25.0,  # iostat -m: sectors / 2048
        "rrqm_s": 0.0, "wrqm_s": 0.0, "drqm_s": 0.0,
        "rrqm_pct": 0.0, "wrqm_pct": 0.0, "drqm_pct": 0.0,
        "r_await_ms": 11 / 300, "w_await_ms": 0.1675, "d_await_ms": 2.4, "f_await_ms": 0.0,
        "rareq_sz_kb": 16.0, "wareq_sz_kb": 64.0, "dareq_sz_kb": 5121.6,
        "avgrq_sz": 60800 / 700,  # (9600 + 51200) sectors / 700 requests
        "avgqu_sz": 0.09, "aqu_sz": 0.09, "util_pct": 9.2,
    }
    assert list(m) == list(DISK_METRICS)
    assert m == pytest.approx(expected)


def test_rates_scale_with_the_interval_and_ratios_do_not() -> None:
    m = iostat_metrics(_vda("diskstats-1.txt"), _vda("diskstats-2.txt"), 0.5)
    assert m["w_s"] == pytest.approx(800.0) and m["w_mb_s"] == pytest.approx(50.0)
    assert m["avgqu_sz"] == pytest.approx(0.18) and m["util_pct"] == pytest.approx(18.4)
    assert m["w_await_ms"] == pytest.approx(0.1675) and m["wareq_sz_kb"] == 64.0


def test_merge_percentages() -> None:
    a = DiskCounters(100, 0, 800, 10, 0, 0, 0, 0, 0, 0, 0)
    b = DiskCounters(400, 100, 4000, 40, 0, 0, 0, 0, 0, 0, 0)
    m = iostat_metrics(a, b, 2.0)
    assert m["rrqm_s"] == 50.0 and m["rrqm_pct"] == 25.0  # 100 / (100 + 300)
    assert m["r_await_ms"] == pytest.approx(0.1)


def test_idle_interval_gives_zeros_not_division_errors() -> None:
    a = _vda("diskstats-1.txt")
    assert set(iostat_metrics(a, a, 0.1).values()) == {0.0}
    assert set(iostat_metrics(a, _vda("diskstats-2.txt"), 0.0).values()) == {0.0}


def test_util_is_capped_at_100_and_backwards_counters_clamp() -> None:
    a = DiskCounters(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    b = DiskCounters(0, 0, 0, 0, 0, 0, 0, 0, 1, 150, 0)
    assert iostat_metrics(a, b, 0.1)["util_pct"] == 100.0
    assert iostat_metrics(b, a, 0.1)["util_pct"] == 0.0


def test_sampler_keeps_the_device_line_and_reports_like_iostat(tmp_path: Path) -> None:
    source = tmp_path / "diskstats"
    source.write_text((FIXTURES / "diskstats-1.txt").read_text())
    sampler = DiskStatsSampler("vda", source=str(source))
    sampler.open()
    first = sampler.sample()
    assert first.startswith(b" 254       0 vda 276732 ")
    source.write_text((FIXTURES / "diskstats-2.txt").read_text())
    second = sampler.sample()
    report = sampler.report([(10.0, first), (12.0, second)], t0=9.0)
    assert report.summary["w_s"] == pytest.approx(200.0)
    assert report.series == [(3.0, report.summary)]
    sampler.close()


def test_sampler_names_a_device_that_disappears(tmp_path: Path) -> None:
    source = tmp_path / "diskstats"
    source.write_text((FIXTURES / "diskstats-1.txt").read_text())
    sampler = DiskStatsSampler("zram0", source=str(source))
    sampler.open()
    source.write_text("".join(line for line in source.read_text().splitlines(True)
                              if "zram0" not in line))
    with pytest.raises(HostError, match="'zram0'"):
        sampler.sample()
    sampler.close()
    with pytest.raises(HostError, match="'nvme9n1'"):
        DiskStatsSampler("nvme9n1", source=str(FIXTURES / "diskstats-1.txt")).open()


def test_device_for_path_reports_the_partition_and_whole_disk_its_parent(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A fake sysfs: the filesystem of tmp_path is partition 3 of disk "vdz".
    (tmp_path / "any").touch()
    dev = (tmp_path / "any").stat().st_dev
    part_dir = tmp_path / "devices" / "virtio9" / "block" / "vdz" / "vdz3"
    part_dir.mkdir(parents=True)
    (part_dir / "partition").write_text("3\n")
    dev_block, class_block = tmp_path / "dev-block", tmp_path / "class-block"
    dev_block.mkdir()
    class_block.mkdir()
    (dev_block / f"{os.major(dev)}:{os.minor(dev)}").symlink_to(part_dir)
    (class_block / "vdz3").symlink_to(part_dir)
    (class_block / "vdz").symlink_to(part_dir.parent)
    monkeypatch.setattr(devices, "SYS_DEV_BLOCK", dev_block)
    monkeypatch.setattr(devices, "SYS_CLASS_BLOCK", class_block)
    assert devices.device_for_path(tmp_path / "any") == "vdz3"
    assert devices.whole_disk("vdz3") == "vdz"
    assert devices.whole_disk("vdz") == "vdz"
    with pytest.raises(HostError, match="no block device named 'sdq'"):
        devices.whole_disk("sdq")


def test_paths_without_a_block_device() -> None:
    with pytest.raises(HostError, match="not on a block device"):
        devices.device_for_path("/proc/self")
    with pytest.raises(HostError, match="cannot find"):
        devices.device_for_path("/nonexistent/hvbench")
    assert devices.backing_device("/proc") is None
