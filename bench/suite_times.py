"""Where the test suite's time goes: per test file and the slowest tests, from the JUnit
XML files pytest writes (``make test`` keeps them in build/test-times/).

Usage: python bench/suite_times.py [FILE.xml ...] [--slowest 20] [--modules 15] [--json]

Each file is one pytest session (``make test`` writes unit.xml and integration.xml).
For each file: its tests' summed call time (setup and teardown included, as pytest's
JUnit report counts them), the session's own wall time when the file records it, and
a table of the ``--modules`` test files that took longest (tests, seconds, share of the
session's summed time), then the slowest tests. Under pytest-xdist the summed time
exceeds the wall time (the workers run side by side). Exits 2 when a file is missing
or is not a JUnit report.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_FILES = ("build/test-times/unit.xml", "build/test-times/integration.xml")


@dataclass(frozen=True)
class Case:
    """One test's time as the report gives it."""

    module: str
    name: str
    seconds: float
    outcome: str


def outcome_of(case: ET.Element) -> str:
    """passed, failed (a failure or an error element) or skipped."""
    if case.find("failure") is not None or case.find("error") is not None:
        return "failed"
    return "skipped" if case.find("skipped") is not None else "passed"


def read_report(path: Path) -> tuple[list[Case], float | None]:
    """The cases of one JUnit file and its session's wall time (None if absent).

    Raises ValueError naming the file when it is not a JUnit report."""
    try:
        # The files are pytest's own output on this machine, not input from elsewhere.
        root = ET.parse(path).getroot()  # noqa: S314
    except ET.ParseError as exc:
        raise ValueError(f"{path}: not XML ({exc})") from exc
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    if not suites:
        raise ValueError(f"{path}: no <testsuite> element (expected pytest's --junitxml)")
    cases = [Case(c.get("classname", "?"), c.get("name", "?"),
                  seconds_of(path, c, "0"), outcome_of(c))
             for suite in suites for c in suite.iter("testcase")]
    walls = [seconds_of(path, s, "nan") for s in suites]
    return cases, None if any(math.isnan(w) for w in walls) else sum(walls)


def seconds_of(path: Path, element: ET.Element, default: str) -> float:
    """An element's ``time`` attribute in seconds (``default`` when absent).

    Raises ValueError naming the file, the element and the value when it is no number."""
    text = element.get("time", default)
    try:
        return float(text)
    except ValueError as exc:
        name = element.get("name", "?")
        raise ValueError(f"{path}: <{element.tag} name={name!r}> time={text!r}: "
                         "expected a number of seconds") from exc


def by_module(cases: Sequence[Case]) -> list[dict[str, Any]]:
    """Per test file: tests, seconds and share of the summed time, slowest first."""
    total = sum(c.seconds for c in cases) or 1.0
    modules: dict[str, list[Case]] = {}
    for case in cases:
        modules.setdefault(case.module, []).append(case)
    seconds = {name: sum(c.seconds for c in found) for name, found in modules.items()}
    return [{"module": name, "tests": len(modules[name]), "seconds": seconds[name],
             "share": seconds[name] / total}
            for name in sorted(seconds, key=lambda n: -seconds[n])]


def summary(path: Path, slowest: int) -> dict[str, Any]:
    cases, wall = read_report(path)
    ranked = sorted(cases, key=lambda c: -c.seconds)[:slowest]
    return {
        "file": str(path), "tests": len(cases), "wall_s": wall,
        "summed_s": sum(c.seconds for c in cases),
        "outcomes": {o: sum(c.outcome == o for c in cases)
                     for o in ("passed", "failed", "skipped")},
        "modules": by_module(cases),
        "slowest": [{"test": f"{c.module}::{c.name}", "seconds": c.seconds} for c in ranked],
    }


def print_summary(part: dict[str, Any], modules: int) -> None:
    wall = "unknown" if part["wall_s"] is None else f"{part['wall_s']:.1f} s"
    outcomes = ", ".join(f"{n} {o}" for o, n in part["outcomes"].items() if n)
    print(f"\n{part['file']}: {part['tests']} tests ({outcomes}); session wall {wall}, "
          f"tests' summed time {part['summed_s']:.1f} s")
    print(f"  {'seconds':>8} {'share':>6} {'tests':>5}  test file")
    for row in part["modules"][:modules]:
        print(f"  {row['seconds']:8.1f} {row['share']:6.1%} {row['tests']:5d}  {row['module']}")
    rest = part["modules"][modules:]
    if rest:
        seconds = sum(float(r["seconds"]) for r in rest)
        print(f"  {seconds:8.1f} {seconds / (part['summed_s'] or 1.0):6.1%} "
              f"{sum(int(r['tests']) for r in rest):5d}  ({len(rest)} more test files)")
    print(f"  slowest {len(part['slowest'])}:")
    for row in part["slowest"]:
        print(f"  {row['seconds']:8.1f}  {row['test']}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", default=list(DEFAULT_FILES))
    parser.add_argument("--slowest", type=int, default=20)
    parser.add_argument("--modules", type=int, default=15)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    parts = []
    for name in args.files:
        path = Path(name)
        if not path.is_file():
            print(f"{path}: no such file (make test writes build/test-times/*.xml)",
                  file=sys.stderr)
            return 2
        try:
            parts.append(summary(path, args.slowest))
        except ValueError as exc:
            print(exc, file=sys.stderr)
            return 2
    if args.json:
        print(json.dumps(parts, indent=2))
    else:
        for part in parts:
            print_summary(part, args.modules)
    return 0


if __name__ == "__main__":
    sys.exit(main())
