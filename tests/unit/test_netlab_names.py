"""Lab names and the address plan (pure)."""

from __future__ import annotations

import re

import pytest

from hvbench.netlab import names


def test_names_carry_prefix_and_tag_and_fit_ifnamsiz() -> None:
    tag = names.random_tag()
    assert re.fullmatch(r"[0-9a-f]{6}", tag)
    assert names.random_tag() != names.random_tag()
    bridge, veth = names.bridge_name(tag), names.veth_name(tag, 9999)
    assert bridge == f"hvb-b{tag}" and veth == f"hvb-v{tag}9999"
    assert len(bridge) <= 15 and len(veth) == 15
    assert names.netns_name(tag, "web") == f"hvb-{tag}-web"
    assert all(names.is_lab_name(n) for n in (bridge, veth, names.netns_name(tag, "a")))
    assert not names.is_lab_name("hvbtest-decoy")


def test_names_never_collide_with_taps() -> None:
    # Taps are hvb-t<hex>...; a tag is hex, so bridge and veth names never start hvb-t.
    assert not names.bridge_name("abcdef").startswith("hvb-t")
    assert not names.veth_name("abcdef", 0).startswith("hvb-t")


def test_too_long_interface_name() -> None:
    with pytest.raises(ValueError, match="longer than 15"):
        names.veth_name("abcdef", 10000)


def test_address_plan() -> None:
    plan = names.AddressPlan("10.213.7.0/24")
    assert (plan.subnet, plan.prefix_len, plan.bridge_address) == ("10.213.7.0/24", 24,
                                                                  "10.213.7.1")
    assert plan.lab_host_address(0) == "10.213.7.10"
    assert plan.lab_host_address(89) == "10.213.7.99"
    with pytest.raises(ValueError, match="at most 90 hosts"):
        plan.lab_host_address(90)
    guests = list(plan.guest_addresses())
    assert guests[0] == "10.213.7.100" and guests[-1] == "10.213.7.254" and len(guests) == 155
    assert plan.with_prefix("10.213.7.10") == "10.213.7.10/24"


@pytest.mark.parametrize("bad", ["10.213.7.0/16", "10.213.7.1/24"])
def test_address_plan_rejects(bad: str) -> None:
    with pytest.raises(ValueError):
        names.AddressPlan(bad)


def test_overlaps() -> None:
    used = ["127.0.0.1/8", "192.0.2.2/24", "fe80::1/64", "junk", "10.213.5.77"]
    assert names.overlaps("192.0.2.0/24", used)
    assert names.overlaps("10.213.5.0/24", used)  # a single address (host route)
    assert not names.overlaps("10.213.6.0/24", used)
    assert names.overlaps("10.213.6.0/24", ["10.0.0.0/8"])


def test_choose_subnet_skips_used_and_wraps() -> None:
    assert names.choose_subnet([], start=0) == "10.213.0.0/24"
    assert names.choose_subnet(["default", "10.213.0.1/24"], start=0) == "10.213.1.0/24"
    assert names.choose_subnet(["10.213.255.0/24"], start=255) == "10.213.0.0/24"
    assert names.choose_subnet([], start=300) == "10.213.44.0/24"
    assert names.choose_subnet(["10.213.0.0/17"], start=3) == "10.213.128.0/24"
    assert names.choose_subnet(["10.0.0.0/8"]) is None
