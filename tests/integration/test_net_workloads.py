"""iperf3 and the web workload with the real programs: between the root namespace and
network namespaces, and with TCG guests on a bridge the test creates (tap backend).

Traffic stays on a throwaway lab: a bridge ``hvb-nb*`` in the root namespace (address
198.18.N.1/24, RFC 2544's benchmarking range) and namespaces ``hvb-nt*`` joined to it by
veth pairs; all removed in ``finally``.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import subprocess
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from hvbench.errors import CommandError
from hvbench.host.paths import records_dir
from hvbench.image.builder import GuestImage
from hvbench.kinds.network.spec import NetworkWorkloadSpec
from hvbench.kinds.web.spec import WebWorkloadSpec
from hvbench.model.spec import NicSpec, VmSpec
from hvbench.netlab.lab import LabRecord, remove_recorded
from hvbench.platforms.base import ExecResult
from hvbench.platforms.native import NativePlatform
from hvbench.platforms.qemu import QemuPlatform
from hvbench.workloads.endpoints import (
    Endpoint,
    guest_endpoint,
    host_endpoint,
    start_server,
)
from hvbench.workloads.iperf3 import run_iperf3, server_argv
from hvbench.workloads.web import GUEST_WWW, file_content, file_uri, run_web_phase, serve_web
from tests.integration.conftest import (
    free_test_subnet,
    nic_state,
    nic_state_on_failure,
    shared,
)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="namespaces and taps need root"),
]


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


class NetnsExecutor:
    """Runs commands in a network namespace (what netlab's LabHost does)."""

    def __init__(self, netns: str) -> None:
        self.netns = netns
        self._native = NativePlatform()

    def exec(self, argv: Sequence[str], *, timeout: float, stdin: bytes | None = None,
             env: Mapping[str, str] | None = None) -> ExecResult:
        return self._native.exec(["ip", "netns", "exec", self.netns, *argv],
                                 timeout=timeout, stdin=stdin, env=env)


@dataclass
class Lab:
    bridge: str
    prefix: str          # "198.18.N"
    hosts: dict[str, Endpoint]

    @property
    def host_address(self) -> str:
        return f"{self.prefix}.1"

    def root(self) -> Endpoint:
        return host_endpoint(NativePlatform(), self.host_address)

    def guest_nic(self) -> NicSpec:
        return NicSpec(backend="tap", bridge=self.bridge, address=f"{self.prefix}.100/24")


def _add_host(tag: str, index: int, name: str, bridge: str, address: str, *,
              record: LabRecord) -> str:
    netns, veth = f"hvb-nt{tag}-{name}", f"hvb-nv{tag}{index}"
    record.add("netns", netns)
    ip("netns", "add", netns)
    record.add("links", veth)
    ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", netns)
    ip("link", "set", veth, "master", bridge, "up")
    ip("-n", netns, "addr", "add", f"{address}/24", "dev", "eth0")
    ip("-n", netns, "link", "set", "eth0", "up")
    ip("-n", netns, "link", "set", "lo", "up")
    return netns


@contextlib.contextmanager
def _made_lab() -> Iterator[Lab]:
    """A bridge with a free /24 of the tests' range and two namespaces on it (a prefix
    drawn without looking could be another session's), all removed afterwards by the
    netlab's own teardown. Each device is written to a lab record before it is made,
    as NetLab does: if this process is killed, the next hvbench run's orphan cleanup
    (or `hvbench cleanup`) removes exactly these."""
    tag = secrets.token_hex(2)
    subnet = free_test_subnet()
    prefix = str(subnet.network_address).rsplit(".", 1)[0]
    bridge = f"hvb-nb{tag}"
    record = LabRecord.create(records_dir(), tag, str(subnet))
    try:
        record.add("links", bridge)
        ip("link", "add", bridge, "type", "bridge")
        ip("addr", "add", f"{prefix}.1/24", "dev", bridge)
        ip("link", "set", bridge, "up")
        hosts = {}
        for index, name in enumerate(("client", "server")):
            address = f"{prefix}.{10 + index}"
            netns = _add_host(tag, index, name, bridge, address, record=record)
            hosts[name] = Endpoint(name, "netns", NetnsExecutor(netns), address, address,
                                   netns=netns)
        yield Lab(bridge, prefix, hosts)
    finally:
        # links in reverse (veths before the bridge), then namespaces, their processes
        # killed first; a failure keeps the record for the orphan cleanup and fails
        _, failures = remove_recorded(record)
        if failures:
            raise AssertionError(f"lab {tag} not removed: {failures}")


@pytest.fixture
def lab() -> Iterator[Lab]:
    with _made_lab() as made:
        yield made


@dataclass
class GuestLab:
    """A lab and one TCG guest on its bridge (tap backend, address .100)."""

    lab: Lab
    vm: QemuPlatform

    def endpoint(self) -> Endpoint:
        return guest_endpoint(self.vm, f"{self.lab.prefix}.100", name="guest")


@pytest.fixture(scope="module")
def guest_lab(image: GuestImage) -> Iterator[GuestLab]:
    """One guest booted for the module's guest tests (their specs are identical): each
    test stops what it starts in it and checks so; the last one stops the guest."""
    with _made_lab() as made, QemuPlatform(VmSpec(accel="tcg", nics=(made.guest_nic(),)),
                                           image=image) as vm, shared(vm):
        yield GuestLab(made, vm)


def assert_no_process(pattern: str) -> None:
    found = subprocess.run(["pgrep", "-f", pattern], check=False, capture_output=True,
                           text=True)
    assert found.stdout == "", f"still running: {pattern}"


# -- iperf3 ----------------------------------------------------------------------------
@pytest.mark.parametrize(("direction", "protocol"), [("tx", "tcp"), ("rx", "tcp"),
                                                     ("tx", "udp")])
def test_iperf3_root_namespace_and_netns(lab: Lab, direction: str, protocol: str) -> None:
    spec = NetworkWorkloadSpec(direction=direction, protocol=protocol,  # type: ignore[arg-type]
                               duration_s=1.5, omit_s=0.5, streams=2,
                               udp_bitrate="200M" if protocol == "udp" else None)
    outcome = run_iperf3(spec, lab.root(), lab.hosts["server"])
    assert outcome.phase == direction and outcome.raw_kind == "iperf3-json"
    metrics = outcome.metrics
    assert metrics["mbit_s"][0] > 10 and metrics["mbit_s"][1] == "Mbit/s"
    assert metrics["bytes"][0] > 0 and 0 < metrics["cpu_platform_pct"][0] <= 200
    assert outcome.series and all(values["mbit_s"] > 0 for _, values in outcome.series)
    if protocol == "udp":
        assert "lost_pct" in metrics and "jitter_ms" in metrics
    assert '"reverse":\t1' in outcome.raw if direction == "rx" else True
    assert_no_process(f"iperf3 -s -B {lab.hosts['server'].address}")


def test_iperf3_port_taken_is_a_clear_error(lab: Lab) -> None:
    server = lab.hosts["server"]
    spec = NetworkWorkloadSpec(duration_s=1, omit_s=0, port=5301)
    with start_server(server, server_argv(server.bind_address, 5301), name="squatter",
                      port=5301) as squatter:
        with pytest.raises(CommandError, match="already accepts connections") as info:
            run_iperf3(spec, lab.root(), server)
        assert "iperf3 -s" in str(info.value)
        assert squatter.is_running()
    assert not squatter.is_running()


def test_server_that_exits_reports_its_log(lab: Lab) -> None:
    # An address the namespace does not have: iperf3 cannot listen and exits.
    server = lab.hosts["server"]
    with pytest.raises(CommandError, match="Cannot assign requested address") as info:
        start_server(server, server_argv("203.0.113.7", 5302), name="broken", port=5302,
                     timeout=5)
    assert "starting broken" in str(info.value) and "exited with 1" in str(info.value)


def test_iperf3_unreachable_server_names_the_client_command(lab: Lab) -> None:
    # Port 9 on the server host: the iperf3 server is started on 5303, the client is
    # pointed elsewhere through a forward, so it gets iperf3's own error document.
    server = lab.hosts["server"]
    broken = Endpoint(server.name, "netns", server.executor, server.address,
                      server.bind_address, netns=server.netns, forwards={5303: 9})
    spec = NetworkWorkloadSpec(duration_s=1, omit_s=0, port=5303)
    with pytest.raises(CommandError, match="Connection refused") as info:
        run_iperf3(spec, lab.root(), broken)
    assert "iperf3 -c" in str(info.value) and "server iperf3-server" in str(info.value)


def test_iperf3_with_a_guest(guest_lab: GuestLab) -> None:
    """The guest as the platform (client) against the root namespace, both directions;
    then the guest as the server (a peer guest) with a lab host as the client."""
    spec = NetworkWorkloadSpec(duration_s=2, omit_s=0.5, timeout_s=120)
    lab, vm, guest = guest_lab.lab, guest_lab.vm, guest_lab.endpoint()
    with nic_state_on_failure(vm):
        for direction in ("tx", "rx"):
            outcome = run_iperf3(spec.model_copy(update={"direction": direction}), guest,
                                 lab.root())
            assert outcome.metrics["mbit_s"][0] > 1, direction
        outcome = run_iperf3(spec, lab.hosts["client"], guest)
        assert outcome.metrics["mbit_s"][0] > 1
    # the state a failure would carry can be read: the NIC's three queues, the guest's
    # counters and its NIC's interrupts
    state = nic_state(vm)
    assert "queue 2: " in state and "used-idx=" in state and "QMP:" not in state, state
    assert "[NIC counters (/proc/net/dev)]\nInter-" in state, state
    assert "[virtio interrupts (/proc/interrupts)]\n" in state and "-output.0" in state, state
    left = vm.exec(["pidof", "iperf3"], timeout=30)
    assert left.stdout == b"", "the guest's iperf3 server outlived the test"
    assert vm.exec(["sh", "-c", "ls /tmp/hvbench-iperf3*"], timeout=30).exit_code != 0


# -- web -------------------------------------------------------------------------------
def test_web_native_lighttpd_in_a_netns(lab: Lab) -> None:
    spec = WebWorkloadSpec(file_kb=(1, 30), rate=20, duration_s=2, reply_timeout_s=2)
    server, client = lab.hosts["server"], lab.hosts["client"]
    with serve_web(spec, server) as web:
        root = web.layout.root
        assert web.uris == {1: "/1k.bin", 30: "/30k.bin"}
        url = f"http://{server.address}:{spec.port}{file_uri(30)}"
        with urllib.request.urlopen(url, timeout=10) as reply:
            assert reply.read() == file_content(30)
        outcome = run_web_phase(spec, 30, client, server)
    assert outcome.phase == "30kB" and outcome.raw_kind == "httperf-text"
    metrics = outcome.metrics
    assert metrics["errors"] == (0.0, "count") and metrics["error_pct"][0] == 0.0
    assert metrics["offered_rps"] == (20.0, "req/s")
    # Kept up: 40 calls over the 2 s schedule, allowing the last reply about 0.2 s of
    # lateness (a host stall; 0.95 allowed only 0.1 s).
    assert metrics["achieved_ratio"][0] > 0.9 and metrics["replies_s"][0] > 18
    assert metrics["net_mbit_s"][0] > 0 and metrics["reply_ms"][1] == "ms"
    assert "### httperf 30kB rate=20/s" in outcome.raw and "Reply status" in outcome.raw
    assert_no_process(f"lighttpd -D -f {root}")
    assert not Path(root).exists()


def test_web_in_a_guest(guest_lab: GuestLab) -> None:
    """lighttpd in a TCG guest (tap on the lab bridge), httperf from a netns: a fixed
    low rate, a missing file (non-2xx counts as errors), and a short max-rate search."""
    spec = WebWorkloadSpec(file_kb=(1, 10), rate=20, duration_s=3, reply_timeout_s=3,
                           timeout_s=300)
    client = guest_lab.lab.hosts["client"]
    vm, guest = guest_lab.vm, guest_lab.endpoint()
    with nic_state_on_failure(vm), serve_web(spec, guest):
        fixed = run_web_phase(spec, 10, client, guest)
        assert fixed.metrics["error_pct"][0] == 0.0, fixed.raw
        assert fixed.metrics["achieved_ratio"][0] > 0.9, fixed.raw
        missing = run_web_phase(spec.model_copy(update={"duration_s": 1}), 99, client,
                                guest)
        assert missing.metrics["err.non-2xx"][0] == 20 and \
            missing.metrics["error_pct"][0] == 100.0
        # Short steps are noisy (one slow reply at the end weighs 1/duration), so
        # the rule is loosened: this checks the search, not the guest.
        ramp = spec.model_copy(update={"mode": "max-rate", "start_rate": 10,
                                       "rate_factor": 2.0, "max_rate": 40,
                                       "duration_s": 2, "min_achieved_ratio": 0.9})
        outcome = run_web_phase(ramp, 1, client, guest)
    # Every step is in the raw output; the maximum is one of their rates, found
    # sustained (the phase's rows are that step's: the loosened rule holds).
    rates = [float(r) for r in re.findall(r"### httperf 1kB rate=([0-9.e+]+)/s",
                                           outcome.raw)]
    assert len(rates) == outcome.metrics["steps"][0] >= 1, outcome.raw
    top = outcome.metrics["max_rate_rps"][0]
    assert top == pytest.approx(outcome.metrics["offered_rps"][0])
    assert any(top == pytest.approx(r, rel=1e-3) for r in rates), (top, rates)
    assert outcome.metrics["achieved_ratio"][0] >= 0.9, outcome.raw
    assert vm.exec(["pidof", "lighttpd"], timeout=30).stdout == b""
    assert vm.exec(["ls", GUEST_WWW], timeout=30).exit_code != 0


# Last in the module: it stops the module's shared guest.
def test_guest_server_stop_is_safe_after_the_guest_died(guest_lab: GuestLab) -> None:
    vm, guest = guest_lab.vm, guest_lab.endpoint()
    handle = start_server(guest, server_argv(guest.bind_address, 5304), name="srv",
                          port=5304, timeout=20)
    assert handle.is_running() and "Server listening" in handle.log_tail()
    with pytest.raises(CommandError, match="already listens"):
        start_server(guest, server_argv(guest.bind_address, 5304), name="dup",
                     port=5304, timeout=20)
    with pytest.raises(CommandError, match="Cannot assign requested address"):
        start_server(guest, server_argv("203.0.113.7", 5305), name="broken",
                     port=5305, timeout=20)
    logs = vm.exec(["sh", "-c", "ls /tmp/hvbench-*.log"], timeout=30).text().split()
    assert len(logs) == 1 and "hvbench-srv-" in logs[0]  # the broken one's is gone
    vm.stop()
    handle.stop()
    handle.stop()
