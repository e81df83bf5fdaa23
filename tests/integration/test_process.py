"""BackgroundProcess: a real server started, checked ready, stopped; its failures."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hvbench.errors import CommandError, GuestTimeoutError, HostError
from hvbench.host.paths import remove_orphaned_dirs
from hvbench.platforms.process import BackgroundProcess, run_in_group, tcp_port_open
from hvbench.platforms.registry import REGISTRY

pytestmark = pytest.mark.integration
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _iperf3(port: int) -> list[str]:
    return ["iperf3", "-s", "--forceflush", "-B", "127.0.0.1", "-p", str(port)]


def _pid_alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def _eventually(check: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def test_start_ready_stop_twice() -> None:
    port = free_port()
    server = BackgroundProcess(_iperf3(port), name="iperf3 server")
    assert server.pid is None and not server.is_running() and server.log_tail() == ""
    server.start(ready=lambda: tcp_port_open("127.0.0.1", port), timeout=10)
    try:
        assert server.is_running() and server in REGISTRY.live()
        # iperf3 takes the ready probe's bare connection for a failed test and re-opens
        # its listening socket: the port can be closed for a moment right after.
        assert _eventually(lambda: tcp_port_open("127.0.0.1", port), 5.0)
        log = server.log_path
        assert log is not None and log.parent.parent == Path(tempfile.gettempdir())
        assert "Server listening" in server.log_tail()
        pid = server.pid
        assert pid is not None and os.getpgid(pid) == pid  # its own session
        with pytest.raises(HostError, match="already running"):
            server.start()
    finally:
        server.stop()
    assert not server.is_running() and server.pid is None
    assert server not in REGISTRY.live() and not log.parent.exists()
    assert not _pid_alive(pid) and not tcp_port_open("127.0.0.1", port)
    server.stop()  # safe twice


def test_context_manager_without_ready_check() -> None:
    with BackgroundProcess(["sleep", "30"], name="sleeper") as proc:
        pid = proc.pid
        assert pid is not None and _pid_alive(pid)
    assert not _pid_alive(pid)


def test_port_conflict_is_a_command_error_with_the_log_tail() -> None:
    port = free_port()
    with BackgroundProcess(_iperf3(port), name="first") as first:
        first_ready = time.monotonic() + 10
        while not tcp_port_open("127.0.0.1", port) and time.monotonic() < first_ready:
            time.sleep(0.02)
        second = BackgroundProcess(_iperf3(port), name="second iperf3")
        with pytest.raises(CommandError) as info:
            # The port answers (the first server's), so ready() cannot tell them apart:
            # only this process's own exit can end the wait.
            second.start(ready=lambda: False, timeout=10)
        assert first.is_running()
    err = info.value
    assert err.returncode == 1 and err.argv == _iperf3(port)
    assert "Address already in use" in err.output
    assert str(err).startswith("starting second iperf3: command 'iperf3 -s --forceflush")
    assert not second.is_running() and second not in REGISTRY.live()


def test_not_ready_in_time_stops_the_process() -> None:
    proc = BackgroundProcess(["sh", "-c", "echo waiting; exec sleep 30"], name="slow")
    started = time.monotonic()
    with pytest.raises(CommandError, match=r"starting slow: .* timed out") as info:
        proc.start(ready=lambda: False, timeout=0.5)
    assert time.monotonic() - started < 5
    assert info.value.returncode is None and "waiting" in info.value.output
    assert "not ready after 0.5 s" in info.value.output
    assert not proc.is_running() and REGISTRY.live() == []


def test_dies_with_its_parent(tmp_path: Path) -> None:
    """PR_SET_PDEATHSIG: kill -9 of the python that started it kills the server too."""
    script = textwrap.dedent("""
        import sys, time
        from hvbench.platforms.process import BackgroundProcess
        proc = BackgroundProcess(["sleep", "300"], name="orphan")
        proc.start()
        print(proc.pid, flush=True)
        time.sleep(300)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert _pid_alive(child)
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 5
    while _pid_alive(child) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _pid_alive(child)
    # The killed parent's log directory is an orphan: hvbench cleanup removes it.
    removed = remove_orphaned_dirs(Path(tempfile.gettempdir()))
    assert [p.name[:9] for p in removed] == ["hvb-proc-"]


def test_run_in_group_captures_and_times_out() -> None:
    done = run_in_group(["sh", "-c", "cat; echo err >&2; exit 3"], timeout=10, stdin=b"in",
                        env={"X": "1"})
    assert (done.exit_code, done.stdout, done.stderr) == (3, b"in", b"err\n")

    started = time.monotonic()
    with pytest.raises(GuestTimeoutError, match=r"did not finish in 0\.3 s"):
        run_in_group(["sh", "-c", "sleep 30 & sleep 30"], timeout=0.3, what="sleepers")
    assert time.monotonic() - started < 5


@pytest.fixture
def netns() -> Iterator[str]:
    name = f"hvb-ptest{os.getpid() % 100000}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=True)


@root_only
def test_server_in_a_network_namespace(netns: str) -> None:
    port = free_port()
    with BackgroundProcess(_iperf3(port), name="ns server", netns=netns) as server:
        deadline = time.monotonic() + 10
        while not tcp_port_open("127.0.0.1", port, netns=netns):
            assert time.monotonic() < deadline and server.is_running()
            time.sleep(0.02)
        assert server.argv[:4] == ["ip", "netns", "exec", netns]
        # ip netns exec execs the program: the pid we hold is iperf3's own.
        assert Path(f"/proc/{server.pid}/comm").read_text().strip() == "iperf3"
        # Only inside the namespace is the port open.
        assert not tcp_port_open("127.0.0.1", port)
        assert not tcp_port_open("127.0.0.1", port, netns="hvb-no-such-netns")


def test_cleanup_removes_the_wrk_script_of_a_killed_hvbench(tmp_path: Path) -> None:
    """wrk's report script lives in a directory that records its owner: after a kill -9
    of the process that staged it, `hvbench cleanup` removes it and says so once
    ("removed PATH"). ~5 s."""
    env = {**os.environ, "TMPDIR": str(tmp_path), "HVBENCH_WORKDIR": str(tmp_path / "w")}
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent("""
            import sys, time, types
            from hvbench.workloads.wrk import staged_script
            with staged_script(types.SimpleNamespace(kind="host", name="h")) as path:
                print(path, flush=True)
                time.sleep(600)
        """)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert holder.stdout is not None
        script = Path(holder.stdout.readline().strip())
        assert script.is_file() and script.parent.parent == tmp_path
    finally:
        holder.kill()
        holder.wait()
    done = subprocess.run([str(Path(sys.executable).parent / "hvbench"), "cleanup"],
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert f"removed {script.parent}\n" in done.stdout
    assert "removed removed" not in done.stdout
    assert not script.parent.exists()
