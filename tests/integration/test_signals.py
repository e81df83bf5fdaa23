"""SIGTERM and SIGINT stop a whole run: during a native fio cell, a guest cell and a lab
cell, hvbench exits 143/130 within 10 s, leaves no process behind (not even fio's job
processes, which fio forks into their own session), marks the run ``interrupted``, and
``--resume`` completes it with exit 0. A run whose every repetition failed exits 3."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hvbench.host import proctree
from hvbench.image.builder import GuestImage
from hvbench.kinds.network.spec import NetworkWorkloadSpec

pytestmark = pytest.mark.integration
HVBENCH = [sys.executable, "-m", "hvbench.cli.main"]
#: The bound the issue sets, from the signal to hvbench's exit, seconds.
STOP_BOUND_S = 10.0
START_TIMEOUT_S = 60.0
#: The lab study's iperf3 port (the network workload's default).
IPERF3_PORT: int = NetworkWorkloadSpec.model_fields["port"].default
#: /proc/net/tcp's state of an established connection.
TCP_ESTABLISHED = "01"



def _job(name: str, options: str) -> str:
    """A fio job reading a file in the target directory."""
    return f"[{name}]\ndirectory=${{HVBENCH_TARGET_DIR}}\nrw=read\n{options}"


# A long job to interrupt, and a short one the resume runs instead (the job file is
# read when the cell runs, so rewriting it shortens the resume).
LONG_JOB = _job("long", "size=4M\nbs=4k\ntime_based=1\nruntime=60\n")
SHORT_JOB = _job("short", "size=1M\nbs=64k\n")
#: What the guest's fio prints on the guest's console (kernel log, error level: shown
#: despite ``quiet``) once it starts the job: the serial console's log on the host
#: then shows that fio runs in the guest. (exec_prerun is refused natively, not in a
#: guest.)
FIO_STARTED = "hvbench-test: fio started its job in the guest"
GUEST_LONG_JOB = _job("long", f"exec_prerun=sh -c 'echo \"<3>{FIO_STARTED}\" > /dev/kmsg'\n"
                      "size=4M\nbs=4k\ntime_based=1\nruntime=60\n")
# Verifies a file fio lays out with its own data, not verify headers: fails every time.
FAILING_JOB = _job("bad", "size=1M\nbs=4k\nverify=crc32c\nverify_only=1\n")

DISK_STUDY = """
[study]
name = "signals-disk"
repetitions = 1
seed = 1

[[platform]]
kind = "native"

[[platform]]
kind = "qemu"
name = "vm"
memory_mib = 256
disk = {{ bus = "virtio-blk", cache = "none", size = "64M" }}

[[workload]]
name = "job"
profile = "fio-job"
job_file = "{job}"
"""

# The interrupt comes as soon as the transfer is under way (an event, well inside the
# 5 s); the resume then runs the whole transfer, so a longer one only costs time.
LAB_STUDY = """
[study]
name = "signals-lab"
repetitions = 1
seed = 1

[lab]
[[lab.host]]
name = "ext"

[[platform]]
kind = "native"

[[workload]]
kind = "network"
name = "iperf3"
peer = "ext"
duration_s = 5
omit_s = 0
"""

FAILING_STUDY = """
[study]
name = "signals-failing"
repetitions = 2
seed = 1

[[platform]]
kind = "native"

[[workload]]
name = "bad"
profile = "fio-job"
job_file = "{job}"
"""


#: Descendants this test process had before the test (a session's PostgreSQL server
#: started by the store tests, with its workers): not hvbench's, never leftovers.
_BEFORE: set[int] = set()


@pytest.fixture(autouse=True)
def subreaper() -> Iterator[None]:
    """This test process as a child subreaper: whatever hvbench leaves behind
    re-parents here instead of to init, so the leak check finds it."""
    _BEFORE.clear()
    _BEFORE.update(p.pid for p in proctree.descendants(os.getpid()))
    assert proctree.become_subreaper()
    try:
        yield
    finally:
        for info in proctree.descendants(os.getpid()):
            if info.state == "Z":
                proctree.reap([info.pid])
        proctree.become_subreaper(enable=False)


def _start(args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen([*HVBENCH, *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def _wait_for(proc: subprocess.Popen[str], ready: Callable[[list[proctree.ProcInfo]], bool],
              what: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            _, err = proc.communicate()
            pytest.fail(f"hvbench exited with {proc.returncode} before {what}:\n{err}")
        if ready(proctree.descendants(proc.pid)):
            return
        time.sleep(0.1)
    proc.kill()
    pytest.fail(f"no {what} within {START_TIMEOUT_S:g} s")


def _guest_console_shows(text: str) -> bool:
    """True when a serial console log of a guest this test's hvbench runs (its run
    directory is in the test's own HVBENCH_WORKDIR) holds ``text``."""
    for log in Path(os.environ["HVBENCH_WORKDIR"]).rglob("console.log"):
        with contextlib.suppress(OSError):
            if text in log.read_text(errors="replace"):
                return True
    return False


def _named(names: set[str], count: int = 1) -> Callable[[list[proctree.ProcInfo]], bool]:
    return lambda tree: sum(1 for p in tree if p.comm in names) >= count


def _established_at(pid: int, port: int) -> int:
    """How many established TCP connections in ``pid``'s network namespace have
    ``port`` at their local end (/proc/PID/net/tcp and tcp6)."""
    count = 0
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        count += sum(1 for fields in map(str.split, lines) if fields[3] == TCP_ESTABLISHED
                     and int(fields[1].rsplit(":", 1)[1], 16) == port)
    return count


def _transferring(tree: list[proctree.ProcInfo]) -> bool:
    """True when the iperf3 server of ``tree`` holds the test's control connection and
    its data stream (two established connections to its port): the transfer is under
    way, not starting."""
    return any(_established_at(p.pid, IPERF3_PORT) >= 2 for p in tree if p.comm == "iperf3")


def _new_descendants() -> list[proctree.ProcInfo]:
    """Descendants of this test process that are neither one it had before the test
    nor a child of one (a PostgreSQL server forks a worker per connection)."""
    tree = proctree.descendants(os.getpid())
    parents = {p.pid: p.ppid for p in tree}
    old = set(_BEFORE)

    def is_old(pid: int) -> bool:
        seen: set[int] = set()
        while pid in parents and pid not in seen:
            if pid in old:
                return True
            seen.add(pid)
            pid = parents[pid]
        return pid in old

    return [p for p in tree if not is_old(p.pid)]


def _leftovers() -> list[proctree.ProcInfo]:
    """Live descendants of this test process that the test started: what hvbench left
    (it re-parents here)."""
    deadline = time.monotonic() + 2.0
    while True:
        alive = [p for p in _new_descendants() if p.state != "Z"]
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.05)


def _interrupt(proc: subprocess.Popen[str], signum: int) -> tuple[float, str]:
    """Send ``signum``; the seconds until hvbench exited and its stderr."""
    sent = time.monotonic()
    proc.send_signal(signum)
    try:
        _, err = proc.communicate(timeout=STOP_BOUND_S * 3)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        pytest.fail(f"hvbench did not exit within {STOP_BOUND_S * 3:g} s:\n{err}")
    return time.monotonic() - sent, err


def _run_status(db: Path) -> tuple[str, str]:
    with sqlite3.connect(db) as conn:
        row = conn.execute("SELECT id, status FROM runs ORDER BY created_at DESC").fetchone()
        stored = conn.execute("SELECT COUNT(*) FROM repetitions").fetchone()[0]
    assert stored == 0, "the abandoned repetition was stored"
    return str(row[0]), str(row[1])


def _check_stopped(proc: subprocess.Popen[str], signum: int, db: Path) -> str:
    elapsed, err = _interrupt(proc, signum)
    print(f"signal {signum}: hvbench exited {elapsed:.2f} s after it")
    assert proc.returncode == 128 + signum, err
    assert elapsed < STOP_BOUND_S, f"took {elapsed:.1f} s to stop:\n{err}"
    assert f"interrupted by signal {signum}" in err
    assert _leftovers() == [], f"left running: {_leftovers()}"
    run_id, status = _run_status(db)
    assert status == "interrupted"
    # The id at start, and the exact command that completes the run on interrupt.
    assert f"run {run_id} started" in err, err
    assert f"complete it with `hvbench run --resume {run_id} --db {db}`" in err, err
    return run_id


def _resume(run_id: str, db: Path, given: str | None = None) -> None:
    """Resume ``run_id`` as ``given`` (default: the whole id) and check it completes."""
    done = subprocess.run([*HVBENCH, "run", "--resume", given or run_id, "--db", str(db)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert f"run {run_id} resumed" in done.stderr, done.stderr
    assert f"hvbench explain {run_id} --db {db}" in done.stderr, done.stderr
    with sqlite3.connect(db) as conn:
        status = conn.execute("SELECT status FROM runs WHERE id=?", (run_id,)).fetchone()[0]
    assert status == "complete"


def _disk_study(tmp_path: Path) -> tuple[Path, Path]:
    job = tmp_path / "job.fio"
    job.write_text(LONG_JOB)
    study = tmp_path / "study.toml"
    study.write_text(DISK_STUDY.format(job=job))
    return study, job


SIGNALS = [pytest.param(signal.SIGTERM, id="SIGTERM"), pytest.param(signal.SIGINT, id="SIGINT")]


@pytest.mark.parametrize("signum", SIGNALS)
def test_signal_during_native_fio_cell(signum: int, tmp_path: Path) -> None:
    study, job = _disk_study(tmp_path)
    db = tmp_path / "runs.db"
    proc = _start(["run", str(study), "--db", str(db), "--only", "native/*"])
    # fio's main process and its job process (in a session of its own).
    _wait_for(proc, _named({"fio"}, count=2), "fio and its job process")
    run_id = _check_stopped(proc, signum, db)
    job.write_text(SHORT_JOB)
    # A unique prefix is enough, as for report, compare and explain.
    _resume(run_id, db, given=run_id[:8])


@pytest.mark.parametrize("signum", SIGNALS)
def test_signal_during_guest_cell(signum: int, image: GuestImage, tmp_path: Path) -> None:
    study, job = _disk_study(tmp_path)
    job.write_text(GUEST_LONG_JOB)
    # Only the guest: the job's exec_prerun is refused for the bare host's cell.
    native = '[[platform]]\nkind = "native"\n\n'
    assert native in study.read_text()
    study.write_text(study.read_text().replace(native, ""))
    db = tmp_path / "runs.db"
    proc = _start(["run", str(study), "--db", str(db), "--only", "vm/*"])
    _wait_for(proc, lambda _: _guest_console_shows(FIO_STARTED),
              "the guest's fio (on the guest's console)")
    run_id = _check_stopped(proc, signum, db)
    job.write_text(SHORT_JOB)
    _resume(run_id, db)


@pytest.mark.parametrize("signum", SIGNALS)
def test_signal_during_lab_cell(signum: int, tmp_path: Path) -> None:
    study = tmp_path / "lab.toml"
    study.write_text(LAB_STUDY)
    db = tmp_path / "runs.db"
    proc = _start(["run", str(study), "--db", str(db)])
    # The server in the lab host and the client, with the transfer under way.
    _wait_for(proc, lambda tree: _named({"iperf3"}, count=2)(tree) and _transferring(tree),
              "the iperf3 server and client, transferring")
    run_id = _check_stopped(proc, signum, db)
    _resume(run_id, db)


def test_every_repetition_failed_exits_3(tmp_path: Path) -> None:
    job = tmp_path / "bad.fio"
    job.write_text(FAILING_JOB)
    study = tmp_path / "failing.toml"
    study.write_text(FAILING_STUDY.format(job=job))
    # --quiet: no run id, bar or next commands; the failures still print.
    done = subprocess.run([*HVBENCH, "-q", "run", str(study), "--db",
                           str(tmp_path / "runs.db")],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 3, done.stderr
    assert "2 of 2 repetitions failed" in done.stderr
    assert " started" not in done.stderr and "next:" not in done.stderr, done.stderr
