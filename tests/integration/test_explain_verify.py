"""``hvbench explain --verify`` on real TCG guests: a stored verdict's fix is re-run
beside the original platform as an A/B study in ABBA order, and the effect it reports is
the one stored in the verification run."""

from __future__ import annotations

import json
import math
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

from hvbench.image.builder import GuestImage

FIXTURE = Path(__file__).parents[1] / "fixtures" / "runs" / "storage.db"
RUN = "20261125-014558-2dfc"
CELL = "vm.ide-writeback/iozone/read"


def _verification_rows(db: Path, run_id: str) -> dict[str, dict[int, float]]:
    with sqlite3.connect(db) as con:
        rows = con.execute(
            "SELECT c.platform_name, r.repetition, m.value FROM measurements m "
            "JOIN repetitions r ON m.repetition_id = r.id JOIN cells c ON r.cell_id = c.id "
            "WHERE c.run_id = ? AND m.phase = 'read' AND m.metric = 'mb_s'", (run_id,))
        out: dict[str, dict[int, float]] = {}
        for platform, repetition, value in rows:
            out.setdefault(platform, {})[repetition] = value
    return out


def test_verify_reruns_the_fix_beside_the_original(image: GuestImage, tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    shutil.copyfile(FIXTURE, db)
    done = subprocess.run(
        [sys.executable, "-m", "hvbench.cli.main", "explain", RUN, "--db", str(db),
         "--verify", "--only", CELL, "--repetitions", "3", "--format", "json"],
        capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    [verified] = report["verified"]
    assert (verified["cell"], verified["rule"]) == (CELL, "emulated-controller")
    assert verified["fix"] == 'disk = { bus = "virtio-blk" }'
    run_id = verified["verification_run"]
    with sqlite3.connect(db) as con:
        orders = [json.loads(o) for (o,) in con.execute(
            "SELECT cell_ids_json FROM run_order WHERE run_id = ? ORDER BY repetition",
            (run_id,))]
        buses = dict(con.execute(
            "SELECT name, json_extract(platform_json, '$.vm.disks[0].bus') FROM cells "
            "WHERE run_id = ?", (run_id,)).fetchall())
    # The pair alternates its order (ABBA) over the three repetitions.
    assert len(orders) == 3 and orders[1] == orders[0][::-1] == orders[2][::-1]
    assert buses == {"vm.ide-writeback/iozone": "ide",
                     "vm.ide-writeback+fix/iozone": "virtio-blk"}
    # The reported ratio is the geometric mean of the stored per-repetition ratios.
    values = _verification_rows(db, run_id)
    fixed, original = values["vm.ide-writeback+fix"], values["vm.ide-writeback"]
    logs = [math.log(fixed[r] / original[r]) for r in sorted(fixed)]
    assert verified["pairs"] == 3
    assert math.isclose(verified["ratio"], math.exp(sum(logs) / 3), rel_tol=1e-9)
    # The outcome follows from the interval and the margin.
    low, high, bound = verified["low"], verified["high"], 1 + verified["margin"]
    expected = ("confirmed" if low > bound else "worse" if high < 1 / bound
                else "no effect" if 1 / bound <= low and high <= bound else "inconclusive")
    assert verified["outcome"] == expected
