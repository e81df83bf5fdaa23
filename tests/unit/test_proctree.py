"""Finding and stopping whole process trees with real child processes: a child that
left its session (``setsid``) and an orphan re-parented to the subreaper are found and
killed; nothing outside the tree is touched; the interrupt flag; run exit codes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hvbench.cli.run import run_exit_code
from hvbench.errors import HvbenchError, InterruptedRun
from hvbench.host import interrupt, proctree
from hvbench.platforms.process import run_in_group
from tests.unit.waiting import wait_until


@pytest.fixture
def subreaper() -> Iterator[None]:
    assert proctree.become_subreaper()
    try:
        yield
    finally:
        # Back to an ordinary process for the rest of the session.
        proctree.become_subreaper(enable=False)


def _wait_for_tree(root: int, count: int) -> list[proctree.ProcInfo]:
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        tree = [p for p in proctree.descendants(root) if p.comm == "sleep"]
        if len(tree) >= count:
            return tree
        time.sleep(0.02)
    pytest.fail(f"no {count} sleeps under {root}")


def _alive(pid: int) -> bool:
    info = proctree.read_stat(pid)
    return info is not None and info.state not in ("Z", "X")


def test_read_stat_handles_spaces_and_parentheses_in_comm(tmp_path: Path) -> None:
    (tmp_path / "42").mkdir()
    (tmp_path / "42" / "stat").write_text("42 (a (b) c) D 7 42 42 0 -1 4194560 0\n")
    assert proctree.read_stat(42, tmp_path) == proctree.ProcInfo(42, 7, "D", "a (b) c")
    assert proctree.read_stat(43, tmp_path) is None


def test_read_stat_of_a_real_child() -> None:
    proc = subprocess.Popen(["sleep", "30"])
    try:
        info = proctree.read_stat(proc.pid)
        assert info is not None and info.ppid == os.getpid()
    finally:
        proc.kill()
        proc.wait()
    assert proctree.read_stat(proc.pid) is None


def test_descendants_follow_ppid_chains_parents_first() -> None:
    table = [proctree.ProcInfo(10, 1, "S", "root"), proctree.ProcInfo(12, 11, "S", "c"),
             proctree.ProcInfo(11, 10, "S", "b"), proctree.ProcInfo(20, 1, "S", "other")]
    assert [p.pid for p in proctree.descendants(10, table)] == [11, 12]
    assert proctree.descendants(12, table) == []


def test_kill_tree_reaches_a_child_in_its_own_session() -> None:
    # The shell stays; its setsid'd grandchild is in another session and process group.
    proc = subprocess.Popen(["sh", "-c", "setsid sleep 60 & sleep 61 & wait"],
                            start_new_session=True)
    outsider = subprocess.Popen(["sleep", "62"])
    try:
        tree = _wait_for_tree(proc.pid, 2)
        killed = proctree.kill_tree(proc.pid)
        assert {p.pid for p in tree} <= {p.pid for p in killed}
        assert proc.pid in {p.pid for p in killed}
        assert proctree.wait_gone([p.pid for p in tree], 3.0) == []
        assert proc.wait(timeout=3) == -signal.SIGKILL
        assert outsider.poll() is None, "a process outside the tree was killed"
    finally:
        outsider.kill()
        outsider.wait()


def test_an_orphan_re_parented_to_the_subreaper_is_found_and_reaped(
        subreaper: None) -> None:
    # The shell exits at once: its setsid'd child is orphaned and re-parents here.
    subprocess.run(["sh", "-c", "setsid sleep 60 >/dev/null 2>&1 &"], check=True)
    orphan = _wait_for_tree(os.getpid(), 1)[0]
    assert orphan.ppid == os.getpid()
    proctree.kill_strays([orphan])
    # Killed and reaped: not even a zombie is left.
    assert proctree.read_stat(orphan.pid) is None


def test_kill_strays_stops_members_whose_leader_already_exited(subreaper: None) -> None:
    # The leader exits when told (its stdin closed), not after a sleep that a loaded
    # worker's poll could miss.
    proc = subprocess.Popen(["sh", "-c", "setsid sleep 58.5 & head -c 1 >/dev/null"],
                            stdin=subprocess.PIPE)
    members = _wait_for_tree(proc.pid, 1)
    stray = next(p for p in members if b"58.5" in _cmdline(p.pid))
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(timeout=5)
    assert _alive(stray.pid)
    proctree.kill_strays(members)
    assert not _alive(stray.pid)


def test_wait_gone_returns_survivors_after_its_timeout() -> None:
    proc = subprocess.Popen(["sleep", "30"])
    try:
        started = time.monotonic()
        alive = proctree.wait_gone([proc.pid], 0.2)
        assert [p.pid for p in alive] == [proc.pid]
        assert 0.2 <= time.monotonic() - started < 2.0
        assert "sleep, state S" in proctree.describe(alive)
    finally:
        proc.kill()
        proc.wait()


def test_interrupt_check_turns_a_swallowed_signal_into_interrupted_run() -> None:
    interrupt.reset()
    try:
        interrupt.check(HvbenchError("ordinary"))  # no signal: nothing happens
        assert interrupt.request(signal.SIGTERM)
        assert not interrupt.request(signal.SIGINT)  # later signals do not raise again
        with pytest.raises(InterruptedRun) as caught:
            interrupt.check(HvbenchError("fio was killed"))
        assert caught.value.exit_code == 143
        assert isinstance(caught.value.__cause__, HvbenchError)
    finally:
        interrupt.reset()
    original = InterruptedRun(signal.SIGINT)
    with pytest.raises(InterruptedRun) as again:
        interrupt.check(original)
    assert again.value is original and again.value.exit_code == 130


@pytest.mark.parametrize(("ok", "failed", "code"), [
    (3, 0, 0), (0, 0, 0), (2, 1, 1), (1, 5, 1), (0, 1, 3), (0, 4, 3)])
def test_run_exit_code(ok: int, failed: int, code: int) -> None:
    assert run_exit_code(ok, failed) == code


def test_a_stray_holding_the_output_pipe_does_not_make_a_command_wait(
        subreaper: None, monkeypatch: pytest.MonkeyPatch) -> None:
    # The shell exits at once; its setsid'd child keeps stdout open for 60 s. The grace
    # the stray gets (PIPE_WAIT_S, twice: once to see the exit, once to let go) is
    # shortened: what is tested is that it ends, not how long it is.
    from hvbench.platforms import process

    monkeypatch.setattr(process, "PIPE_WAIT_S", 0.2)
    started = time.monotonic()
    done = run_in_group(["sh", "-c", "echo out; setsid sleep 59.25 &"], timeout=30)
    assert time.monotonic() - started < 5.0
    assert done.exit_code == 0 and done.stdout == b"out\n"
    left = [p for p in proctree.descendants(os.getpid())
            if p.state != "Z" and b"59.25" in _cmdline(p.pid)]
    assert left == []


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def test_main_is_a_subreaper_only_while_it_runs(tmp_path: Path) -> None:
    from hvbench.cli.main import main
    from hvbench.host import proctree as tree

    assert not tree.is_subreaper()
    main(["runs", "--db", str(tmp_path / "none.db")])  # fails at once: no database
    assert not tree.is_subreaper()


def test_a_listening_socket_is_seen_without_connecting_to_it() -> None:
    import socket

    from hvbench.platforms.process import tcp_listening

    with socket.socket() as bound, socket.socket() as listening:
        bound.bind(("127.0.0.1", 0))
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        assert tcp_listening(os.getpid(), listening.getsockname()[1])
        assert not tcp_listening(os.getpid(), bound.getsockname()[1])  # bound only
    assert not tcp_listening(None, 80)


#: A parent that forks a ``sleep`` whose preexec names the child on stdout, then waits
#: before die_with_parent: the test kills the parent (SIGKILL) during that wait.
_SLOW_START = """
import os, subprocess, time
from hvbench.host.proctree import die_with_parent

def slow() -> None:
    os.write(1, f"{os.getpid()}\\n".encode())
    time.sleep(1.0)
    die_with_parent()

subprocess.Popen(["sleep", "30"], preexec_fn=slow).wait()
"""


def test_a_child_whose_parent_died_before_the_prctl_kills_itself() -> None:
    # The race of a kill -9 during a guest's start: without the parent check the
    # child would exec and outlive hvbench, found by nothing.
    parent = subprocess.Popen([sys.executable, "-c", _SLOW_START], stdout=subprocess.PIPE,
                              text=True)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    parent.kill()
    parent.wait()
    alive = not wait_until(lambda: not _alive(child))
    if alive:
        os.kill(child, signal.SIGKILL)
    assert not alive, "the child outlived a parent that died before its prctl"
