"""iperf3: argv builders, a parser of the client's ``--json`` document, and one run.

The client always runs on the platform under test and the server on its peer, so
``direction = "tx"`` (the platform sends) is a plain client and ``"rx"`` adds ``-R``.
iperf3's ``cpu_utilization_percent`` is measured by each iperf3 process on its own
system (user + system time over wall time, in % of one CPU): ``host_total`` is the
client's, hence the platform's, ``remote_total`` the server's, hence the peer's.

Pure except :func:`run_iperf3`; the parser is unit-tested on output of real runs.
"""

from __future__ import annotations

import contextlib
import json
import re
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from hvbench.errors import CommandError, HvbenchError, SpecError
from hvbench.workloads.endpoints import Endpoint, start_server
from hvbench.workloads.outcome import PhaseOutcome


class Iperf3Test(Protocol):
    """What one iperf3 test is run with (the network kind's spec is one; a neighbour's
    load is an :class:`Iperf3Load`)."""

    @property
    def direction(self) -> Literal["tx", "rx"]: ...
    @property
    def protocol(self) -> Literal["tcp", "udp"]: ...
    @property
    def streams(self) -> int: ...
    @property
    def duration_s(self) -> float: ...
    @property
    def omit_s(self) -> float: ...
    @property
    def udp_bitrate(self) -> str | None: ...
    @property
    def bitrate(self) -> str | None: ...
    @property
    def port(self) -> int: ...
    @property
    def timeout_s(self) -> float: ...


@dataclass(frozen=True)
class Iperf3Load:
    """An :class:`Iperf3Test` given field by field (a scenario neighbour's load)."""

    direction: Literal["tx", "rx"]
    duration_s: float
    port: int
    protocol: Literal["tcp", "udp"] = "tcp"
    streams: int = 1
    omit_s: float = 0.0
    udp_bitrate: str | None = None
    bitrate: str | None = None
    timeout_s: float = 300.0


#: iperf3 --connect-timeout, milliseconds.
CONNECT_TIMEOUT_MS = 5000
_BITRATE_RE = re.compile(r"^\d+(\.\d+)?[KMGTkmgt]?$")


@dataclass(frozen=True)
class Iperf3Result:
    """The numbers of one iperf3 test, as the client reported them."""

    protocol: str               # "TCP" or "UDP"
    reverse: bool               # -R: the server sent
    streams: int
    seconds: float              # measured time (omitted intervals excluded)
    mbit_s: float               # receiver goodput
    sender_mbit_s: float
    bytes_received: int
    bytes_sent: int
    retransmits: int | None     # TCP only
    lost_pct: float | None      # UDP only
    jitter_ms: float | None     # UDP only
    client_cpu_pct: float       # cpu_utilization_percent.host_total
    server_cpu_pct: float       # cpu_utilization_percent.remote_total
    intervals: list[tuple[float, dict[str, float]]] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


def server_argv(bind_address: str, port: int) -> list[str]:
    """``iperf3 -s`` bound to ``bind_address:port``; --forceflush so its log is current."""
    return ["iperf3", "-s", "-B", bind_address, "-p", str(port), "--forceflush"]


def client_argv(
    spec: Iperf3Test,
    server_address: str,
    server_port: int,
    *,
    bind_address: str | None = None,
    connect_timeout_ms: int = CONNECT_TIMEOUT_MS,
) -> list[str]:
    """The client argv for ``spec`` (always ``--json``).

    Raises :class:`SpecError` for a ``udp_bitrate`` or ``bitrate`` iperf3 would not
    read as a rate.
    """
    argv = ["iperf3", "-c", server_address, "-p", str(server_port), "--json",
            "-t", f"{spec.duration_s:g}", "-O", f"{spec.omit_s:g}",
            "-P", str(spec.streams), f"--connect-timeout={connect_timeout_ms}"]
    if bind_address is not None and bind_address != "0.0.0.0":  # noqa: S104
        argv += ["-B", bind_address]
    if spec.direction == "rx":
        argv.append("-R")
    if spec.protocol == "udp":
        argv.append("-u")
    field, rate = (("udp_bitrate", spec.udp_bitrate) if spec.protocol == "udp"
                   else ("bitrate", spec.bitrate))
    if rate is not None:
        if not _BITRATE_RE.match(str(rate)):
            raise SpecError(f"{field}: expected bits/s such as 1G or 500M, got {rate!r}")
        argv += ["-b", str(rate)]
    return argv


def _load(text: str) -> dict[str, Any]:
    start = text.find("{")
    try:
        doc = json.loads(text[start:]) if start >= 0 else None
    except ValueError as exc:
        raise HvbenchError(f"iperf3 output is not JSON: {text[:200]!r}") from exc
    if not isinstance(doc, dict):
        raise HvbenchError(f"iperf3 output is not a JSON object: {text[:200]!r}")
    if doc.get("error"):
        raise HvbenchError(f"iperf3 reported an error: {doc['error']!r}")
    if not doc.get("end"):
        raise HvbenchError(f"iperf3 output has no end summary: {text[:200]!r}")
    return doc


def _series(doc: dict[str, Any]) -> list[tuple[float, dict[str, float]]]:
    """Per-interval sums of the measured (not omitted) intervals: (end time, values)."""
    out = []
    for interval in doc.get("intervals", []):
        total = interval.get("sum", {})
        if total.get("omitted"):
            continue
        values = {"mbit_s": float(total.get("bits_per_second", 0.0)) / 1e6}
        for key, name in (("retransmits", "retransmits"), ("lost_percent", "lost_pct")):
            if key in total:
                values[name] = float(total[key])
        out.append((float(total.get("end", 0.0)), values))
    return out


def parse_iperf3_json(text: str) -> Iperf3Result:
    """Parse the client's ``--json`` document (warnings before it are skipped).

    Raises :class:`HvbenchError` quoting iperf3's own ``"error"`` field when the test
    failed, or when the text holds no complete iperf3 document.
    """
    doc = _load(text)
    end, test = doc["end"], doc.get("start", {}).get("test_start", {})
    protocol = str(test.get("protocol", "TCP")).upper()
    try:
        sent, received = end["sum_sent"], end["sum_received"]
    except KeyError as exc:
        raise HvbenchError(f"iperf3 end summary lacks {exc.args[0]}") from exc
    udp = protocol == "UDP"
    cpu = end.get("cpu_utilization_percent", {})
    return Iperf3Result(
        protocol=protocol, reverse=bool(test.get("reverse", 0)),
        streams=int(test.get("num_streams", 1)), seconds=float(received.get("seconds", 0)),
        mbit_s=float(received["bits_per_second"]) / 1e6,
        sender_mbit_s=float(sent["bits_per_second"]) / 1e6,
        bytes_received=int(received["bytes"]), bytes_sent=int(sent["bytes"]),
        retransmits=None if udp else int(sent.get("retransmits", 0)),
        lost_pct=float(received.get("lost_percent", 0.0)) if udp else None,
        jitter_ms=float(received.get("jitter_ms", 0.0)) if udp else None,
        client_cpu_pct=float(cpu.get("host_total", 0.0)),
        server_cpu_pct=float(cpu.get("remote_total", 0.0)),
        intervals=_series(doc), raw=doc,
    )


def iperf3_error(stdout: str, stderr: str, server_log: str = "") -> str:
    """iperf3's own words for a failure (pure): the ``"error"`` field of its JSON
    document, else its ``iperf3: error - ...`` lines on stderr; then the server's error
    lines, if its log has any. Empty when iperf3 said nothing useful."""
    said: list[str] = []
    start = stdout.find("{")
    try:
        doc = json.loads(stdout[start:]) if start >= 0 else None
    except ValueError:
        doc = None
    if isinstance(doc, dict) and doc.get("error"):
        said.append(f"iperf3: {doc['error']}")
    else:
        said += [line.strip() for line in stderr.splitlines() if "error" in line.lower()]
    said += [f"server: {line.strip()}" for line in server_log.splitlines()
             if "iperf3: error" in line]
    return "\n".join(list(dict.fromkeys(said))[-5:])


def iperf3_metrics(result: Iperf3Result) -> dict[str, tuple[float, str]]:
    """The rows of one test; the client is the platform, the server its peer."""
    metrics: dict[str, tuple[float, str]] = {
        "mbit_s": (result.mbit_s, "Mbit/s"),
        "sender_mbit_s": (result.sender_mbit_s, "Mbit/s"),
        "bytes": (float(result.bytes_received), "B"),
        "cpu_platform_pct": (result.client_cpu_pct, "%"),
        "cpu_peer_pct": (result.server_cpu_pct, "%"),
        "retransmits": (float(result.retransmits or 0), "count"),
    }
    if result.lost_pct is not None:
        metrics["lost_pct"] = (result.lost_pct, "%")
    if result.jitter_ms is not None:
        metrics["jitter_ms"] = (result.jitter_ms, "ms")
    return metrics


def run_iperf3(spec: Iperf3Test, client: Endpoint, server: Endpoint, *,
               window: AbstractContextManager[object] | None = None) -> PhaseOutcome:
    """One iperf3 test: the server on ``server`` (bound to its ``bind_address`` and
    ``spec.port``), the client (the platform under test) on ``client``. ``window`` is
    entered just around the client's run (host monitors sample exactly the transfer,
    not the server's start and stop).

    The client gets ``spec.timeout_s`` seconds; the server is stopped in ``finally``.
    Raises :class:`CommandError` naming the command with the server's log when the
    server does not start (e.g. the port is taken) or the client fails or reports an
    error; :class:`GuestError` if a guest fails.
    """
    address, port = server.reach(spec.port)
    argv = client_argv(spec, address, port, bind_address=client.bind_address)
    handle = start_server(server, server_argv(server.bind_address, spec.port),
                          name=f"iperf3-server-{server.name}", port=spec.port)
    try:
        with window or contextlib.nullcontext():
            done = client.executor.exec(argv, timeout=spec.timeout_s)
        text = done.text()
        try:
            result = parse_iperf3_json(text)
        except HvbenchError as exc:
            stderr, server_log = done.stderr.decode(errors="replace"), handle.log_tail()
            output = f"{exc}\n{stderr}\n--- server {handle.name} log ---\n{server_log}"
            raise CommandError(argv, done.exit_code, output,
                               f"iperf3 client on {client.name}",
                               tool_error=iperf3_error(text, stderr, server_log)) from exc
    finally:
        handle.stop()
    return PhaseOutcome(phase=spec.direction, metrics=iperf3_metrics(result), raw=text,
                           raw_kind="iperf3-json", series=result.intervals)
