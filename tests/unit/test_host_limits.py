"""HostLimitsCgroup on a fake cgroupfs tree: the files each version writes, the owner
record before the directories, join(), stop() safe twice and the cleanup after a dead
owner; the spec's validation of host_limits; the host config reader seeing the limits."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hvbench.errors import HostError, SpecError
from hvbench.host import cgroups
from hvbench.host.cgroups import HostLimitsCgroup, cleanup_orphaned_cgroups, whole_disk
from hvbench.host.hostconfig import ProcRoots, read_host_config
from hvbench.model.libvirt_xml import check_libvirt_spec
from hvbench.model.spec import HostLimitsSpec, VmSpec, vm_spec_from_mapping
from tests.unit.test_cgroups import fake_rmdir  # noqa: F401  (autouse: rmdir as on cgroupfs)

V1_MOUNTS = ("cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0\n"
             "cgroup /sys/fs/cgroup/blkio cgroup rw,relatime,blkio 0 0\n"
             "cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0\n")
V2_MOUNTS = "cgroup2 /sys/fs/cgroup cgroup2 rw,relatime 0 0\n"
LIMITS = HostLimitsSpec(read_bps=8 << 20, write_iops=200, cpu_quota_pct=30)


def _v1_tree(tmp_path: Path) -> Path:
    root = tmp_path / "sys/fs/cgroup"
    for name in ("cpu", "blkio", "unified"):
        (root / name).mkdir(parents=True)
    (root / "unified/cgroup.controllers").write_text("")
    return root


def _group(tmp_path: Path, mounts: str, limits: HostLimitsSpec = LIMITS) -> HostLimitsCgroup:
    records = tmp_path / "records"
    records.mkdir(exist_ok=True)
    return HostLimitsCgroup("limits-t", limits, ["254:0"], registry_dir=records,
                            mounts_text=mounts, fs_root=tmp_path)


def test_v1_writes_throttle_and_cfs_quota_and_removes_everything(tmp_path: Path) -> None:
    root = _v1_tree(tmp_path)
    group = _group(tmp_path, V1_MOUNTS)
    with group:
        blkio, cpu = root / "blkio/hvbench-limits-t", root / "cpu/hvbench-limits-t"
        assert (blkio / "blkio.throttle.read_bps_device").read_text() == "254:0 8388608"
        assert (blkio / "blkio.throttle.write_iops_device").read_text() == "254:0 200"
        assert not (blkio / "blkio.throttle.write_bps_device").exists()
        assert (cpu / "cpu.cfs_period_us").read_text() == "100000"
        assert (cpu / "cpu.cfs_quota_us").read_text() == "30000"
        record = json.loads((tmp_path / "records/cgroups-limits-t.json").read_text())
        assert sorted(record["paths"]) == sorted([str(blkio), str(cpu)])
        group.join(os.getpid())
        assert (blkio / "cgroup.procs").read_text() == str(os.getpid())
        assert (cpu / "cgroup.procs").read_text() == str(os.getpid())
        about = group.describe()
        assert about["limits"] == {"read_bps": 8 << 20, "write_iops": 200,
                                   "cpu_quota_pct": 30.0}
        assert {g["controller"] for g in about["groups"]} == {"blkio", "cpu"}
        assert about["pids"] == [os.getpid()]
    assert list(root.glob("*/hvbench-*")) == []
    assert list((tmp_path / "records").iterdir()) == []
    group.stop()  # safe twice


def test_v2_writes_io_max_and_cpu_max_in_one_group(tmp_path: Path) -> None:
    root = tmp_path / "sys/fs/cgroup"
    root.mkdir(parents=True)
    (root / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (root / "cgroup.subtree_control").write_text("memory\n")
    with _group(tmp_path, V2_MOUNTS) as group:
        path = root / "hvbench-limits-t"
        assert (path / "io.max").read_text() == "254:0 rbps=8388608 wiops=200"
        assert (path / "cpu.max").read_text() == "30000 100000"
        # The missing controllers were enabled; the ones found are left as they were.
        assert (root / "cgroup.subtree_control").read_text() == "+io +cpu"
        assert len(group.describe()["groups"]) == 2
    assert not path.exists()


def test_a_missing_controller_is_named_and_nothing_is_left(tmp_path: Path) -> None:
    _v1_tree(tmp_path)
    group = _group(tmp_path, "cgroup /sys/fs/cgroup/cpu cgroup rw,cpu 0 0\n")
    with pytest.raises(HostError, match="needs the blkio cgroup controller"):
        group.start()
    assert list((tmp_path / "records").iterdir()) == []


def test_a_refused_write_removes_what_was_made(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    root = _v1_tree(tmp_path)
    real = cgroups._write

    def refuse(path: Path, value: str) -> None:
        if path.name == "cpu.cfs_quota_us":
            raise HostError(f"cannot write {value!r} to {path}: EINVAL: Invalid argument")
        real(path, value)
    monkeypatch.setattr(cgroups, "_write", refuse)
    with pytest.raises(HostError, match=r"cpu\.cfs_quota_us: EINVAL"):
        _group(tmp_path, V1_MOUNTS).start()
    assert list(root.glob("*/hvbench-*")) == []
    assert list((tmp_path / "records").iterdir()) == []


def test_a_dead_owners_limits_are_cleaned_up(tmp_path: Path) -> None:
    root = _v1_tree(tmp_path)
    group = _group(tmp_path, V1_MOUNTS)
    group.start()
    record = tmp_path / "records/cgroups-limits-t.json"
    data = json.loads(record.read_text())
    record.write_text(json.dumps({**data, "pid": 2 ** 22 + 1}))  # an owner that is gone
    removed = cleanup_orphaned_cgroups(tmp_path / "records")
    assert sorted(removed) == sorted(f"cgroup {root}/{c}/hvbench-limits-t"
                                     for c in ("blkio", "cpu"))
    assert list(root.glob("*/hvbench-*")) == [] and not record.exists()


def test_a_partition_is_limited_on_its_whole_disk(tmp_path: Path) -> None:
    disk = tmp_path / "block/sda"
    (disk / "sda1").mkdir(parents=True)
    (disk / "dev").write_text("8:0\n")
    (disk / "sda1/partition").write_text("1\n")
    dev_block = tmp_path / "dev-block"
    dev_block.mkdir()
    (dev_block / "8:1").symlink_to(disk / "sda1")
    assert whole_disk(os.makedev(8, 1), dev_block) == "8:0"
    assert whole_disk(os.makedev(254, 0), dev_block) == "254:0"


def test_the_host_config_reader_sees_the_limits(tmp_path: Path) -> None:
    root = _v1_tree(tmp_path)
    with _group(tmp_path, V1_MOUNTS):
        proc = tmp_path / "proc/42"
        proc.mkdir(parents=True)
        (proc / "cgroup").write_text("3:blkio:/hvbench-limits-t\n2:cpu:/hvbench-limits-t\n")
        config = read_host_config(42, ProcRoots(tmp_path / "proc", root, tmp_path / "nope"))
        kinds = {(lim["kind"], lim["value"]) for lim in config["io_limits"]}
        assert kinds == {("read_bps", 8 << 20), ("write_iops", 200)}
        assert config["cpu"]["cpu.cfs_quota_us"]["value"] == "30000"
        assert config["cpu"]["cpu.cfs_quota_us"]["path"] == \
            str(root / "cpu/hvbench-limits-t/cpu.cfs_quota_us")


@pytest.mark.parametrize(("limits", "message"), [
    ({}, "expected at least one of read_bps"),
    ({"read_bps": "fast"}, "expected a size"),
    ({"cpu_quota_pct": 0.5}, "greater than or equal to 1"),
    ({"write_iops": 0}, "greater than 0"),
    ({"read_bps": "8M", "burst": 1}, "burst"),
])
def test_bad_host_limits_are_refused_in_one_line(limits: dict[str, object],
                                                 message: str) -> None:
    with pytest.raises(SpecError, match=message) as caught:
        vm_spec_from_mapping({"disks": [{}], "host_limits": limits}, "study.toml")
    assert "host_limits" in str(caught.value)
    assert len(str(caught.value).splitlines()) == 1


def test_io_limits_need_a_local_disk_and_libvirt_refuses() -> None:
    with pytest.raises(SpecError, match="the guest has no disk"):
        vm_spec_from_mapping({"host_limits": {"read_bps": "8M"}})
    with pytest.raises(SpecError, match="served over the network"):
        vm_spec_from_mapping({"nics": [{}], "disks": [{"source": "nbd:st"}],
                              "host_limits": {"write_bps": "8M"}})
    quota_only = VmSpec.model_validate({"host_limits": {"cpu_quota_pct": 30}})
    assert quota_only.label().endswith("_cg-cpu30")
    with pytest.raises(SpecError, match=r"host_limits: .* use kind = \"qemu\""):
        check_libvirt_spec(quota_only)


WEIGHTS_STUDY = """
[study]
name = "w"

[[platform]]
kind = "qemu"
name = "vm"
host_limits = { cpu_quota_pct = 30 }

[[workload]]
kind = "disk"
profile = "dd"
file_size = "8M"
direct = true

[[scenario]]
name = "w"
weights = { target = 2.0 }
"""


def test_host_limits_and_scenario_weights_are_refused_together() -> None:
    """Both would move the guest's QEMU threads into cgroups; the last move would win
    and the run would be stored under limits it did not have."""
    from hvbench.model.study import parse_study
    with pytest.raises(SpecError, match="host_limits and the scenario's weights") as caught:
        parse_study(WEIGHTS_STUDY, "w.toml", 8 << 30)
    assert str(caught.value).startswith("w.toml") and "\n" not in str(caught.value)
    parse_study(WEIGHTS_STUDY.replace("host_limits = { cpu_quota_pct = 30 }", ""),
                "w.toml", 8 << 30)


def test_an_image_without_a_block_device_is_named() -> None:
    """procfs (like tmpfs or overlayfs) has no block device: an I/O limit cannot name
    one, and the error says which file and why."""
    with pytest.raises(HostError, match=r"host_limits: /proc/self/stat is on a file system "
                                        r"without a block device"):
        cgroups.device_of("/proc/self/stat")
