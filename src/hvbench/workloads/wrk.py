"""The web workload's latency pass: wrk against the same lighttpd, after httperf.

wrk is closed-loop: each of its ``connections`` sends its next request when the previous
reply is complete, for ``seconds``; the request rate is an output (``wrk_rps``). Its
latency is the time from writing a request to the end of its reply (TCP connect
excluded), recorded for every request at 1 us resolution. wrk (since 4.0) corrects the
recorded distribution for coordinated omission before reporting it: a latency longer
than twice the mean interval between one connection's requests adds samples at that
latency minus 1, 2, ... intervals (docs/network-workloads.md).

wrk's human-readable report is never parsed: a Lua script (package data
``wrk_report.lua``, staged into a temporary file for each run and removed afterwards)
writes the ``done()`` hook's numbers as one JSON line after a marker; that JSON is
kept as the raw output (``raw_kind = "wrk-json"``) next to httperf's text.

The argv builder, the parser and the metrics are pure and unit-tested;
:func:`run_wrk_pass` runs the real program through the client endpoint's executor.
"""

from __future__ import annotations

import contextlib
import json
import math
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

from hvbench.errors import (
    CommandError,
    GuestTimeoutError,
    HvbenchError,
    SpecError,
    ToolMissingError,
)
from hvbench.host.commands import require_tool
from hvbench.host.paths import make_owned_dir
from hvbench.workloads.endpoints import Endpoint
from hvbench.workloads.web import file_uri


class WrkOptions(Protocol):
    """A closed-loop wrk run: ``seconds`` long, ``connections`` on ``threads``."""

    @property
    def seconds(self) -> int: ...
    @property
    def connections(self) -> int: ...
    @property
    def threads(self) -> int: ...


class WrkSite(Protocol):
    """The web workload a wrk pass follows (the web kind's spec)."""

    @property
    def port(self) -> int: ...
    @property
    def reply_timeout_s(self) -> float: ...
    @property
    def latency(self) -> WrkOptions | None: ...


#: The raw output kind of the JSON the Lua script writes.
RAW_KIND = "wrk-json"
#: What starts the Lua script's JSON line on wrk's stdout (see wrk_report.lua).
MARK = "hvbench-wrk-json "
#: wrk's percentile (the JSON's key) -> the metric's infix.
PERCENTILES = (("50", "p50"), ("90", "p90"), ("99", "p99"), ("99.9", "p999"),
               ("99.99", "p9999"))
#: wrk's error kinds, as its summary names them.
ERROR_KINDS = ("connect", "read", "write", "status", "timeout")
#: Seconds a wrk run gets beyond its duration and reply timeout (start-up, threads'
#: last replies).
_WRK_SLACK_S = 30.0
_US_PER_MS = 1000.0


def check_wrk(workload: str) -> None:
    """Before a study runs: raises :class:`SpecError` naming ``workload`` and the Debian
    package when its latency pass cannot run because wrk is not on PATH."""
    try:
        require_tool("wrk")
    except ToolMissingError as exc:
        raise SpecError(f"workload {workload}: latency = {{ tool = \"wrk\" }}: {exc}") from exc


def report_script() -> str:
    """The Lua script that makes wrk write its results as JSON (package data)."""
    return resources.files("hvbench.workloads").joinpath("wrk_report.lua").read_text()


def wrk_url(address: str, port: int, uri: str) -> str:
    return f"http://{address}:{port}{uri}"


def wrk_argv(*, url: str, latency: WrkOptions, timeout_s: float, script: str
             ) -> list[str]:
    """wrk for ``latency.seconds`` with ``latency.connections`` connections on
    ``latency.threads`` threads, replies slower than ``timeout_s`` (rounded up to whole
    seconds, wrk's unit) counted as timeouts, results through ``script``."""
    return ["wrk", "-t", str(latency.threads), "-c", str(latency.connections),
            "-d", f"{latency.seconds}s", "--timeout", f"{max(1, math.ceil(timeout_s))}s",
            "-s", script, url]


def wrk_error(stderr: str, lines: int = 3) -> str:
    """wrk's own error lines on stderr (pure), each once (wrk loads its script in two
    Lua states, so a script error is printed twice), the last ``lines`` of them."""
    said = list(dict.fromkeys(line.strip() for line in stderr.splitlines() if line.strip()))
    return "\n".join(said[-lines:])


@dataclass(frozen=True)
class WrkResult:
    """The numbers of one wrk run, as its ``done()`` hook gave them (times in ms)."""

    url: str
    duration_s: float
    requests: int
    bytes: int
    errors: dict[str, int]
    #: Latency samples: the requests wrk recorded plus those its coordinated-omission
    #: correction added; None when the report has no histogram (too costly for wrk to
    #: give, see wrk_report.lua), which alone counts them.
    samples: int | None
    min_ms: float
    max_ms: float
    mean_ms: float
    stdev_ms: float
    #: wrk's percentile ("50", "99.9", ...) -> ms.
    percentiles: dict[str, float]
    thread_rps_mean: float

    @property
    def rps(self) -> float:
        """Completed requests per second (wrk's "Requests/sec")."""
        return self.requests / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())

    @property
    def corrected_pct(self) -> float | None:
        """% of the latency samples that wrk's coordinated-omission correction added
        (requests slower than the timeout are errors, not samples); None when the
        samples were not counted."""
        if self.samples is None:
            return None
        recorded = self.requests - self.errors.get("timeout", 0)
        if self.samples <= 0:
            return 0.0
        return 100.0 * max(self.samples - recorded, 0) / self.samples


def report_json(stdout: str) -> str:
    """The Lua script's JSON document on wrk's stdout: the last line after :data:`MARK`.
    Raises :class:`HvbenchError` when there is none (the script did not run)."""
    found = [line[len(MARK):] for line in stdout.splitlines() if line.startswith(MARK)]
    if not found:
        raise HvbenchError("wrk printed no hvbench report line (its done() hook did not "
                           "run: see wrk's words)")
    return found[-1]


def _number(doc: Mapping[str, Any], key: str, where: str) -> float:
    value = doc.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise HvbenchError(f"wrk report: {where}{key} is {value!r}, expected a number")
    return float(value)


def _table(doc: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = doc.get(key)
    if not isinstance(value, dict):
        raise HvbenchError(f"wrk report: {key} is {value!r}, expected an object")
    return value


def parse_wrk(text: str) -> WrkResult:
    """Parse the Lua script's JSON document (``text``: the document, or wrk's whole
    stdout holding it). Latency numbers are microseconds in the document, ms here; a
    null (wrk's mean of no sample) reads as 0. Raises :class:`HvbenchError` naming
    what is missing or malformed."""
    body = text if text.lstrip().startswith("{") else report_json(text)
    try:
        doc = json.loads(body)
    except ValueError as exc:
        raise HvbenchError(f"wrk report is not JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise HvbenchError("wrk report is not a JSON object")
    latency = _table(doc, "latency_us")
    errors = _table(doc, "errors")
    points = _table(latency, "percentiles")

    def ms(key: str) -> float:
        value = latency.get(key)
        return 0.0 if value is None else _number(latency, key, "latency_us.") / _US_PER_MS

    rps = _table(doc, "thread_rps").get("mean")
    samples = latency.get("count")
    return WrkResult(
        url=str(doc.get("url", "")),
        duration_s=_number(doc, "duration_us", "") / 1e6,
        requests=int(_number(doc, "requests", "")), bytes=int(_number(doc, "bytes", "")),
        errors={kind: int(_number(errors, kind, "errors.")) for kind in ERROR_KINDS},
        samples=None if samples is None else int(_number(latency, "count", "latency_us.")),
        min_ms=ms("min"), max_ms=ms("max"), mean_ms=ms("mean"), stdev_ms=ms("stdev"),
        percentiles={key: _number(points, key, "latency_us.percentiles.") / _US_PER_MS
                     for key, _ in PERCENTILES},
        thread_rps_mean=float(rps) if isinstance(rps, int | float) else 0.0,
    )


def wrk_metrics(result: WrkResult) -> dict[str, tuple[float, str]]:
    """The rows of one wrk run (catalogue names ``wrk_*``)."""
    metrics: dict[str, tuple[float, str]] = {
        f"wrk_lat_{infix}_ms": (result.percentiles[key], "ms") for key, infix in PERCENTILES}
    metrics |= {
        "wrk_lat_mean_ms": (result.mean_ms, "ms"),
        "wrk_lat_stdev_ms": (result.stdev_ms, "ms"),
        "wrk_lat_max_ms": (result.max_ms, "ms"),
        "wrk_rps": (result.rps, "req/s"),
        "wrk_requests": (float(result.requests), "count"),
        "wrk_errors": (float(result.error_count), "count"),
    }
    if result.corrected_pct is not None:
        metrics["wrk_corrected_pct"] = (result.corrected_pct, "%")
    for kind in ERROR_KINDS:
        metrics[f"wrk_err.{kind}"] = (float(result.errors[kind]), "count")
    return metrics


@contextlib.contextmanager
def staged_script(client: Endpoint) -> Iterator[str]:
    """The report script in a fresh temporary file where ``client`` runs (the host's
    file system: the root namespace and lab namespaces share it), removed on exit.
    Raises :class:`HvbenchError` for a guest client (its image has no wrk)."""
    if client.kind == "guest":
        raise HvbenchError(f"the wrk latency pass runs on a lab host or the host, not in "
                           f"guest {client.name}")
    # in a directory that records its owner, so `hvbench cleanup` (and the next run)
    # removes it after a kill -9 of this process
    directory = make_owned_dir(Path(tempfile.gettempdir()), "hvb-wrk-")
    path = directory / "report.lua"
    try:
        path.write_text(report_script())
        yield str(path)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@dataclass(frozen=True)
class WrkPass:
    """One latency pass: its metrics and the raw JSON they came from."""

    metrics: dict[str, tuple[float, str]]
    raw: str


def run_wrk_pass(spec: WrkSite, file_kb: int, client: Endpoint,
                 server: Endpoint) -> WrkPass:
    """wrk on ``client`` against the ``{file_kb}kB`` file that :func:`serve_web` serves
    on ``server``, as ``spec.latency`` says (nothing to run without it: an empty pass).

    The run gets ``seconds`` + the reply timeout + 30 s. Raises :class:`CommandError`
    led by wrk's own words when wrk fails, outlives that time, prints no report (its
    script failed to load) or completes no request; :class:`HvbenchError` for a guest
    client.
    """
    latency = spec.latency
    if latency is None:
        return WrkPass({}, "")
    address, port = server.reach(spec.port)
    url = wrk_url(address, port, file_uri(file_kb))
    timeout = latency.seconds + math.ceil(spec.reply_timeout_s) + _WRK_SLACK_S
    what = f"wrk {file_kb}kB on {client.name}"
    with staged_script(client) as script:
        argv = wrk_argv(url=url, latency=latency, timeout_s=spec.reply_timeout_s,
                        script=script)
        try:
            done = client.executor.exec(argv, timeout=timeout)
        except GuestTimeoutError as exc:
            raise CommandError(argv, None, str(exc), what,
                               tool_error=f"wrk did not finish in {timeout:g} s") from exc
    stdout = done.stdout.decode(errors="replace")
    stderr = done.stderr.decode(errors="replace")
    try:
        if not done.ok:
            raise HvbenchError(f"wrk exited with {done.exit_code}")
        body = report_json(stdout)
        result = parse_wrk(body)
        if result.requests == 0:
            counts = ", ".join(f"{k} {v}" for k, v in result.errors.items())
            raise HvbenchError(f"wrk completed no request in {latency.seconds} s "
                               f"(errors: {counts})")
    except HvbenchError as exc:
        said = wrk_error(stderr)
        raise CommandError(argv, done.exit_code, f"{stdout}\n{stderr}", what,
                           tool_error=f"{said}\n{exc}" if said else str(exc)) from exc
    return WrkPass(wrk_metrics(result), body)
