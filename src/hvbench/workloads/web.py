"""The web workload: lighttpd serving generated files, httperf offering load (seed 003).

- Content: one file per size in ``file_kb`` (1 kB = 1024 bytes), deterministic bytes
  (a SHAKE-256 block repeated), served as ``/<kb>k.bin``.
- Server: lighttpd with a generated config (no access log, keep-alive only when
  ``calls_per_conn`` > 1, connection and fd limits raised), started by
  :func:`~hvbench.workloads.endpoints.start_server` on the platform.
- Client: httperf on a lab host, open-loop: it opens ``rate`` connections per second on
  schedule whatever is outstanding (see docs/network-workloads.md).
- ``max-rate``: a geometric ramp until a rate is not sustained, then bisection.

The argv builder, the config text, the parser and the search are pure and unit-tested;
:func:`serve_web` and :func:`run_web_phase` run the real programs.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Literal, Protocol

from hvbench.errors import CommandError, GuestError, GuestTimeoutError, HvbenchError
from hvbench.host.paths import make_owned_dir
from hvbench.model.rates import Rate, absolute
from hvbench.workloads.endpoints import (
    Endpoint,
    FileWriter,
    ServerHandle,
    start_server,
)
from hvbench.workloads.outcome import PhaseOutcome

#: Where a guest's site lives (the guest root is a tmpfs overlay).
GUEST_WWW = "/tmp/hvbench-www"
#: lighttpd limits: far above what httperf (FD_SETSIZE = 1024 sockets) can open.
MAX_CONNECTIONS = 8192
MAX_FDS = 16384
_BLOCK = 64 << 10
#: Extra seconds an httperf run gets beyond its schedule and reply timeout.
_HTTPERF_SLACK_S = 30.0
#: httperf's error kinds, in the order it prints them.
ERROR_KINDS = ("client-timo", "socket-timo", "connrefused", "connreset", "fd-unavail",
               "addrunavail", "ftab-full", "other")
STATUS_CLASSES = ("1xx", "2xx", "3xx", "4xx", "5xx")


# -- content and configuration ---------------------------------------------------------
def file_name(kb: int) -> str:
    return f"{kb}k.bin"


def file_uri(kb: int) -> str:
    """The URI of the ``kb`` kB file."""
    return "/" + file_name(kb)


def file_content(kb: int) -> bytes:
    """``kb`` x 1024 deterministic bytes: a SHAKE-256 block repeated (incompressible
    within a block, identical on every run and platform)."""
    block = hashlib.shake_256(b"hvbench web content").digest(_BLOCK)
    size = kb << 10
    return (block * (size // _BLOCK + 1))[:size]


def _quote(value: str) -> str:
    if any(c in value for c in '"\\\n'):
        raise HvbenchError(f"lighttpd config value {value!r} holds a quote or newline")
    return f'"{value}"'


def lighttpd_config(*, docroot: str, bind_address: str, port: int, pid_file: str,
                    error_log: str, calls_per_conn: int = 1) -> str:
    """lighttpd.conf text: static files only, no access log, keep-alive only when more
    than one call per connection is made (then exactly that many requests)."""
    keep_alive = 0 if calls_per_conn <= 1 else calls_per_conn
    lines = [
        f"server.document-root = {_quote(docroot)}",
        f"server.bind = {_quote(bind_address)}",
        f"server.port = {int(port)}",
        f"server.pid-file = {_quote(pid_file)}",
        f"server.errorlog = {_quote(error_log)}",
        'server.tag = "hvbench"',
        "server.modules = ()",
        f"server.max-connections = {MAX_CONNECTIONS}",
        f"server.max-fds = {MAX_FDS}",
        f"server.max-keep-alive-requests = {keep_alive}",
        "server.max-keep-alive-idle = 5",
        'index-file.names = ()',
        'mimetype.assign = ("" => "application/octet-stream")',
    ]
    return "\n".join(lines) + "\n"



class Site(Protocol):
    """What a web server serves: one file per size, on a port, each connection
    answering ``calls_per_conn`` requests (the web kind's spec is one)."""

    @property
    def file_kb(self) -> tuple[int, ...]: ...
    @property
    def port(self) -> int: ...
    @property
    def calls_per_conn(self) -> int: ...


class HttperfTest(Site, Protocol):
    """What httperf's runs of one file size are run with (the web kind's spec)."""

    @property
    def mode(self) -> Literal["fixed", "max-rate"]: ...
    @property
    def rate(self) -> Rate: ...
    @property
    def duration_s(self) -> float: ...
    @property
    def reply_timeout_s(self) -> float: ...
    @property
    def timeout_s(self) -> float: ...
    @property
    def start_rate(self) -> float: ...
    @property
    def rate_factor(self) -> float: ...
    @property
    def max_rate(self) -> float: ...
    @property
    def max_error_pct(self) -> float: ...
    @property
    def min_achieved_ratio(self) -> float: ...


@dataclass(frozen=True)
class StaticSite:
    """A :class:`Site` given field by field (a scenario neighbour's)."""

    file_kb: tuple[int, ...]
    port: int
    calls_per_conn: int = 1

@dataclass(frozen=True)
class SiteLayout:
    """The paths of one site on its platform."""

    root: str

    def _path(self, name: str) -> str:
        return str(PurePosixPath(self.root) / name)

    @property
    def docroot(self) -> str:
        return self._path("htdocs")

    @property
    def config(self) -> str:
        return self._path("lighttpd.conf")

    def config_text(self, spec: Site, endpoint: Endpoint) -> str:
        return lighttpd_config(
            docroot=self.docroot, bind_address=endpoint.bind_address, port=spec.port,
            pid_file=self._path("lighttpd.pid"), error_log=self._path("error.log"),
            calls_per_conn=spec.calls_per_conn)


# -- the tools' own words -------------------------------------------------------------
#: lighttpd tags each log line with its source position, e.g. ``(network.c.537)``.
_LIGHTTPD_LINE = re.compile(r"\(\w+\.c\.\d+\)")
_LIGHTTPD_ROUTINE = ("server started", "server stopped", "WARNING: unknown config-key")


def lighttpd_error(output: str, lines: int = 3) -> str:
    """lighttpd's own error lines in its output (pure): the source-tagged lines that are
    not routine start/stop notices, the last ``lines`` of them."""
    said = [line.strip() for line in output.splitlines()
            if _LIGHTTPD_LINE.search(line) and not any(r in line for r in _LIGHTTPD_ROUTINE)]
    return "\n".join(said[-lines:])


def httperf_error(stderr: str, lines: int = 3) -> str:
    """httperf's own error lines on stderr (pure), without the warning it prints on
    every run about FD_SETSIZE."""
    said = [line.strip() for line in stderr.splitlines()
            if line.strip() and not line.startswith("httperf: warning")]
    return "\n".join(said[-lines:])


# -- the server ------------------------------------------------------------------------
@dataclass
class WebServer:
    """A running lighttpd; ``uris`` maps each file size (kB) to its URI."""

    endpoint: Endpoint
    port: int
    layout: SiteLayout
    handle: ServerHandle
    uris: dict[int, str] = field(default_factory=dict)


def _stage_host(spec: Site, endpoint: Endpoint) -> SiteLayout:
    """Write the site into a fresh owned directory under TMPDIR (host and netns share
    the root namespace's file system)."""
    layout = SiteLayout(str(make_owned_dir(Path(tempfile.gettempdir()), "hvb-www-")))
    docroot = Path(layout.docroot)
    docroot.mkdir()
    for kb in spec.file_kb:
        (docroot / file_name(kb)).write_bytes(file_content(kb))
    Path(layout.config).write_text(layout.config_text(spec, endpoint))
    return layout


def _stage_guest(spec: Site, endpoint: Endpoint) -> SiteLayout:
    """Write the site into :data:`GUEST_WWW` in the guest (through the agent's file
    calls when the executor has them, else ``cat`` fed on stdin). Raises
    :class:`CommandError` if the guest cannot create it."""
    layout = SiteLayout(GUEST_WWW)
    _guest_ok(endpoint, ["sh", "-c", 'rm -rf "$1" && mkdir -p "$2"', "sh", layout.root,
                         layout.docroot], "creating the web root")
    files = {f"{layout.docroot}/{file_name(kb)}": file_content(kb) for kb in spec.file_kb}
    files[layout.config] = layout.config_text(spec, endpoint).encode()
    executor = endpoint.executor
    for path, data in files.items():
        if isinstance(executor, FileWriter):
            executor.write_file(path, data)
        else:
            _guest_ok(endpoint, ["sh", "-c", 'cat >"$1"', "sh", path], f"writing {path}",
                      stdin=data)
    return layout


def _guest_ok(endpoint: Endpoint, argv: list[str], what: str,
              stdin: bytes | None = None) -> None:
    result = endpoint.executor.exec(argv, timeout=60, stdin=stdin)
    if not result.ok:
        output = (result.stdout + result.stderr).decode(errors="replace")
        raise CommandError(argv, result.exit_code, output, f"{what} on {endpoint.name}")


def _remove_site(endpoint: Endpoint, layout: SiteLayout) -> None:
    """Remove the site; never raises for a guest that is already gone."""
    if endpoint.kind != "guest":
        shutil.rmtree(layout.root, ignore_errors=True)
        return
    with contextlib.suppress(GuestError):
        endpoint.executor.exec(["rm", "-rf", layout.root], timeout=60)


@contextlib.contextmanager
def serve_web(spec: Site, endpoint: Endpoint) -> Iterator[WebServer]:
    """Serve ``spec.file_kb`` files with lighttpd on ``endpoint`` port ``spec.port``.

    The server is ready when the context is entered and stopped, with its files
    removed, on exit. Raises :class:`CommandError` (with lighttpd's output) if it does
    not listen within 15 s, e.g. because the port is taken.
    """
    stage = _stage_guest if endpoint.kind == "guest" else _stage_host
    layout = stage(spec, endpoint)
    try:
        argv = ["lighttpd", "-D", "-f", layout.config]
        try:
            handle = start_server(endpoint, argv, name=f"lighttpd-{endpoint.name}",
                                  port=spec.port)
        except CommandError as exc:
            raise CommandError(exc.argv, exc.returncode, exc.output,
                               f"starting lighttpd on {endpoint.name}",
                               tool_error=lighttpd_error(exc.output)) from exc
        with handle:
            uris = {kb: file_uri(kb) for kb in spec.file_kb}
            yield WebServer(endpoint, spec.port, layout, handle, uris)
    finally:
        _remove_site(endpoint, layout)


# -- httperf ---------------------------------------------------------------------------
def httperf_argv(*, server: str, port: int, uri: str, rate: float, num_conns: int,
                 calls_per_conn: int = 1, timeout_s: float = 5.0) -> list[str]:
    """httperf offering ``rate`` connections/s, ``num_conns`` in all, each making
    ``calls_per_conn`` requests for ``uri``; ``--hog`` so ports are not the limit."""
    return ["httperf", "--hog", f"--server={server}", f"--port={port}", f"--uri={uri}",
            f"--rate={rate:g}", f"--num-conns={num_conns}", f"--num-calls={calls_per_conn}",
            f"--timeout={timeout_s:g}"]


@dataclass(frozen=True)
class HttperfResult:
    """The numbers of one httperf run (times in ms, rates per second)."""

    rate: float | None                # --rate, from httperf's echo of its command line
    num_conns: int | None
    calls_per_conn: int
    connections: int
    requests: int
    replies: int
    duration_s: float
    conn_rate: float
    max_concurrent: int
    conn_min_ms: float
    conn_avg_ms: float
    conn_median_ms: float
    conn_max_ms: float
    connect_ms: float
    reply_rate_avg: float
    reply_rate_samples: int
    response_ms: float
    transfer_ms: float
    content_bytes: float
    status: dict[str, int]
    cpu_user_pct: float
    cpu_system_pct: float
    cpu_total_pct: float
    net_kb_s: float
    net_mbit_s: float
    errors: dict[str, int]            # "total" and each kind in ERROR_KINDS

    @property
    def ok_replies(self) -> int:
        return self.status.get("2xx", 0)

    @property
    def non_2xx(self) -> int:
        return max(self.replies - self.ok_replies, 0)

    @property
    def error_count(self) -> int:
        """httperf's errors plus the replies whose status was not 2xx."""
        return self.errors.get("total", 0) + self.non_2xx

    @property
    def offered_calls(self) -> int:
        return max((self.num_conns or self.connections) * self.calls_per_conn, 1)

    @property
    def error_pct(self) -> float:
        """% of the offered calls that did not get a 2xx reply, whatever the cause."""
        return 100.0 * max(self.offered_calls - self.ok_replies, 0) / self.offered_calls

    def achieved_rps(self) -> float:
        """2xx replies per second over the schedule.

        The schedule spans ``(num_conns - 1) / rate`` s; httperf's test duration adds
        the lifetime of the last connections. The shortest connection time (a request
        that met no queue) is taken off the duration (never below the span) and one
        interval added back, so a server that keeps up scores ``rate`` x
        ``calls_per_conn``, and one that falls behind, whose queue stretches the run
        beyond the schedule, scores less. Without the rate: 2xx replies / duration.
        """
        if not self.rate or not self.num_conns:
            return self.ok_replies / self.duration_s if self.duration_s > 0 else 0.0
        span = (self.num_conns - 1) / self.rate
        effective = max(self.duration_s - self.conn_min_ms / 1000.0, span) + 1 / self.rate
        return self.ok_replies / effective


_NUM = r"([-+]?(?:\d+(?:\.\d*)?|nan|inf))"


def _floats(pattern: str, text: str, required: bool = False) -> list[float] | None:
    """The numbers captured by ``pattern`` (``#`` stands for a number) in ``text``."""
    regex = re.escape(pattern).replace("\\#", _NUM).replace("\\ ", r"\s+")
    match = re.search(regex, text)
    if match is None:
        if required:
            head = pattern.split("#", maxsplit=1)[0]
            raise HvbenchError(f"httperf output lacks the line {head!r}")
        return None
    return [float(g) for g in match.groups()]


def _pairs(text: str, prefix: str) -> dict[str, int]:
    """``name value`` pairs of every line starting with ``prefix`` (the Errors lines)."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        if line.startswith(prefix):
            words = line[len(prefix):].split()
            for name, value in zip(words[::2], words[1::2], strict=False):
                with contextlib.suppress(ValueError):
                    out[name] = int(value)
    return out


def _command_line(text: str) -> dict[str, str]:
    """The ``--opt=value`` options of httperf's echo of its own command line."""
    for line in text.splitlines():
        if line.startswith("httperf ") and "--" in line:
            return dict(re.findall(r"--([a-z-]+)=(\S+)", line))
    return {}


def _opt(options: Mapping[str, str], name: str) -> float | None:
    with contextlib.suppress(KeyError, ValueError):
        return float(options[name])
    return None


def parse_httperf(text: str) -> HttperfResult:
    """Parse httperf's text report (it has no machine-readable output).

    Lines httperf always prints (``Total:``, ``Reply status:``, ``Errors: total``) are
    required; the others default to 0. Raises :class:`HvbenchError` naming the missing
    line.
    """
    total = _floats("Total: connections # requests # replies # test-duration # s", text,
                    required=True) or []
    status = _pairs(text.replace("=", " "), "Reply status:")
    if "2xx" not in status:
        raise HvbenchError("httperf output lacks the line 'Reply status:'")
    errors = _pairs(text, "Errors:")
    if "total" not in errors:
        raise HvbenchError("httperf output lacks the line 'Errors: total'")
    options = _command_line(text)
    zero = [0.0] * 5
    conn = _floats("Connection time [ms]: min # avg # max # median # stddev #", text) or zero
    rate = _floats("Connection rate: # conn/s (# ms/conn, <=# concurrent", text) or zero
    reply_rate = _floats("[replies/s]: min # avg # max # stddev # (# samples)", text) or zero
    reply = _floats("Reply time [ms]: response # transfer #", text) or zero
    cpu = _floats("CPU time [s]: user # system # (user #% system #% total #%)", text) or zero
    net = _floats("Net I/O: # KB/s (#*10^6 bps)", text) or zero
    num_conns = _opt(options, "num-conns")
    return HttperfResult(
        rate=_opt(options, "rate"), num_conns=None if num_conns is None else int(num_conns),
        calls_per_conn=int(_opt(options, "num-calls") or 1),
        connections=int(total[0]), requests=int(total[1]), replies=int(total[2]),
        duration_s=total[3], conn_rate=rate[0], max_concurrent=int(rate[2]),
        conn_min_ms=conn[0], conn_avg_ms=conn[1], conn_median_ms=conn[3],
        conn_max_ms=conn[2],
        connect_ms=(_floats("Connection time [ms]: connect #", text) or zero)[0],
        reply_rate_avg=reply_rate[1], reply_rate_samples=int(reply_rate[4]),
        response_ms=reply[0], transfer_ms=reply[1],
        content_bytes=(_floats("Reply size [B]: header # content #", text) or zero)[1],
        status={k: status.get(k, 0) for k in STATUS_CLASSES},
        cpu_user_pct=cpu[2], cpu_system_pct=cpu[3], cpu_total_pct=cpu[4],
        net_kb_s=net[0], net_mbit_s=net[1],
        errors={"total": errors["total"], **{k: errors.get(k, 0) for k in ERROR_KINDS}},
    )


# -- decisions -------------------------------------------------------------------------
def achieved_ratio(result: HttperfResult, offered_rate: float) -> float:
    """2xx replies/s over the offered replies/s (``offered_rate`` connections/s)."""
    offered = offered_rate * result.calls_per_conn
    return result.achieved_rps() / offered if offered > 0 else 0.0


def sustained(result: HttperfResult, offered_rate: float, max_error_pct: float,
              min_achieved_ratio: float) -> bool:
    """True if the server kept up with ``offered_rate`` connections/s: at most
    ``max_error_pct`` % of the calls failed (errors or non-2xx replies) and the achieved
    reply rate is at least ``min_achieved_ratio`` of the offered one."""
    return (result.error_pct <= max_error_pct
            and achieved_ratio(result, offered_rate) >= min_achieved_ratio)


class ProbeOverloaded(HvbenchError):
    """One max-rate probe produced no report because the load overwhelmed the client or
    the server (httperf outlived its timeout). The search counts the rate as above the
    maximum."""


@dataclass(frozen=True)
class RateStep:
    """One measured rate of a max-rate search. ``result`` is None for an overloaded
    probe, whose reason is ``overload``; ``started`` and ``ended`` bound the probe on
    the monotonic clock (the host evidence of the step the metrics come from)."""

    rate: float
    result: HttperfResult | None
    sustained: bool
    overload: str = ""
    started: float = 0.0
    ended: float = 0.0


@dataclass(frozen=True)
class MaxRateOutcome:
    """The highest sustained rate (0 if none) and every step, in the order run."""

    max_rate: float
    steps: tuple[RateStep, ...]

    @property
    def best(self) -> RateStep | None:
        """The step at ``max_rate``, or None when no rate was sustained."""
        good = [s for s in self.steps if s.sustained and s.rate == self.max_rate]
        return good[-1] if good else None

    @property
    def chosen(self) -> RateStep | None:
        """The step whose report the phase's metrics are: :attr:`best`, else the last
        served step (None: none was served)."""
        served = self.served
        return self.best or (served[-1] if served else None)

    @property
    def served(self) -> list[RateStep]:
        """The steps httperf completed (with a report), whether sustained or not."""
        return [s for s in self.steps if s.result is not None]


class _Search:
    """State of one search: the steps so far and the sustain rule."""

    def __init__(self, measure: Callable[[float], HttperfResult], max_error_pct: float,
                 min_achieved_ratio: float, max_steps: int,
                 keep_going: Callable[[], bool]) -> None:
        self.measure = measure
        self.rule = (max_error_pct, min_achieved_ratio)
        self.max_steps = max_steps
        self.keep_going = keep_going
        self.steps: list[RateStep] = []

    def can_probe(self) -> bool:
        return len(self.steps) < self.max_steps and self.keep_going()

    def probe(self, rate: float) -> bool:
        """Measure ``rate``; an overloaded probe is recorded as not sustained."""
        started = time.monotonic()
        try:
            result = self.measure(rate)
        except ProbeOverloaded as exc:
            self.steps.append(RateStep(rate, None, False, str(exc), started,
                                       time.monotonic()))
            return False
        step = RateStep(rate, result, sustained(result, rate, *self.rule), "", started,
                        time.monotonic())
        self.steps.append(step)
        return step.sustained


def _bracket(search: _Search, start: float, factor: float,
             limit: float) -> tuple[float | None, float | None]:
    """(highest sustained, lowest failed) rate: ramp up by ``factor`` from ``start``
    to ``limit``; if ``start`` fails, step down by ``factor`` (at most 3 times)."""
    good: float | None = None
    rate = min(start, limit)
    while search.can_probe():
        if search.probe(rate):
            good = rate
            if rate >= limit:
                return good, None
            rate = min(rate * factor, limit)
        else:
            return good, rate
    return good, None


def _bracket_down(search: _Search, bad: float, factor: float) -> float | None:
    rate = bad
    for _ in range(3):
        rate /= factor
        if not search.can_probe():
            return None
        if search.probe(rate):
            return rate
    return None


def max_rate_search(
    measure: Callable[[float], HttperfResult], *, start: float, factor: float,
    limit: float, max_error_pct: float, min_achieved_ratio: float,
    precision: float = 0.05, max_steps: int = 24,
    keep_going: Callable[[], bool] = lambda: True,
) -> MaxRateOutcome:
    """The highest rate (connections/s) ``measure`` shows sustained.

    ``measure`` raising :class:`ProbeOverloaded` (httperf timed out) counts as a rate
    above the maximum, as a run with too many errors does: the search narrows down
    instead of failing. A geometric ramp (``start``, x ``factor``, ... up to
    ``limit``) until a rate is not sustained, then bisection (geometric midpoints)
    between the last good and the first bad rate until they are within ``precision``
    (5 %). At most ``max_steps`` runs, and none once ``keep_going()`` is False.
    Pure given ``measure``.
    """
    search = _Search(measure, max_error_pct, min_achieved_ratio, max_steps, keep_going)
    good, bad = _bracket(search, start, factor, limit)
    if good is None and bad is not None:
        found = _bracket_down(search, bad, factor)
        bad = found * factor if found is not None else None
        good = found
    while good is not None and bad is not None and bad > good * (1 + precision):
        if not search.can_probe():
            break
        mid = math.sqrt(good * bad)
        if search.probe(mid):
            good = mid
        else:
            bad = mid
    return MaxRateOutcome(good or 0.0, tuple(search.steps))


# -- running a phase -------------------------------------------------------------------
def web_metrics(result: HttperfResult, offered_rate: float) -> dict[str, tuple[float, str]]:
    """The rows of one httperf run at ``offered_rate`` connections/s."""
    metrics: dict[str, tuple[float, str]] = {
        "offered_rps": (offered_rate * result.calls_per_conn, "req/s"),
        "replies_s": (result.achieved_rps(), "replies/s"),
        "achieved_ratio": (achieved_ratio(result, offered_rate), "ratio"),
        "reply_ms": (result.response_ms, "ms"),
        "transfer_ms": (result.transfer_ms, "ms"),
        "connect_ms": (result.connect_ms, "ms"),
        "conn_ms": (result.conn_avg_ms, "ms"),
        "max_concurrent": (float(result.max_concurrent), "count"),
        "errors": (float(result.error_count), "count"),
        "error_pct": (result.error_pct, "%"),
        "err.non-2xx": (float(result.non_2xx), "count"),
        "client_cpu_pct": (result.cpu_total_pct, "%"),
        "net_mbit_s": (result.net_mbit_s, "Mbit/s"),
    }
    for kind in ERROR_KINDS:
        metrics[f"err.{kind}"] = (float(result.errors.get(kind, 0)), "count")
    return metrics


class _Httperf:
    """Runs httperf for one phase on the client endpoint and keeps every report."""

    def __init__(self, spec: HttperfTest, file_kb: int, client: Endpoint,
                 server: Endpoint) -> None:
        self.spec, self.file_kb, self.client = spec, file_kb, client
        self.address, self.port = server.reach(spec.port)
        self.deadline = time.monotonic() + spec.timeout_s
        self.reports: list[str] = []

    def step_timeout(self) -> float:
        return self.spec.duration_s + self.spec.reply_timeout_s + _HTTPERF_SLACK_S

    def time_left(self) -> bool:
        """Room for one more run before the phase's ``timeout_s``."""
        return time.monotonic() + self.step_timeout() <= self.deadline

    def __call__(self, rate: float) -> HttperfResult:
        """One httperf run at ``rate`` connections/s, given :meth:`step_timeout` s.

        Raises :class:`ProbeOverloaded` if httperf outlives that timeout (it was killed:
        the load overwhelmed client or server), :class:`CommandError` led by httperf's
        own error lines if it fails or prints no report.
        """
        spec = self.spec
        argv = httperf_argv(
            server=self.address, port=self.port, uri=file_uri(self.file_kb), rate=rate,
            num_conns=max(1, round(rate * spec.duration_s)),
            calls_per_conn=spec.calls_per_conn, timeout_s=spec.reply_timeout_s)
        title = f"### httperf {self.file_kb}kB rate={rate:g}/s on {self.client.name}"
        try:
            done = self.client.executor.exec(argv, timeout=self.step_timeout())
        except GuestTimeoutError as exc:
            reason = (f"httperf at {rate:g} conn/s did not finish in "
                      f"{self.step_timeout():g} s (overloaded)")
            self.reports.append(f"{title}\n{reason}\n")
            raise ProbeOverloaded(reason) from exc
        text = done.text()
        stderr = done.stderr.decode(errors="replace")
        self.reports.append(f"{title}\n{text}")
        try:
            if not done.ok:
                raise HvbenchError(f"httperf exited with {done.exit_code}")
            return parse_httperf(text)
        except HvbenchError as exc:
            raise CommandError(argv, done.exit_code, f"{exc}\n{text}\n{stderr}",
                               f"httperf on {self.client.name}",
                               tool_error=httperf_error(stderr)) from exc


def _max_rate_metrics(spec: HttperfTest, file_kb: int,
                      outcome: MaxRateOutcome) -> dict[str, tuple[float, str]]:
    """The metrics of the highest sustained step (else the last served one), plus
    ``max_rate_rps``, ``steps`` and ``overloaded_steps``. Raises :class:`HvbenchError`
    when no probe ran, or none could be served (every one overloaded)."""
    if not outcome.steps:
        raise HvbenchError(f"web phase {file_kb}kB: timeout_s {spec.timeout_s:g} s "
                           "leaves no room for one httperf run")
    served = outcome.served
    if not served:
        tried = "; ".join(s.overload for s in outcome.steps)
        raise HvbenchError(f"web phase {file_kb}kB: no rate could be served: {tried}")
    chosen = outcome.chosen
    # a chosen step always carries a result (served); this keeps mypy exact
    if chosen is None or chosen.result is None:
        raise HvbenchError("internal: a sustained step without a report")
    metrics = web_metrics(chosen.result, chosen.rate)
    metrics["max_rate_rps"] = (outcome.max_rate * spec.calls_per_conn, "req/s")
    metrics["steps"] = (float(len(outcome.steps)), "count")
    metrics["overloaded_steps"] = (float(len(outcome.steps) - len(served)), "count")
    return metrics


def run_web_phase(spec: HttperfTest, file_kb: int, client: Endpoint,
                  server: Endpoint) -> PhaseOutcome:
    """The ``{file_kb}kB`` phase: httperf on ``client`` against the lighttpd that
    :func:`serve_web` runs on ``server``.

    ``fixed``: one run at ``spec.rate``. ``max-rate``: :func:`max_rate_search`; the
    metrics are those of the highest sustained step (else the last served step) plus
    ``max_rate_rps``, ``steps`` and ``overloaded_steps``. Each run gets duration +
    reply timeout + 30 s; a run that outlives it counts as above the maximum rate, and
    no run starts that could end after ``spec.timeout_s``. Raises :class:`CommandError`
    if httperf fails, :class:`HvbenchError` if no rate at all could be served, and
    :class:`ProbeOverloaded` if the fixed-rate run outlives its timeout.
    """
    run = _Httperf(spec, file_kb, client, server)
    focus: tuple[float, float] | None = None
    if spec.mode == "fixed":
        rate = absolute(spec.rate)
        metrics = web_metrics(run(rate), rate)
    else:
        outcome = max_rate_search(
            run, start=spec.start_rate, factor=spec.rate_factor, limit=spec.max_rate,
            max_error_pct=spec.max_error_pct, min_achieved_ratio=spec.min_achieved_ratio,
            keep_going=run.time_left)
        metrics = _max_rate_metrics(spec, file_kb, outcome)
        chosen = outcome.chosen
        # The window spans every probe; the evidence that explains the headline is the
        # chosen probe's (a vCPU saturated at the highest rate reads half idle over a
        # search that also ran the low rates).
        focus = (chosen.started, chosen.ended) if chosen is not None else None
    return PhaseOutcome(phase=f"{file_kb}kB", metrics=metrics,
                           raw="\n".join(run.reports), raw_kind="httperf-text",
                           focus=focus)
