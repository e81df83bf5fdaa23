"""How long `hvbench explain` takes on a 28-platform storage run.

Usage: python bench/explain_speed.py [--rounds 5] [--platforms 28] [--json]

No real 28-platform run is stored, so the script synthesises one from the real storage
fixture (tests/fixtures/runs/storage.db: native + 2 guest platforms x 3 workloads, 2
repetitions): it copies the database to a scratch directory, opens it once (the store
upgrades it in place), then clones the guest cells with every repetition, measurement
and sample under new platform names (vm.c1-..., with the cache mode changed in their
definition so that they are distinct platforms) until the run has ``--platforms``
platforms, as examples/storage.toml's 27 guests + native. It then runs
`hvbench explain RUN --db COPY` (a fresh process each round: import, store read, model,
rules, printing) and prints every round and the median. Target: median < 2 s.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "runs" / "storage.db"
CACHES = ("none", "writeback", "writethrough", "directsync", "unsafe")


# Table and column names below come from this script and the store's own schema
# (PRAGMA table_info), never from input: hence the S608 waivers.
def _columns(db: sqlite3.Connection, table: str) -> list[str]:
    return [row[1] for row in db.execute(f"PRAGMA table_info({table})") if row[1] != "id"]


def _clone_children(db: sqlite3.Connection, table: str, old_rep: int, new_rep: int) -> None:
    cols = [c for c in _columns(db, table) if c != "repetition_id"]
    names = ", ".join(cols)
    sql = (f"INSERT INTO {table} (repetition_id, {names}) SELECT ?, {names} "  # noqa: S608
           f"FROM {table} WHERE repetition_id = ?")
    db.execute(sql, (new_rep, old_rep))


def _clone_cell(db: sqlite3.Connection, cell_id: int, platform: str) -> None:
    cols = _columns(db, "cells")
    select = f"SELECT {', '.join(cols)} FROM cells WHERE id = ?"  # noqa: S608
    row = dict(zip(cols, db.execute(select, (cell_id,)).fetchone(), strict=True))
    old_platform = row["platform_name"]
    row["name"] = row["name"].replace(old_platform, platform, 1)
    definition = json.loads(row["platform_json"])
    disks = definition.get("vm", {}).get("disks", [])
    if disks:
        disks[0]["cache"] = CACHES[hash(platform) % len(CACHES)]
    row["platform_json"] = json.dumps(definition)
    row["platform_name"] = platform
    for key in ("base_platform",):
        if key in row and row[key] == old_platform:
            row[key] = platform
    marks = ", ".join("?" * len(row))
    insert = f"INSERT INTO cells ({', '.join(row)}) VALUES ({marks})"  # noqa: S608
    new_cell = db.execute(insert, list(row.values())).lastrowid
    rep_cols = [c for c in _columns(db, "repetitions") if c != "cell_id"]
    for (rep_id,) in db.execute("SELECT id FROM repetitions WHERE cell_id = ?",
                                (cell_id,)).fetchall():
        names = ", ".join(rep_cols)
        sql = (f"INSERT INTO repetitions (cell_id, {names}) SELECT ?, {names} "  # noqa: S608
               "FROM repetitions WHERE id = ?")
        new_rep = db.execute(sql, (new_cell, rep_id)).lastrowid
        if new_rep is None:
            raise RuntimeError("sqlite returned no row id for a cloned repetition")
        for table in ("measurements", "samples", "raw_outputs"):
            _clone_children(db, table, rep_id, new_rep)


def synthesise(path: Path, platforms: int) -> str:
    """Grow the run in ``path`` to ``platforms`` platforms; its run id."""
    db = sqlite3.connect(path)
    run_id = db.execute("SELECT id FROM runs").fetchone()[0]
    guests = db.execute("SELECT id, platform_name FROM cells WHERE platform_name != "
                        "'native' ORDER BY id").fetchall()
    have = len({name for _, name in guests}) + 1
    index = 0
    while have < platforms:
        index += 1
        for source in sorted({name for _, name in guests}):
            if have >= platforms:
                break
            for cell_id, name in guests:
                if name == source:
                    _clone_cell(db, cell_id, f"{source}.c{index}")
            have += 1
    db.commit()
    db.close()
    return str(run_id)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--platforms", type=int, default=28)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp())
    try:
        db = scratch / "storage28.db"
        shutil.copyfile(FIXTURE, db)
        cmd = [sys.executable, "-m", "hvbench.cli.main"]
        env = {"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"}
        # Open once through hvbench so the store upgrades the schema before cloning.
        subprocess.run([*cmd, "runs", "--db", str(db)], env=env, check=True,
                       capture_output=True)
        run_id = synthesise(db, args.platforms)
        times = []
        for _ in range(args.rounds):
            start = time.perf_counter()
            done = subprocess.run([*cmd, "explain", run_id, "--db", str(db)], env=env,
                                  capture_output=True, text=True, check=False)
            times.append(time.perf_counter() - start)
            if done.returncode != 0:
                print(done.stderr, file=sys.stderr)
                return 1
        cells = sum(1 for line in done.stdout.splitlines() if not line.startswith(" "))
        result = {"platforms": args.platforms, "verdicts": cells, "rounds": times,
                  "median_s": statistics.median(times), "target_s": 2.0}
        if args.json:
            print(json.dumps(result, indent=2))
        else:
            for i, t in enumerate(times, 1):
                print(f"round {i}: {t:.3f} s")
            print(f"{cells} verdicts on {args.platforms} platforms: median "
                  f"{result['median_s']:.3f} s (target < 2 s)")
        return 0 if result["median_s"] < 2.0 else 1
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
