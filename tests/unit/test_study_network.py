"""Study files with a net lab, network and web workloads: expansion and every error."""

from __future__ import annotations

from pathlib import Path

import pytest

from hvbench.errors import SpecError
from hvbench.kinds.network.spec import NetworkWorkloadSpec
from hvbench.kinds.qemu.spec import QemuPlatformSpec
from hvbench.kinds.web.spec import WebWorkloadSpec
from hvbench.model.study import parse_study

EXAMPLES = Path(__file__).parents[2] / "examples"
HOST_RAM = 24 << 30

BASE = """
[study]
name = "net"
repetitions = 1

[lab]
[[lab.host]]
name = "client"
rate = "100mbit"

[[platform]]
kind = "native"

[[platform]]
kind = "qemu"
name = "vm"
nic = { model = ["virtio-net", "e1000"], backend = "tap" }

[[workload]]
kind = "network"
peer = ["host", "client", "guest"]
direction = ["tx", "rx"]
"""


def _parse(text: str) -> object:
    return parse_study(text, "net.toml", HOST_RAM)


def test_nic_shorthand_expands_and_peer_guest_has_no_native_cell() -> None:
    study = parse_study(BASE, "net.toml", HOST_RAM)
    assert [p.name for p in study.platforms] == ["native", "vm.virtio-net", "vm.e1000"]
    spec = study.platforms[2].spec
    assert isinstance(spec, QemuPlatformSpec)
    assert spec.vm.nics[0].model == "e1000" and spec.vm.nics[0].backend == "tap"
    assert len(study.workloads) == 6
    names = [c.name for c in study.cells]
    assert "native/iperf3.guest-tx" not in names and "native/iperf3.client-rx" in names
    assert "vm.e1000/iperf3.guest-rx" in names
    assert len(names) == 3 * 6 - 2
    assert study.lab is not None and study.lab.hosts[0].rate_bits == 100_000_000
    workload = study.workloads[0].spec
    assert isinstance(workload, NetworkWorkloadSpec) and workload.phase_list() == ("tx",)


def test_web_file_sizes_are_phases_not_variants() -> None:
    text = BASE.replace('kind = "network"\npeer = ["host", "client", "guest"]\n'
                        'direction = ["tx", "rx"]',
                        'kind = "web"\nfile_kb = [1, 70]\nrate = [10, 20]')
    study = parse_study(text, "web.toml", HOST_RAM)
    assert [w.name for w in study.workloads] == ["web.10", "web.20"]
    spec = study.workloads[0].spec
    assert isinstance(spec, WebWorkloadSpec) and spec.phase_list() == ("1kB", "70kB")


def test_a_network_workload_without_a_lab_section_gets_an_empty_lab() -> None:
    text = BASE.replace('[lab]\n[[lab.host]]\nname = "client"\nrate = "100mbit"\n', "")
    text = text.replace('peer = ["host", "client", "guest"]', 'peer = "host"')
    study = parse_study(text, "net.toml", HOST_RAM)
    assert study.lab is not None and study.lab.hosts == ()


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (('peer = ["host", "client", "guest"]', 'peer = "nowhere"'),
         "peer: expected host, guest or a [[lab.host]] name (client), got 'nowhere'"),
        (('rate = "100mbit"', 'rate = "fast"'), "net.toml:9: lab.host[0]: rate: rate 'fast'"),
        (('name = "client"', 'name = "native"'),
         "lab.host[0]: name: host name 'native' is reserved"),
        (('name = "client"', 'name = "host"'), "host name 'host' is reserved"),
        (('backend = "tap"', 'backend = "user"'), 'peer = "guest" needs backend = "tap"'),
        (('nic = { model = ["virtio-net", "e1000"], backend = "tap" }', 'memory_mib = 256'),
         "the guest has no NIC"),
        (('direction = ["tx", "rx"]', 'direction = "up"'), "direction: Input should be"),
        (('direction = ["tx", "rx"]', 'duration_s = 2\nomit_s = 3'), "omit_s (3) must be"),
        (('direction = ["tx", "rx"]', 'udp_bitrate = "1G"'), "udp_bitrate is only valid"),
        (('direction = ["tx", "rx"]', 'protocol = "udp"\nbitrate = "1G"'),
         "bitrate is the TCP ceiling"),
        (('kind = "network"', 'kind = "gpu"'), 'kind: expected one of "disk", "network"'),
        (("[lab]", "[lab]\nsubnet = \"8.8.8.0/24\""), "must lie inside a private range"),
    ],
)
def test_errors_name_file_field_and_expectation(edit: tuple[str, str], message: str) -> None:
    with pytest.raises(SpecError) as err:
        _parse(BASE.replace(*edit))
    assert message in str(err.value)
    assert str(err.value).startswith("net.toml")
    assert "\n" not in str(err.value)


def test_web_client_must_be_a_lab_host() -> None:
    text = BASE.replace('kind = "network"\npeer = ["host", "client", "guest"]\n'
                        'direction = ["tx", "rx"]', 'kind = "web"\nclient = "host"')
    with pytest.raises(SpecError, match=r"client: expected a \[\[lab.host\]\] name \(client\)"):
        _parse(text)


def test_only_guest_peer_cells_left_on_native_is_an_error() -> None:
    text = BASE.replace('peer = ["host", "client", "guest"]', 'peer = "guest"')
    text = text.replace('kind = "qemu"\nname = "vm"\nnic = { model = ["virtio-net", '
                        '"e1000"], backend = "tap" }', 'kind = "native"\nname = "n2"')
    with pytest.raises(SpecError, match="no cell remains"):
        _parse(text)


@pytest.mark.parametrize("name", ["network.toml", "web.toml"])
def test_examples_parse(name: str) -> None:
    path = EXAMPLES / name
    study = parse_study(path.read_text(), str(path), HOST_RAM)
    assert study.cells and study.lab is not None


def test_a_jumbo_lab_refuses_nics_that_cannot_carry_it() -> None:
    """virtio-net and e1000 take 9000-byte frames; rtl8139's driver does not, and a
    libvirt domain's NIC MTU is not set by hvbench: both are refused in one line."""
    jumbo = BASE.replace("[lab]\n", "[lab]\nmtu = 9000\n")
    _parse(jumbo)
    with pytest.raises(SpecError) as err:
        _parse(jumbo.replace('"e1000"]', '"rtl8139"]'))
    assert "[lab] mtu 9000" in str(err.value) and "rtl8139" in str(err.value)
    assert str(err.value).startswith("net.toml") and "\n" not in str(err.value)
    _parse(BASE.replace('"e1000"]', '"rtl8139"]'))
