"""Accuracy of `hvbench explain` on the planted-bottleneck matrix.

Usage: python bench/diagnosis_accuracy.py [--rounds 3] [--only NAME,...] [--json]
                                          [--keep DIR | --rescore DIR]

Runs every study of examples/diagnosis (each plants known bottlenecks; the planted
cells and causes are in examples/diagnosis/expected.json) ``--rounds`` times, each into
a fresh scratch database, and compares what `hvbench explain` names for every planted
cell with the planted cause. Prints one line per planted cell and round, then:

- the confusion matrix: planted cause (rows) x named dominant cause (columns; a cell
  with no cause is named by its outcome: ``(unexplained)``, ``(not-a-device-
  measurement)``, ``(near-native)``);
- top-1 accuracy: the dominant cause is the planted one (for a clean guest, planted
  ``none``: no specific cause, i.e. no dominant cause or only ``tcg-emulation``, the
  accelerator every guest here runs under);
- right-fix rate: the fix given is the planted cause's fix. A planted cell may list the
  configuration changes of its fix (``{"rule": ..., "fix": {"disk.cache": "none"}}``):
  then the dominant finding's changes must be exactly those; or, for a fix outside the
  study file, what its text must name (``{"rule": ..., "fix_names": [FILE, ...]}``: a
  cgroup limit's control file, any of them); otherwise its fix must
  be the planted rule's own (another rule with the same fix is a right fix, a wrong
  name). For a clean guest: no fix given;
- unexplained rate: planted cells whose outcome was ``unexplained``;
- the same figures over the *quiet* studies only: those during which the host used at
  most :data:`QUIET_CORES` cores outside the study (busy CPU from /proc/stat minus the
  run's own process tree). On a busy host the planted truth no longer holds (the
  other work is a bottleneck of its own), and each line names that host's load.

``--json`` prints all of it as one JSON document instead. Exit 0 when every planted cell
was named correctly in every round. Real guests (TCG here): each study takes about a
minute; the whole matrix takes long, run it in a window of its own.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from machine_lock import machine_lock

REPO = Path(__file__).resolve().parents[1]
SUITE = REPO / "examples" / "diagnosis"
#: The planted cause of a clean guest: no specific cause may be named.
CLEAN = "none"
#: Causes a clean guest may still get: the accelerator's own cost (every guest here
#: runs under TCG), which is no bottleneck planted in the cell.
NOT_SPECIFIC = ("tcg-emulation",)


def _hvbench(*args: str) -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    return subprocess.run([sys.executable, "-m", "hvbench.cli.main", *args], env=env,
                          capture_output=True, text=True, check=False)


#: The machine is shared: a run refused because another study holds the host's run lock
#: is retried, every RETRY_S seconds, up to LOCK_RETRIES times.
LOCK_RETRIES = 60
RETRY_S = 10.0


#: A study is *quiet* when the host's CPU outside it averaged at most this many cores.
#: A planted "none" or a planted cause is only the truth on a quiet host: other work on
#: the host is itself a bottleneck that explain rightly names (host-cpu-contention).
QUIET_CORES = 0.3
_TICKS_S = float(os.sysconf("SC_CLK_TCK"))


def _busy_s() -> float:
    """CPU seconds the whole host spent busy since boot (/proc/stat: all but idle and
    iowait; guest time is already inside user)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / _TICKS_S


def _children_s() -> float:
    times = os.times()
    return times.children_user + times.children_system


def _run(name: str, db: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run one study; with the cores the host used outside it, on average over the run
    (host busy minus the CPU of the run's process tree, reaped into this process's
    children times: the kernel's own work for the study, softirqs and kworkers, counts
    as outside, so this is an upper bound)."""
    for _ in range(LOCK_RETRIES):
        with machine_lock():
            busy, mine, start = _busy_s(), _children_s(), time.monotonic()
            done = _hvbench("run", str(SUITE / f"{name}.toml"), "--db", str(db))
            wall = time.monotonic() - start
            outside = max(0.0, (_busy_s() - busy) - (_children_s() - mine)) / wall
        if done.returncode == 0 or "another study is running" not in done.stderr:
            return done, outside
        db.unlink(missing_ok=True)
        time.sleep(RETRY_S)
    return done, outside


def planted_cause(spec: str | Mapping[str, Any]) -> tuple[str, dict[str, Any] | None]:
    """(rule, the fix's configuration changes or None) of an expected.json entry."""
    if isinstance(spec, str):
        return spec, None
    return str(spec["rule"]), dict(spec["fix"]) if "fix" in spec else None


def fix_names(spec: str | Mapping[str, Any]) -> tuple[str, ...] | None:
    """What the right fix's text must name, for a fix outside the study file (a cgroup
    limit: its control file): ``"fix_names"`` of an expected.json entry, one string or
    a list of alternatives (``["blkio.throttle.read_bps_device", "io.max"]``: v1 or v2,
    whichever the host has). None when the entry has none."""
    names = spec.get("fix_names") if isinstance(spec, Mapping) else None
    if names is None:
        return None
    return (names,) if isinstance(names, str) else tuple(str(n) for n in names)


def named_label(verdict: Mapping[str, Any]) -> str:
    """The column of the confusion matrix: the dominant rule, else ``(outcome)``."""
    dominant = verdict.get("dominant")
    return str(dominant["rule"]) if dominant else f"({verdict.get('outcome')})"


def score(verdict: Mapping[str, Any], spec: str | Mapping[str, Any],
          rule_fixes: Mapping[str, str]) -> dict[str, Any]:
    """One planted cell's result: planted, named, top-1 ``ok``, ``right_fix``,
    ``unexplained``. ``rule_fixes``: rule -> its fix text (the planted rule's own fix
    when the entry lists no changes)."""
    planted, changes = planted_cause(spec)
    dominant = verdict.get("dominant")
    named = dominant["rule"] if dominant else None
    if planted == CLEAN:
        ok = named is None or named in NOT_SPECIFIC
        right_fix = ok
    else:
        ok = named == planted
        names = fix_names(spec)
        if dominant is None:
            right_fix = False
        elif names is not None:
            right_fix = any(n in str(dominant["fix_detail"]) for n in names)
        elif changes is not None:
            right_fix = {c["key"]: c["value"] for c in dominant["changes"]} == changes
        else:
            right_fix = dominant["fix_detail"] == rule_fixes.get(planted)
    return {"cell": verdict["cell"], "planted": planted, "named": named,
            "label": named_label(verdict), "outcome": verdict.get("outcome"), "ok": ok,
            "right_fix": right_fix, "unexplained": verdict.get("outcome") == "unexplained"}


def match(verdicts: Sequence[Mapping[str, Any]], planted: Mapping[str, Any],
          rule_fixes: Mapping[str, str]) -> list[dict[str, Any]]:
    """The results of one study's verdicts against its planted cells (shell patterns;
    the boot phase is never a planted cell). A pattern no verdict matches is a miss."""
    out: list[dict[str, Any]] = []
    for pattern, spec in planted.items():
        found = [score(v, spec, rule_fixes) for v in verdicts
                 if fnmatch.fnmatchcase(v["cell"], pattern) and v["phase"] != "boot"]
        out += found or [{"cell": pattern, "planted": planted_cause(spec)[0], "named": None,
                          "label": "(no such cell)", "outcome": None, "ok": False,
                          "right_fix": False, "unexplained": False}]
    return out


def one_study(name: str, planted: Mapping[str, Any], scratch: Path,
              rule_fixes: Mapping[str, str], *, rescore: bool = False
              ) -> list[dict[str, Any]]:
    """Run one planted study (``rescore``: explain the database a kept run left in
    ``scratch`` again, with the host load recorded beside it); one result per planted
    cell."""
    db = scratch / f"{name}.db"
    load = scratch / f"{name}.host.json"
    if rescore:
        if not db.exists():
            return []
        done = subprocess.CompletedProcess([], 0, "", "")
        outside = json.loads(load.read_text())["outside_cores"] if load.exists() else None
    else:
        done, outside = _run(name, db)
        load.write_text(json.dumps({"outside_cores": outside}))
    # A rescored run of a bench that did not record the load: unknown, not quiet.
    host = {"outside_cores": None if outside is None else round(outside, 3),
            "quiet": outside is not None and outside <= QUIET_CORES}
    if done.returncode != 0:
        return [{"study": name, "cell": pattern, "planted": planted_cause(spec)[0],
                 "named": None, "label": "(run failed)", "outcome": None, "ok": False,
                 "right_fix": False, "unexplained": False,
                 "error": done.stderr.strip().splitlines()[-1:], **host}
                for pattern, spec in planted.items()]
    verdicts = json.loads(_hvbench("explain", "--db", str(db), "--format", "json").stdout)
    return [{"study": name, **r, **host}
            for r in match(verdicts["verdicts"], planted, rule_fixes)]


def summarize(results: Sequence[Mapping[str, Any]], rounds: int) -> dict[str, Any]:
    """Top-1 accuracy, right-fix and unexplained rates, and the confusion matrix
    (planted -> named label -> count) over every round."""
    n = len(results)
    matrix: dict[str, Counter[str]] = {}
    for r in results:
        matrix.setdefault(str(r["planted"]), Counter())[str(r["label"])] += 1

    def rate(key: str, among: Sequence[Mapping[str, Any]] = results) -> float:
        return sum(1 for r in among if r[key]) / len(among) if among else 0.0
    quiet = [r for r in results if r.get("quiet")]
    return {"rounds": rounds, "planted_cells": n,
            "correct": sum(1 for r in results if r["ok"]), "top1_accuracy": rate("ok"),
            "right_fix_rate": rate("right_fix"), "unexplained_rate": rate("unexplained"),
            "quiet_cells": len(quiet), "quiet_correct": sum(1 for r in quiet if r["ok"]),
            "quiet_top1_accuracy": rate("ok", quiet),
            "quiet_right_fix_rate": rate("right_fix", quiet),
            "confusion": {p: dict(sorted(c.items())) for p, c in sorted(matrix.items())}}


def confusion_lines(confusion: Mapping[str, Mapping[str, int]]) -> list[str]:
    """The confusion matrix as text: planted rows, named columns."""
    columns = sorted({c for row in confusion.values() for c in row})
    width = max([len("planted \\ named"), *map(len, confusion)])
    head = "planted \\ named".ljust(width) + "".join(f"  {c}" for c in columns)
    lines = [head]
    for planted, row in confusion.items():
        cells = "".join(f"  {str(row.get(c, '.')).rjust(len(c))}" for c in columns)
        lines.append(planted.ljust(width) + cells)
    return lines


def _rule_fixes() -> dict[str, str]:
    sys.path.insert(0, str(REPO / "src"))
    from hvbench.analysis.diagnosis import RULES  # noqa: PLC0415 (the repository's own)
    return {rule.name: rule.fix for rule in RULES}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", help="comma-separated study names (default: all)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--keep", metavar="DIR",
                        help="keep the databases in DIR/round-N instead of a scratch dir")
    parser.add_argument("--rescore", metavar="DIR",
                        help="run nothing: explain the databases a --keep DIR run left "
                             "(DIR/round-N/NAME.db) again, with today's rules")
    args = parser.parse_args()
    if args.rescore:
        args.keep = args.rescore
    expected = {k: v for k, v in json.loads((SUITE / "expected.json").read_text()).items()
                if not k.startswith("_")}
    names = args.only.split(",") if args.only else sorted(expected)
    rule_fixes = _rule_fixes()
    results: list[dict[str, Any]] = []
    for round_no in range(1, args.rounds + 1):
        with tempfile.TemporaryDirectory() as scratch:
            where = Path(args.keep) / f"round-{round_no}" if args.keep else Path(scratch)
            where.mkdir(parents=True, exist_ok=True)
            for name in names:
                for result in one_study(name, expected[name], where, rule_fixes,
                                        rescore=bool(args.rescore)):
                    result["round"] = round_no
                    results.append(result)
                    if not args.json:
                        mark = "ok " if result["ok"] else "BAD"
                        cores = result["outside_cores"]
                        busy = "" if result["quiet"] else (
                            " (host load outside the study not recorded)" if cores is None
                            else f" (host busy outside the study: {cores:.2f} cores)")
                        print(f"round {round_no} {mark} {result['study']} {result['cell']}: "
                              f"planted {result['planted']}, named {result['label']}{busy}",
                              flush=True)
    summary = summarize(results, args.rounds)
    if args.json:
        print(json.dumps({"summary": summary, "results": results}, indent=2))
    else:
        print("\n".join(confusion_lines(summary["confusion"])))
        print(f"top-1 accuracy: {summary['correct']}/{len(results)} = "
              f"{summary['top1_accuracy']:.0%}; right fix {summary['right_fix_rate']:.0%}; "
              f"unexplained {summary['unexplained_rate']:.0%}")
        print(f"on a quiet host (at most {QUIET_CORES:g} cores used outside the study): "
              f"{summary['quiet_correct']}/{summary['quiet_cells']} = "
              f"{summary['quiet_top1_accuracy']:.0%}; right fix "
              f"{summary['quiet_right_fix_rate']:.0%}")
    return 0 if results and summary["correct"] == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
