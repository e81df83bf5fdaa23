"""httperf: the argv builder, the text parser (on reports captured from real httperf
0.9.0 runs against lighttpd on this machine), the sustain rule and the max-rate search."""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable
from pathlib import Path

import pytest

from hvbench.errors import HvbenchError
from hvbench.kinds.web.spec import WebWorkloadSpec
from hvbench.workloads.web import (
    ERROR_KINDS,
    HttperfResult,
    ProbeOverloaded,
    _max_rate_metrics,
    achieved_ratio,
    httperf_argv,
    max_rate_search,
    parse_httperf,
    sustained,
    web_metrics,
)

FIXTURES = Path(__file__).parent.parent / "fixtures" / "net"


def load(name: str) -> HttperfResult:
    return parse_httperf((FIXTURES / name).read_text())


def test_argv() -> None:
    argv = httperf_argv(server="10.0.0.2", port=8080, uri="/10k.bin", rate=20.0,
                        num_conns=60, calls_per_conn=1, timeout_s=5.0)
    assert argv == ["httperf", "--hog", "--server=10.0.0.2", "--port=8080",
                    "--uri=/10k.bin", "--rate=20", "--num-conns=60", "--num-calls=1",
                    "--timeout=5"]
    assert "--rate=12.5" in httperf_argv(server="a", port=1, uri="/", rate=12.5,
                                         num_conns=1)


def test_clean_run() -> None:
    result = load("httperf-10k-rate50.txt")
    assert (result.rate, result.num_conns, result.calls_per_conn) == (50.0, 100, 1)
    assert (result.connections, result.requests, result.replies) == (100, 100, 100)
    assert result.duration_s == pytest.approx(1.981)
    assert result.conn_avg_ms == pytest.approx(0.6) and result.conn_median_ms == 0.5
    assert result.connect_ms == 0.0 and result.max_concurrent == 1
    assert (result.response_ms, result.transfer_ms) == (0.5, 0.0)
    assert result.content_bytes == 10240.0
    assert result.status == {"1xx": 0, "2xx": 100, "3xx": 0, "4xx": 0, "5xx": 0}
    assert result.cpu_total_pct == pytest.approx(92.0)
    assert (result.net_kb_s, result.net_mbit_s) == (517.0, 4.2)
    assert result.errors["total"] == 0 and set(result.errors) == {"total", *ERROR_KINDS}
    assert result.error_pct == 0.0
    assert result.achieved_rps() == pytest.approx(50.0, rel=0.01)
    assert sustained(result, 50.0, 1.0, 0.99)


def test_reply_rate_samples_of_a_longer_run() -> None:
    result = load("httperf-10k-rate100-6s.txt")
    assert result.reply_rate_samples == 1 and result.reply_rate_avg == 100.0
    assert achieved_ratio(result, 100.0) == pytest.approx(1.0, abs=0.01)


def test_non_2xx_replies_are_errors() -> None:
    result = load("httperf-404.txt")
    assert result.replies == 10 and result.status["4xx"] == 10
    assert result.errors["total"] == 0
    assert result.non_2xx == 10 and result.error_count == 10
    assert result.error_pct == 100.0
    assert not sustained(result, 20.0, 1.0, 0.5)
    metrics = web_metrics(result, 20.0)
    assert metrics["errors"] == (10.0, "count") and metrics["err.non-2xx"] == (10.0, "count")


def test_refused_connections() -> None:
    result = load("httperf-refused.txt")
    assert result.errors["connrefused"] == 40 and result.errors["total"] == 40
    assert result.error_pct == 100.0 and result.achieved_rps() == 0.0
    assert web_metrics(result, 20.0)["err.connrefused"] == (40.0, "count")


def test_client_timeouts() -> None:
    result = load("httperf-client-timeout.txt")
    assert result.errors["client-timo"] == 20 and result.requests == 6
    assert result.max_concurrent == 20


def test_a_growing_queue_is_not_sustained() -> None:
    # A TCG guest's lighttpd at 640/s: every reply came, none failed, but the queue grew
    # (median connection 690 ms against 3 ms at low rates) and the run overran its 3 s
    # schedule by half a second.
    result = load("httperf-guest-10k-rate640-queueing.txt")
    assert result.error_pct == 0.0 and result.conn_min_ms == 6.8
    assert achieved_ratio(result, 640) == pytest.approx(1920 / (3.558 - 0.0068) / 640,
                                                        rel=1e-3)
    assert not sustained(result, 640, 1.0, 0.99)


def test_client_fd_limit() -> None:
    # httperf's select() caps it at FD_SETSIZE (1024) sockets: past that, fd-unavail.
    result = load("httperf-guest-10k-rate1280-fd-unavail.txt")
    assert result.errors["fd-unavail"] == 1197 and result.errors["total"] == 1197
    assert result.connections == 2643 and result.num_conns == 3840
    assert result.max_concurrent == 1022
    assert result.error_pct == pytest.approx(100 * 1197 / 3840)
    assert web_metrics(result, 1280)["max_concurrent"] == (1022.0, "count")


def test_metrics_have_units() -> None:
    metrics = web_metrics(load("httperf-10k-rate50.txt"), 50.0)
    assert metrics["offered_rps"] == (50.0, "req/s")
    assert metrics["replies_s"][1] == "replies/s" and metrics["achieved_ratio"][1] == "ratio"
    for name in ("reply_ms", "transfer_ms", "connect_ms", "conn_ms"):
        assert metrics[name][1] == "ms"
    assert metrics["client_cpu_pct"] == (92.0, "%") and metrics["net_mbit_s"] == (4.2, "Mbit/s")
    assert all(f"err.{k}" in metrics for k in ERROR_KINDS)


def test_parser_tolerates_extra_whitespace_and_missing_optional_lines() -> None:
    text = (FIXTURES / "httperf-10k-rate50.txt").read_text()
    text = text.replace("Reply time [ms]: response 0.5", "Reply time [ms]:  response   0.5")
    text = "\n".join(line for line in text.splitlines() if not line.startswith("Net I/O"))
    result = parse_httperf(text)
    assert result.response_ms == 0.5 and result.net_mbit_s == 0.0


@pytest.mark.parametrize("line", ["Total:", "Reply status:", "Errors: total"])
def test_required_lines(line: str) -> None:
    text = (FIXTURES / "httperf-10k-rate50.txt").read_text()
    text = "\n".join(x for x in text.splitlines() if not x.startswith(line))
    with pytest.raises(HvbenchError, match="lacks the line"):
        parse_httperf(text)


def test_nan_is_read() -> None:
    text = (FIXTURES / "httperf-10k-rate50.txt").read_text().replace(
        "median 0.5", "median nan")
    assert math.isnan(parse_httperf(text).conn_median_ms)


# -- the sustain rule and the search, on a model server -----------------------------------
BASE = load("httperf-10k-rate50.txt")


def model_run(rate: float, capacity: float, seconds: float = 10.0) -> HttperfResult:
    """What httperf would report against a server that serves ``capacity`` replies/s:
    below it every reply is on time; above it the backlog stretches the run and replies
    beyond the reply timeout fail."""
    n = round(rate * seconds)
    if rate <= capacity:
        return dataclasses.replace(BASE, rate=rate, num_conns=n, connections=n, requests=n,
                                   replies=n, duration_s=(n - 1) / rate + 0.001,
                                   status={**BASE.status, "2xx": n})
    ok = round(n * capacity / rate)
    return dataclasses.replace(
        BASE, rate=rate, num_conns=n, connections=n, requests=n, replies=ok,
        duration_s=n / capacity, status={**BASE.status, "2xx": ok},
        errors={**BASE.errors, "total": n - ok, "client-timo": n - ok})


def test_sustained_rule() -> None:
    assert sustained(model_run(100, 150), 100, 1.0, 0.99)
    assert not sustained(model_run(200, 150), 200, 1.0, 0.99)
    slow = dataclasses.replace(model_run(100, 150), duration_s=12.0)
    assert slow.error_pct == 0.0 and not sustained(slow, 100, 1.0, 0.99)
    assert sustained(slow, 100, 1.0, 0.8)


def test_search_ramps_then_bisects() -> None:
    seen: list[float] = []

    def measure(rate: float) -> HttperfResult:
        seen.append(rate)
        return model_run(rate, capacity=333.0)

    outcome = max_rate_search(measure, start=10, factor=2, limit=20000,
                              max_error_pct=1.0, min_achieved_ratio=0.99)
    assert seen[:7] == [10, 20, 40, 80, 160, 320, 640]
    # The rule tolerates 1 % errors, so a rate a hair above capacity may pass.
    assert 333 / 1.05 <= outcome.max_rate <= 333 * 1.01
    assert [s.rate for s in outcome.steps] == seen
    assert outcome.best is not None and outcome.best.rate == outcome.max_rate
    assert len(seen) <= 24


def test_search_stops_at_the_limit() -> None:
    outcome = max_rate_search(lambda r: model_run(r, 1e9), start=10, factor=3, limit=100,
                              max_error_pct=1.0, min_achieved_ratio=0.99)
    assert [s.rate for s in outcome.steps] == [10, 30, 90, 100]
    assert outcome.max_rate == 100


def test_search_steps_down_when_the_start_fails() -> None:
    outcome = max_rate_search(lambda r: model_run(r, 7.0), start=10, factor=1.5,
                              limit=1000, max_error_pct=1.0, min_achieved_ratio=0.99)
    assert outcome.steps[0].rate == 10 and not outcome.steps[0].sustained
    assert 7 / 1.05 <= outcome.max_rate <= 7 * 1.01


def test_search_gives_zero_when_nothing_sustains() -> None:
    outcome = max_rate_search(lambda r: model_run(r, 0.001), start=10, factor=2,
                              limit=1000, max_error_pct=1.0, min_achieved_ratio=0.99)
    assert outcome.max_rate == 0.0 and outcome.best is None
    assert [s.rate for s in outcome.steps] == [10, 5, 2.5, 1.25]


def test_search_is_bounded() -> None:
    outcome = max_rate_search(lambda r: model_run(r, 5000), start=1, factor=1.01,
                              limit=20000, max_error_pct=1.0, min_achieved_ratio=0.99,
                              max_steps=8)
    assert len(outcome.steps) == 8
    budget = iter([True, True, False])
    outcome = max_rate_search(lambda r: model_run(r, 5000), start=1, factor=2,
                              limit=20000, max_error_pct=1.0, min_achieved_ratio=0.99,
                              keep_going=lambda: next(budget))
    assert len(outcome.steps) == 2


# -- overloaded probes ---------------------------------------------------------------------
def overloading(capacity: float, timeout_above: float) -> Callable[[float], HttperfResult]:
    """A model server whose httperf client times out above ``timeout_above`` conn/s."""
    def measure(rate: float) -> HttperfResult:
        if rate > timeout_above:
            raise ProbeOverloaded(f"httperf at {rate:g} conn/s did not finish in 36 s")
        return model_run(rate, capacity)
    return measure


def test_overloaded_probe_counts_as_above_the_maximum() -> None:
    """examples/web.toml's native 100 kB case: 3200/s times out; the search narrows down
    instead of failing."""
    outcome = max_rate_search(overloading(2000.0, 2500.0), start=50, factor=2, limit=3200,
                              max_error_pct=1.0, min_achieved_ratio=0.99)
    rates = [s.rate for s in outcome.steps]
    assert rates[:7] == [50, 100, 200, 400, 800, 1600, 3200]
    assert outcome.steps[6].result is None and "did not finish" in outcome.steps[6].overload
    assert 2000 / 1.05 <= outcome.max_rate <= 2000 * 1.01
    assert outcome.best is not None and outcome.best.result is not None


def test_overload_from_the_start_steps_down() -> None:
    outcome = max_rate_search(overloading(30.0, 40.0), start=50, factor=2, limit=3200,
                              max_error_pct=1.0, min_achieved_ratio=0.99)
    assert outcome.steps[0].result is None
    assert 30 / 1.05 <= outcome.max_rate <= 30 * 1.01
    assert len(outcome.served) == len(outcome.steps) - 1


def test_every_probe_overloaded_fails_the_phase() -> None:
    spec = WebWorkloadSpec(mode="max-rate", client="ext", file_kb=(100,))
    outcome = max_rate_search(overloading(1.0, 0.0), start=50, factor=2, limit=3200,
                              max_error_pct=1.0, min_achieved_ratio=0.99)
    assert outcome.max_rate == 0.0 and not outcome.served
    with pytest.raises(HvbenchError, match="no rate could be served: httperf at 50 conn/s"):
        _max_rate_metrics(spec, 100, outcome)


def test_metrics_count_overloaded_steps() -> None:
    spec = WebWorkloadSpec(mode="max-rate", client="ext", file_kb=(100,))
    outcome = max_rate_search(overloading(2000.0, 2500.0), start=50, factor=2, limit=3200,
                              max_error_pct=1.0, min_achieved_ratio=0.99)
    metrics = _max_rate_metrics(spec, 100, outcome)
    overloaded = sum(1 for s in outcome.steps if s.result is None)
    assert metrics["overloaded_steps"] == (float(overloaded), "count")
    assert metrics["max_rate_rps"][0] == outcome.max_rate


def test_a_served_but_unsustained_minimum_is_a_zero_maximum() -> None:
    spec = WebWorkloadSpec(mode="max-rate", client="ext", file_kb=(100,))
    outcome = max_rate_search(lambda r: model_run(r, 0.001), start=10, factor=2,
                              limit=1000, max_error_pct=1.0, min_achieved_ratio=0.99)
    assert _max_rate_metrics(spec, 100, outcome)["max_rate_rps"] == (0.0, "req/s")


def test_each_probe_is_timed_and_the_chosen_one_is_the_metrics_step() -> None:
    outcome = max_rate_search(lambda r: model_run(r, 333.0), start=10, factor=2, limit=20000,
                              max_error_pct=1.0, min_achieved_ratio=0.99)
    assert all(s.started <= s.ended for s in outcome.steps)
    assert all(a.ended <= b.started for a, b in itertools.pairwise(outcome.steps))
    assert outcome.chosen is outcome.best
    # nothing sustained: the last served step is the one the metrics are of
    unsustained = max_rate_search(lambda r: model_run(r, 0.001), start=10, factor=2,
                                  limit=1000, max_error_pct=1.0, min_achieved_ratio=0.99)
    assert unsustained.chosen is unsustained.served[-1]
    nothing = max_rate_search(overloading(1.0, 0.0), start=50, factor=2, limit=3200,
                              max_error_pct=1.0, min_achieved_ratio=0.99)
    assert nothing.chosen is None
