"""Where the test suite's time goes: per test file and the slowest tests, from the JUnit
XML files pytest writes (``make test`` keeps them in build/test-times/).

Usage: python bench/suite_times.py [FILE.xml ...] [--slowest 20] [--modules 15]
       [--trace FILE.jsonl] [--json]

Each file is one pytest session (``make test`` writes unit.xml and integration.xml).
For each file: its tests' summed call time (setup and teardown included, as pytest's
JUnit report counts them), the session's own wall time when the file records it, and
a table of the ``--modules`` test files that took longest (tests, seconds, share of the
session's summed time), then the slowest tests. Under pytest-xdist the summed time
exceeds the wall time (the workers run side by side).

With a trace (``--trace``; by default trace.jsonl beside the first report when it
exists, which ``make test`` writes for the integration session through
``HVBENCH_TRACE``, see hvbench.host.trace): what the tests waited on, per test
file (guest boots and their seconds, seconds in guest commands and in host commands)
and per program (runs, seconds, median). Exits 2 when a file is missing, is not a
JUnit report or a trace line is not one of hvbench's.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_FILES = ("build/test-times/unit.xml", "build/test-times/integration.xml")
TRACE_NAME = "trace.jsonl"
TRACE_EVENTS = ("boot", "guest-exec", "host-exec")


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


@dataclass(frozen=True)
class Traced:
    """One trace line: what a test waited on."""

    event: str
    seconds: float
    module: str
    program: str


def module_of(tag: str) -> str:
    """The test file of a pytest node id, as JUnit names it
    (``tests/integration/test_x.py::test_y`` -> ``tests.integration.test_x``)."""
    if not tag:
        return "(outside a test)"
    path = tag.split("::", 1)[0]
    return path.removesuffix(".py").replace("/", ".")


def read_trace(path: Path) -> list[Traced]:
    """The lines of an ``HVBENCH_TRACE`` file. Raises ValueError naming the file, the
    line and what was expected."""
    found = []
    for number, text in enumerate(path.read_text().splitlines(), 1):
        if not text.strip():
            continue
        where = f"{path}:{number}"
        try:
            line = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{where}: not JSON ({exc.msg})") from exc
        if not isinstance(line, dict) or line.get("event") not in TRACE_EVENTS:
            raise ValueError(f"{where}: event: expected one of {', '.join(TRACE_EVENTS)}")
        seconds = line.get("seconds")
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
            raise ValueError(f"{where}: seconds: expected a number, got {seconds!r}")
        tag, program = line.get("tag", ""), line.get("program", "")
        if not isinstance(tag, str) or not isinstance(program, str):
            raise ValueError(f"{where}: tag and program: expected strings")
        found.append(Traced(line["event"], float(seconds), module_of(tag), program))
    return found


def trace_summary(path: Path) -> dict[str, Any]:
    """Per test file and per program, what the trace's tests waited on."""
    lines = read_trace(path)
    modules: dict[str, dict[str, float]] = {}
    for t in lines:
        row = modules.setdefault(t.module, {"boots": 0, "boot_s": 0.0, "guest_exec_s": 0.0,
                                            "host_exec_s": 0.0})
        if t.event == "boot":
            row["boots"] += 1
            row["boot_s"] += t.seconds
        else:
            row[t.event.replace("-", "_") + "_s"] += t.seconds
    groups: dict[tuple[str, str], list[float]] = {}
    for t in lines:
        groups.setdefault((t.event, t.program), []).append(t.seconds)
    programs = [{"event": event, "program": program, "runs": len(times),
                 "seconds": sum(times), "median_s": statistics.median(times)}
                for (event, program), times in groups.items()]
    return {
        "file": str(path),
        "modules": sorted(({"module": name, **row} for name, row in modules.items()),
                          key=lambda r: -(r["boot_s"] + r["guest_exec_s"] + r["host_exec_s"])),
        "programs": sorted(programs, key=lambda r: -float(r["seconds"])),
    }


def print_trace(part: dict[str, Any], modules: int) -> None:
    boots = [p for p in part["programs"] if p["event"] == "boot"]
    print(f"\n{part['file']}: {sum(p['runs'] for p in boots)} boots, "
          f"{sum(p['seconds'] for p in boots):.1f} s")
    print(f"  {'boots':>5} {'boot s':>7} {'guest cmd s':>11} {'host cmd s':>10}  test file")
    for row in part["modules"][:modules]:
        print(f"  {int(row['boots']):5d} {row['boot_s']:7.1f} {row['guest_exec_s']:11.1f} "
              f"{row['host_exec_s']:10.1f}  {row['module']}")
    print(f"  {'runs':>5} {'seconds':>8} {'median':>7}  what")
    for row in part["programs"][:modules]:
        print(f"  {row['runs']:5d} {row['seconds']:8.1f} {row['median_s']:7.3f}  "
              f"{row['event']} {row['program']}")


def beside(files: Sequence[str]) -> str | None:
    """The trace ``make test`` writes next to the reports (``trace.jsonl`` in the
    first report's directory), when it exists."""
    found = [Path(name).with_name(TRACE_NAME) for name in files[:1]]
    return str(found[0]) if found and found[0].is_file() else None


def existing(name: str) -> Path:
    """``name`` as a path; raises ValueError when there is no such file."""
    path = Path(name)
    if not path.is_file():
        raise ValueError(f"{path}: no such file (make test writes build/test-times/)")
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", default=list(DEFAULT_FILES))
    parser.add_argument("--slowest", type=int, default=20)
    parser.add_argument("--modules", type=int, default=15)
    parser.add_argument("--trace", help=f"an HVBENCH_TRACE file (default: {TRACE_NAME} "
                        "beside the first report, when it exists)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    trace = args.trace or beside(args.files)
    try:
        parts = [summary(existing(name), args.slowest) for name in args.files]
        traces = [trace_summary(existing(trace))] if trace else []
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(parts + traces, indent=2))
        return 0
    for part in parts:
        print_summary(part, args.modules)
    for part in traces:
        print_trace(part, args.modules)
    return 0


if __name__ == "__main__":
    sys.exit(main())
