"""CpuCgroups on the host's real cgroups (root): weights and quotas measured on busy
loops, removal by stop(), and the cleanup after a ``kill -9`` of the owner.

Every test runs once per cgroup version; a version the host does not offer for the cpu
controller is skipped with the reason :func:`detect_cpu_cgroups` gives at run time."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from hvbench.host.cgroups import (
    PREFIX,
    CgroupSupport,
    CgroupVersion,
    CpuCgroups,
    GroupSettings,
    cleanup_orphaned_cgroups,
    detect_cpu_cgroups,
)
from hvbench.host.paths import work_dir

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="real cgroups need root"),
]
BUSY = [sys.executable, "-c", "while True: pass"]
MEASURE_S = 3.0


@pytest.fixture(params=[1, 2], ids=["v1", "v2"])
def support(request: pytest.FixtureRequest) -> CgroupSupport:
    """The host's cpu cgroups if they are of the version asked for, else a skip."""
    version: CgroupVersion = request.param
    found = detect_cpu_cgroups()
    if found.version != version:
        pytest.skip(f"the cpu controller is not in cgroup v{version} here: {found.reason}")
    return found


@pytest.fixture
def tag() -> str:
    # Unique per test process: other people's runs on the machine use other tags.
    return f"it{os.getpid()}"


@contextmanager
def busy_loops(count: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    procs = [subprocess.Popen(BUSY) for _ in range(count)]
    try:
        yield procs
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def _dirs(support: CgroupSupport, tag: str) -> list[Path]:
    roots = {r for r in (support.cpu_root, support.cpuset_root, support.cpuacct_root) if r}
    return sorted(p for root in roots for p in [root / f"{PREFIX}{tag}"] if p.exists())


def _cgroup_lines(pid: int) -> list[str]:
    """The non-root cgroups of ``pid`` in /proc/PID/cgroup."""
    return [line for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines()
            if not line.endswith(":/")]


def _usage_over(groups: CpuCgroups, names: list[str], seconds: float
                ) -> tuple[list[float], float]:
    """Each group's CPU seconds over about ``seconds``, and the wall time between the two
    reads (a loaded host's sleep overruns: the bounds are rates over the real window)."""
    started = time.monotonic()
    before = [groups.usage_s(n) for n in names]
    time.sleep(seconds)
    used = [groups.usage_s(n) - b for n, b in zip(names, before, strict=True)]
    return used, time.monotonic() - started


def test_weights_1_to_2_on_one_cpu(support: CgroupSupport, tag: str) -> None:
    with busy_loops(2) as procs, CpuCgroups(tag, support) as groups:
        groups.add_group("light", GroupSettings(weight=1, cpus="0"))
        groups.add_group("heavy", GroupSettings(weight=2, cpus="0"))
        groups.move_threads("light", [procs[0].pid])
        groups.move_threads("heavy", [procs[1].pid])
        assert any(f"{PREFIX}{tag}/light" in line for line in _cgroup_lines(procs[0].pid))
        time.sleep(0.3)  # both settled on CPU 0
        (light, heavy), window = _usage_over(groups, ["light", "heavy"], MEASURE_S)
        ratio = heavy / light
        print(f"cgroup v{support.version} 1:2 usage {light:.3f} s : {heavy:.3f} s, "
              f"ratio {ratio:.2f}")
        # Together they get at most CPU 0: pinned.
        assert light + heavy < window * 1.15
        assert 1.5 <= ratio <= 2.6
    assert _dirs(support, tag) == []
    assert list(work_dir().glob("cgroups-*.json")) == []


def test_quota_caps_a_busy_loop(support: CgroupSupport, tag: str) -> None:
    with busy_loops(1) as procs, CpuCgroups(tag, support) as groups:
        groups.add_group("capped", GroupSettings(quota_pct=25))
        groups.move_threads("capped", [procs[0].pid])
        time.sleep(0.3)
        (used,), window = _usage_over(groups, ["capped"], MEASURE_S)
        print(f"cgroup v{support.version} quota 25 %: {used / window:.3f} s/s")
        assert 0.15 <= used / window <= 0.35


def test_stop_moves_live_tasks_out_and_removes_everything(support: CgroupSupport,
                                                          tag: str) -> None:
    with busy_loops(1) as procs:
        groups = CpuCgroups(tag, support)
        groups.start()
        groups.add_group("a", GroupSettings(weight=0.5, cpus="0"))
        groups.add_group("b", GroupSettings(quota_pct=50))
        groups.move_threads("a", [procs[0].pid, 2 ** 22 + 1])  # the second never existed
        record = work_dir() / f"cgroups-{tag}.json"
        assert record.exists() and len(_dirs(support, tag)) >= 1
        groups.stop()
        assert _dirs(support, tag) == [] and not record.exists()
        assert _cgroup_lines(procs[0].pid) == _cgroup_lines(os.getpid())  # back at root
        assert procs[0].poll() is None  # and still running
        groups.stop()


CHILD = textwrap.dedent("""\
    import sys, time
    from hvbench.host.cgroups import CpuCgroups, GroupSettings
    groups = CpuCgroups(sys.argv[1])
    groups.start()
    groups.add_group("io", GroupSettings(weight=2, cpus="0"))
    groups.move_threads("io", [int(sys.argv[2])])
    print("ready", flush=True)
    time.sleep(120)
""")


def test_cleanup_after_kill_9_of_the_owner(support: CgroupSupport, tag: str) -> None:
    with busy_loops(1) as procs:
        owner = subprocess.Popen([sys.executable, "-c", CHILD, tag, str(procs[0].pid)],
                                 stdout=subprocess.PIPE, text=True)
        try:
            assert owner.stdout is not None and owner.stdout.readline() == "ready\n"
            assert cleanup_orphaned_cgroups() == []  # its owner is alive
            assert len(_dirs(support, tag)) >= 1
        finally:
            owner.send_signal(signal.SIGKILL)
            owner.wait()
            if owner.stdout is not None:
                owner.stdout.close()
        assert any(f"{PREFIX}{tag}" in line for line in _cgroup_lines(procs[0].pid))
        removed = cleanup_orphaned_cgroups()
        assert any(f"{PREFIX}{tag}/io" in line for line in removed), removed
        assert _dirs(support, tag) == []
        assert list(work_dir().glob("cgroups-*.json")) == []
        assert _cgroup_lines(procs[0].pid) == _cgroup_lines(os.getpid())
