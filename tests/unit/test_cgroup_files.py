"""CPU cgroups on a fake cgroupfs tree: detection, weight mappings, the files each
version writes, removal and orphan cleanup (no root, no real cgroups)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hvbench.host.cgroups import (
    CgroupSupport,
    CpuCgroups,
    GroupSettings,
    cleanup_orphaned_cgroups,
    detect_cpu_cgroups,
    weight_to_shares,
    weight_to_v2,
)

HYBRID = """\
tmpfs /sys/fs/cgroup tmpfs rw 0 0
cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0
cgroup /sys/fs/cgroup/cpuacct cgroup rw,relatime,cpuacct 0 0
cgroup /sys/fs/cgroup/cpuset cgroup rw,relatime,cpuset 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
"""
PURE_V2 = "cgroup2 /sys/fs/cgroup cgroup2 rw,nsdelegate 0 0\n"


def test_detection_prefers_the_hierarchy_that_holds_cpu(tmp_path: Path) -> None:
    v1 = detect_cpu_cgroups(HYBRID, tmp_path)
    assert v1.version == 1 and v1.cpu_root == tmp_path / "sys/fs/cgroup/cpu"
    assert v1.cpuset_root == tmp_path / "sys/fs/cgroup/cpuset"
    assert v1.cpuacct_root == tmp_path / "sys/fs/cgroup/cpuacct"
    (tmp_path / "sys/fs/cgroup").mkdir(parents=True)
    (tmp_path / "sys/fs/cgroup/cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    v2 = detect_cpu_cgroups(PURE_V2, tmp_path)
    assert v2.version == 2 and v2.cpu_root == tmp_path / "sys/fs/cgroup"
    (tmp_path / "sys/fs/cgroup/cgroup.controllers").write_text("memory pids\n")
    none = detect_cpu_cgroups(PURE_V2, tmp_path)
    assert none.version is None and "cpu controller" in none.reason


def test_weight_mappings_clamp() -> None:
    assert [weight_to_shares(r) for r in (0.5, 1, 2)] == [512, 1024, 2048]
    assert [weight_to_v2(r) for r in (0.5, 1, 2)] == [50, 100, 200]
    assert weight_to_shares(0.0001) == 2 and weight_to_v2(1000) == 10000


def _v1_tree(tmp_path: Path) -> CgroupSupport:
    for name in ("cpu", "cpuset", "cpuacct"):
        (tmp_path / name).mkdir()
    (tmp_path / "cpuset/cpuset.cpus").write_text("0-1\n")
    (tmp_path / "cpuset/cpuset.mems").write_text("0\n")
    return CgroupSupport(1, tmp_path / "cpu", tmp_path / "cpuset", tmp_path / "cpuacct")


def test_v1_writes_shares_quota_and_cpuset(tmp_path: Path) -> None:
    support = _v1_tree(tmp_path)
    registry = tmp_path / "reg"
    registry.mkdir()
    groups = CpuCgroups("t", support, registry)
    groups.start()
    record = json.loads((registry / "cgroups-t.json").read_text())
    assert record["paths"][0] == str(tmp_path / "cpu/hvbench-t")
    groups.add_group("io", GroupSettings(weight=0.5, cpus="0", quota_pct=50))
    assert (tmp_path / "cpu/hvbench-t/io/cpu.shares").read_text() == "512"
    assert (tmp_path / "cpu/hvbench-t/io/cpu.cfs_quota_us").read_text() == "50000"
    assert (tmp_path / "cpuset/hvbench-t/io/cpuset.cpus").read_text() == "0"
    assert (tmp_path / "cpuset/hvbench-t/io/cpuset.mems").read_text() == "0"
    assert groups.describe()["groups"]["io"]["written"]["cpu.shares"] == "512"
    # On cgroupfs the control files go with rmdir; on this fake tree remove them first.
    for control in [f for f in tmp_path.glob("*/hvbench-t/**/*") if f.is_file()]:
        control.unlink()
    groups.stop()
    groups.stop()
    assert not list(tmp_path.glob("*/hvbench-t")) and not (registry / "cgroups-t.json").exists()


def test_v2_groups_are_threaded_with_weight_and_max(tmp_path: Path) -> None:
    support = CgroupSupport(2, tmp_path, tmp_path, tmp_path)
    groups = CpuCgroups("t", support, tmp_path)
    groups.start()
    assert (tmp_path / "hvbench-t/cgroup.subtree_control").read_text() == "+cpu +cpuset"
    groups.add_group("target", GroupSettings(weight=2, cpus="1", quota_pct=25))
    path = tmp_path / "hvbench-t/target"
    assert (path / "cgroup.type").read_text() == "threaded"
    assert (path / "cpu.weight").read_text() == "200"
    assert (path / "cpu.max").read_text() == "25000 100000"
    assert (path / "cpuset.cpus").read_text() == "1"


def test_orphaned_records_of_dead_owners_are_removed(tmp_path: Path) -> None:
    support = _v1_tree(tmp_path)
    (tmp_path / "cpu/hvbench-dead/io").mkdir(parents=True)
    (tmp_path / "reg").mkdir()
    (tmp_path / "reg/cgroups-dead.json").write_text(json.dumps(
        {"pid": 2 ** 22 + 1, "version": 1, "paths": [str(tmp_path / "cpu/hvbench-dead")]}))
    (tmp_path / "reg/cgroups-live.json").write_text(json.dumps(
        {"pid": 1, "version": 1, "paths": [str(support.cpu_root)]}))
    removed = cleanup_orphaned_cgroups(tmp_path / "reg")
    assert not (tmp_path / "cpu/hvbench-dead").exists()
    assert any("hvbench-dead" in r for r in removed)
    assert (tmp_path / "reg/cgroups-live.json").exists() and (tmp_path / "cpu").is_dir()


def test_unusable_host_is_a_clear_error(tmp_path: Path) -> None:
    groups = CpuCgroups("t", CgroupSupport(None, reason="no cpu"), tmp_path)
    with pytest.raises(Exception, match="CPU weights need cgroups: no cpu"):
        groups.start()
