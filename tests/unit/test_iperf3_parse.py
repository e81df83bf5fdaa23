"""iperf3: argv builders and the JSON parser, on output captured from real iperf3 3.12
runs between the root namespace and a network namespace on this machine."""

from __future__ import annotations

from pathlib import Path

import pytest

from hvbench.errors import HvbenchError
from hvbench.kinds.network.spec import NetworkWorkloadSpec
from hvbench.workloads.iperf3 import (
    client_argv,
    iperf3_metrics,
    parse_iperf3_json,
    server_argv,
)

FIXTURES = Path(__file__).parent.parent / "fixtures" / "net"


def load(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_tcp_two_streams() -> None:
    result = parse_iperf3_json(load("iperf3-tcp-P2.json"))
    assert result.protocol == "TCP" and not result.reverse and result.streams == 2
    assert result.mbit_s == pytest.approx(11560742524.814903 / 1e6)
    assert result.sender_mbit_s == pytest.approx(11565047334.44693 / 1e6)
    assert result.bytes_received == 2893545472 and result.bytes_sent == 2891448320
    assert result.retransmits == 760
    assert result.lost_pct is None and result.jitter_ms is None
    assert result.client_cpu_pct == pytest.approx(51.70168899665275)
    assert result.server_cpu_pct == pytest.approx(40.39080160478786)


def test_omitted_intervals_are_left_out_of_the_series() -> None:
    result = parse_iperf3_json(load("iperf3-tcp-P2.json"))
    # -t 2 -O 1: three intervals, the first omitted.
    assert len(result.raw["intervals"]) == 3
    assert len(result.intervals) == 2
    t, values = result.intervals[0]
    assert t == pytest.approx(1.001771)
    assert values["mbit_s"] > 0 and "retransmits" in values


def test_tcp_reverse() -> None:
    result = parse_iperf3_json(load("iperf3-tcp-reverse.json"))
    assert result.reverse
    assert result.mbit_s == pytest.approx(12474181195.62049 / 1e6)
    # The retransmits are the server's (the sender's), reported to the client.
    assert result.retransmits == 242


def test_udp_with_loss() -> None:
    result = parse_iperf3_json(load("iperf3-udp.json"))
    assert result.protocol == "UDP" and result.retransmits is None
    # Goodput is what arrived, below what was sent.
    assert result.mbit_s == pytest.approx(570353393.75269 / 1e6)
    assert result.sender_mbit_s == pytest.approx(628102750.3559943 / 1e6)
    assert result.lost_pct == pytest.approx(9.16969053966103)
    assert result.jitter_ms == pytest.approx(0.00842939761222615)
    assert "lost_pct" not in result.intervals[0][1]  # the client sends; no loss view


def test_metrics_map_cpu_to_platform_and_peer() -> None:
    metrics = iperf3_metrics(parse_iperf3_json(load("iperf3-udp.json")))
    assert metrics["cpu_platform_pct"][0] == pytest.approx(60.68895286559902)
    assert metrics["cpu_peer_pct"][0] == pytest.approx(34.4969146833083)
    assert metrics["cpu_platform_pct"][1] == metrics["cpu_peer_pct"][1] == "%"
    assert metrics["mbit_s"][1] == "Mbit/s" and metrics["bytes"] == (142629200.0, "B")
    assert metrics["lost_pct"][1] == "%" and metrics["jitter_ms"][1] == "ms"
    tcp = iperf3_metrics(parse_iperf3_json(load("iperf3-tcp-P2.json")))
    assert "lost_pct" not in tcp and tcp["retransmits"] == (760.0, "count")


def test_iperf3_error_document_is_quoted() -> None:
    with pytest.raises(HvbenchError, match="unable to connect to server: Connection refused"):
        parse_iperf3_json(load("iperf3-error.json"))


@pytest.mark.parametrize("text", ["", "iperf3: error - bad option", "[1, 2]", "{\"start\": {}"])
def test_garbage_is_refused(text: str) -> None:
    with pytest.raises(HvbenchError):
        parse_iperf3_json(text)


def test_warnings_before_the_document_are_skipped() -> None:
    text = "warning: something\n" + load("iperf3-tcp-reverse.json")
    assert parse_iperf3_json(text).reverse


def test_client_argv_tcp_tx() -> None:
    spec = NetworkWorkloadSpec(duration_s=5, omit_s=1, streams=4)
    argv = client_argv(spec, "10.0.0.2", 5201, bind_address="10.0.0.1")
    assert argv[:6] == ["iperf3", "-c", "10.0.0.2", "-p", "5201", "--json"]
    assert argv[argv.index("-t") + 1] == "5" and argv[argv.index("-O") + 1] == "1"
    assert argv[argv.index("-P") + 1] == "4" and argv[argv.index("-B") + 1] == "10.0.0.1"
    assert "--connect-timeout=5000" in argv
    assert "-R" not in argv and "-u" not in argv


def test_client_argv_udp_rx() -> None:
    spec = NetworkWorkloadSpec(direction="rx", protocol="udp", udp_bitrate="500M")
    argv = client_argv(spec, "10.0.0.2", 15201)
    assert "-R" in argv and "-u" in argv and argv[argv.index("-b") + 1] == "500M"
    assert "-B" not in argv and argv[argv.index("-p") + 1] == "15201"
    assert "-B" not in client_argv(spec, "10.0.0.2", 5201, bind_address="0.0.0.0")  # noqa: S104


def test_client_argv_tcp_ceiling_is_paced_per_stream() -> None:
    spec = NetworkWorkloadSpec(streams=2, bitrate="200M")
    argv = client_argv(spec, "10.0.0.2", 5201)
    assert "-u" not in argv and argv[argv.index("-b") + 1] == "200M"
    assert "-b" not in client_argv(NetworkWorkloadSpec(), "10.0.0.2", 5201)


def test_server_argv_binds() -> None:
    assert server_argv("10.0.0.1", 5202) == [
        "iperf3", "-s", "-B", "10.0.0.1", "-p", "5202", "--forceflush"]
