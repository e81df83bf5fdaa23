"""Study overhead: wall time of a study / (sum of measured phases + guest boots).

Usage: python bench/study_overhead.py [STUDY] [--db PATH] [--json]

Runs the study (default examples/quick.toml) into a fresh database, then reads back every
phase's wall time (``phase_wall_s``) and every boot (``boot_s``) that the runner stored.
Everything else (cache drops, file set-up, monitor start/stop, agent round trips, the
store's commits, process start) is overhead. Target: ratio <= 1.10.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from hvbench.kinds import install
from hvbench.run.runner import load_study, run_study
from hvbench.store.database import Store

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    install()  # every workload kind, as the CLI does at start-up
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("study", nargs="?", default=str(ROOT / "examples" / "quick.toml"))
    parser.add_argument("--db")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    db = Path(args.db or tempfile.mkdtemp(prefix="hvbench-overhead-")) / "overhead.db"
    study = load_study(Path(args.study))
    store = Store(db)
    try:
        started = time.monotonic()
        outcome = run_study(study, store)
        wall = time.monotonic() - started
        rows = store.measurements(outcome.run_id)
    finally:
        store.close()
    phases = sum(r.value for r in rows if r.metric == "phase_wall_s")
    boots = sum(r.value for r in rows if r.metric == "boot_s")
    result = {
        "study": args.study, "run": outcome.run_id, "db": str(db), "wall_s": wall,
        "phases_s": phases, "boots_s": boots, "ratio": wall / (phases + boots),
        "failures": outcome.failures,
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"{args.study}: wall {wall:.1f} s, phases {phases:.1f} s, boots {boots:.1f} s, "
              f"ratio {result['ratio']:.3f} (target <= 1.10)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
