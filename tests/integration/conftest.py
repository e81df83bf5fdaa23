"""Integration fixtures: the real guest image, and a leak check after every test."""

from __future__ import annotations

import contextlib
import fcntl
import io
import ipaddress
import os
import secrets
import subprocess
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest
from rich.console import Console

import hvbench.cli.main as cli_main
from hvbench.cli.main import main as hvbench_main
from hvbench.host import proctree, trace
from hvbench.host.paths import RECORDS_DIR
from hvbench.image.builder import GuestImage, build_image
from hvbench.netlab.lab import OWNER_ALIAS_PREFIX, used_networks
from hvbench.netlab.names import BRIDGE_PREFIX, TAG_LEN, VETH_PREFIX, bridge_name, overlaps
from hvbench.platforms.qemu import TAP_PREFIX, QemuPlatform
from hvbench.platforms.registry import REGISTRY


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item) -> None:
    """Trace lines (``HVBENCH_TRACE``, which `make test` sets) name the test they belong
    to, also from the hvbench processes it starts (they inherit the variable); set
    before setup, so a module fixture's boots count for the test that first needs it,
    as its JUnit time does."""
    os.environ[trace.TAG_ENV] = item.nodeid


@pytest.fixture(scope="session")
def image() -> GuestImage:
    """The bundled guest image (built once; a cache hit after `make image`)."""
    return build_image()


#: Every hvbench network device and namespace: taps (hvb-t...), lab bridges and veths
#: (hvb-b..., hvb-v...) and lab namespaces (hvb-<tag>-<host>).
NET_PREFIX = "hvb-"
assert TAP_PREFIX.startswith(NET_PREFIX)
#: How long the leak check waits for new hvb- objects to vanish, seconds.
LEAK_GRACE_S = 3.0
#: Serialises integration tests across pytest sessions on this machine.
LOCK_FILE = Path("/run/lock" if Path("/run/lock").is_dir() else "/tmp") / "hvbench-tests.lock"
LOCK_WAIT_S = 900.0


def hvbench_links() -> list[str]:
    """The root namespace's links whose name starts with ``hvb-``."""
    out = subprocess.run(
        ["ip", "-o", "link", "show"], capture_output=True, text=True, check=True
    ).stdout
    names = [line.split(": ")[1].split("@")[0] for line in out.splitlines()]
    return [n for n in names if n.startswith(NET_PREFIX)]


def hvbench_netns() -> list[str]:
    """The named network namespaces whose name starts with ``hvb-``."""
    netns_dir = Path("/run/netns")
    if not netns_dir.is_dir():
        return []
    return sorted(p.name for p in netns_dir.iterdir() if p.name.startswith(NET_PREFIX))


def _ancestors(pid: int) -> set[int]:
    """``pid`` and its parent, grandparent, ... (from /proc/PID/stat)."""
    chain: set[int] = set()
    while pid > 1 and pid not in chain:
        chain.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        pid = int(stat.rsplit(")", 1)[1].split()[1])
    return chain


def _foreign_taps(names: set[str]) -> set[str]:
    """The taps among ``names`` held open by processes that this test session did not
    start (another hvbench on a shared machine): /proc/PID/fdinfo shows ``iff: NAME``."""
    me = os.getpid()
    foreign: set[str] = set()
    for fdinfo in Path("/proc").glob("[0-9]*/fdinfo/*") if names else ():
        with contextlib.suppress(OSError, ValueError):
            for line in fdinfo.read_text().splitlines():
                tap = line.split()[1] if line.startswith("iff:") else None
                if tap in names and me not in _ancestors(int(fdinfo.parts[2])):
                    foreign.add(tap)
    return foreign


def _lab_tags(links: set[str], netns: set[str]) -> set[str]:
    """The tags of the labs that ``links`` and ``netns`` belong to."""
    tags = {n.removeprefix(NET_PREFIX).split("-")[0] for n in netns}
    for tag_source in links:
        for prefix in (BRIDGE_PREFIX, VETH_PREFIX):
            if tag_source.startswith(prefix):
                tags.add(tag_source.removeprefix(prefix)[:TAG_LEN])
    return tags


def _bridge_alias(tag: str) -> str | None:
    """The alias of the lab's bridge (its creator's pid, after OWNER_ALIAS_PREFIX)."""
    try:
        return Path(f"/sys/class/net/{bridge_name(tag)}/ifalias").read_text().strip()
    except OSError:
        return None


def _bridge_owned_elsewhere(tag: str, me: int) -> bool:
    """True when the lab's bridge names (in its alias) a live creator that this test
    session did not start: a lab that another hvbench has just created, before any
    process runs in its namespaces."""
    alias = _bridge_alias(tag)
    if alias is None or not alias.startswith(OWNER_ALIAS_PREFIX):
        return False
    pid = int(alias.removeprefix(OWNER_ALIAS_PREFIX))
    return Path(f"/proc/{pid}").exists() and me not in _ancestors(pid)


def _foreign_lab_objects(links: set[str], netns: set[str]) -> set[str]:
    """The links and namespaces among ``links`` and ``netns`` of labs that another
    hvbench runs (a background study on a shared machine): those whose tag names a
    namespace with a process this test session did not start. A namespace of this
    session's own (even leaked, empty) is never among them."""
    me = os.getpid()
    tags = {tag for tag in _lab_tags(links, netns) if _bridge_owned_elsewhere(tag, me)}
    for name in netns:
        done = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True,
                              check=False)
        pids = [int(p) for p in done.stdout.split() if p.isdigit()]
        if pids and not any(me in _ancestors(pid) for pid in pids):
            tags.add(name.removeprefix(NET_PREFIX).split("-")[0])
    return {n for n in links | netns for tag in tags
            if n == bridge_name(tag) or n.startswith((f"{VETH_PREFIX}{tag}",
                                                      f"{NET_PREFIX}{tag}-"))}


def new_network_objects(links_before: set[str], netns_before: set[str]) -> list[str]:
    """hvb- links and namespaces that did not exist before the test, waiting up to
    :data:`LEAK_GRACE_S` for them to go (devices of other work on a shared machine come
    and go; this session's own are removed synchronously), minus taps of QEMUs and labs
    that this session did not start."""
    deadline = time.monotonic() + LEAK_GRACE_S
    while True:
        links = set(hvbench_links()) - links_before
        links -= _foreign_taps({n for n in links if n.startswith(TAP_PREFIX)})
        netns = set(hvbench_netns()) - netns_before
        foreign = _foreign_lab_objects(links, netns)
        found = sorted(links - foreign) + [f"netns {n}" for n in sorted(netns - foreign)]
        if not found or time.monotonic() >= deadline:
            return found
        time.sleep(0.1)


def network_objects_of(pid: int) -> set[str]:
    """The hvb- links and namespaces that the running hvbench ``pid`` created: those of
    the labs whose bridge names it as creator, and the taps its QEMUs (descendants of
    it) opened. Taken while it runs, to check after it is gone that they went too."""
    links, netns = set(hvbench_links()), set(hvbench_netns())
    tags = {tag for tag in _lab_tags(links, netns)
            if _bridge_alias(tag) == f"{OWNER_ALIAS_PREFIX}{pid}"}
    found = {n for n in links | netns for tag in tags
             if n == bridge_name(tag) or n.startswith((f"{VETH_PREFIX}{tag}",
                                                       f"{NET_PREFIX}{tag}-"))}
    for info in proctree.descendants(pid):
        with contextlib.suppress(OSError):
            argv = Path(f"/proc/{info.pid}/cmdline").read_bytes().split(b"\0")
            found |= {part.split("ifname=", 1)[1].split(",")[0]
                      for part in (a.decode(errors="replace") for a in argv)
                      if "ifname=" + TAP_PREFIX in part}
    return found


def existing_network_objects(names: set[str]) -> set[str]:
    """Those of ``names`` (hvb- links and namespaces) that exist now."""
    return names & (set(hvbench_links()) | set(hvbench_netns()))


#: Where the tests' own bridges and fixed-subnet labs take a /24: private (a lab's
#: subnet must be) and outside 10.213.0.0/16, which hvbench's labs allocate from.
TEST_NETWORKS = ipaddress.IPv4Network("10.214.0.0/16")


def free_test_subnet() -> ipaddress.IPv4Network:
    """A /24 of :data:`TEST_NETWORKS` that nothing on this host uses (addresses and
    routes), from a random start so that two sessions are unlikely to pick the same one
    at the same moment.

    Raises:
        RuntimeError: every one is in use.
    """
    used = used_networks()
    subnets = list(TEST_NETWORKS.subnets(new_prefix=24))
    start = secrets.randbelow(len(subnets))
    for subnet in subnets[start:] + subnets[:start]:
        if not overlaps(str(subnet), used):
            return subnet
    raise RuntimeError(f"every /24 of {TEST_NETWORKS} is in use on this host")


#: Guests (or other registered processes) that a module fixture shares between its
#: tests: the leak check after each test leaves them alone; the fixture stops them.
SHARED: list[object] = []


@contextlib.contextmanager
def shared(*items: object) -> Iterator[None]:
    """Mark ``items`` as shared between tests while the block runs."""
    SHARED.extend(items)
    try:
        yield
    finally:
        for item in items:
            SHARED.remove(item)


#: What a failure in a guest's network says it may be: the known open bug (see
#: ``TX_STALL`` in test_scenarios.py), with the state needed to place it.
NIC_STALL = "known open bug, a guest NIC stall? its virtio-net queues and counters then:"


def nic_state(vm: QemuPlatform) -> str:
    """The guest's failure evidence (kernel warnings, virtio-net queues as QEMU has
    them, its own NIC counters and interrupts; :meth:`QemuPlatform.failure_evidence`)
    under :data:`NIC_STALL`."""
    return f"{NIC_STALL}\n{vm.failure_evidence()}"


@contextlib.contextmanager
def nic_state_on_failure(vm: QemuPlatform) -> Iterator[None]:
    """A failure in the block gets :func:`nic_state` as a note (it still fails)."""
    try:
        yield
    except Exception as exc:
        exc.add_note(nic_state(vm))
        raise


@contextlib.contextmanager
def machine_lock() -> Iterator[None]:
    """One integration test at a time on this machine, across pytest sessions: tests
    of other sessions (other people working in the same tree) neither see each other's
    hvb- devices appear nor share the CPU with each other's measurements. Waits up to
    :data:`LOCK_WAIT_S`, then goes on without the lock (with a warning)."""
    with LOCK_FILE.open("a") as handle:
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                locked = True
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    warnings.warn(f"{LOCK_FILE} still held after {LOCK_WAIT_S:g} s; "
                                  "running without it", stacklevel=1)
                    locked = False
                    break
                time.sleep(0.1)
        try:
            yield
        finally:
            if locked:
                fcntl.flock(handle, fcntl.LOCK_UN)


@pytest.fixture(autouse=True)
def no_leaks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Each test gets a private work dir and TMPDIR; afterwards nothing may remain in
    them, no guest may be registered, and no link or network namespace named ``hvb-...``
    (taps, lab bridges and veths, lab namespaces) may exist that did not exist before."""
    work = tmp_path / "work"
    tmp = tmp_path / "tmp"
    work.mkdir()
    tmp.mkdir()
    with machine_lock():
        monkeypatch.setenv("HVBENCH_WORKDIR", str(work))
        monkeypatch.setenv("TMPDIR", str(tmp))
        monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
        # The machine may be shared: hvb- objects that existed before the test (and
        # outside the lock) are not its.
        links_before, netns_before = set(hvbench_links()), set(hvbench_netns())
        # a module fixture's records (its shared lab) were made before the test
        records_before = set(RECORDS_DIR.glob(f"*.hvb{os.getpid()}"))
        yield work
        own = [p for p in REGISTRY.live() if not any(p is s for s in SHARED)]
        assert own == [], "a guest outlived its test"
        assert list(work.iterdir()) == [], f"left in the work dir: {list(work.iterdir())}"
        assert list(tmp.iterdir()) == [], f"left in TMPDIR: {list(tmp.iterdir())}"
        leaked = new_network_objects(links_before, netns_before)
        assert leaked == [], f"network devices or namespaces outlived their test: {leaked}"
        records = sorted(set(RECORDS_DIR.glob(f"*.hvb{os.getpid()}")) - records_before)
        assert records == [], f"owner records outlived their test: {records}"


def hvbench(*args: str, columns: int | None = None) -> subprocess.CompletedProcess[str]:
    """``hvbench ARGS`` in this process: its exit code, stdout and stderr as
    ``subprocess.run(..., capture_output=True, text=True)`` gives them. For the commands
    that only read a store (report, explain without --verify, compare, calibrate
    --from, noise --show): a process of their own costs 2-3 s of imports on this
    machine and buys no assertion (``hvbench run`` and the commands that start guests
    stay processes of their own). ``columns`` is the terminal width the tables are
    laid out for (``COLUMNS``). Guests that the test's fixtures started (shared
    between tests) are still running afterwards."""
    # Text streams over bytes, as a process has: documents (report --format json, html)
    # are written to sys.stdout.buffer.
    stdout, stderr = (io.TextIOWrapper(io.BytesIO(), encoding="utf-8") for _ in range(2))
    with contextlib.ExitStack() as stack:
        patch = stack.enter_context(pytest.MonkeyPatch.context())
        if columns is not None:
            patch.setenv("COLUMNS", str(columns))
        # The CLI's consoles as a new process makes them: rich fixes a console's width
        # when it is made if COLUMNS is set then, so the module's own, made when pytest
        # imported it, would keep the caller's COLUMNS over ``columns``.
        patch.setattr(cli_main, "out", Console(highlight=False))
        patch.setattr(cli_main, "err", Console(stderr=True, highlight=False))
        stack.enter_context(_registry_set_aside())
        stack.enter_context(contextlib.redirect_stdout(stdout))
        stack.enter_context(contextlib.redirect_stderr(stderr))
        code = hvbench_main(list(args))
    return subprocess.CompletedProcess(["hvbench", *args], code, _text(stdout), _text(stderr))


@contextlib.contextmanager
def _registry_set_aside() -> Iterator[None]:
    """The process registry without what it holds now while the block runs, then with
    it again: main() stops every registered process when it returns, as a process of
    its own would stop only its own, and a module fixture's booted guest is not the
    command's."""
    before = REGISTRY.live()
    for item in before:
        REGISTRY.discard(item)
    try:
        yield
    finally:
        for item in before:
            REGISTRY.add(item)


def _text(stream: io.TextIOWrapper) -> str:
    """What was written to ``stream`` (text and bytes written to its buffer), decoded."""
    stream.flush()
    return cast(io.BytesIO, stream.buffer).getvalue().decode("utf-8")
