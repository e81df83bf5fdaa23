"""Adaptive repetitions and the noise floor end to end on the real host disk: a run
that gives each cell the rounds its rule asks for, survives kill -9 and resumes; an
A/A noise floor measured by `hvbench noise` that `compare` and `check` then use."""

from __future__ import annotations

import json
import re
import signal
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hvbench.analysis.compare import DEFAULT_ALPHA
from hvbench.cli.check import noise_spreads
from hvbench.report.model import run_noise_floors
from hvbench.store.database import Store
from tests.integration.conftest import hvbench

pytestmark = pytest.mark.integration
HVBENCH = str(Path(sys.executable).parent / "hvbench")

ADAPTIVE = """
[study]
name = "adaptive"
repetitions = 3
seed = 4

[[platform]]
kind = "native"

[[workload]]
name = "loose"
profile = "dd"
target = "device"
file_size = "8M"
direct = true
# a 100 % interval: three repetitions usually reach it (a CoV up to 40 % at n = 3); a
# noisy device may take a round or two more, never all six
repetitions = { min = 3, max = 6, ci_pct = 100 }

[[workload]]
name = "strict"
profile = "dd"
target = "device"
file_size = "8M"
direct = true
# a disk is never this steady: the cell runs to its maximum
repetitions = { min = 3, max = 6, ci_pct = 0.001 }
"""

AA = """
[study]
name = "aa"
repetitions = 3
seed = 9
ab = ["a", "b"]

[[platform]]
kind = "native"
name = "a"

[[platform]]
kind = "native"
name = "b"

[[workload]]
name = "dd"
profile = "dd"
target = "device"
file_size = "8M"
direct = true
"""


def _ok(db: Path, cell: str) -> int:
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db, timeout=5) as conn:
            return int(conn.execute(
                "SELECT count(*) FROM repetitions r JOIN cells c ON c.id = r.cell_id "
                "WHERE r.status = 'ok' AND c.name = ?", (cell,)).fetchone()[0])
    except sqlite3.OperationalError:
        return 0  # the schema is being created


def test_adaptive_rounds_stop_on_each_rule_and_resume_after_kill_9(
        tmp_path: Path, no_leaks: Path) -> None:
    study, db = tmp_path / "adaptive.toml", tmp_path / "a.db"
    study.write_text(ADAPTIVE)
    proc = subprocess.Popen([HVBENCH, "run", str(study), "--db", str(db)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    while _ok(db, "native/strict") < 4 and time.monotonic() < deadline \
            and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before the adaptive rounds"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with sqlite3.connect(db) as conn:
        run_id = conn.execute("SELECT id FROM runs").fetchone()[0]
    done = subprocess.run([HVBENCH, "run", "--resume", run_id, "--db", str(db)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    loose = _ok(db, "native/loose")
    assert 3 <= loose < 6 and _ok(db, "native/strict") == 6
    with sqlite3.connect(db) as conn:
        orders = dict(conn.execute("SELECT repetition, cell_ids_json FROM run_order"))
        ids = dict(conn.execute("SELECT id, name FROM cells"))
        dupes = conn.execute("SELECT count(*) FROM repetitions GROUP BY cell_id, repetition "
                             "HAVING count(*) > 1").fetchall()
    assert not dupes
    assert sorted(orders) == list(range(6))
    # Each adaptive round holds the cells that have not reached their rule yet: strict
    # to its maximum, loose only until its interval was within 100 % (CI once saw a
    # fourth round of it, the 8 MB dd's CoV above 40 % over three).
    for rep in range(3, 6):
        expected = (["native/loose"] if rep < loose else []) + ["native/strict"]
        assert sorted(ids[i] for i in json.loads(orders[rep])) == expected, rep
    assert "native/strict: stopped at max 6 rounds" in done.stderr
    report = hvbench("report", run_id, "--db", str(db))
    shown = " ".join((report.stdout + report.stderr).split())
    assert "adaptive repetitions: native/strict: stopped at max 6 rounds" in shown
    assert "native/loose: stopped" not in shown  # it reached its interval


def test_noise_floor_gates_compare_and_sizes_check_bounds(tmp_path: Path,
                                                          no_leaks: Path) -> None:
    study, db = tmp_path / "aa.toml", tmp_path / "n.db"
    study.write_text(AA)
    noise = subprocess.run([HVBENCH, "noise", str(study), "--only", "a/*", "--pairs", "3",
                            "--db", str(db)],
                           capture_output=True, text=True, timeout=300, check=False)
    assert noise.returncode == 0, noise.stderr
    assert "noise floors stored from run" in noise.stdout
    shown = hvbench("noise", "--show", "--db", str(db))
    assert shown.returncode == 0, shown.stderr
    assert "a/dd/read" in shown.stdout and "a/dd/write" in shown.stdout
    run = subprocess.run([HVBENCH, "run", str(study), "--db", str(db)],
                         capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stderr
    found = re.search(r"run (\S+) complete", run.stderr)
    assert found, run.stderr
    run_id = found.group(1)
    compared = hvbench("compare", "--run", run_id, "a", "b", "--format", "json", "--db", str(db))
    assert compared.returncode == 0, compared.stderr
    rows = json.loads(compared.stdout)["comparisons"]
    assert {r["phase"] for r in rows} == {"read", "write"}
    # b is defined as a is: the floor measured on a applies, and a is paired with b.
    # The floor is the stored A/A spread's, at these sample sizes: it can be 0 (an 8 MB
    # dd lasts about 11 ms, and fio's rates step with its whole-ms runtime: three pairs
    # of equal values happen).
    with Store(db, create=False) as store:
        cells = [c for c in store.cells(run_id) if c.platform_name == "a"]
        floors = run_noise_floors(store, store.get_run(run_id), cells,
                                  name=lambda c: c.workload_name)
    assert {(r["cell"], r["phase"], r["metric"]) for r in rows} <= set(floors)
    for r in rows:
        expected = floors[(r["cell"], r["phase"], r["metric"])].floor_pct(
            r["n_a"], r["n_b"], DEFAULT_ALPHA)
        assert r["test"] == "paired t", r
        assert r["noise_floor_pct"] == pytest.approx(expected), (r, expected)
    bounds = tmp_path / "b.toml"
    bounds.write_text('[[bound]]\nmetric = "mb_s"\nplatform = "a"\nphase = "read"\n'
                      'mid = 1000\ntolerance_noise = 3\n')
    checked = hvbench("check", run_id, "--bounds", str(bounds), "--db", str(db))
    # The verdict follows from the stored rows: a's mean read rate against 1000 MB/s
    # +/- 3 x the noise floor (% of one repetition's A/A spread) stored for a.
    with Store(db, create=False) as store:
        reads = [r.value for r in store.measurements(run_id)
                 if (r.platform, r.phase, r.metric) == ("a", "read", "mb_s")]
        spread = noise_spreads(store, run_id)[("a", "dd", "read", "mb_s")]
    tolerance = 1000 * 3 * spread / 100
    inside = abs(statistics.fmean(reads) - 1000) <= tolerance
    assert checked.returncode == (0 if inside else 1), (checked.stdout, checked.stderr)
    assert "no noise floor" not in checked.stdout and " .. " in checked.stdout
