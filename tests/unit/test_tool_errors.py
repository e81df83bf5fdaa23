"""Tool failures carry the tool's own words, extracted from real captured output
(tests/fixtures/tool-errors: fio, iperf3, httperf and lighttpd run with bad arguments)."""

from __future__ import annotations

from pathlib import Path

from hvbench.errors import CommandError
from hvbench.workloads.fio import fio_command_error, fio_error
from hvbench.workloads.iperf3 import iperf3_error
from hvbench.workloads.web import httperf_error, lighttpd_error

FIXTURES = Path(__file__).parents[1] / "fixtures" / "tool-errors"


def load(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_fio_missing_directory() -> None:
    said = fio_error(load("fio-nodir.stdout"), load("fio-nodir.stderr"))
    assert said.splitlines()[0] == "fio: /nonexistent-dir is not a directory"
    assert "error=No such file or directory" in said


def test_fio_unrecognized_option_said_once() -> None:
    assert fio_error("", load("fio-bad-option.stderr")) == \
        "fio: unrecognized option '--bogus=1'"


def test_fio_json_error_field() -> None:
    said = fio_error(load("fio-unlink-eperm.json"), load("fio-unlink-eperm.stderr"))
    assert "func=unlink, error=Operation not permitted" in said
    assert said.splitlines()[-1] == "job x: error 1 (Operation not permitted)"
    said = fio_error(load("fio-no-size.json"), load("fio-no-size.stderr"))
    assert said.splitlines()[0] == "x: you need to specify size="
    assert "job x: error 22 (Invalid argument)" in said


def test_fio_command_error_leads_with_fio_words() -> None:
    error = fio_command_error(["fio", "--output-format=json", "/s/hvbench-job.fio"], 1, "",
                              load("fio-jobfile-nodir.stderr"), "fio job file")
    assert isinstance(error, CommandError)
    first = str(error).splitlines()[0]
    assert first == "fio job file: fio: /nonexistent-dir is not a directory"
    assert "exited with 1" in str(error)


def test_iperf3_json_error_and_server_log() -> None:
    said = iperf3_error(load("iperf3-refused.json"), "")
    assert said == "iperf3: unable to connect to server: Connection refused"
    log = "-----------\nServer listening on 5201\niperf3: error - unable to send cookie\n"
    assert iperf3_error("", load("iperf3-refused.text"), log).splitlines() == [
        "iperf3: error - unable to connect to server: Connection refused",
        "server: iperf3: error - unable to send cookie"]


def test_httperf_error_skips_the_fd_setsize_warning() -> None:
    assert httperf_error(load("httperf-bad-server.stderr")) == \
        "httperf.core_addr_intern: invalid server address no-such-host.invalid"
    assert httperf_error(load("httperf-bad-option.stderr")) == \
        "httperf: unrecognized option '--bogus'"


def test_lighttpd_error() -> None:
    assert lighttpd_error(load("lighttpd-port-busy.stderr")).endswith(
        "can't bind to socket: 127.0.0.1:18099: Address already in use")
    assert "parser failed somehow near here" in lighttpd_error(load("lighttpd-syntax.stderr"))
    routine = "2026-11-25 01:49:39: (server.c.1704) server started (lighttpd/1.4.69)\n"
    assert lighttpd_error(routine) == ""


def test_command_error_without_tool_words_is_unchanged() -> None:
    error = CommandError(["x", "y"], 3, "out")
    assert str(error).startswith("command 'x y' exited with 3")
