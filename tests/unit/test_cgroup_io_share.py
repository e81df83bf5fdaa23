"""Attribution from the cell's cgroup (issue 23, item 2): its io statistics sampled (v2
io.stat, v1 blkio throttle bytes), found only for cgroups hvbench created, preferred
over /proc/PID/io as the cell's share of the device, and named in the evidence."""

from __future__ import annotations

from pathlib import Path

import pytest

from hvbench.analysis.diagnosis import diagnose
from hvbench.analysis.resources import derive
from hvbench.host.cgroups import MemoryCgroup
from hvbench.host.hostconfig import ProcRoots, io_stat_file
from hvbench.monitors import session
from hvbench.monitors.readers import CgroupIoSampler, parse_blkio_bytes, parse_io_stat
from tests.unit.test_diagnosis import DISK, NATIVE, model

V2_TEXT = ("8:0 rbytes=4096 wbytes=0 rios=1 wios=0 dbytes=0 dios=0\n"
           "254:0 rbytes={rb} wbytes={wb} rios={ri} wios={wi} dbytes=0 dios=0\n")
V1_TEXT = ("254:0 Read {rb}\n254:0 Write {wb}\n254:0 Sync 1\n254:0 Async 2\n"
           "254:0 Discard 0\n254:0 Total 3\nTotal 3\n")


def test_parse_v2_io_stat_and_v1_throttle_bytes() -> None:
    assert parse_io_stat(V2_TEXT.format(rb=10, wb=20, ri=3, wi=4)) == {
        "8:0": (4096, 0, 1, 0), "254:0": (10, 20, 3, 4)}
    # A line without the four keys (a kernel listing only some) is left out.
    assert parse_io_stat("7:0 rbytes=1\n") == {}
    assert parse_blkio_bytes(V1_TEXT.format(rb=7, wb=9)) == {"254:0": (7, 9, -1, -1)}


def _two_samples(stat: Path, text: str, first: dict[str, int], second: dict[str, int],
                 device: str = "254:0") -> tuple[CgroupIoSampler, dict[str, float]]:
    sampler = CgroupIoSampler(stat, device)
    stat.write_text(text.format(**first))
    sampler.open()
    try:
        a = sampler.decode(sampler.sample())
        stat.write_text(text.format(**second))
        b = sampler.decode(sampler.sample())
    finally:
        sampler.close()
    return sampler, sampler.metrics(a, b, 2.0)


def test_sampler_rates_v2_and_v1(tmp_path: Path) -> None:
    _, v2 = _two_samples(tmp_path / "io.stat", V2_TEXT,
                         {"rb": 0, "wb": 1 << 20, "ri": 0, "wi": 10},
                         {"rb": 512 << 10, "wb": 3 << 20, "ri": 4, "wi": 30})
    assert v2 == {"read_kb_s": 256.0, "write_kb_s": 1024.0, "r_s": 2.0, "w_s": 10.0}
    # v1's bytes file has no request counts: no r_s/w_s rather than made-up ones.
    _, v1 = _two_samples(tmp_path / "blkio.throttle.io_service_bytes_recursive", V1_TEXT,
                         {"rb": 0, "wb": 0}, {"rb": 2048, "wb": 4096})
    assert v1 == {"read_kb_s": 1.0, "write_kb_s": 2.0}
    # A device the group never touched is not listed: zeros, not an error.
    _, none = _two_samples(tmp_path / "io.stat", V2_TEXT, {"rb": 1, "wb": 1, "ri": 1, "wi": 1},
                           {"rb": 9, "wb": 9, "ri": 9, "wi": 9}, device="253:0")
    assert none == {"read_kb_s": 0.0, "write_kb_s": 0.0, "r_s": 0.0, "w_s": 0.0}


def _proc(tmp_path: Path, pid: int, text: str) -> None:
    (tmp_path / "proc" / str(pid)).mkdir(parents=True)
    (tmp_path / "proc" / str(pid) / "cgroup").write_text(text)


def test_io_stat_file_only_for_cgroups_hvbench_created(tmp_path: Path) -> None:
    roots = ProcRoots(proc=tmp_path / "proc", cgroup=tmp_path / "cg")
    blkio = tmp_path / "cg" / "blkio"
    (blkio / "hvbench-native-1").mkdir(parents=True)
    stat = blkio / "hvbench-native-1" / "blkio.throttle.io_service_bytes_recursive"
    stat.write_text("")
    (blkio / "user" / "blkio.throttle.io_service_bytes_recursive").parent.mkdir()
    (blkio / "user" / "blkio.throttle.io_service_bytes_recursive").write_text("")
    _proc(tmp_path, 10, "7:blkio:/hvbench-native-1\n0::/\n")
    _proc(tmp_path, 11, "7:blkio:/user\n0::/\n")
    assert io_stat_file(10, roots) == stat
    assert io_stat_file(11, roots) is None  # the user's own group: others may share it
    assert io_stat_file(12, roots) is None  # no such process
    # v2: a QEMU thread in a threaded group; its I/O shows in the threaded domain above.
    unified = tmp_path / "cg" / "unified"
    (unified / "hvbench-s1" / "io").mkdir(parents=True)
    (unified / "cgroup.controllers").write_text("cpu io\n")
    (unified / "hvbench-s1" / "io.stat").write_text("")
    _proc(tmp_path, 13, "7:blkio:/\n0::/hvbench-s1/io\n")
    assert io_stat_file(13, roots) == unified / "hvbench-s1" / "io.stat"


def test_memory_cgroup_accounts_io_in_a_v1_blkio_group(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mounts = ("cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0\n"
              "cgroup /sys/fs/cgroup/blkio cgroup rw,relatime,blkio 0 0\n")
    for name in ("memory", "blkio"):
        (tmp_path / "sys/fs/cgroup" / name).mkdir(parents=True)
    monkeypatch.setattr("hvbench.host.cgroups._rmdir", _rm_tree)
    group = MemoryCgroup("native-t", 1 << 20, registry_dir=tmp_path, mounts_text=mounts,
                         fs_root=tmp_path)
    blkio = tmp_path / "sys/fs/cgroup/blkio/hvbench-native-t"
    with group:
        assert group.procs_files == [group.procs_file, blkio / "cgroup.procs"]
        assert group.io_stat is None  # a real blkio group has the file; this fake not yet
        (blkio / "blkio.throttle.io_service_bytes_recursive").write_text("")
        assert group.io_stat == blkio / "blkio.throttle.io_service_bytes_recursive"
        assert (tmp_path / "cgroups-native-t.json").is_file()
    assert not blkio.exists() and not (tmp_path / "cgroups-native-t.json").exists()


def _rm_tree(path: Path) -> None:
    for child in path.iterdir():
        child.unlink()
    path.rmdir()


# -- analysis: the preferred source, and the evidence naming it ---------------------------
SHARED = {**DISK, "host.disk.vda.util_pct": 90.0, "host.disk.vda.w_kb_s": 50_000.0,
          "host.disk.vda.r_kb_s": 0.0, "mb_s": 20.0}


def test_the_cgroup_figure_is_preferred_and_named() -> None:
    both = {**SHARED, "qemu.io.write_kb_s": 45_000.0, "cgroup.io.write_kb_s": 10_000.0,
            "cgroup.io.read_kb_s": 0.0}
    derived = derive(both, native=False)
    assert derived["res.disk.cell_share"] == pytest.approx(0.2)
    assert derived["res.disk.cell_share_source"] == 0.0
    verdict = diagnose(model(both, native=NATIVE))
    assert verdict.dominant is not None and verdict.dominant.rule == "shared-device"
    first = verdict.dominant.evidence[0]
    assert "cgroup" in first and "others moved 80 %" in first
    # Without a cgroup figure, /proc/PID/io is the source, and the text says so.
    proc_only = {**SHARED, "qemu.io.write_kb_s": 10_000.0}
    assert derive(proc_only, native=False)["res.disk.cell_share_source"] == 1.0
    verdict = diagnose(model(proc_only, native=NATIVE))
    assert verdict.dominant is not None and "/proc/PID/io" in verdict.dominant.evidence[0]


def test_a_native_cell_in_its_cgroup_gets_a_share() -> None:
    derived = derive({**SHARED, "cgroup.io.write_kb_s": 49_000.0}, native=True)
    assert derived["res.disk.cell_share"] == pytest.approx(0.98)
    assert "res.disk.cell_share" not in derive(SHARED, native=True)


# -- which platforms get the monitor ------------------------------------------------------
class _Native:
    """The parts of a platform cgroup_io_monitor reads (an IoCgroup)."""

    pid = None

    def __init__(self, stat: Path | None) -> None:
        self.stat = stat

    def io_stat_file(self) -> Path | None:
        return self.stat


class _Guest:
    pid = 4242


def test_cgroup_io_monitor_for_native_and_guests(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(session, "whole_disk", lambda dev: dev.rstrip("0123456789"))
    monkeypatch.setattr(session, "device_number", {"vda": "254:0"}.__getitem__)
    stat = tmp_path / "io.stat"
    found = session.cgroup_io_monitor(_Native(stat), "vda1")  # type: ignore[arg-type]
    assert found is not None and (found.source, found.device) == (str(stat), "254:0")
    assert session.cgroup_io_monitor(_Native(None), "vda1") is None  # type: ignore[arg-type]
    # A guest: the hvbench cgroup its QEMU process is in, if any.
    seen: list[int] = []

    def no_cgroup(pid: int) -> None:
        seen.append(pid)
    monkeypatch.setattr(session, "io_stat_file", no_cgroup)
    assert session.cgroup_io_monitor(_Guest(), "vda1") is None  # type: ignore[arg-type]
    assert seen == [4242]
