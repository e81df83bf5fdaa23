"""`hvbench tune` end to end on real TCG guests: a small search (3 axes, few trials) is
killed with kill -9 mid-way and resumed to completion without measuring anything again;
its winner parses as a study platform, its domain XML validates with virt-xml-validate,
and report/explain/compare read the tuning run like any run."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from hvbench.image.builder import GuestImage
from hvbench.model.study import declared_vm, parse_study
from hvbench.store.database import Store
from tests.integration.conftest import hvbench

pytestmark = pytest.mark.integration
HVBENCH = [sys.executable, "-m", "hvbench.cli.main"]
HOST_RAM = 24 << 30
#: Configurations the killed search may try. With 4, a run of this test measured 10
#: guest repetitions of about 5 s each (boot and write); 3 still leave a promotion and
#: the finalists' rounds after the kill (which comes after 2), for 2 repetitions fewer.
TRIALS = 3
TUNE = f"""
[study]
name = "tune-small"
seed = 5

[[platform]]
kind = "native"

[[platform]]
kind = "qemu"
name = "vm"
machine = "pc"
memory_mib = 256
disk = {{ bus = "virtio-blk", cache = "writethrough", allocation = "preallocated", size = "32M" }}

[[workload]]
name = "wr"
kind = "disk"
profile = "dd"
target = "device"
file_size = "8M"
direct = true
phases = ["write"]

[tune]
metric = "mb_s"
budget = {{ trials = {TRIALS}, seconds = 400 }}
halving = {{ rungs = [1, 2], eta = 2, finalists = 2, max_repetitions = 3 }}

[tune.axes]
"disk.bus" = ["virtio-blk", "virtio-scsi"]
"disk.cache" = ["none", "writeback", "writethrough"]
"disk.iothread" = [false, true]
"""


def _ok_trial_reps(db: Path) -> int:
    """Stored ok repetitions of guest configurations (not the native baseline)."""
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db, timeout=1) as conn:
            row = conn.execute(
                "SELECT count(*) FROM repetitions p JOIN cells c ON p.cell_id = c.id "
                "WHERE p.status = 'ok' AND c.platform_kind = 'qemu'").fetchone()
    except sqlite3.OperationalError:  # the schema is not there yet
        return 0
    return int(row[0])


def _clean_work_dirs() -> None:
    # kill -9 leaves no chance to delete files; the resumed run removes the orphans it
    # recognises, the rest of the test's private directories is cleaned here.
    for variable in ("HVBENCH_WORKDIR", "TMPDIR"):
        for leftover in Path(os.environ[variable]).iterdir():
            subprocess.run(["rm", "-rf", str(leftover)], check=True)


def test_tune_killed_and_resumed_gives_a_usable_winner(image: GuestImage, tmp_path: Path,
                                                       no_leaks: Path) -> None:
    tune, db, winner = tmp_path / "tune.toml", tmp_path / "t.db", tmp_path / "winner"
    tune.write_text(TUNE)
    proc = subprocess.Popen([*HVBENCH, "tune", str(tune), "--db", str(db)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    deadline = time.monotonic() + 240
    while _ok_trial_reps(db) < 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert proc.poll() is None, f"the search ended before it could be killed: {proc.stderr}"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    with sqlite3.connect(db) as conn:
        before = conn.execute("SELECT id, cell_id, repetition, started_at FROM repetitions "
                              "WHERE status = 'ok' ORDER BY id").fetchall()
        run_id, status = conn.execute("SELECT id, status FROM runs").fetchone()
    assert status == "running"  # killed: nobody could mark it
    _clean_work_dirs()

    started = time.monotonic()
    done = subprocess.run([*HVBENCH, "tune", "--resume", run_id, "--db", str(db),
                           "--format", "json", "--winner-dir", str(winner)],
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < 400
    answer = json.loads(done.stdout)
    with sqlite3.connect(db) as conn:
        after = conn.execute("SELECT id, cell_id, repetition, started_at FROM repetitions "
                             "WHERE status = 'ok' ORDER BY id").fetchall()
        status = conn.execute("SELECT status FROM runs").fetchone()[0]
        configs = conn.execute("SELECT count(DISTINCT platform_name) FROM cells WHERE "
                               "platform_kind = 'qemu'").fetchone()[0]
    assert after[: len(before)] == before, "a stored repetition was measured again"
    assert len(after) > len(before)
    assert status == "complete"
    assert 2 <= configs <= TRIALS  # the trial budget, across both sessions
    assert "trial " in done.stderr and "best so far" in done.stderr

    _check_answer(answer, winner)
    _check_against_native(answer, run_id, db)
    _check_other_commands(answer, run_id, db)


def _check_against_native(answer: dict[str, Any], run_id: str, db: Path) -> None:
    """The winner against native, from the stored rows: native's write rates (mean, n)
    on one side, the winner's ranked mean on the other, and their difference in %."""
    with Store(db, create=False) as store:
        native = [r.value for r in store.measurements(run_id)
                  if r.platform == "native" and r.metric == "mb_s"]
    test = answer["winner_vs_native"]
    winner_mean = next(r["mean"] for r in answer["ranking"]
                       if r["configuration"] == answer["winner"])
    assert native and test["n_other"] == len(native), (test, native)
    assert test["mean_other"] == pytest.approx(statistics.fmean(native))
    assert test["mean_winner"] == pytest.approx(winner_mean)
    assert test["delta_pct"] == pytest.approx(
        100 * (winner_mean / statistics.fmean(native) - 1), abs=1e-6)


def _check_answer(answer: dict[str, Any], winner: Path) -> None:
    """A ranking, the winner against the default and native, the TCG label; the
    winner as a study platform, a QEMU fragment and libvirt XML."""
    ranking = answer["ranking"]
    assert answer["winner"] in {r["configuration"] for r in ranking}
    assert answer["tcg_note"]  # guests here run under TCG
    means = [r["mean"] for r in ranking]
    assert means == sorted(means, reverse=True)

    # The winner parses as a study platform with the winner's settings...
    platform = (winner / "platform.toml").read_text()
    study = parse_study('[study]\nname = "w"\n' + platform
                        + '[[workload]]\nkind = "disk"\nprofile = "dd"\ndirect = true\n',
                        "w.toml", HOST_RAM)
    settings = next(r["settings"] for r in ranking if r["configuration"] == answer["winner"])
    disk = declared_vm(study.platforms[0].spec).disks[0]
    assert (disk.bus, disk.cache, disk.iothread) == (
        settings["disk.bus"], settings["disk.cache"], settings["disk.iothread"])
    # ... and as libvirt XML that libvirt's schema accepts.
    assert f'cache="{disk.cache}"' in (winner / "libvirt-elements.xml").read_text()
    validate = shutil.which("virt-xml-validate")
    assert validate is not None, "virt-xml-validate (libvirt-clients) is missing"
    checked = subprocess.run([validate, str(winner / "domain.xml"), "domain"],
                             capture_output=True, text=True, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"cache={disk.cache}" in (winner / "qemu-args.txt").read_text()


def _check_other_commands(answer: dict[str, Any], run_id: str, db: Path) -> None:
    """report (with its tuning section), explain and compare read the run like any."""
    report = hvbench("report", run_id, "--db", str(db), "--format", "html")
    assert report.returncode == 0, report.stderr
    html = report.stdout
    assert 'id="tuning"' in html and "objective per measurement" in html
    explained = hvbench("explain", run_id, "--db", str(db), "--format", "json")
    assert explained.returncode == 0, explained.stderr
    assert answer["winner"] in explained.stdout
    if answer["default"] and answer["default"] != answer["winner"]:
        compared = hvbench("compare", answer["default"], answer["winner"], "--run", run_id,
                           "--db", str(db), "--metric", "mb_s")
        assert compared.returncode == 0, compared.stderr


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
#: The examples' budgets, cut to the smallest search that still explores, promotes and
#: ranks: two configurations, a rung of one repetition, then two for the finalists.
SMALL_BUDGET = "budget = { trials = 2, seconds = 300 }"
SMALL_HALVING = "halving = { rungs = [1, 2], eta = 2, finalists = 2, max_repetitions = 2 }"
#: Each example's workload, shortened (every trial and the native baseline run it per
#: repetition): the search and its ranking are what is checked, not the rates.
SHORTER = {
    "tune-disk.toml": {"file_size = ": 'file_size = "8M"'},
    "tune-net.toml": {"duration_s = ": "duration_s = 1.5", "omit_s = ": "omit_s = 0.5"},
}


def _reduced_example(name: str, directory: Path) -> Path:
    """examples/NAME.toml with :data:`SMALL_BUDGET`, :data:`SMALL_HALVING` and the
    :data:`SHORTER` lines in place of its own (the rest, axes included, as shipped)."""
    lines = (EXAMPLES / name).read_text().splitlines()
    cuts = {"budget = ": SMALL_BUDGET, "halving = ": SMALL_HALVING, **SHORTER[name]}
    for prefix, replacement in cuts.items():
        found = [i for i, line in enumerate(lines) if line.startswith(prefix)]
        assert len(found) == 1, f"{name}: expected one line starting with {prefix!r}"
        lines[found[0]] = replacement
    path = directory / name
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_tune_examples_search_and_are_explained(image: GuestImage, tmp_path: Path) -> None:
    """examples/tune-disk.toml and tune-net.toml, each searched for real (a reduced
    budget): the search measures its trials against the native baseline and names a
    winner from its ranking, and `hvbench explain` gives a verdict for the winner's
    cells."""
    for example in ("tune-disk.toml", "tune-net.toml"):
        db = tmp_path / f"{example}.db"
        done = subprocess.run(
            [*HVBENCH, "tune", str(_reduced_example(example, tmp_path)), "--db", str(db),
             "--format", "json"], capture_output=True, text=True, timeout=400, check=False)
        assert done.returncode == 0, done.stderr
        answer = json.loads(done.stdout)
        ranking = answer["ranking"]
        assert len(ranking) == 2, (example, ranking)
        assert answer["winner"] == ranking[0]["configuration"], example
        assert ranking[0]["mean"] >= ranking[1]["mean"], example
        with sqlite3.connect(db) as conn:
            (run_id,) = conn.execute("SELECT id FROM runs").fetchone()
            natives = conn.execute("SELECT count(*) FROM repetitions p JOIN cells c ON "
                                   "p.cell_id = c.id WHERE p.status = 'ok' AND "
                                   "c.platform_kind = 'native'").fetchone()[0]
        assert natives >= 1, f"{example}: no native baseline measured"
        explained = hvbench("explain", run_id, "--db", str(db), "--format", "json")
        assert explained.returncode == 0, explained.stderr
        verdicts = json.loads(explained.stdout)["verdicts"]
        assert any(v["platform"] == answer["winner"] for v in verdicts), (example, verdicts)
