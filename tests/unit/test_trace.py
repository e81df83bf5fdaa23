"""hvbench.host.trace: one JSON line per boot or command when HVBENCH_TRACE is set,
nothing when it is not, and one error naming the variable when it cannot be written."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from hvbench.errors import HostError
from hvbench.host import trace


def test_nothing_is_written_without_the_variable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(trace.TRACE_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    trace.record("boot", 1.0, ["qemu-system-x86_64"])
    assert not trace.enabled()
    assert list(tmp_path.iterdir()) == []


def test_each_event_is_one_line_with_its_program_and_tag(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t.jsonl"
    monkeypatch.setenv(trace.TRACE_ENV, str(path))
    monkeypatch.setenv(trace.TAG_ENV, "tests/integration/test_x.py::test_y")
    trace.record("boot", 2.34567, ["/usr/bin/qemu-system-x86_64", "-m", "256"], platform="vm")
    trace.record("host-exec", 0.5, ["ip", "netns", "exec", "hvb-ab-client", "iperf3", "-c"])
    trace.record("guest-exec", 0.25, ["fio", "--output-format=json"])
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines == [
        {"event": "boot", "seconds": 2.3457, "program": "qemu-system-x86_64",
         "platform": "vm", "tag": "tests/integration/test_x.py::test_y"},
        {"event": "host-exec", "seconds": 0.5, "program": "iperf3",
         "tag": "tests/integration/test_x.py::test_y"},
        {"event": "guest-exec", "seconds": 0.25, "program": "fio",
         "tag": "tests/integration/test_x.py::test_y"}]


@pytest.mark.parametrize("argv, program", [
    (["ip", "netns", "exec", "ns"], "ip"), (["ip", "link"], "ip"), ([], ""),
    (["./bin/tool"], "tool")])
def test_the_program_is_the_wrapped_one_only_when_there_is_one(
        argv: list[str], program: str) -> None:
    assert trace.program_of(argv) == program


def test_a_relative_or_unwritable_trace_is_one_error_naming_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(trace.TRACE_ENV, "trace.jsonl")
    relative = re.escape("HVBENCH_TRACE=trace.jsonl: expected an absolute path")
    with pytest.raises(HostError, match=relative):
        trace.record("boot", 1.0, ["qemu"])
    monkeypatch.setenv(trace.TRACE_ENV, str(tmp_path))  # a directory
    unwritable = re.escape(f"HVBENCH_TRACE={tmp_path}: cannot append the trace")
    with pytest.raises(HostError, match=unwritable):
        trace.record("boot", 1.0, ["qemu"])
    monkeypatch.setenv(trace.TRACE_ENV, str(tmp_path / "t.jsonl"))
    with pytest.raises(HostError, match="trace event 'nap' is not one of"):
        trace.record("nap", 1.0, ["qemu"])
