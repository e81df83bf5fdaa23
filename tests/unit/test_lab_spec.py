"""LabSpec / LabHostSpec validation, read through spec_error as a study would show it."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from hvbench.errors import SpecError
from hvbench.model.lab import LabHostSpec, LabSpec, parse_rate
from hvbench.model.spec import spec_error


def _error(data: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as info:
        LabSpec.model_validate(data)
    err = spec_error(info.value, "study.toml: lab")
    assert isinstance(err, SpecError)
    return str(err)


@pytest.mark.parametrize(
    ("text", "bits"),
    [("100mbit", 100_000_000), ("1gbit", 10**9), ("500kbit", 500_000), ("1.5Mbit", 1_500_000),
     ("64000bit", 64_000), (" 2GBIT ", 2 * 10**9)],
)
def test_parse_rate(text: str, bits: int) -> None:
    assert parse_rate(text) == bits


@pytest.mark.parametrize("bad", ["100", "100mbps", "fast", "mbit", "-1mbit", "1e3kbit"])
def test_parse_rate_rejects_forms(bad: str) -> None:
    with pytest.raises(ValueError, match="expected a number and a unit"):
        parse_rate(bad)


@pytest.mark.parametrize("bad", ["1kbit", "0mbit", "101gbit"])
def test_parse_rate_rejects_range(bad: str) -> None:
    with pytest.raises(ValueError, match="between 10kbit and 100gbit"):
        parse_rate(bad)


def test_host_defaults_and_properties() -> None:
    plain = LabHostSpec(name="web")
    assert (plain.rate, plain.delay_ms, plain.loss_pct) == (None, 0.0, 0.0)
    assert plain.rate_bits is None and not plain.shaped and not plain.needs_netem
    shaped = LabHostSpec(name="db2", rate="100MBit")
    assert shaped.rate == "100mbit" and shaped.rate_bits == 10**8
    assert shaped.shaped and not shaped.needs_netem
    assert LabHostSpec(name="x", delay_ms=5).needs_netem
    assert LabHostSpec(name="x", loss_pct=0.1).needs_netem


def test_spec_is_frozen_and_strict() -> None:
    spec = LabSpec(hosts=(LabHostSpec(name="a"),))
    with pytest.raises(ValidationError):
        spec.subnet = "10.1.2.0/24"
    assert "hosts[0].speed: unknown field" in _error({"hosts": [{"name": "a", "speed": 1}]})
    assert spec.host("a") == LabHostSpec(name="a") and spec.host("b") is None


@pytest.mark.parametrize("name", ["Web", "1web", "web-1", "abcdefghijk", ""])
def test_bad_host_names(name: str) -> None:
    msg = _error({"hosts": [{"name": name}]})
    assert msg.startswith("study.toml: lab: hosts[0].name: host name")
    assert "1 to 10 lowercase letters and digits" in msg


@pytest.mark.parametrize("name", ["host", "guest"])
def test_reserved_names(name: str) -> None:
    msg = _error({"hosts": [{"name": name}]})
    assert f"hosts: host name {name!r} is reserved" in msg


def test_duplicate_names() -> None:
    msg = _error({"hosts": [{"name": "a"}, {"name": "b"}, {"name": "a"}]})
    assert msg == "study.toml: lab: hosts: host name 'a' appears twice"


def test_shaping_ranges_and_rate_message() -> None:
    assert "hosts[0].rate: rate '9 mbit'" in _error({"hosts": [{"name": "a", "rate": "9 mbit"}]})
    assert "hosts[0].delay_ms" in _error({"hosts": [{"name": "a", "delay_ms": -1}]})
    assert "hosts[0].loss_pct" in _error({"hosts": [{"name": "a", "loss_pct": 101}]})
    msg = _error({"hosts": [{"name": "a", "rate": "1gbit", "loss_pct": -1}]})
    assert "greater than or equal to 0" in msg


@pytest.mark.parametrize("subnet", ["10.213.7.0/24", "172.20.1.0/24", "192.168.99.0/24"])
def test_good_subnets(subnet: str) -> None:
    assert LabSpec(subnet=subnet).subnet == subnet


@pytest.mark.parametrize(
    ("subnet", "expected"),
    [("10.213.7.5/24", "expected an IPv4 network such as"),
     ("10.213.0.0/16", "must be a /24 network"),
     ("8.8.8.0/24", "must lie inside a private range"),
     ("172.32.0.0/24", "must lie inside a private range"),
     ("banana", "expected an IPv4 network such as")],
)
def test_bad_subnets(subnet: str, expected: str) -> None:
    msg = _error({"subnet": subnet})
    assert msg.startswith("study.toml: lab: subnet: subnet ") and expected in msg


@pytest.mark.parametrize("mtu", [576, 1500, 9000])
def test_good_mtus(mtu: int) -> None:
    assert LabSpec(mtu=mtu).mtu == mtu
    assert LabSpec().mtu == 1500


@pytest.mark.parametrize("mtu", [575, 9001, 0, "9000", True, 1500.5])
def test_bad_mtus(mtu: object) -> None:
    msg = _error({"mtu": mtu})
    assert msg.startswith("study.toml: lab: mtu: mtu ")
    assert "expected a whole number of bytes from 576 to 9000" in msg
