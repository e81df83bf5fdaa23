"""What the guest kernel's speculative-execution mitigations cost each profile here.

Usage: python bench/mitigations.py [--db FILE] [--repetitions 6] [--json]

Runs bench/studies/mitigations.toml (the same guest booted with its kernel's default,
mitigations on, and with mitigations=off, next to the bare host; dd streaming, 4 kB
random reads one at a time, iperf3 both ways) and prints `hvbench
compare vm.on vm.off` of that run: the headline of every phase, the delta of turning
mitigations off, its permutation-test p-value and verdict. Real guests (TCG here):
about 2 minutes per repetition. The database is kept (default: a scratch file, named
at the end).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine_lock import machine_lock

REPO = Path(__file__).resolve().parents[1]
STUDY = REPO / "bench" / "studies" / "mitigations.toml"
#: A run refused because another study holds the host's run lock is retried.
LOCK_RETRIES = 60
#: The line `hvbench run` ends a run with.
RUN_LINE = re.compile(r"^run (\S+) complete", re.M)
RETRY_S = 10.0


def _hvbench(*args: str, output: bool = True) -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
           "COLUMNS": "120"}
    return subprocess.run([sys.executable, "-m", "hvbench.cli.main", *args], env=env,
                          capture_output=output, text=True, check=False)


def _run(db: Path, repetitions: int) -> str:
    for _ in range(LOCK_RETRIES):
        with machine_lock():
            done = _hvbench("run", str(STUDY), "--db", str(db),
                            "--repetitions", str(repetitions))
        found = RUN_LINE.search(done.stdout + done.stderr)
        if done.returncode == 0 and found:
            return found.group(1)
        if "another study is running" not in done.stderr:
            sys.exit(f"hvbench run failed: {done.stderr.strip()}")
        db.unlink(missing_ok=True)
        time.sleep(RETRY_S)
    sys.exit("the host's run lock stayed taken")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path)
    parser.add_argument("--json", action="store_true")
    # 6 per side is the fewest with which the permutation test can reach p < 0.01.
    parser.add_argument("--repetitions", type=int, default=6)
    args = parser.parse_args()
    db = args.db or Path(tempfile.mkdtemp(prefix="hvbench-mitigations-")) / "m.db"
    run = _run(db, args.repetitions)
    fmt = "json" if args.json else "table"
    done = _hvbench("compare", "vm.on", "vm.off", "--run", run, "--db", str(db),
                    "--threshold", "2", "--format", fmt)
    print(done.stdout, end="")
    if args.json:
        json.loads(done.stdout)  # a failed compare prints no JSON: fail loudly here
    print(f"run {run} in {db}", file=sys.stderr)
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
