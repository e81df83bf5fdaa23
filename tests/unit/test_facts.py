"""Host facts read from fake /sys and /proc trees."""

from __future__ import annotations

from pathlib import Path

from hvbench.host.facts import cgroup_info

PROC_CGROUPS = """#subsys_name\thierarchy\tnum_cgroups\tenabled
cpuset\t3\t1\t1
cpu\t1\t1\t1
memory\t4\t1\t1
hugetlb\t0\t1\t0
"""


def tree(tmp_path: Path, dirs: list[str], files: dict[str, str]) -> Path:
    root = tmp_path / "cgroup"
    for d in dirs:
        (root / d).mkdir(parents=True)
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (tmp_path / "cgroups").write_text(PROC_CGROUPS)
    return root


def test_hybrid(tmp_path: Path) -> None:
    root = tree(tmp_path, ["cpu", "cpuset", "memory"], {"unified/cgroup.controllers": ""})
    info = cgroup_info(root, tmp_path / "cgroups")
    assert info == {
        "version": "hybrid",
        "v1_controllers": ["cpuset", "cpu", "memory"],
        "v2_controllers": [],
    }


def test_pure_v2(tmp_path: Path) -> None:
    root = tree(tmp_path, [], {"cgroup.controllers": "cpuset cpu io memory pids\n"})
    info = cgroup_info(root, tmp_path / "cgroups")
    assert info["version"] == "v2"
    assert info["v2_controllers"] == ["cpuset", "cpu", "io", "memory", "pids"]


def test_pure_v1(tmp_path: Path) -> None:
    root = tree(tmp_path, ["cpu", "memory"], {})
    info = cgroup_info(root, tmp_path / "cgroups")
    assert info["version"] == "v1" and info["v1_controllers"] == ["cpu", "memory"]
