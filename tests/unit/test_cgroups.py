"""CpuCgroups without root or real cgroups: detection from mounts text, the weight
mappings, the files each version writes on a fake cgroupfs tree under tmp_path, the
owner record, stop() and the cleanup of a dead owner's cgroups."""

from __future__ import annotations

import errno
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from hvbench.errors import HostError, RootRequiredError
from hvbench.host import cgroups, facts
from hvbench.host.cgroups import (
    CgroupSupport,
    CpuCgroups,
    GroupSettings,
    cleanup_orphaned_cgroups,
    detect_cpu_cgroups,
    qemu_thread_groups,
    quota_us,
    weight_to_shares,
    weight_to_v2,
)

#: This host: cgroup v1 hybrid, cpu bound to v1, cgroup2 without it.
HYBRID_MOUNTS = """\
sysfs /sys sysfs rw,nosuid,nodev,noexec,relatime 0 0
tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0
cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0
cgroup /sys/fs/cgroup/cpuacct cgroup rw,relatime,cpuacct 0 0
cgroup /sys/fs/cgroup/cpuset cgroup rw,relatime,cpuset 0 0
cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0
cgroup /sys/fs/cgroup/systemd cgroup rw,relatime,name=systemd 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
"""
HYBRID_CGROUPS = """\
#subsys_name\thierarchy\tnum_cgroups\tenabled
cpuset\t3\t1\t1
cpu\t1\t1\t1
cpuacct\t2\t1\t1
memory\t4\t21\t1
"""
#: A systemd distribution's pure v2.
V2_MOUNTS = "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime,nsdelegate 0 0\n"
V2_CGROUPS = "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpu\t0\t80\t1\ncpuset\t0\t80\t1\n"
NO_PID = 2 ** 22 + 1  # above any pid_max: never a live process


# -- detection -----------------------------------------------------------------------
def test_hybrid_v1_like_this_host(tmp_path: Path) -> None:
    s = detect_cpu_cgroups(HYBRID_MOUNTS, tmp_path, cgroups_text=HYBRID_CGROUPS)
    cg = tmp_path / "sys/fs/cgroup"
    assert (s.version, s.cpu_root, s.cpuset_root, s.cpuacct_root) == (
        1, cg / "cpu", cg / "cpuset", cg / "cpuacct")
    assert "bound to v1" in s.reason and str(cg / "unified") in s.reason


def test_v1_with_cpu_and_cpuacct_in_one_hierarchy(tmp_path: Path) -> None:
    mounts = ("cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,cpu,cpuacct 0 0\n"
              "cgroup /sys/fs/cgroup/cpu\\040set cgroup rw,cpuset 0 0\n")
    s = detect_cpu_cgroups(mounts, tmp_path, cgroups_text="")
    assert s.cpu_root == s.cpuacct_root == tmp_path / "sys/fs/cgroup/cpu,cpuacct"
    assert s.cpuset_root == tmp_path / "sys/fs/cgroup/cpu set"  # \040 decoded


def test_pure_v2_with_and_without_cpuset(tmp_path: Path) -> None:
    root = tmp_path / "sys/fs/cgroup"
    root.mkdir(parents=True)
    (root / "cgroup.controllers").write_text("cpuset cpu io memory hugetlb pids rdma\n")
    s = detect_cpu_cgroups(V2_MOUNTS, tmp_path, cgroups_text=V2_CGROUPS)
    assert (s.version, s.cpu_root, s.cpuset_root, s.cpuacct_root) == (2, root, root, root)
    (root / "cgroup.controllers").write_text("cpu memory pids\n")
    assert detect_cpu_cgroups(V2_MOUNTS, tmp_path, cgroups_text=V2_CGROUPS).cpuset_root is None


def test_no_cpu_controller_anywhere(tmp_path: Path) -> None:
    root = tmp_path / "sys/fs/cgroup"
    root.mkdir(parents=True)
    (root / "cgroup.controllers").write_text("memory pids\n")
    s = detect_cpu_cgroups(V2_MOUNTS, tmp_path, cgroups_text="")
    assert s.version is None and s.cpu_root is None and "cpu controller" in s.reason
    assert detect_cpu_cgroups("", tmp_path, cgroups_text="").version is None


def test_disabled_or_unmounted_cpu_controller_says_so(tmp_path: Path) -> None:
    disabled = HYBRID_CGROUPS.replace("cpu\t1\t1\t1", "cpu\t1\t1\t0")
    s = detect_cpu_cgroups(HYBRID_MOUNTS, tmp_path, cgroups_text=disabled)
    assert s.version is None and "disabled" in s.reason
    unmounted = detect_cpu_cgroups("cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n",
                                   tmp_path, cgroups_text=HYBRID_CGROUPS)
    assert unmounted.version is None and "not mounted" in unmounted.reason


# -- mappings and settings -----------------------------------------------------------
@pytest.mark.parametrize(("ratios", "shares", "weights"), [
    ((0.5, 1, 1), [512, 1024, 1024], [50, 100, 100]),   # the seed's Dom0:VM1:VM2 sets
    ((1, 1, 1), [1024, 1024, 1024], [100, 100, 100]),
    ((2, 1, 1), [2048, 1024, 1024], [200, 100, 100]),
])
def test_seed_ratios_map_to_shares_and_weights(ratios: tuple[float, ...], shares: list[int],
                                               weights: list[int]) -> None:
    assert [weight_to_shares(r) for r in ratios] == shares
    assert [weight_to_v2(r) for r in ratios] == weights


def test_mappings_clamp_to_the_kernel_ranges() -> None:
    assert weight_to_shares(0) == 2 and weight_to_shares(1e6) == 262144
    assert weight_to_v2(0.001) == 1 and weight_to_v2(1e6) == 10000
    with pytest.raises(ValueError, match="finite"):
        weight_to_shares(float("nan"))
    assert quota_us(25) == 25_000 and quota_us(200) == 200_000 and quota_us(0.01) == 1000


@pytest.mark.parametrize("kwargs", [{"weight": 0}, {"weight": float("inf")},
                                    {"quota_pct": -5}, {"cpus": "0;1"}, {"cpus": ""}])
def test_bad_settings_are_refused(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        GroupSettings(**kwargs)  # type: ignore[arg-type]


# -- a fake cgroupfs -----------------------------------------------------------------
@pytest.fixture(autouse=True)
def fake_rmdir(monkeypatch: pytest.MonkeyPatch) -> None:
    """rmdir as on cgroupfs: the control files go with the directory, subdirectories
    (child cgroups) make it fail."""
    def rmdir(path: Path) -> None:
        if any(p.is_dir() for p in path.iterdir()):
            raise OSError(errno.EBUSY, os.strerror(errno.EBUSY), str(path))
        for control in path.iterdir():
            control.unlink()
        path.rmdir()
    monkeypatch.setattr(cgroups, "_rmdir", rmdir)


def _v1(tmp_path: Path) -> CgroupSupport:
    for name in ("cpu", "cpuset", "cpuacct"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "tasks").write_text("")
    (tmp_path / "cpuset/cpuset.cpus").write_text("0-1\n")
    (tmp_path / "cpuset/cpuset.mems").write_text("0\n")
    return CgroupSupport(1, tmp_path / "cpu", tmp_path / "cpuset", tmp_path / "cpuacct")


def _v2(tmp_path: Path, cpuset: bool = True) -> CgroupSupport:
    root = tmp_path / "unified"
    root.mkdir()
    (root / "cgroup.subtree_control").write_text("")
    return CgroupSupport(2, root, root if cpuset else None, root)


@pytest.fixture
def registry(tmp_path: Path) -> Path:
    path = tmp_path / "registry"
    path.mkdir()
    return path


@pytest.fixture
def v1_groups(tmp_path: Path, registry: Path) -> Iterator[CpuCgroups]:
    groups = CpuCgroups("t1", _v1(tmp_path), registry)
    groups.start()
    yield groups
    groups.stop()


def _hvbench_dirs(tmp_path: Path) -> list[Path]:
    return sorted(tmp_path.glob("*/hvbench-*"))


def test_the_record_names_each_path_before_it_is_created(
        tmp_path: Path, registry: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    support = _v1(tmp_path)
    seen: list[bool] = []
    mkdir = Path.mkdir

    def checked_mkdir(path: Path, *args: object, **kwargs: object) -> None:
        record = json.loads((registry / "cgroups-t.json").read_text())
        seen.append(str(path) in record["paths"] and record["pid"] == os.getpid())
        mkdir(path, *args, **kwargs)  # type: ignore[arg-type]
    monkeypatch.setattr(Path, "mkdir", checked_mkdir)
    with CpuCgroups("t", support, registry) as groups:
        groups.add_group("io", GroupSettings())
    assert len(seen) == 6 and all(seen)
    assert not (registry / "cgroups-t.json").exists() and not _hvbench_dirs(tmp_path)


def test_v1_writes_shares_quota_and_cpuset(tmp_path: Path, v1_groups: CpuCgroups) -> None:
    v1_groups.add_group("io", GroupSettings(weight=0.5, cpus="0", quota_pct=50))
    v1_groups.add_group("target", GroupSettings(weight=2))
    cpu, cpuset = tmp_path / "cpu/hvbench-t1", tmp_path / "cpuset/hvbench-t1"
    assert (cpuset / "cpuset.cpus").read_text() == "0-1"  # the parent inherits the root's
    assert (cpu / "io/cpu.shares").read_text() == "512"
    assert (cpu / "io/cpu.cfs_period_us").read_text() == "100000"
    assert (cpu / "io/cpu.cfs_quota_us").read_text() == "50000"
    assert (cpuset / "io/cpuset.cpus").read_text() == "0"
    assert (cpuset / "io/cpuset.mems").read_text() == "0"
    assert (cpu / "target/cpu.shares").read_text() == "2048"
    assert not (cpu / "target/cpu.cfs_quota_us").exists()
    assert (cpuset / "target/cpuset.cpus").read_text() == "0-1"
    described = v1_groups.describe()
    assert described["version"] == 1 and described["parent"] == "hvbench-t1"
    assert described["groups"]["io"] == {
        "weight": 0.5, "cpus": "0", "quota_pct": 50,
        "written": {"cpu.shares": "512", "cpu.cfs_period_us": "100000",
                    "cpu.cfs_quota_us": "50000", "cpuset.cpus": "0", "cpuset.mems": "0"}}
    assert str(cpu / "target") in described["paths"]


def test_v1_moves_each_thread_into_every_hierarchy(tmp_path: Path,
                                                   v1_groups: CpuCgroups) -> None:
    v1_groups.add_group("io", GroupSettings())
    v1_groups.move_threads("io", [NO_PID, threading.get_native_id()])  # gone: skipped
    for hierarchy in ("cpu", "cpuset", "cpuacct"):
        tasks = tmp_path / hierarchy / "hvbench-t1/io/tasks"
        assert tasks.read_text() == str(threading.get_native_id())
    with pytest.raises(ValueError, match="no cgroup group"):
        v1_groups.move_threads("nope", [os.getpid()])


def test_usage_of_both_versions(tmp_path: Path, registry: Path,
                                v1_groups: CpuCgroups) -> None:
    v1_groups.add_group("io", GroupSettings())
    (tmp_path / "cpuacct/hvbench-t1/io/cpuacct.usage").write_text("1500000000\n")
    assert v1_groups.usage_s("io") == 1.5
    groups = CpuCgroups("t2", _v2(tmp_path), registry)
    groups.start()
    groups.add_group("vcpu", GroupSettings())
    stat = tmp_path / "unified/hvbench-t2/vcpu/cpu.stat"
    with pytest.raises(HostError, match="cannot read the CPU usage"):
        groups.usage_s("vcpu")
    stat.write_text("usage_usec 2250000\nuser_usec 2000000\nsystem_usec 250000\n")
    assert groups.usage_s("vcpu") == 2.25
    groups.stop()


def test_v2_threaded_groups_weight_max_cpuset(tmp_path: Path, registry: Path) -> None:
    root = tmp_path / "unified"
    with CpuCgroups("t", _v2(tmp_path), registry) as groups:
        assert (root / "cgroup.subtree_control").read_text() == "+cpu +cpuset"
        assert (root / "hvbench-t/cgroup.subtree_control").read_text() == "+cpu +cpuset"
        groups.add_group("target", GroupSettings(weight=2, cpus="1", quota_pct=25))
        path = root / "hvbench-t/target"
        assert (path / "cgroup.type").read_text() == "threaded"
        assert (path / "cpu.weight").read_text() == "200"
        assert (path / "cpu.max").read_text() == "25000 100000"
        assert (path / "cpuset.cpus").read_text() == "1"
        # The process joins the threaded domain, then the thread its group.
        groups.move_threads("target", [threading.get_native_id()])
        assert (root / "hvbench-t/cgroup.procs").read_text() == str(os.getpid())
        assert (path / "cgroup.threads").read_text() == str(threading.get_native_id())
        assert groups.describe()["groups"]["target"]["written"] == {
            "cgroup.type": "threaded", "cpu.weight": "200", "cpu.max": "25000 100000",
            "cpuset.cpus": "1"}
    assert not (root / "hvbench-t").exists()


def test_v2_root_controllers_already_enabled_are_left_alone(tmp_path: Path,
                                                             registry: Path) -> None:
    support = _v2(tmp_path, cpuset=False)
    (tmp_path / "unified/cgroup.subtree_control").write_text("cpu io memory\n")
    with CpuCgroups("t", support, registry) as groups:
        assert (tmp_path / "unified/cgroup.subtree_control").read_text() == "cpu io memory\n"
        assert (tmp_path / "unified/hvbench-t/cgroup.subtree_control").read_text() == "+cpu"
        with pytest.raises(HostError, match="needs the cpuset controller"):
            groups.add_group("g", GroupSettings(cpus="0"))


# -- stop and failures ---------------------------------------------------------------
def test_stop_evacuates_removes_everything_and_is_idempotent(tmp_path: Path,
                                                             registry: Path) -> None:
    groups = CpuCgroups("t", _v1(tmp_path), registry)
    groups.start()
    groups.add_group("io", GroupSettings(cpus="0"))
    groups.move_threads("io", [threading.get_native_id()])
    groups.stop()
    # The thread went back to each hierarchy's root before the rmdir.
    assert (tmp_path / "cpu/tasks").read_text() == str(threading.get_native_id())
    assert not _hvbench_dirs(tmp_path) and list(registry.iterdir()) == []
    groups.stop()
    groups.stop()
    assert not _hvbench_dirs(tmp_path)


def test_stop_before_start_does_nothing(registry: Path) -> None:
    CpuCgroups("t", CgroupSupport(None, reason="none"), registry).stop()


def test_a_cgroup_that_stays_busy_is_reported_and_kept_recorded(
        tmp_path: Path, registry: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    groups = CpuCgroups("t", _v1(tmp_path), registry)
    groups.start()
    groups.add_group("io", GroupSettings())
    good_rmdir = cgroups._rmdir

    def busy(path: Path) -> None:
        raise OSError(errno.EBUSY, os.strerror(errno.EBUSY), str(path))
    monkeypatch.setattr(cgroups, "_rmdir", busy)
    monkeypatch.setattr(cgroups, "RMDIR_WAIT_S", 0.1)
    with pytest.raises(HostError, match="EBUSY") as caught:
        groups.stop()
    assert "hvbench-t/io" in str(caught.value)
    assert (registry / "cgroups-t.json").exists()  # for a later cleanup
    monkeypatch.setattr(cgroups, "_rmdir", good_rmdir)
    groups.stop()
    assert not _hvbench_dirs(tmp_path) and list(registry.iterdir()) == []


def test_a_failed_start_leaves_nothing(tmp_path: Path, registry: Path) -> None:
    support = _v2(tmp_path)
    (tmp_path / "unified/cgroup.subtree_control").unlink()
    (tmp_path / "unified/cgroup.subtree_control").mkdir()  # the write fails: EISDIR
    groups = CpuCgroups("t", support, registry)
    with pytest.raises(HostError, match=r"cannot write '\+cpu \+cpuset' to .*EISDIR"):
        groups.start()
    assert not (tmp_path / "unified/hvbench-t").exists() and list(registry.iterdir()) == []


def test_a_refused_write_is_a_host_error_naming_file_and_errno(
        tmp_path: Path, v1_groups: CpuCgroups, monkeypatch: pytest.MonkeyPatch) -> None:
    write_text = Path.write_text

    def kernel(path: Path, data: str, *args: object, **kwargs: object) -> int:
        if path.name == "cpuset.cpus" and data == "7":  # a CPU this host lacks
            raise OSError(errno.EINVAL, os.strerror(errno.EINVAL), str(path))
        return write_text(path, data, *args, **kwargs)  # type: ignore[arg-type]
    monkeypatch.setattr(Path, "write_text", kernel)
    with pytest.raises(HostError, match=r"cannot write '7' to .*cpuset/hvbench-t1/io/"
                                        r"cpuset.cpus: EINVAL: Invalid argument"):
        v1_groups.add_group("io", GroupSettings(cpus="7"))
    v1_groups.stop()
    assert not _hvbench_dirs(tmp_path)


def test_an_existing_parent_is_not_adopted(tmp_path: Path, registry: Path) -> None:
    support = _v1(tmp_path)
    (tmp_path / "cpuset/hvbench-t").mkdir()  # another run's, with another work dir
    with pytest.raises(HostError, match="hvbench-t already exists"):
        CpuCgroups("t", support, registry).start()
    assert (tmp_path / "cpuset/hvbench-t").is_dir()
    assert not (tmp_path / "cpu/hvbench-t").exists() and list(registry.iterdir()) == []


def test_a_tag_in_use_by_a_live_process_is_refused(tmp_path: Path, registry: Path,
                                                   v1_groups: CpuCgroups) -> None:
    with pytest.raises(HostError, match=f"in use by process {os.getpid()}"):
        CpuCgroups("t1", _v1_roots(tmp_path), registry).start()
    assert (tmp_path / "cpu/hvbench-t1").is_dir()  # the owner's cgroups are untouched
    assert (registry / "cgroups-t1.json").exists()


def _v1_roots(tmp_path: Path) -> CgroupSupport:
    return CgroupSupport(1, tmp_path / "cpu", tmp_path / "cpuset", tmp_path / "cpuacct")


def test_a_dead_owners_cgroups_with_the_same_tag_are_replaced(tmp_path: Path,
                                                              registry: Path) -> None:
    support = _v1(tmp_path)
    (tmp_path / "cpu/hvbench-t/io").mkdir(parents=True)
    (registry / "cgroups-t.json").write_text(json.dumps(
        {"pid": NO_PID, "tag": "t", "roots": [str(tmp_path / "cpu")],
         "paths": [str(tmp_path / "cpu/hvbench-t")]}))
    with CpuCgroups("t", support, registry):
        assert not (tmp_path / "cpu/hvbench-t/io").exists()
        assert json.loads((registry / "cgroups-t.json").read_text())["pid"] == os.getpid()


def test_root_is_required_for_real_hierarchies(tmp_path: Path, registry: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(facts, "is_root", lambda: False)
    monkeypatch.setattr(os, "access", lambda *_: False)
    with pytest.raises(RootRequiredError, match="CPU cgroups needs root"):
        CpuCgroups("t", _v1(tmp_path), registry).start()
    assert list(registry.iterdir()) == []


@pytest.mark.parametrize("tag", ["", "../x", "a/b", ".hidden", "x" * 65])
def test_tags_that_are_not_plain_names_are_refused(tag: str, registry: Path) -> None:
    with pytest.raises(ValueError, match="use letters"):
        CpuCgroups(tag, CgroupSupport(1), registry).start()


# -- orphans -------------------------------------------------------------------------
def test_orphan_cleanup_removes_a_dead_owners_cgroups_only(tmp_path: Path,
                                                           registry: Path) -> None:
    support = _v1(tmp_path)
    for root in ("cpu", "cpuset"):
        (tmp_path / root / "hvbench-dead/io").mkdir(parents=True)
        (tmp_path / root / "hvbench-dead/io/tasks").write_text("")
    (registry / "cgroups-dead.json").write_text(json.dumps(
        {"pid": NO_PID, "tag": "dead", "roots": [str(tmp_path / "cpu"), str(tmp_path / "cpuset")],
         "paths": [str(tmp_path / "cpu/hvbench-dead"), str(tmp_path / "cpuset/hvbench-dead"),
                   str(tmp_path / "cpu/hvbench-dead/io")]}))
    # Our own pid, but another start time: a reused pid, so the owner is dead too.
    (tmp_path / "cpuacct/hvbench-reused").mkdir()
    (registry / "cgroups-reused.json").write_text(json.dumps(
        {"pid": os.getpid(), "start_time": -1,
         "paths": [str(tmp_path / "cpuacct/hvbench-reused")]}))
    live = CpuCgroups("live", support, registry)
    live.start()
    expected = sorted(f"cgroup {p}" for p in [
        tmp_path / "cpu/hvbench-dead/io", tmp_path / "cpuset/hvbench-dead/io",
        tmp_path / "cpu/hvbench-dead", tmp_path / "cpuset/hvbench-dead",
        tmp_path / "cpuacct/hvbench-reused"])
    # A dry run names the same cgroups and removes nothing.
    assert sorted(cleanup_orphaned_cgroups(registry, dry_run=True)) == expected
    assert (tmp_path / "cpu/hvbench-dead/io").is_dir()
    assert len(list(registry.iterdir())) == 3
    removed = cleanup_orphaned_cgroups(registry)
    assert sorted(removed) == expected
    assert sorted(p.name for p in registry.iterdir()) == ["cgroups-live.json"]
    assert (tmp_path / "cpu/hvbench-live").is_dir()
    assert cleanup_orphaned_cgroups(registry) == []
    live.stop()


def test_orphan_cleanup_never_touches_what_is_not_an_hvbench_cgroup(tmp_path: Path,
                                                                    registry: Path) -> None:
    (tmp_path / "cpu/system.slice").mkdir(parents=True)
    (registry / "cgroups-evil.json").write_text(json.dumps(
        {"pid": NO_PID, "roots": [str(tmp_path / "cpu")],
         "paths": [str(tmp_path / "cpu/system.slice"), str(tmp_path / "cpu")]}))
    (registry / "cgroups-junk.json").write_text("{not json")
    assert cleanup_orphaned_cgroups(registry, dry_run=True) == []
    assert cleanup_orphaned_cgroups(registry) == []
    assert (tmp_path / "cpu/system.slice").is_dir()
    assert (registry / "cgroups-evil.json").exists()  # kept: not everything was removed


# -- QEMU threads --------------------------------------------------------------------
def test_threads_split_into_vcpus_and_the_io_side() -> None:
    ready, done = threading.Event(), threading.Event()
    tids: list[int] = []

    def named(comm: str) -> None:
        tids.append(threading.get_native_id())
        Path(f"/proc/self/task/{tids[-1]}/comm").write_text(comm)
        ready.set()
        done.wait(10)
    threads = [threading.Thread(target=named, args=(comm,))
               for comm in ("CPU 0/TCG", "worker", "IO iothread0", "CPU x/TCG")]
    try:
        for thread in threads:
            ready.clear()
            thread.start()
            ready.wait(10)
        vcpus, others = qemu_thread_groups(os.getpid(), [tids[1]])
        assert vcpus == sorted(tids[:2])  # by name, and by the QMP list
        assert set(tids[2:]) <= set(others) and os.getpid() in others
        assert not set(vcpus) & set(others)
    finally:
        done.set()
        for thread in threads:
            thread.join()
    assert qemu_thread_groups(NO_PID, []) == ([], [])
