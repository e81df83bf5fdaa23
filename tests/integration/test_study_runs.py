"""Studies end to end on real guests: every profile, resume after kill -9, the lock,
a guest that crashes mid-workload, malformed study files."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hvbench.errors import HostError
from hvbench.image.builder import GuestImage
from hvbench.kinds.disk import driver as disk
from hvbench.model.qemu_argv import GUEST_CLOCKSOURCE_KIND
from hvbench.model.study import parse_study
from hvbench.platforms.qemu import QemuPlatform
from hvbench.run.runner import RunLock, run_study
from hvbench.store.database import Store
from hvbench.workloads.outcome import PhaseOutcome

pytestmark = pytest.mark.integration
HVBENCH = str(Path(sys.executable).parent / "hvbench")
HOST_RAM = 24 << 30

PROFILES = """
[study]
name = "profiles"
repetitions = 1
seed = 3

[[platform]]
kind = "native"

[[platform]]
kind = "qemu"
name = "vm"
memory_mib = 256
disk = {{ bus = "virtio-blk", cache = "none", size = "128M" }}

[[workload]]
name = "iozone"
profile = "iozone"
target = "file"
file_size = "16M"
record_size = "1M"
direct = true

[[workload]]
name = "bonnie"
profile = "bonnie"
file_size = "8M"
files = 64
direct = true

[[workload]]
name = "dd"
profile = "dd"
target = "device"
file_size = "16M"
direct = true

[[workload]]
name = "job"
profile = "fio-job"
job_file = "{job}"
"""

JOB = """[global]
directory=${HVBENCH_TARGET_DIR}
size=4M
bs=4k
direct=1
[randread]
rw=randread
"""


def test_every_profile_natively_and_in_a_guest(image: GuestImage, tmp_path: Path) -> None:
    (tmp_path / "job.fio").write_text(JOB)
    path = tmp_path / "profiles.toml"
    path.write_text(PROFILES.format(job="job.fio"))
    study = parse_study(path.read_text(), str(path), HOST_RAM)
    store = Store(tmp_path / "r.db")
    try:
        outcome = run_study(study, store)
        assert outcome.failures == 0, store.failures(outcome.run_id)
        rows = store.measurements(outcome.run_id)
        clocks = store.raw_outputs(outcome.run_id, kind=GUEST_CLOCKSOURCE_KIND)
    finally:
        store.close()
    seen = {(r.platform, r.workload, r.phase) for r in rows}
    for platform in ("native", "vm"):
        for phase in ("write", "rewrite", "read", "reread", "randread", "randwrite"):
            assert (platform, "iozone", phase) in seen
        for phase in ("block-write", "block-rewrite", "block-read", "seq-create",
                      "rand-stat", "rand-delete"):
            assert (platform, "bonnie", phase) in seen
        assert (platform, "dd", "write") in seen and (platform, "dd", "read") in seen
        assert (platform, "job", "randread") in seen
    values = {(r.platform, r.workload, r.phase, r.metric): r.value for r in rows}
    assert values[("vm", "iozone", "write", "mb_s")] > 0
    assert values[("native", "bonnie", "seq-create", "ops_s")] > 0
    assert any(k[3].endswith("avgrq_sz") for k in values)
    assert values[("vm", "dd", "write", "qemu.vcpu.cpu_pct")] > 0
    # Each guest repetition keeps the clocksource its kernel used (auto under TCG: the
    # TSC); the host's repetitions keep none.
    assert {c.cell.split("/")[0] for c in clocks} == {"vm"}
    assert {c.content for c in clocks} == {"tsc"}


def _ok_count(db: Path) -> int:
    try:
        with sqlite3.connect(db) as conn:
            return int(conn.execute(
                "SELECT count(*) FROM repetitions WHERE status = 'ok'").fetchone()[0])
    except sqlite3.Error:
        return 0


#: The resume study's repetitions: 2 give 4 repetitions in all (one native and one guest
#: per round), of which the kill below comes after 2 are stored, so there is work left
#: both to lose and to resume; each repetition more costs a guest boot.
RESUME_REPETITIONS = 2
RESUME = f"""
[study]
name = "resume"
repetitions = {RESUME_REPETITIONS}
seed = 5

[[platform]]
kind = "native"

[[platform]]
kind = "qemu"
name = "vm"
memory_mib = 256
disk = {{ bus = "virtio-blk", cache = "none", size = "64M" }}

[[workload]]
profile = "dd"
target = "device"
file_size = "8M"
direct = true
"""


def test_resume_after_kill_9(image: GuestImage, tmp_path: Path, no_leaks: Path) -> None:
    study, db = tmp_path / "resume.toml", tmp_path / "r.db"
    study.write_text(RESUME)
    proc = subprocess.Popen([HVBENCH, "run", str(study), "--db", str(db)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    while _ok_count(db) < 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert proc.poll() is None, "the study finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with sqlite3.connect(db) as conn:
        before = conn.execute("SELECT id, repetition_id, metric, value FROM measurements "
                              "ORDER BY id").fetchall()
        run_id = conn.execute("SELECT id FROM runs").fetchone()[0]
    assert before
    done = subprocess.run([HVBENCH, "run", "--resume", run_id, "--db", str(db)],
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(db) as conn:
        after = conn.execute("SELECT id, repetition_id, metric, value FROM measurements "
                             "ORDER BY id").fetchall()
        reps = conn.execute("SELECT cell_id, repetition, count(*) FROM repetitions "
                            "WHERE status = 'ok' GROUP BY cell_id, repetition").fetchall()
        status = conn.execute("SELECT status FROM runs").fetchone()[0]
    assert after[: len(before)] == before, "a committed measurement changed or vanished"
    assert len(reps) == 2 * RESUME_REPETITIONS and all(count == 1 for _, _, count in reps)
    assert status == "complete"


def test_second_study_is_refused(tmp_path: Path, no_leaks: Path) -> None:
    lock = RunLock(no_leaks)
    lock.acquire("20260101-000000-abcd", "someone-elses-study")
    try:
        study = tmp_path / "s.toml"
        study.write_text(RESUME)
        done = subprocess.run([HVBENCH, "run", str(study), "--db", str(tmp_path / "x.db")],
                              capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 1
        assert "someone-elses-study" in done.stderr and "Traceback" not in done.stderr
        with pytest.raises(HostError, match="another study is running"):
            RunLock(no_leaks).acquire("x", "y")
    finally:
        lock.release()


def test_guest_crash_marks_cell_failed_and_study_goes_on(
    image: GuestImage, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    study = parse_study(RESUME, "crash.toml", HOST_RAM)
    real = disk.run_phase
    crashed: list[int] = []

    def crash_once(platform: object, *args: object, **kw: object) -> PhaseOutcome:
        if isinstance(platform, QemuPlatform) and not crashed and platform.pid:
            crashed.append(platform.pid)
            os.kill(platform.pid, signal.SIGKILL)  # the guest dies mid-workload
        return real(platform, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(disk, "run_phase", crash_once)
    store = Store(tmp_path / "c.db")
    try:
        outcome = run_study(study, store)
        failures = store.failures(outcome.run_id)
        ok = store.done(outcome.run_id)
    finally:
        store.close()
    assert outcome.failures == 1 and len(failures) == 1
    assert failures[0].console_log and "hvbench-init" in failures[0].console_log
    assert len(ok) == 2 * RESUME_REPETITIONS - 1


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("seed = 5", "seed = 5\nspeed = 1"), "study: speed: unknown field (did you mean 'seed'?)"),
        (("repetitions = 2", "repetitions = []"), "study: repetitions: Input should be"),
        (('cache = "none"', 'cache = "writeback", aio = "native"'), "aio=native needs cache=none"),
        (('profile = "dd"', 'profile = "fio-job"\njob_file = "missing.fio"'),
         "workload job_file: "),
    ],
)
def test_malformed_study_is_one_line_exit_2(
    tmp_path: Path, edit: tuple[str, str], message: str
) -> None:
    study = tmp_path / "bad.toml"
    study.write_text(RESUME.replace(*edit))
    done = subprocess.run([HVBENCH, "run", str(study), "--db", str(tmp_path / "x.db")],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert str(study) in done.stderr and message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
