"""The web workload's wrk latency pass: the argv, the parser of the Lua script's JSON
(on output captured from real wrk 4.1.0 runs against lighttpd on this machine, the
script being hvbench's own), the metrics, and the error path with wrk's own words
(tests/fixtures/tool-errors: wrk against a closed port, and with a missing script)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from pydantic import ValidationError

from hvbench.analysis.metrics import direction_of, lookup, unknown_metrics
from hvbench.errors import CommandError, GuestTimeoutError, HvbenchError, SpecError
from hvbench.kinds.web.cell import WebCell
from hvbench.kinds.web.spec import WebLatencySpec, WebWorkloadSpec
from hvbench.platforms.base import ExecResult
from hvbench.workloads.endpoints import Endpoint
from hvbench.workloads.wrk import (
    MARK,
    PERCENTILES,
    check_wrk,
    parse_wrk,
    report_json,
    report_script,
    run_wrk_pass,
    wrk_argv,
    wrk_error,
    wrk_metrics,
)

FIXTURES = Path(__file__).parents[1] / "fixtures"
NET = FIXTURES / "net"
ERRORS = FIXTURES / "tool-errors"


def text(path: Path) -> str:
    return path.read_text()


# -- argv --------------------------------------------------------------------------------
def test_argv() -> None:
    latency = WebLatencySpec(seconds=5, connections=8, threads=2)
    argv = wrk_argv(url="http://10.0.0.2:8080/10k.bin", latency=latency, timeout_s=5.0,
                    script="/tmp/hvb-wrk-x.lua")
    assert argv == ["wrk", "-t", "2", "-c", "8", "-d", "5s", "--timeout", "5s",
                    "-s", "/tmp/hvb-wrk-x.lua", "http://10.0.0.2:8080/10k.bin"]


@pytest.mark.parametrize(("timeout_s", "flag"), [(2.5, "3s"), (0.2, "1s"), (30, "30s")])
def test_argv_timeout_in_whole_seconds(timeout_s: float, flag: str) -> None:
    argv = wrk_argv(url="http://a:1/", latency=WebLatencySpec(), timeout_s=timeout_s,
                    script="s.lua")
    assert argv[argv.index("--timeout") + 1] == flag


# -- the spec ----------------------------------------------------------------------------
def test_latency_is_off_unless_asked_for() -> None:
    assert WebWorkloadSpec().latency is None
    assert WebWorkloadSpec(latency=False).latency is None  # type: ignore[arg-type]
    assert WebWorkloadSpec(latency=True).latency == WebLatencySpec()  # type: ignore[arg-type]
    spec = WebWorkloadSpec(latency={"seconds": 2})  # type: ignore[arg-type]
    assert spec.latency == WebLatencySpec(tool="wrk", seconds=2, connections=4, threads=1)


@pytest.mark.parametrize("bad", [{"connections": 1, "threads": 2}, {"seconds": 1.5},
                                 {"tool": "ab"}, {"seconds": 0}, {"extra": 1}])
def test_latency_rejects(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        WebWorkloadSpec(latency=bad)  # type: ignore[arg-type]


def test_estimate_counts_the_wrk_pass() -> None:
    cell = WebCell()
    base = WebWorkloadSpec(file_kb=(1, 10), duration_s=3)
    with_wrk = base.model_copy(update={"latency": WebLatencySpec(seconds=5)})
    assert cell.estimate_s(with_wrk) - cell.estimate_s(base) == pytest.approx(2 * (5 + 0.5))


# -- parsing -----------------------------------------------------------------------------
def test_script_writes_one_marked_json_line() -> None:
    script = report_script()
    assert "function done(summary, latency, requests)" in script
    assert repr(MARK)[1:-1] in script


def test_parse_a_real_run() -> None:
    stdout = text(NET / "wrk-10k-c4.stdout")
    assert stdout.startswith("Running 2s test @ http://127.0.0.1:18931/10k.bin")
    result = parse_wrk(stdout)
    assert result.url == "http://127.0.0.1:18931/10k.bin"
    assert result.requests == 6088 and result.duration_s == pytest.approx(2.04764)
    assert result.errors == dict.fromkeys(("connect", "read", "write", "status", "timeout"), 0)
    assert result.percentiles == {"50": 0.258, "90": 6.627, "99": 17.004, "99.9": 33.204,
                                  "99.99": 35.894}
    assert result.min_ms < result.percentiles["50"] < result.mean_ms < result.max_ms
    assert result.rps == pytest.approx(6088 / 2.04764)
    # wrk's coordinated-omission correction added samples: more samples than requests.
    assert result.samples == 8598
    assert result.corrected_pct == pytest.approx(100 * (8598 - 6088) / 8598)
    # The document alone parses the same.
    assert parse_wrk(report_json(stdout)) == result


def test_histogram_is_in_the_raw_document() -> None:
    doc = json.loads(report_json(text(NET / "wrk-10k-c4.stdout")))
    bins = doc["latency_us"]["histogram"]
    assert sum(count for _, count in bins) == doc["latency_us"]["count"]
    assert [value for value, _ in bins] == sorted(value for value, _ in bins)


def test_quantiles_instead_of_a_histogram() -> None:
    # The script leaves the histogram out when wrk would take long to give it (here
    # forced by running it with MAX_SCAN = 0): no sample count, a quantile grid.
    stdout = text(NET / "wrk-10k-c4-quantiles.stdout")
    result = parse_wrk(stdout)
    assert result.samples is None and result.corrected_pct is None
    assert result.percentiles["99"] == 14.117 and result.requests == 10740
    metrics = wrk_metrics(result)
    assert "wrk_corrected_pct" not in metrics and metrics["wrk_lat_p99_ms"] == (14.117, "ms")
    latency = json.loads(report_json(stdout))["latency_us"]
    assert "histogram" not in latency and len(latency["quantiles"]) == 126
    assert latency["quantiles"][-1] == [99.999, 36088]


def test_status_errors() -> None:
    result = parse_wrk(text(NET / "wrk-404.stdout"))
    assert result.errors["status"] == result.requests == 12205
    metrics = wrk_metrics(result)
    assert metrics["wrk_err.status"] == (12205.0, "count")
    assert metrics["wrk_errors"] == (12205.0, "count")


def test_metrics_are_catalogued() -> None:
    metrics = wrk_metrics(parse_wrk(text(NET / "wrk-10k-c4.stdout")))
    assert unknown_metrics(metrics) == []
    assert {f"wrk_lat_{infix}_ms" for _, infix in PERCENTILES} <= set(metrics)
    assert metrics["wrk_lat_p99_ms"] == (17.004, "ms")
    assert direction_of("wrk_lat_p99_ms") == "lower" and direction_of("wrk_rps") == "higher"
    spec = lookup("wrk_rps")
    assert spec is not None and spec.vs_native and spec.detail is not None


@pytest.mark.parametrize(("body", "says"), [
    ("Running 1s test @ http://x/\n", "no hvbench report line"),
    (MARK + "{not json\n", "not JSON"),
    (MARK + json.dumps({"latency_us": {}, "errors": {}}) + "\n", "percentiles"),
    (MARK + json.dumps({"duration_us": "1", "requests": 1, "bytes": 0,
                        "errors": dict.fromkeys(("connect", "read", "write", "status",
                                                 "timeout"), 0),
                        "latency_us": {"count": 1, "percentiles": {}},
                        "thread_rps": {}}) + "\n", "duration_us"),
])
def test_parse_errors_name_what_is_wrong(body: str, says: str) -> None:
    with pytest.raises(HvbenchError, match=says):
        parse_wrk(body)


def test_wrk_error_lines() -> None:
    assert wrk_error(text(ERRORS / "wrk-refused.stderr")) == \
        "unable to connect to 127.0.0.1:18931 Connection refused"
    # The script error is printed once per Lua state: said once.
    said = wrk_error(text(ERRORS / "wrk-no-script.stderr"))
    assert said == ("/tmp/wrkproto/nonexist.lua: cannot open /tmp/wrkproto/nonexist.lua: "
                    "No such file or directory")


# -- the pass, with a stand-in executor ---------------------------------------------------
class Replay:
    """An executor that answers with captured wrk output and notes the script it saw."""

    def __init__(self, exit_code: int, stdout: str, stderr: str = "",
                 timeout: bool = False) -> None:
        self.result = (exit_code, stdout.encode(), stderr.encode())
        self.timeout = timeout
        self.argv: list[str] = []
        self.script_text = ""

    def exec(self, argv: Sequence[str], *, timeout: float, stdin: bytes | None = None,
             env: Mapping[str, str] | None = None) -> ExecResult:
        self.argv = list(argv)
        self.script_text = Path(argv[argv.index("-s") + 1]).read_text()
        if self.timeout:
            raise GuestTimeoutError(f"lab host client: did not finish in {timeout:g} s")
        code, out, err = self.result
        return ExecResult(tuple(argv), code, out, err, 1.0)


SPEC = WebWorkloadSpec(file_kb=(10,), reply_timeout_s=5,
                       latency=WebLatencySpec(seconds=2))


def ends(replay: Replay, kind: str = "netns") -> tuple[Endpoint, Endpoint]:
    client = Endpoint("client", kind, replay, "10.9.0.10",  # type: ignore[arg-type]
                      "10.9.0.10", netns="hvb-x-client" if kind == "netns" else None)
    server = Endpoint("native", "netns", replay, "10.9.0.11", "10.9.0.11",
                      netns="hvb-x-native")
    return client, server


def test_pass_runs_wrk_with_the_script_and_removes_it() -> None:
    stdout = text(NET / "wrk-10k-c4.stdout")
    replay = Replay(0, stdout)
    done = run_wrk_pass(SPEC, 10, *ends(replay))
    assert replay.argv[-1] == "http://10.9.0.11:8080/10k.bin"
    assert replay.argv[replay.argv.index("-d") + 1] == "2s"
    assert replay.script_text == report_script()
    assert not Path(replay.argv[replay.argv.index("-s") + 1]).exists()
    assert done.raw == report_json(stdout)
    assert done.metrics["wrk_lat_p50_ms"] == (0.258, "ms")


def test_pass_without_latency_runs_nothing() -> None:
    replay = Replay(0, "")
    done = run_wrk_pass(SPEC.model_copy(update={"latency": None}), 10, *ends(replay))
    assert (done.metrics, done.raw, replay.argv) == ({}, "", [])


def test_refused_connection_leads_with_wrk_words() -> None:
    replay = Replay(1, "", text(ERRORS / "wrk-refused.stderr"))
    with pytest.raises(CommandError) as caught:
        run_wrk_pass(SPEC, 10, *ends(replay))
    first = str(caught.value).splitlines()[0]
    assert first == "wrk 10kB on client: unable to connect to 127.0.0.1:18931 Connection refused"
    assert caught.value.returncode == 1
    assert not Path(replay.argv[replay.argv.index("-s") + 1]).exists()


def test_script_that_did_not_run_is_an_error_with_wrk_words() -> None:
    # wrk exits 0 when its script cannot be loaded: the missing report line tells.
    replay = Replay(0, text(ERRORS / "wrk-no-script.stdout"),
                    text(ERRORS / "wrk-no-script.stderr"))
    with pytest.raises(CommandError) as caught:
        run_wrk_pass(SPEC, 10, *ends(replay))
    message = str(caught.value)
    assert "cannot open /tmp/wrkproto/nonexist.lua" in message.splitlines()[0]
    assert "no hvbench report line" in message


def test_no_completed_request_is_an_error() -> None:
    stdout = text(NET / "wrk-10k-c4.stdout")
    doc = json.loads(report_json(stdout))
    doc.update(requests=0, errors={**doc["errors"], "timeout": 7})
    replay = Replay(0, MARK + json.dumps(doc) + "\n")
    with pytest.raises(CommandError, match=r"completed no request in 2 s .*timeout 7"):
        run_wrk_pass(SPEC, 10, *ends(replay))


def test_timeout_is_a_command_error() -> None:
    replay = Replay(0, "", timeout=True)
    with pytest.raises(CommandError, match="wrk did not finish in 37 s"):
        run_wrk_pass(SPEC, 10, *ends(replay))


def test_guest_client_is_refused() -> None:
    replay = Replay(0, "")
    client = Endpoint("vm", "guest", replay, "10.9.0.100", "10.9.0.100")
    with pytest.raises(HvbenchError, match="not in guest vm"):
        run_wrk_pass(SPEC, 10, client, ends(replay)[1])


def test_missing_wrk_is_a_spec_error_before_the_run(monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SpecError, match=r"workload fixed: latency .*'wrk' .*package: wrk"):
        check_wrk("fixed")
