"""/proc/net/dev parsing and rates, on snapshots stored from this host.

netdev-1.txt and netdev-2.txt were taken 0.43 s apart around ``iperf3 -c -n 20M`` from
the root namespace to lab host a (its link's root end hvb-v0d44640) and 3 pings from lab
host b (hvb-v0d44641) to the bridge hvb-b0d4464; netdev-3.txt right after b's veth was
deleted. (Other hvb- devices belonged to other work on the machine.) Deltas by hand:

    hvb-v0d44640  rx 12002-237 = 11765 B, 177-4 = 173 pkts;
                  tx 19368462-508 = 19367954 B, 379-8 = 371 pkts
    hvb-v0d44641  rx 434-140 = 294 B, 3 pkts; tx 620-182 = 438 B, 5 pkts
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hvbench.errors import HostError, SpecError
from hvbench.monitors import NetDevSampler
from hvbench.monitors.netdev import (
    NET_METRICS,
    NetDevCounters,
    interface_window,
    parse_net_dev,
    rates,
    window_metrics,
)
from hvbench.monitors.sampler import MonitorSet

FIXTURES = Path(__file__).parent.parent / "fixtures" / "monitors"
A, B, BR = "hvb-v0d44640", "hvb-v0d44641", "hvb-b0d4464"


def _raw(n: int) -> bytes:
    return (FIXTURES / f"netdev-{n}.txt").read_bytes()


def _parsed(n: int) -> dict[str, NetDevCounters]:
    return parse_net_dev(_raw(n).decode())


def test_parse_every_interface_and_all_16_counters() -> None:
    stats = _parsed(1)
    assert {"lo", "eth0", "ifb0", BR, A, B} <= set(stats)
    assert stats["eth0"] == NetDevCounters(296057411, 9207, 0, 0, 0, 0, 0, 0,
                                           359682, 4111, 0, 0, 0, 0, 0, 0)
    assert stats["hvb-capbr"].rx_multicast == 12
    assert set(parse_net_dev(_raw(1).decode(), {A, "nope"})) == {A}


def test_parse_lines_without_space_after_the_colon_and_bad_lines() -> None:
    text = "Inter-|\n face |bytes\nverylongname0:123 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15\n"
    counters = parse_net_dev(text)["verylongname0"]
    assert counters.rx_bytes == 123 and counters.tx_compressed == 15
    with pytest.raises(ValueError, match="expected 16 counters"):
        parse_net_dev("eth0: 1 2 3\n")
    with pytest.raises(ValueError, match="invalid literal"):
        parse_net_dev("eth0: x 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15\n")


def test_rates_of_the_stored_interval() -> None:
    m = window_metrics([(0.0, _parsed(1)), (0.5, _parsed(2))], {A: A, B: "b"})
    assert m[f"{A}.tx_mbit_s"] == pytest.approx(19367954 * 8 / 1e6 / 0.5)
    assert m[f"{A}.rx_mbit_s"] == pytest.approx(11765 * 8 / 1e6 / 0.5)
    assert (m[f"{A}.tx_pps"], m[f"{A}.rx_pps"]) == (742.0, 346.0)
    assert (m[f"{A}.tx_bytes"], m[f"{A}.rx_bytes"]) == (19367954.0, 11765.0)
    assert (m["b.rx_bytes"], m["b.tx_bytes"], m["b.rx_pps"], m["b.tx_pps"]) == (
        294.0, 438.0, 6.0, 10.0)
    assert all(m[f"{A}.{k}"] == 0.0 for k in ("rx_drop_s", "tx_drop_s", "rx_err_s",
                                               "tx_err_s"))
    assert {k.split(".", 1)[1] for k in m if k.startswith(A)} == set(NET_METRICS)


def test_drops_errors_and_counter_reset() -> None:
    a = NetDevCounters(1000, 10, 1, 2, 0, 0, 0, 0, 5000, 50, 0, 4, 0, 0, 0, 0)
    b = NetDevCounters(3000, 30, 3, 6, 0, 0, 0, 0, 9000, 90, 2, 8, 0, 0, 0, 0)
    m = rates(interface_window([(0.0, {"x": a}), (2.0, {"x": b})], "x")[0], 2.0)
    assert (m["rx_err_s"], m["rx_drop_s"], m["tx_err_s"], m["tx_drop_s"]) == (1, 2, 1, 2)
    # Re-created under the same name: its counters restart from zero.
    c = NetDevCounters(100, 1, 0, 0, 0, 0, 0, 0, 200, 2, 0, 0, 0, 0, 0, 0)
    total, seconds = interface_window([(0.0, {"x": a}), (1.0, {"x": b}), (2.0, {"x": c})], "x")
    assert seconds == 2.0 and total.rx_bytes == 2000 + 100 and total.tx_packets == 40 + 2


def test_sampler_report_survives_a_vanished_interface() -> None:
    sampler = NetDevSampler({A: "a", B: "b", BR: "bridge", "hvb-gone": "gone"})
    t0 = 100.0
    samples = [(t0, _raw(1)), (t0 + 0.5, _raw(2)), (t0 + 1.0, _raw(3))]
    report = sampler.report(samples, t0)
    s = report.summary
    # a: the whole second (its counters did not move in the last half).
    assert s["a.tx_bytes"] == 19367954.0 and s["a.tx_mbit_s"] == pytest.approx(19367954 * 8e-6)
    # b vanished: its numbers cover its lifetime (the first half-second) only.
    assert s["b.rx_bytes"] == 294.0 and s["b.rx_pps"] == 6.0
    assert "gone.rx_bytes" not in s and "bridge.tx_bytes" in s
    assert report.error == "net: hvb-v0d44641: vanished after 0.500 s; hvb-gone: not found"
    assert [t for t, _ in report.series] == [0.5, 1.0]
    assert "b.rx_bytes" in report.series[0][1] and "b.rx_bytes" not in report.series[1][1]
    assert report.series[1][1]["a.tx_bytes"] == 0.0


def test_sampler_on_a_stored_file_and_its_errors(tmp_path: Path) -> None:
    source = str(FIXTURES / "netdev-1.txt")
    with MonitorSet([NetDevSampler([A, "lo"], source=source)], hz=50) as monitors:
        pass
    result = monitors.result
    assert result is not None and result.errors == {}
    assert result.summary[f"net.{A}.rx_bytes"] == 0.0 and "net.lo.tx_mbit_s" in result.summary
    missing = NetDevSampler(["nope0"], source=source)
    with pytest.raises(HostError, match="none of the interfaces"):
        missing.open()
    with pytest.raises(HostError, match="sampled before open"):
        missing.sample()
    with pytest.raises(SpecError, match="labels must be unique"):
        NetDevSampler({"a": "x", "b": "x"})
    bad = tmp_path / "dev"
    bad.write_text(_raw(1).decode())
    sampler = NetDevSampler([A], source=str(bad))
    report = sampler.report([(0.0, _raw(1)), (1.0, b"hvb-v0d44640: 1 2\n")], 0.0)
    assert report.error is not None and "undecodable sample at 1.000 s" in report.error
