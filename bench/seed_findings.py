"""The seed papers' findings table of docs/seeds.md, and the verdicts of stored runs.

Usage:
    python bench/seed_findings.py [--write]                       # the findings table
    python bench/seed_findings.py --db runs.db RUN [RUN...]        # verdicts of these runs
    python bench/seed_findings.py --db runs.db --latest [--write]  # newest run of every seed study

Without runs it prints the findings table that docs/seeds.md shows (generated from
src/hvbench/report/findings.toml); ``--write`` puts it between the two marker lines of
docs/seeds.md instead (tests/unit/test_findings.py fails when the two differ).

With runs (ids or unique prefixes in ``--db``), or ``--latest`` (the newest complete run
of every seed study in ``--db``), it evaluates every finding on each run exactly as
``hvbench report RUN --findings`` does (the host's stored noise floors included) and
prints, in Markdown, the runs (wall time, repetitions, failures, verdicts), one row per
measured finding and run (our A/B with its interval and the verdict), the count of
findings per verdict and the findings no run measured; ``--write`` puts that between
docs/seeds.md's verdict markers, so the document says what the code concludes from real
runs. Nothing is measured: the runs must exist (``hvbench run examples/seeds/X.toml``).
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from pathlib import Path

from hvbench.kinds import install
from hvbench.report.findings import (
    DOC_BEGIN,
    DOC_END,
    RUNS_BEGIN,
    RUNS_END,
    SEED_STUDY_PREFIX,
    SeedRun,
    findings_markdown,
    load_findings,
    run_findings,
    seed_runs_markdown,
)
from hvbench.report.model import load_run_report
from hvbench.store.database import Store
from hvbench.store.records import RunRecord

DOC = Path(__file__).resolve().parents[1] / "docs" / "seeds.md"


def write_doc(table: str, doc: Path = DOC, begin: str = DOC_BEGIN, end: str = DOC_END
              ) -> None:
    """Replace the block between the marker lines ``begin`` and ``end`` of ``doc``."""
    text = doc.read_text(encoding="utf-8")
    head, sep, rest = text.partition(begin + "\n")
    _, sep_end, tail = rest.partition(end)
    if not sep or not sep_end:
        sys.exit(f"{doc}: the marker lines {begin!r} and {end!r} are missing")
    doc.write_text(head + sep + table + sep_end + tail, encoding="utf-8")


def _chosen_runs(store: Store, prefixes: list[str], latest: bool) -> list[str]:
    if latest:
        newest: dict[str, str] = {}
        for summary in store.list_runs():  # oldest first: the newest one wins
            if summary.study_name.startswith(SEED_STUDY_PREFIX) and summary.status == "complete":
                newest[summary.study_name] = summary.id
        return sorted(newest.values())
    chosen = []
    for prefix in prefixes:
        ids = store.run_ids(prefix=prefix)
        if len(ids) != 1:
            sys.exit(f"{store.location}: {prefix!r} names {len(ids)} runs, expected one")
        chosen.append(ids[0])
    return chosen


def _wall_s(run: RunRecord) -> float | None:
    if run.finished_at is None:
        return None
    return (datetime.fromisoformat(run.finished_at)
            - datetime.fromisoformat(run.created_at)).total_seconds()


def _seed_run(store: Store, run_id: str) -> SeedRun:
    run = store.get_run(run_id)
    reps = store.repetitions(run_id)
    return SeedRun(study=run.study_name, run_id=run_id, created_at=run.created_at,
                   wall_s=_wall_s(run), repetitions=len({r.repetition for r in reps}),
                   ok=sum(r.status == "ok" for r in reps),
                   failed=sum(r.status != "ok" for r in reps), env=run.env)


def run_verdicts(db: str, prefixes: list[str], *, latest: bool, write: bool) -> None:
    """Print (or write into docs/seeds.md) the verdicts of the chosen runs."""
    findings = load_findings()
    runs, rows = [], []
    with Store(db, create=False) as store:
        for run_id in _chosen_runs(store, prefixes, latest):
            runs.append(_seed_run(store, run_id))
            report = load_run_report(store, run_id, monitors=[], steady=False)
            rows += [(run_id, r) for r in run_findings(report, findings)]
    text = seed_runs_markdown(runs, rows, findings)
    if write:
        write_doc(text, begin=RUNS_BEGIN, end=RUNS_END)
    else:
        print(text, end="")


def main() -> None:
    # The network, web and propagation kinds declare their metrics when installed.
    install()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="*", help="run ids (or unique prefixes) in --db")
    parser.add_argument("--db", default="hvbench.db", help="results database")
    parser.add_argument("--latest", action="store_true",
                        help="the newest complete run of every seed study in --db")
    parser.add_argument("--write", action="store_true",
                        help="write the table (or the runs' verdicts) into docs/seeds.md")
    args = parser.parse_args()
    if args.runs or args.latest:
        run_verdicts(args.db, args.runs, latest=args.latest, write=args.write)
        return
    table = findings_markdown(load_findings())
    if args.write:
        write_doc(table)
    else:
        print(table, end="")


if __name__ == "__main__":
    main()
