"""bench/suite_times.py reads pytest's JUnit reports (what `make test` keeps in
build/test-times/): per test file, the slowest tests, outcomes, and one line for a file
that is not a report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit.bench_scripts import load_bench

REPORT = """<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests">
<testsuite name="pytest" errors="0" failures="1" skipped="1" tests="4" time="30.5">
<testcase classname="tests.integration.test_a" name="test_one" time="12.0" />
<testcase classname="tests.integration.test_a" name="test_two" time="3.0"><failure
 message="boom">boom</failure></testcase>
<testcase classname="tests.integration.test_b" name="test_three[x]" time="10.0" />
<testcase classname="tests.integration.test_b" name="test_four" time="0.5"><skipped
 message="no netem" /></testcase>
</testsuite></testsuites>
"""


BENCH = load_bench("suite_times")


def test_a_report_is_summed_per_test_file_and_ranked(tmp_path: Path) -> None:
    path = tmp_path / "integration.xml"
    path.write_text(REPORT)
    part = BENCH.summary(path, slowest=2)
    assert part["wall_s"] == 30.5
    assert part["summed_s"] == pytest.approx(25.5)
    assert part["outcomes"] == {"passed": 2, "failed": 1, "skipped": 1}
    assert [(r["module"], r["tests"], r["seconds"]) for r in part["modules"]] == [
        ("tests.integration.test_a", 2, 15.0), ("tests.integration.test_b", 2, 10.5)]
    assert part["modules"][0]["share"] == pytest.approx(15.0 / 25.5)
    assert part["slowest"] == [
        {"test": "tests.integration.test_a::test_one", "seconds": 12.0},
        {"test": "tests.integration.test_b::test_three[x]", "seconds": 10.0}]


def test_the_table_and_json_come_from_the_same_summary(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "unit.xml"
    path.write_text(REPORT)
    assert BENCH.main([str(path), "--modules", "1", "--slowest", "1"]) == 0
    text = capsys.readouterr().out
    assert "4 tests (2 passed, 1 failed, 1 skipped); session wall 30.5 s" in text
    assert "tests.integration.test_a" in text and "(1 more test files)" in text
    assert BENCH.main([str(path), "--json"]) == 0
    [doc] = json.loads(capsys.readouterr().out)
    assert doc["tests"] == 4 and len(doc["modules"]) == 2


def test_a_missing_or_foreign_file_is_one_line_and_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert BENCH.main([str(tmp_path / "absent.xml")]) == 2
    assert "absent.xml: no such file" in capsys.readouterr().err
    other = tmp_path / "other.xml"
    other.write_text("<html><body/></html>")
    assert BENCH.main([str(other)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"{other}: no <testsuite> element (expected pytest's --junitxml)")
    broken = tmp_path / "broken.xml"
    broken.write_text("<testsuite")
    assert BENCH.main([str(broken)]) == 2
    assert capsys.readouterr().err.startswith(f"{broken}: not XML (")
    odd = tmp_path / "odd.xml"
    odd.write_text('<testsuite time="1"><testcase name="t" time="soon"/></testsuite>')
    assert BENCH.main([str(odd)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"{odd}: <testcase name='t'> time='soon': expected a number of seconds")


TRACE = [
    {"event": "boot", "seconds": 3.0, "program": "qemu-system-x86_64",
     "tag": "tests/integration/test_a.py::test_one"},
    {"event": "guest-exec", "seconds": 0.75, "program": "fio",
     "tag": "tests/integration/test_a.py::test_one"},
    {"event": "guest-exec", "seconds": 1.25, "program": "fio",
     "tag": "tests/integration/test_b.py::test_three[x]"},
    {"event": "host-exec", "seconds": 0.5, "program": "iperf3",
     "tag": "tests/integration/test_b.py::test_three[x]"},
    {"event": "boot", "seconds": 2.0, "program": "qemu-system-x86_64", "tag": ""},
]


def test_a_trace_beside_the_report_is_summed_per_test_file_and_program(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "integration.xml").write_text(REPORT)
    (tmp_path / "trace.jsonl").write_text("".join(json.dumps(t) + "\n" for t in TRACE))
    assert BENCH.main([str(tmp_path / "integration.xml"), "--json"]) == 0
    _, traced = json.loads(capsys.readouterr().out)
    assert [(r["module"], r["boots"], r["boot_s"], r["guest_exec_s"], r["host_exec_s"])
            for r in traced["modules"]] == [
        ("tests.integration.test_a", 1, 3.0, 0.75, 0.0),
        ("(outside a test)", 1, 2.0, 0.0, 0.0),
        ("tests.integration.test_b", 0, 0.0, 1.25, 0.5)]
    fio = next(p for p in traced["programs"] if p["program"] == "fio")
    assert (fio["event"], fio["runs"], fio["seconds"], fio["median_s"]) == (
        "guest-exec", 2, 2.0, 1.0)
    assert BENCH.main([str(tmp_path / "integration.xml")]) == 0
    text = capsys.readouterr().out
    assert "trace.jsonl: 2 boots, 5.0 s" in text and "guest-exec fio" in text


@pytest.mark.parametrize("line, expected", [
    ("{not json", "trace.jsonl:2: not JSON"),
    ('{"event": "nap", "seconds": 1}', "trace.jsonl:2: event: expected one of boot"),
    ('{"event": "boot", "seconds": "1"}', "trace.jsonl:2: seconds: expected a number, got '1'"),
    ('{"event": "boot", "seconds": 1, "tag": 3}', "trace.jsonl:2: tag and program"),
])
def test_a_bad_trace_line_is_one_line_naming_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str, expected: str) -> None:
    (tmp_path / "integration.xml").write_text(REPORT)
    (tmp_path / "trace.jsonl").write_text(json.dumps(TRACE[0]) + "\n" + line + "\n")
    assert BENCH.main([str(tmp_path / "integration.xml")]) == 2
    err = capsys.readouterr().err
    assert expected in err and len(err.strip().splitlines()) == 1
    assert BENCH.main([str(tmp_path / "integration.xml"), "--trace",
                       str(tmp_path / "absent.jsonl")]) == 2
    assert "absent.jsonl: no such file" in capsys.readouterr().err
