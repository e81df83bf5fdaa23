"""The seed papers' findings table of docs/seeds.md, and the verdicts of stored runs.

Usage:
    python bench/seed_findings.py [--write]                    # the findings table
    python bench/seed_findings.py --db hvbench.db RUN [RUN...]  # verdicts and counts

Without runs it prints the findings table that docs/seeds.md shows (generated from
src/hvbench/report/findings.toml); ``--write`` puts it between the two marker lines of
docs/seeds.md instead (tests/unit/test_findings.py fails when the two differ).

With runs (ids or unique prefixes in ``--db``, e.g. one run of every seed study) it
evaluates every finding on each run exactly as ``hvbench report RUN --findings`` does
(the host's stored noise floors included) and prints, in Markdown, one row per measured
finding and run (our A/B with its interval and the verdict), then the count of findings
per verdict over all the runs. Nothing is measured: the runs must exist.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hvbench.kinds import install
from hvbench.report.findings import (
    DOC_BEGIN,
    DOC_END,
    findings_markdown,
    load_findings,
    run_findings,
    verdict_counts,
    verdicts_markdown,
)
from hvbench.report.model import load_run_report
from hvbench.store.database import Store

DOC = Path(__file__).resolve().parents[1] / "docs" / "seeds.md"


def write_doc(table: str, doc: Path = DOC) -> None:
    """Replace the block between the marker lines of ``doc`` with ``table``."""
    text = doc.read_text(encoding="utf-8")
    head, sep, rest = text.partition(DOC_BEGIN + "\n")
    _, sep_end, tail = rest.partition(DOC_END)
    if not sep or not sep_end:
        sys.exit(f"{doc}: the marker lines {DOC_BEGIN!r} and {DOC_END!r} are missing")
    doc.write_text(head + sep + table + sep_end + tail, encoding="utf-8")


def run_verdicts(db: str, runs: list[str]) -> None:
    """Print the verdicts of every run and the count per verdict."""
    rows = []
    with Store(db, create=False) as store:
        for prefix in runs:
            ids = store.run_ids(prefix=prefix)
            if len(ids) != 1:
                sys.exit(f"{db}: {prefix!r} names {len(ids)} runs, expected one")
            run_id = ids[0]
            report = load_run_report(store, run_id, monitors=[], steady=False)
            rows += [(run_id, r) for r in run_findings(report) if r.measured]
    print(verdicts_markdown(rows))
    print("| verdict | findings |\n|---|---|")
    for verdict, count in verdict_counts([r for _, r in rows]).items():
        print(f"| {verdict} | {count} |")


def main() -> None:
    # The network, web and propagation kinds declare their metrics when installed.
    install()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="*", help="run ids (or unique prefixes) in --db")
    parser.add_argument("--db", default="hvbench.db", help="results database")
    parser.add_argument("--write", action="store_true",
                        help="write the findings table into docs/seeds.md")
    args = parser.parse_args()
    if args.runs:
        run_verdicts(args.db, args.runs)
        return
    table = findings_markdown(load_findings())
    if args.write:
        write_doc(table)
    else:
        print(table, end="")


if __name__ == "__main__":
    main()
