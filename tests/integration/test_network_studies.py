"""Network and web studies end to end: a real lab, real guests on its bridge, iperf3 and
httperf; cleanup after ``kill -9`` that spares what hvbench did not create."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from hvbench.host import facts, proctree
from hvbench.image.builder import GuestImage
from hvbench.model.study import parse_study
from hvbench.run.runner import run_study
from hvbench.store.database import MeasurementRow, Store
from tests.integration.conftest import (
    existing_network_objects,
    hvbench_links,
    hvbench_netns,
    network_objects_of,
    new_network_objects,
)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="the net lab needs root"),
]
HVBENCH = str(Path(sys.executable).parent / "hvbench")
HOST_RAM = 24 << 30

TAP_MODELS = """
[study]
name = "tap-models"
repetitions = 1
seed = 11

[lab]
[[lab.host]]
name = "client"
rate = "100mbit"

[[platform]]
kind = "native"

[[platform]]
kind = "qemu"
name = "vm"
machine = "pc"
memory_mib = 256
nic = { model = ["virtio-net", "e1000", "rtl8139"], backend = "tap" }

[[workload]]
kind = "network"
name = "iperf3"
peer = ["host", "client", "guest"]
duration_s = 2
omit_s = 0.5
"""

#: examples/network.toml reduced to its user-mode guest (`--set`).
NETWORK_EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "network.toml"
USER_MODE = ["study.repetitions=1", "platform.guest.nic.model=virtio-net",
             "platform.guest.nic.backend=user", "platform.guest.exclude=[]",
             'workload.iperf3.peer=["host", "ext"]', "workload.iperf3.duration_s=2",
             "workload.iperf3.omit_s=0.5"]

WEB = """
[study]
name = "web"
repetitions = 1
seed = 13

[lab]
[[lab.host]]
name = "client"

[[platform]]
kind = "native"

[[platform]]
kind = "qemu"
name = "vm"
machine = "pc"
memory_mib = 256
nic = {{ model = "virtio-net", backend = "{backend}" }}

[[workload]]
kind = "web"
name = "fixed"
file_kb = [1, 30]
rate = 20
duration_s = 2

[[workload]]
kind = "web"
name = "max"
mode = "max-rate"
file_kb = [10]
duration_s = 1
start_rate = 20
rate_factor = 2.0
max_rate = 160
# 1 s steps: at the default 0.99 a step fails when its last reply comes 10 ms later than
# the quickest one (one host stall); this checks the search, not the server.
min_achieved_ratio = 0.9
"""


def _run(text: str, tmp_path: Path, path: Path | None = None,
         changes: Sequence[str] = ()) -> list[MeasurementRow]:
    """Run the study ``text`` (of file ``path``, with the ``--set`` ``changes``)."""
    study = parse_study(text, str(path or tmp_path / "study.toml"), HOST_RAM, changes)
    with Store(tmp_path / "r.db") as store:
        outcome = run_study(study, store)
        failures = store.failures(outcome.run_id)
        assert outcome.failures == 0, "\n\n".join(f.error or "" for f in failures)
        return store.measurements(outcome.run_id)


def _values(rows: list[MeasurementRow]) -> dict[tuple[str, str, str, str], float]:
    return {(r.platform, r.workload, r.phase, r.metric): r.value for r in rows}


def test_every_tap_nic_model_to_host_external_host_and_guest(
    image: GuestImage, tmp_path: Path
) -> None:
    values = _values(_run(TAP_MODELS, tmp_path))
    for model in ("virtio-net", "e1000", "rtl8139"):
        for peer in ("host", "client", "guest"):
            key = (f"vm.{model}", f"iperf3.{peer}", "tx")
            mbit, sent = values[(*key, "mbit_s")], values[(*key, "bytes")]
            assert mbit > 1, (model, peer)
            # What the guest sent crossed its tap (the host received it there), frames
            # with their headers, during the monitored window (the client's run).
            tap_rx = values[(*key, "net.guest-tap0.rx_bytes")]
            assert sent <= tap_rx < 1.6 * sent, (model, peer, tap_rx, sent)
        vhost = values[(f"vm.{model}", "iperf3.host", "tx", "vhost")]
        assert vhost == float(facts.vhost_net_available())
        assert values[(f"vm.{model}", "iperf3.host", "tx", "qemu.vcpu.exec_per_s")] > 0
    # The client sits behind a 100 Mbit/s link: nobody gets through faster.
    native = values[("native", "iperf3.client", "tx", "mbit_s")]
    assert 80 < native <= 100, native
    sent = values[("native", "iperf3.client", "tx", "bytes")]
    assert sent <= values[("native", "iperf3.client", "tx", "net.client.tx_bytes")] < 1.6 * sent
    assert ("native", "iperf3.guest", "tx", "mbit_s") not in values


def test_user_mode_guest_transmits_and_receives(image: GuestImage, tmp_path: Path) -> None:
    values = _values(_run(NETWORK_EXAMPLE.read_text(), tmp_path, NETWORK_EXAMPLE,
                          USER_MODE))
    for platform in ("native", "guest"):
        for peer in ("host", "ext"):
            for direction in ("tx", "rx"):
                key = (platform, f"iperf3.{peer}-{direction}", direction, "mbit_s")
                assert values[key] > 1, key


@pytest.mark.parametrize("backend", ["tap", "user"])
def test_web_fixed_rate_and_max_rate(image: GuestImage, tmp_path: Path, backend: str) -> None:
    values = _values(_run(WEB.format(backend=backend), tmp_path))
    for platform in ("native", "vm"):
        for phase in ("1kB", "30kB"):
            assert values[(platform, "fixed", phase, "replies_s")] == pytest.approx(20, rel=0.2)
            assert values[(platform, "fixed", phase, "error_pct")] == 0
            assert values[(platform, "fixed", phase, "reply_ms")] > 0
        top = values[(platform, "max", "10kB", "max_rate_rps")]
        assert 20 <= top <= 160
        # the max-rate phase's host evidence is its chosen probe's (one 1 s httperf run
        # of the several the search made), the fixed one's its whole window
        evidence = values[(platform, "max", "10kB", "evidence_window_s")]
        assert 1.0 <= evidence < values[(platform, "max", "10kB", "phase_wall_s")] / 2
        assert (platform, "fixed", "1kB", "evidence_window_s") not in values
    assert values[("native", "max", "10kB", "max_rate_rps")] == 160


def _hvb_state() -> tuple[set[str], set[str]]:
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                           check=True).stdout
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True,
                           check=True).stdout
    return ({line.split()[0] for line in netns.splitlines() if line.strip()},
            {line.split(": ")[1].split("@")[0] for line in links.splitlines()})


@pytest.fixture
def decoys() -> Iterator[tuple[str, str]]:
    """A namespace and a link hvbench did not create (named like its own)."""
    tag = os.getpid() % 10000
    netns, link = f"hvb-decoy{tag}", f"hvb-decoy{tag}"
    try:
        subprocess.run(["ip", "netns", "add", netns], check=True)
        # A veth pair: this kernel has no dummy links.
        subprocess.run(["ip", "link", "add", link, "type", "veth", "peer", "name",
                        f"{link}p"], check=True)
        yield netns, link
    finally:
        subprocess.run(["ip", "link", "del", link], check=False)
        subprocess.run(["ip", "netns", "del", netns], check=False)


def _ok_count(db: Path) -> int:
    try:
        with sqlite3.connect(db) as conn:
            return int(conn.execute(
                "SELECT count(*) FROM repetitions WHERE status = 'ok'").fetchone()[0])
    except sqlite3.Error:
        return 0


def test_cleanup_after_kill_9_removes_the_lab_and_spares_decoys(
    image: GuestImage, tmp_path: Path, decoys: tuple[str, str]
) -> None:
    study, db = tmp_path / "net.toml", tmp_path / "r.db"
    study.write_text(TAP_MODELS.replace("repetitions = 1", "repetitions = 3"))
    links_before, netns_before = set(hvbench_links()), set(hvbench_netns())
    proc = subprocess.Popen([HVBENCH, "run", str(study), "--db", str(db)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cleaned = False
    try:
        servers, made = _wait_for_a_server(proc, db)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        done = subprocess.run([HVBENCH, "cleanup"], capture_output=True, text=True,
                              timeout=120, check=False)
        cleaned = True
        assert done.returncode == 0, done.stderr
        assert existing_network_objects(made) == set()
        assert new_network_objects(links_before, netns_before) == []
        after_netns, after_links = _hvb_state()
        assert decoys[0] in after_netns and decoys[1] in after_links
        assert not [pid for pid in servers if _alive(pid)], "an iperf3 server lived on"
        assert _run_processes(tmp_path) == [], "a process of the killed run lived on"
    finally:
        # Whatever this test's run left running must not reach the tests after it,
        # even when an assertion above stopped the test before the kill.
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if not cleaned:
            subprocess.run([HVBENCH, "cleanup"], capture_output=True, timeout=120,
                           check=False)
        for pid, _ in _run_processes(tmp_path):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _wait_for_a_server(proc: subprocess.Popen[bytes], db: Path
                       ) -> tuple[set[int], set[str]]:
    """Once two repetitions are stored and an iperf3 server of the run is up (servers
    live for a cell, so between cells, while the next guest boots, there is none):
    the servers' pids and what the run made (its lab, its guest's tap). Only these are
    checked afterwards, not other runs' on a shared machine."""
    deadline = time.monotonic() + 240
    servers: set[int] = set()
    while time.monotonic() < deadline and proc.poll() is None:
        if _ok_count(db) >= 2:
            servers = {p.pid for p in proctree.descendants(proc.pid) if p.comm == "iperf3"}
            if servers:
                break
        time.sleep(0.1)
    assert proc.poll() is None, "the study ended before it could be killed"
    assert servers, "no iperf3 server of the run came up within 240 s"
    made = network_objects_of(proc.pid)
    assert any(n.startswith("hvb-b") for n in made), f"the lab was not built: {made}"
    return servers, made


def _run_processes(tmp_path: Path) -> list[tuple[int, str]]:
    """Live processes (pid, command line) whose command line names ``tmp_path``: those
    that the test's hvbench started (guests, daemons) with paths in its work dir."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            with contextlib.suppress(OSError):
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(
                    errors="replace")
                if str(tmp_path) in cmd and _alive(int(entry.name)):
                    found.append((int(entry.name), cmd))
    return found


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie no longer does)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
