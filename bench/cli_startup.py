"""CLI start-up benchmark: the wall time of a few representative ``hvbench`` commands,
each started ``--rounds`` times as a new process (issue 25: every command, and each of
the integration suite's ~150 ``hvbench`` processes, pays the imports).

Usage: python bench/cli_startup.py [--rounds 5] [--fixture tests/fixtures/runs/quick.db]
                                   [--hvbench PATH] [--json]

The commands: ``--help``; ``runs`` on an empty store (made by the script); ``runs`` and
``report`` on a copy of a stored fixture run (copied: reading a SQLite file may leave
its -wal/-shm files next to it). Also the cumulative ``-X importtime`` of ``import
hvbench.cli.main`` in the same interpreter. Each figure is the median of the rounds
(min and max beside it); a command that exits non-zero is an error, not a time. The
``hvbench`` started is the one next to this interpreter unless ``--hvbench``; run it
with ``PYTHONPATH=OTHER/src`` to time another tree with the same environment.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hvbench.kinds import install
from hvbench.store.database import Store

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "runs" / "quick.db"


def wall_times(argv: list[str], rounds: int) -> list[float]:
    """Seconds from start to exit of ``argv``, ``rounds`` times (output discarded).
    Raises SystemExit with the command's stderr when it fails."""
    took = []
    for _ in range(rounds):
        start = time.perf_counter()
        done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True, check=False)
        took.append(time.perf_counter() - start)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(argv)}: exit {done.returncode}\n{done.stderr}")
    return took


def import_times(rounds: int) -> list[float]:
    """The cumulative ``-X importtime`` of ``import hvbench.cli.main``, seconds."""
    took = []
    for _ in range(rounds):
        done = subprocess.run([sys.executable, "-X", "importtime", "-c",
                               "import hvbench.cli.main"],
                              capture_output=True, text=True, check=True)
        match = re.search(r"\|\s*(\d+) \| hvbench\.cli\.main\s*$", done.stderr, re.MULTILINE)
        if match is None:
            raise SystemExit(f"no importtime line for hvbench.cli.main:\n{done.stderr}")
        took.append(int(match.group(1)) / 1e6)
    return took


def summary(values: list[float]) -> dict[str, float]:
    return {"median_s": statistics.median(values), "min_s": min(values),
            "max_s": max(values)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--fixture", type=Path, default=FIXTURE,
                        help="a results database with at least one run")
    parser.add_argument("--hvbench", type=Path,
                        default=Path(sys.executable).parent / "hvbench",
                        help="the hvbench program (default: the one beside this Python)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    # The store asks each cell's workload kind for its identity facts.
    install()
    program = str(args.hvbench)
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="hvbench-startup-") as tmp:
        empty, stored = Path(tmp) / "empty.db", Path(tmp) / "stored.db"
        Store(empty).close()
        shutil.copyfile(args.fixture, stored)
        commands = {
            "hvbench --help": [program, "--help"],
            "hvbench runs (empty store)": [program, "runs", "--db", str(empty)],
            "hvbench runs (fixture)": [program, "runs", "--db", str(stored)],
            "hvbench report (fixture)": [program, "report", "--db", str(stored)],
        }
        for name, argv in commands.items():
            results[name] = summary(wall_times(argv, args.rounds))
    results["-X importtime: import hvbench.cli.main"] = summary(import_times(args.rounds))
    if args.json:
        print(json.dumps({"rounds": args.rounds, "results": results}, indent=2))
        return
    width = max(len(name) for name in results)
    print(f"{'command':<{width}}  {'median s':>8}  {'min s':>6}  {'max s':>6}"
          f"   ({args.rounds} rounds)")
    for name, row in results.items():
        print(f"{name:<{width}}  {row['median_s']:8.3f}  {row['min_s']:6.3f}  "
              f"{row['max_s']:6.3f}")


if __name__ == "__main__":
    main()
