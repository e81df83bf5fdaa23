"""Trustworthy numbers: false positives of A/A comparisons, power against a planted 5 %
slowdown, and what adaptive repetitions save.

Usage: python bench/ab_statistics.py [--part fp|power|cost|all] [--db FILE]
       [--fp-blocks 40] [--fp-pairs 5] [--power-trials 20] [--power-pairs 3]
       [--power-from RUN,...] [--cost-ci 2] [--json]

- fp: ``hvbench noise`` on bench/studies/ab-aa.toml (platform a, 10 pairs) stores the
  bare host's noise floor; then one run of the same study (a and b identical, ABBA)
  with ``fp-blocks x fp-pairs`` repetitions is cut into blocks of ``fp-pairs``
  consecutive repetitions, each block one A/A comparison per dd phase, tested as
  ``hvbench compare --run RUN a b`` tests it (paired t, alpha 0.01, the noise floor).
  Also reported: the same blocks without the floor, and unpaired (permutation).
- power: bench/studies/ab-power.toml (a guest throttled at 20 MiB/s against 19 MiB/s:
  a 5 % slowdown) run in chunks of 2 trials (the machine lock is released between
  chunks, so a test session on this machine is never starved); its noise floor from
  ``hvbench noise`` on the fast platform (5 pairs). Each trial is ``power-pairs``
  repetitions; detected = significant and worse.
- cost: bench/studies/quick-adaptive.toml (the quick study, repetitions = { min = 3,
  max = 20, ci_pct = 2 }) on its guest cells; against the fixed count that would give
  every guest cell the same interval (the largest count any cell needed), costed with
  each cell's measured time per repetition and boot.

Real host disk and TCG guests; the database is kept (default: a scratch file, named at
the end). Figures for the closing note of issue 17.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

from machine_lock import machine_lock

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from hvbench.analysis.compare import compare_values  # noqa: E402
from hvbench.analysis.noise import NoiseFloor  # noqa: E402
from hvbench.store.database import Store  # noqa: E402
from hvbench.store.records import definition_key  # noqa: E402

STUDIES = REPO / "bench" / "studies"
RUN_LINE = re.compile(r"^run (\S+) complete", re.M)
ALPHA = 0.01
#: A run refused because another study holds the host's run lock is retried.
LOCK_RETRIES = 60
RETRY_S = 10.0
#: The CI target of bench/studies/quick-adaptive.toml, %.
DEFAULT_CI_PCT = 2.0
#: Seconds between two chunks of the power runs with the machine lock released.
PAUSE_S = 5.0


def _hvbench(*args: str) -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
           "COLUMNS": "120"}
    return subprocess.run([sys.executable, "-m", "hvbench.cli.main", *args], env=env,
                          capture_output=True, text=True, check=False)


def _run(*args: str, guests: bool) -> str:
    """``hvbench ARGS`` (a run or noise), retried while another study holds the host;
    returns the run id it printed."""
    for _ in range(LOCK_RETRIES):
        if guests:
            with machine_lock():
                done = _hvbench(*args)
        else:
            done = _hvbench(*args)
        text = done.stdout + done.stderr
        found = RUN_LINE.search(text) or re.search(r"from run (\S+) for host", text)
        if done.returncode == 0 and found:
            return found.group(1)
        if "another study is running" not in text:
            raise SystemExit(f"hvbench {' '.join(args)} failed ({done.returncode}):\n"
                             f"{text[-3000:]}")
        time.sleep(RETRY_S)
    raise SystemExit("the host's run lock stayed taken")


def _values(store: Store, run_id: str) -> dict[tuple[str, str], dict[int, float]]:
    """(platform, phase) -> repetition -> mb_s."""
    out: dict[tuple[str, str], dict[int, float]] = defaultdict(dict)
    for row in store.measurements(run_id):
        if row.metric == "mb_s":
            out[(row.platform, row.phase)][row.repetition] = row.value
    return out


def _floor(store: Store, run_id: str, platform: str, phase: str) -> NoiseFloor | None:
    record = store.get_run(run_id)
    cell = next(c for c in store.cells(run_id) if c.platform_name == platform)
    key = definition_key(cell.platform, cell.workload)
    for row in store.noise_floors(str(record.env.get("hostname")), [key]):
        if row.floor.phase == phase and row.floor.metric == "mb_s":
            f = row.floor
            return NoiseFloor(sd_pct=f.sd_pct, pairs=f.pairs, mean=f.mean, run_id=row.run_id)
    return None


def _block_verdicts(store: Store, run_id: str, a: str, b: str, block: int
                    ) -> list[dict[str, Any]]:
    """Every (block, phase) comparison of ``a`` against ``b`` in run ``run_id``."""
    values = _values(store, run_id)
    out = []
    for phase in sorted({ph for _, ph in values}):
        va, vb = values[(a, phase)], values[(b, phase)]
        floor = _floor(store, run_id, a, phase)
        reps = sorted(va.keys() & vb.keys())
        for start in range(0, len(reps) - block + 1, block):
            chunk = reps[start:start + block]
            xa, xb = [va[r] for r in chunk], [vb[r] for r in chunk]
            key = ("dd", phase, "mb_s")
            kw: dict[str, Any] = {"alpha": ALPHA, "threshold_pct": 0.0}
            floored = compare_values(key, xa, xb, pairs=(chunk, chunk), noise=floor, **kw)
            bare = compare_values(key, xa, xb, pairs=(chunk, chunk), **kw)
            unpaired = compare_values(key, xa, xb, **kw)
            out.append({"phase": phase, "reps": chunk, "delta_pct": floored.delta_pct,
                        "p_paired": bare.p_value, "p_unpaired": unpaired.p_value,
                        "floor_pct": floored.noise_floor_pct,
                        "verdict": floored.verdict, "change": floored.change,
                        "verdict_no_floor": bare.verdict,
                        "verdict_unpaired": unpaired.verdict})
    return out


def _rate(rows: list[dict[str, Any]], field: str, want: str = "significant") -> str:
    hits = sum(1 for r in rows if r[field] == want)
    return f"{hits}/{len(rows)} = {100.0 * hits / len(rows):.1f} %" if rows else "-"


def false_positives(db: Path, blocks: int, pairs: int) -> dict[str, Any]:
    study = str(STUDIES / "ab-aa.toml")
    started = time.monotonic()
    noise_run = _run("noise", study, "--only", "a/*", "--pairs", "10", "--db", str(db),
                     guests=False)
    run_id = _run("run", study, "--repetitions", str(blocks * pairs), "--db", str(db),
                  guests=False)
    with Store(db, create=False) as store:
        rows = _block_verdicts(store, run_id, "a", "b", pairs)
    return {"noise_run": noise_run, "run": run_id, "comparisons": len(rows),
            "significant": _rate(rows, "verdict"),
            "significant_without_floor": _rate(rows, "verdict_no_floor"),
            "significant_unpaired": _rate(rows, "verdict_unpaired"),
            "within_noise_floor": _rate(rows, "verdict", "within noise floor"),
            "seconds": round(time.monotonic() - started), "rows": rows}


def power(db: Path, trials: int, pairs: int, reuse: list[str]) -> dict[str, Any]:
    study = str(STUDIES / "ab-power.toml")
    started = time.monotonic()
    with Store(db, create=True) as store:
        known = [r for r in store.noise_floors() if r.floor.cell.startswith("fast/")]
    noise_run = known[0].run_id if known and reuse else _run(
        "noise", study, "--only", "fast/*", "--pairs", "5", "--db", str(db), guests=True)
    per_run = 2 * pairs
    rows: list[dict[str, Any]] = []
    runs = list(reuse)
    with Store(db, create=False) as store:
        # earlier runs of this study: each block of `pairs` repetitions is a trial
        for run_id in reuse:
            rows += [{**r, "run": run_id} for r in _block_verdicts(store, run_id, "fast",
                                                                   "slow", pairs)]
    while len({(r["run"], r["reps"][0]) for r in rows}) < trials:
        run_id = _run("run", study, "--repetitions", str(per_run), "--db", str(db),
                      guests=True)
        runs.append(run_id)
        with Store(db, create=False) as store:
            rows += [{**r, "run": run_id} for r in _block_verdicts(store, run_id, "fast",
                                                                   "slow", pairs)]
        print(f"power: {len(runs)} runs, {len(rows)} comparisons", file=sys.stderr)
        # a pause without the lock: test sessions poll for it and would otherwise starve
        time.sleep(PAUSE_S)
    detected = [r for r in rows if r["verdict"] == "significant" and r["change"] == "worse"]
    deltas = [r["delta_pct"] for r in rows]
    return {"noise_run": noise_run, "runs": runs, "comparisons": len(rows),
            "trials": len({(r["run"], r["reps"][0]) for r in rows}),
            "detected": f"{len(detected)}/{len(rows)} = "
                        f"{100.0 * len(detected) / len(rows):.1f} %",
            "mean_delta_pct": round(sum(deltas) / len(deltas), 2),
            "seconds": round(time.monotonic() - started), "rows": rows}


def _seconds(a: str, b: str) -> float:
    return (datetime.fromisoformat(b) - datetime.fromisoformat(a)).total_seconds()


def cost(db: Path, ci_pct: float) -> dict[str, Any]:
    text = (STUDIES / "quick-adaptive.toml").read_text()
    if ci_pct != DEFAULT_CI_PCT:
        text = text.replace(f"ci_pct = {DEFAULT_CI_PCT:g} ", f"ci_pct = {ci_pct:g} ")
    scratch = Path(tempfile.mkdtemp(prefix="hvbench-ab-"))
    study = str(scratch / "quick-adaptive.toml")
    Path(study).write_text(text)
    started = time.monotonic()
    run_id = _run("run", study, "--only", "guest*", "--db", str(db), guests=True)
    wall = time.monotonic() - started
    with Store(db, create=False) as store:
        reps = [r for r in store.repetitions(run_id) if r.status == "ok"]
        boots = defaultdict(list)
        for row in store.measurements(run_id):
            if row.metric == "boot_s":
                boots[row.cell].append(row.value)
        order = store.order(run_id)
    per_cell: dict[str, list[float]] = defaultdict(list)
    for r in reps:
        per_cell[r.cell].append(_seconds(r.started_at, r.finished_at))
    counts = {cell: len(v) for cell, v in per_cell.items()}
    # one repetition of a cell: its measurement plus a guest boot (every repetition
    # of a guest cell boots its guest)
    item_s = {cell: sum(v) / len(v) + (sum(boots[cell]) / len(boots[cell])
                                       if boots[cell] else 0.0)
              for cell, v in per_cell.items()}
    fixed_n = max(counts.values())
    fixed_s = fixed_n * sum(item_s.values())
    adaptive_s = sum(counts[c] * item_s[c] for c in counts)
    return {"run": run_id, "ci_pct": ci_pct, "wall_s": round(wall), "repetitions": counts,
            "rounds": len(order), "per_repetition_s": {c: round(s, 1) for c, s in
                                                       item_s.items()},
            "fixed_count": fixed_n, "fixed_s": round(fixed_s),
            "adaptive_measured_s": round(adaptive_s),
            "saving_pct": round(100.0 * (1 - adaptive_s / fixed_s), 1) if fixed_s else None}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("fp", "power", "cost", "all"), default="all")
    parser.add_argument("--db", type=Path)
    parser.add_argument("--fp-blocks", type=int, default=40)
    parser.add_argument("--fp-pairs", type=int, default=5)
    parser.add_argument("--power-trials", type=int, default=20)
    parser.add_argument("--power-pairs", type=int, default=3)
    parser.add_argument("--power-from", default="", metavar="RUN,...",
                        help="earlier ab-power runs in --db to count as trials first")
    parser.add_argument("--cost-ci", type=float, default=DEFAULT_CI_PCT,
                        help="the cost part's CI target, %% (default 2, as the study)")
    parser.add_argument("--json", action="store_true", help="print every comparison too")
    args = parser.parse_args()
    db = args.db or Path(tempfile.mkdtemp(prefix="hvbench-ab-")) / "ab.db"
    out: dict[str, Any] = {"db": str(db)}
    if args.part in ("fp", "all"):
        out["false_positives"] = false_positives(db, args.fp_blocks, args.fp_pairs)
    if args.part in ("power", "all"):
        reuse = [r for r in args.power_from.split(",") if r]
        out["power"] = power(db, args.power_trials, args.power_pairs, reuse)
    if args.part in ("cost", "all"):
        out["cost"] = cost(db, args.cost_ci)
    if not args.json:
        for part in ("false_positives", "power"):
            if part in out:
                out[part] = {k: v for k, v in out[part].items() if k != "rows"}
    print(json.dumps(out, indent=2, default=lambda v: None if isinstance(v, float)
                     and math.isnan(v) else v))
    return 0


if __name__ == "__main__":
    sys.exit(main())
