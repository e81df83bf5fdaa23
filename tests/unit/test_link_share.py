"""Lab link attribution (issue 23, item 2): the cell's bytes against the link's own
veth counters give its share; a link busy with others' traffic is a cause of its own
("shared-link"), with the other users' share as its evidence."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from hvbench.analysis.diagnosis import diagnose
from hvbench.analysis.resources import CellModel, link_share
from tests.unit.test_diagnosis import NET, abstained, model

#: The shaped link of lab host "server" (100 Mbit/s), 96 Mbit/s busy in its busier
#: direction; the guest's tap carries 24 of them.
LINK = {"net.server.rx_mbit_s": 2.0, "net.server.tx_mbit_s": 96.0,
        "net.guest-tap0.rx_mbit_s": 24.0, "net.guest-tap0.tx_mbit_s": 0.5}
NATIVE_NET = {"mbit_s": 95.0, "cpu_platform_pct": 20.0}


def test_share_from_the_tap_else_from_the_workload() -> None:
    tap = link_share({**NET, **LINK, "mbit_s": 23.0}, "server", 100.0)
    assert tap == {"res.net.link_busy_mbit": 92.0, "res.net.link_busy_pct": 92.0,
                   "res.net.cell_share": 0.25, "res.net.cell_share_source": 0.0}
    # A window twice the run: the window's means are half the run's rates; the share
    # is a ratio within the window, and the link's rate while the cell ran is its own
    # run rate over its share (what the planted shared link showed: iperf3 40.2 Mbit/s,
    # 21.5 on its tap and 61.4 on the veth over a window of 3.9 s for a 2 s run).
    diluted = {k: v / 2 for k, v in LINK.items()}
    half = link_share({**diluted, "mbit_s": 23.0}, "server", 100.0)
    assert half["res.net.cell_share"] == 0.25 and half["res.net.link_busy_pct"] == 92.0
    native = {k: v for k, v in LINK.items() if "tap" not in k}
    rate = link_share({"mbit_s": 48.0, **native}, "server", None)
    assert rate == {"res.net.link_busy_mbit": 96.0, "res.net.cell_share": 0.5,
                    "res.net.cell_share_source": 1.0}
    # A link that was not sampled (or no lab host named) gives nothing.
    assert link_share({"mbit_s": 48.0}, "server", 100.0) == {}
    assert link_share({**LINK, "mbit_s": 48.0}, None, 100.0) == {}


def _cell(values: Mapping[str, float], link: float | None = 100.0) -> CellModel:
    cell = model(values, native=NATIVE_NET, main="mbit_s", link=link)
    cell.derived.update(link_share(values, "server", link))
    return cell


def test_others_on_a_busy_link_are_a_shared_link() -> None:
    values = {**NET, **LINK, "mbit_s": 23.0}
    verdict = diagnose(_cell(values))
    assert verdict.dominant is not None and verdict.dominant.rule == "shared-link"
    first, second = verdict.dominant.evidence
    assert "moved 25 %" in first and "others moved 75 %" in first and "tap" in first
    assert "92 %" in second
    # The cell's own 23 Mbit/s is far from the shaped 100: not link-saturated.
    assert "link-saturated" not in {f.rule for f in verdict.contributing}


@pytest.mark.parametrize("change", [
    # The cell moved most of the link's bytes: its own traffic, no other user.
    {"net.guest-tap0.rx_mbit_s": 90.0},
    # The link is far from its shaped rate: others' traffic slows nobody.
    {"net.server.tx_mbit_s": 40.0, "net.guest-tap0.rx_mbit_s": 10.0, "mbit_s": 10.0},
])
def test_no_shared_link_when_mine_or_idle(change: dict[str, float]) -> None:
    values = {**NET, **LINK, "mbit_s": 23.0, **change}
    verdict = diagnose(_cell(values))
    named = {f.rule for f in [verdict.dominant, *verdict.contributing] if f is not None}
    assert "shared-link" not in named


def test_an_unshaped_link_abstains() -> None:
    values = {**NET, **LINK, "mbit_s": 23.0}
    assert "shared-link" in abstained(_cell(values, link=None))
