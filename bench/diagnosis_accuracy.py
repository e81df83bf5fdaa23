"""Accuracy of `hvbench explain` on the planted-bottleneck suite.

Usage: python bench/diagnosis_accuracy.py [--rounds 3] [--only NAME,...] [--json]

Runs every study of examples/diagnosis (each plants one known bottleneck; the planted
cells and causes are in examples/diagnosis/expected.json) ``--rounds`` times, each into
a fresh scratch database, and compares the dominant cause `hvbench explain` names for
every planted cell with the planted one. Prints one line per planted cell and round,
then the accuracy (correct / planted cells over all rounds). Exit 0 when every planted
cell was named correctly in every round. Real guests (TCG here): a round takes a few
minutes.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine_lock import machine_lock

REPO = Path(__file__).resolve().parents[1]
SUITE = REPO / "examples" / "diagnosis"


def _hvbench(*args: str) -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    return subprocess.run([sys.executable, "-m", "hvbench.cli.main", *args], env=env,
                          capture_output=True, text=True, check=False)


#: The machine is shared: a run refused because another study holds the host's run lock
#: is retried, every RETRY_S seconds, up to LOCK_RETRIES times.
LOCK_RETRIES = 60
RETRY_S = 10.0


def _run(name: str, db: Path) -> subprocess.CompletedProcess[str]:
    for _ in range(LOCK_RETRIES):
        with machine_lock():
            done = _hvbench("run", str(SUITE / f"{name}.toml"), "--db", str(db))
        if done.returncode == 0 or "another study is running" not in done.stderr:
            return done
        db.unlink(missing_ok=True)
        time.sleep(RETRY_S)
    return done


def one_study(name: str, planted: dict[str, str], scratch: Path) -> list[dict[str, object]]:
    """Run one planted study; one result per planted cell."""
    db = scratch / f"{name}.db"
    done = _run(name, db)
    if done.returncode != 0:
        return [{"study": name, "cell": pattern, "planted": rule, "named": None,
                 "ok": False, "error": done.stderr.strip().splitlines()[-1:]}
                for pattern, rule in planted.items()]
    verdicts = json.loads(_hvbench("explain", "--db", str(db), "--format", "json").stdout)
    out: list[dict[str, object]] = []
    for pattern, rule in planted.items():
        for verdict in verdicts["verdicts"]:
            if fnmatch.fnmatchcase(verdict["cell"], pattern) and verdict["phase"] != "boot":
                named = verdict["dominant"]["rule"] if verdict["dominant"] else None
                out.append({"study": name, "cell": verdict["cell"], "planted": rule,
                            "named": named, "ok": named == rule})
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", help="comma-separated study names (default: all)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--keep", metavar="DIR",
                        help="keep the databases in DIR/round-N instead of a scratch dir")
    args = parser.parse_args()
    expected = {k: v for k, v in json.loads((SUITE / "expected.json").read_text()).items()
                if not k.startswith("_")}
    names = args.only.split(",") if args.only else sorted(expected)
    results: list[dict[str, object]] = []
    for round_no in range(1, args.rounds + 1):
        with tempfile.TemporaryDirectory() as scratch:
            where = Path(args.keep) / f"round-{round_no}" if args.keep else Path(scratch)
            where.mkdir(parents=True, exist_ok=True)
            for name in names:
                for result in one_study(name, expected[name], where):
                    result["round"] = round_no
                    results.append(result)
                    if not args.json:
                        mark = "ok " if result["ok"] else "BAD"
                        print(f"round {round_no} {mark} {result['cell']}: planted "
                              f"{result['planted']}, named {result['named']}", flush=True)
    correct = sum(1 for r in results if r["ok"])
    summary = {"rounds": args.rounds, "planted_cells": len(results), "correct": correct,
               "accuracy": correct / len(results) if results else 0.0}
    if args.json:
        print(json.dumps({"summary": summary, "results": results}, indent=2))
    else:
        print(f"accuracy: {correct}/{len(results)} = {summary['accuracy']:.0%}")
    return 0 if results and correct == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
