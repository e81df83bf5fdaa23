"""tc argv of a lab link's shaping (pure)."""

from __future__ import annotations

import pytest

from hvbench.model.lab import LabHostSpec
from hvbench.netlab import tc


def test_tbf_burst_and_limit_sizing() -> None:
    # 10 ms of the rate, at least 16 KiB; the queue 4 bursts, at least 128 KiB.
    assert tc.tbf_params(10**8) == tc.TbfParams(10**8, 125_000, 500_000)
    assert tc.tbf_params(10**9) == tc.TbfParams(10**9, 1_250_000, 5_000_000)
    assert tc.tbf_params(500_000) == tc.TbfParams(500_000, 16_384, 131_072)
    assert tc.tbf_params(10_000_001).burst_bytes == 16_384  # 12_500 B < 16 KiB
    small = tc.tbf_params(20_000_000)
    assert small.burst_bytes == 25_000 and small.limit_bytes == 131_072


def test_rate_only_is_one_tbf_per_end() -> None:
    spec = LabHostSpec(name="web", rate="100mbit")
    assert tc.shaping_commands(spec, "hvb-vabcdef0") == [
        ["tc", "qdisc", "add", "dev", "hvb-vabcdef0", "root", "handle", "1:", "tbf",
         "rate", "100000000bit", "burst", "125000", "limit", "500000"],
    ]
    both = tc.link_shaping_commands(spec, "hvb-vabcdef0", "hvb-abcdef-web", "eth0")
    assert len(both) == 2
    assert both[1][:4] == ["tc", "-n", "hvb-abcdef-web", "qdisc"]
    assert both[1][5:7] == ["dev", "eth0"]


def test_unshaped_needs_nothing() -> None:
    assert tc.link_shaping_commands(LabHostSpec(name="a"), "v", "ns", "eth0") == []


def test_delay_only_is_netem_alone() -> None:
    spec = LabHostSpec(name="far", delay_ms=20)
    # 10 Gbit/s assumed: 1.25e9 B/s * 0.02 s * 1.5 / 1514 B = 24768.8 -> 24769 packets
    assert tc.shaping_commands(spec, "v") == [
        ["tc", "qdisc", "add", "dev", "v", "root", "handle", "1:", "netem",
         "delay", "20000us", "limit", "24769"],
    ]


def test_netem_parent_with_tbf_child_and_loss() -> None:
    spec = LabHostSpec(name="lossy", rate="1gbit", delay_ms=0.25, loss_pct=0.5)
    cmds = tc.shaping_commands(spec, "eth0", "ns1")
    assert cmds == [
        ["ip", "-n", "ns1", "link", "set", "dev", "eth0", "gso_max_segs", "1"],
        ["tc", "-n", "ns1", "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "netem",
         "delay", "250us", "loss", "0.5%", "limit", "1000"],
        ["tc", "-n", "ns1", "qdisc", "add", "dev", "eth0", "parent", "1:1", "handle", "10:",
         "tbf", "rate", "1000000000bit", "burst", "1250000", "limit", "5000000"],
    ]


@pytest.mark.parametrize(
    ("loss", "text"), [(0.0001, "0.0001%"), (12.0, "12%"), (100.0, "100%"), (1e-05, "0.00001%")]
)
def test_loss_is_never_in_exponent_notation(loss: float, text: str) -> None:
    args = tc.netem_args(LabHostSpec(name="a", loss_pct=loss))
    assert args == ["netem", "loss", text, "limit", "1000"]


def test_netem_limit_covers_the_delay_at_the_rate() -> None:
    # 1 Gbit/s for 100 ms: 12.5 MB in flight, 1.5-fold, in 1514-byte packets.
    assert tc.netem_limit(LabHostSpec(name="a", rate="1gbit", delay_ms=100)) == 12385
    assert tc.netem_limit(LabHostSpec(name="a", rate="10mbit", delay_ms=10)) == 1000


def test_netem_probe_and_unknown_qdisc() -> None:
    argv = tc.netem_probe_argv()
    assert argv[:2] == ["unshare", "--net"] and "netem" in argv
    assert tc.is_unknown_qdisc("Error: Specified qdisc kind is unknown.\n")
    assert not tc.is_unknown_qdisc("RTNETLINK answers: Operation not permitted")
