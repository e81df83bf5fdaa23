"""The host configuration reader on a synthetic /proc and cgroup tree: cgroup v1
throttles on the process's group and its parents, v2 io.max, CPU limits, and the
O_DIRECT flag of an image's file descriptor."""

from __future__ import annotations

import os
from pathlib import Path

from hvbench.host.hostconfig import (
    ProcRoots,
    parse_cgroup_file,
    parse_io_max,
    parse_throttle,
    read_host_config,
)


def test_parsers() -> None:
    groups = parse_cgroup_file("7:blkio:/hvb/guest\n3:cpu,cpuacct:/hvb\n0::/user.slice\n")
    assert groups == {"blkio": "/hvb/guest", "cpu": "/hvb", "cpuacct": "/hvb",
                      "": "/user.slice"}
    assert parse_throttle("254:0 4194304\n8:0 100\n") == [("254:0", 4194304), ("8:0", 100)]
    assert parse_io_max("254:0 rbps=max wbps=1048576 riops=max wiops=50\n") == [
        ("254:0", "write_bps", 1048576), ("254:0", "write_iops", 50)]


def _tree(tmp_path: Path, image: Path, flags: str) -> ProcRoots:
    proc, cgroup = tmp_path / "proc", tmp_path / "cgroup"
    (proc / "42" / "fd").mkdir(parents=True)
    (proc / "42" / "fdinfo").mkdir()
    (proc / "42" / "cgroup").write_text("7:blkio:/hvb/guest\n1:cpu:/hvb\n0::/hvb\n")
    (proc / "42" / "fd" / "9").symlink_to(image)
    (proc / "42" / "fdinfo" / "9").write_text(f"pos:\t0\nflags:\t{flags}\nmnt_id:\t1\n")
    (cgroup / "blkio" / "hvb" / "guest").mkdir(parents=True)
    (cgroup / "blkio" / "hvb" / "blkio.throttle.read_bps_device").write_text("254:0 8000\n")
    (cgroup / "blkio" / "hvb" / "guest" / "blkio.throttle.write_bps_device").write_text(
        "254:0 4194304\n")
    (cgroup / "cpu" / "hvb").mkdir(parents=True)
    (cgroup / "cpu" / "hvb" / "cpu.cfs_quota_us").write_text("50000\n")
    (cgroup / "unified" / "hvb").mkdir(parents=True)
    (cgroup / "unified" / "cgroup.controllers").write_text("io cpu\n")
    (cgroup / "unified" / "hvb" / "io.max").write_text("254:0 rbps=max wbps=max riops=9 "
                                                      "wiops=max\n")
    return ProcRoots(proc=proc, cgroup=cgroup, dev_block=tmp_path / "dev-block")


def test_limits_on_the_group_and_its_parents(tmp_path: Path) -> None:
    image = tmp_path / "disk0.raw"
    image.write_bytes(b"")
    config = read_host_config(42, _tree(tmp_path, image, "0140002"))
    limits = {(Path(lim["path"]).name, lim["value"]) for lim in config["io_limits"]}
    assert limits == {("blkio.throttle.write_bps_device", 4194304),
                      ("blkio.throttle.read_bps_device", 8000), ("io.max", 9)}
    assert config["cpu"]["cpu.cfs_quota_us"]["value"] == "50000"
    assert config["images"] == [{"path": str(image), "flags": "0o140002", "o_direct": True}]
    assert config["queues"][0]["device"] == f"{os.major(image.stat().st_dev)}:" \
        f"{os.minor(image.stat().st_dev)}"


def test_an_image_through_the_page_cache_and_a_gone_process(tmp_path: Path) -> None:
    image = tmp_path / "disk0.qcow2"
    image.write_bytes(b"")
    roots = _tree(tmp_path, image, "0100002")
    assert read_host_config(42, roots)["images"][0]["o_direct"] is False
    gone = read_host_config(7, roots)
    assert gone["io_limits"] == [] and gone["images"] == []
