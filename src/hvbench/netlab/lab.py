"""NetLab: a study's extra network hosts, as network namespaces on one Linux bridge.

Topology (see docs/netlab.md)::

    root namespace ("host", .1 on the bridge)
      hvb-b<tag> (bridge) ── hvb-v<tag>0 ══ eth0 in netns hvb-<tag>-<host0> (.10)
                          ── hvb-v<tag>1 ══ eth0 in netns hvb-<tag>-<host1> (.11)
                          ── hvb-t...      guests' taps, enslaved by other code (.100+)

``NetLab.__init__`` only stores the spec; ``start()`` builds the lab, ``stop()`` removes
it (safe twice, also after a failed start). Before each device is created its name is
written to an owner record (``<work dir>/lab-XXXX/lab.json``, with the owner's pid), so
:func:`cleanup_orphaned_labs` can remove exactly what a ``kill -9``'d hvbench left and
nothing else. Every command is an argv list run by :func:`hvbench.host.commands.run`.
Not thread-safe: build and change a lab from one thread.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import signal
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hvbench.errors import CommandError, HostError, HvbenchError, RootRequiredError
from hvbench.host import facts
from hvbench.host.commands import require_tool, run
from hvbench.host.paths import RECORDS_DIR, make_owned_dir, records_dir, work_dir
from hvbench.host.started import StartStop
from hvbench.model.lab import DEFAULT_MTU, RESERVED_HOST_NAMES, LabHostSpec, LabSpec
from hvbench.netlab import names
from hvbench.netlab.tc import is_unknown_qdisc, link_shaping_commands, netem_probe_argv
from hvbench.platforms.base import ExecResult
from hvbench.platforms.process import BackgroundProcess, netns_argv, run_in_group
from hvbench.platforms.registry import REGISTRY, ProcessRegistry

LAB_DIR_PREFIX = "lab-"
RECORD_FILE = "lab.json"
#: A lab bridge's alias (``ip link ... alias``): this prefix, then the creating pid.
OWNER_ALIAS_PREFIX = "hvbench pid="
#: Timeout of each ``ip`` / ``tc`` command, seconds.
COMMAND_TIMEOUT_S = 10.0
SYS_NET = Path("/sys/class/net")
NETNS_DIR = Path("/run/netns")
NETEM_MISSING = ("this kernel lacks the netem qdisc (sch_netem, CONFIG_NET_SCH_NETEM), "
                 "which link delay and loss need")


def _ip(*args: str, what: str) -> str:
    return run(["ip", *args], timeout=COMMAND_TIMEOUT_S, what=what)


@functools.cache
def netem_support() -> tuple[bool, str]:
    """Whether the kernel has the netem qdisc, and why not: adds netem to ``lo`` of a
    throwaway namespace (``unshare --net``, root needed), cached per process.

    Raises :class:`CommandError` if the probe fails for another reason than an unknown
    qdisc kind (10 s timeout).
    """
    try:
        run(netem_probe_argv(), timeout=COMMAND_TIMEOUT_S, what="probing for netem")
    except CommandError as exc:
        if is_unknown_qdisc(exc.output):
            return False, NETEM_MISSING
        raise
    return True, "netem is available"


# -- the owner record ------------------------------------------------------------------
def _start_time(pid: int) -> int | None:
    """A process's start time (clock ticks since boot, /proc/PID/stat field 22)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(text[text.rfind(")") + 2:].split()[19])


class LabRecord:
    """What one lab created or is about to create, kept in ``<dir>/lab.json``."""

    def __init__(self, directory: Path, data: dict[str, Any]) -> None:
        self.directory = directory
        self.data = data

    @classmethod
    def create(cls, parent: Path, tag: str, subnet: str) -> LabRecord:
        """A new record under ``parent`` owned by this process (written at once)."""
        directory = make_owned_dir(parent, f"{LAB_DIR_PREFIX}{tag}-")
        pid = os.getpid()
        record = cls(directory, {"pid": pid, "start_time": _start_time(pid), "tag": tag,
                                 "subnet": subnet, "netns": [], "links": []})
        record.save()
        return record

    @classmethod
    def load(cls, directory: Path) -> LabRecord | None:
        """The record in ``directory``; None if it is missing or unreadable."""
        try:
            data = json.loads((directory / RECORD_FILE).read_text())
        except (OSError, ValueError):
            return None
        ok = isinstance(data, dict) and isinstance(data.get("pid"), int)
        return cls(directory, data) if ok else None

    @property
    def netns(self) -> list[str]:
        return [str(n) for n in self.data.get("netns", [])]

    @property
    def links(self) -> list[str]:
        return [str(n) for n in self.data.get("links", [])]

    def owner_alive(self) -> bool:
        """True while the process that made the record runs (pid and start time)."""
        started = _start_time(int(self.data["pid"]))
        recorded = self.data.get("start_time")
        return started is not None and (recorded is None or started == recorded)

    def add(self, kind: str, name: str) -> None:
        """Record the intent to create ``name`` (kind ``netns`` or ``links``)."""
        self.data[kind] = [*self.data.get(kind, []), name]
        self.save()

    @property
    def scratch(self) -> Path | None:
        """The lab hosts' scratch directory (in its owner's work directory)."""
        scratch = self.data.get("scratch")
        return Path(scratch) if isinstance(scratch, str) else None

    def set_scratch(self, directory: Path) -> None:
        self.data["scratch"] = str(directory)
        self.save()

    def discard(self, kind: str, name: str) -> None:
        self.data[kind] = [n for n in self.data.get(kind, []) if n != name]
        self.save()

    def save(self) -> None:
        tmp = self.directory / f"{RECORD_FILE}.tmp"
        tmp.write_text(json.dumps(self.data, indent=1))
        tmp.replace(self.directory / RECORD_FILE)


# -- teardown, shared by stop() and orphan cleanup ----------------------------------------
def _link_exists(name: str) -> bool:
    return (SYS_NET / name).exists()


def _netns_exists(name: str) -> bool:
    return (NETNS_DIR / name).exists()


def _kill_netns_processes(netns: str) -> list[str]:
    """SIGKILL every process in ``netns``; lines saying which."""
    try:
        out = _ip("netns", "pids", netns, what=f"listing processes in {netns}")
    except CommandError:
        return []
    lines = []
    for pid in (int(p) for p in out.split() if p.isdigit()):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
            lines.append(f"killed process {pid} in network namespace {netns}")
    return lines


def _delete(exists: Callable[[str], bool], argv: list[str], name: str,
            failures: list[str]) -> bool:
    """Run ``argv`` to delete ``name`` if it exists; True if it was removed."""
    if not exists(name):
        return False
    try:
        run(argv, timeout=COMMAND_TIMEOUT_S, what=f"deleting {name}")
    except CommandError as exc:
        if exists(name):
            failures.append(f"{name}: {exc}")
        return False
    return True


def teardown(netns: Sequence[str], links: Sequence[str]) -> tuple[list[str], list[str]]:
    """Remove exactly ``netns`` and ``links`` (those that still exist): kill the
    processes in each namespace, delete the links (a veth takes its peer along), then
    the namespaces. Returns (lines saying what was removed, failures). Each command
    has a 10 s timeout; never raises for a device that is already gone."""
    done: list[str] = []
    failures: list[str] = []
    for ns in netns:
        if _netns_exists(ns):
            done += _kill_netns_processes(ns)
    for link in reversed(links):  # veths before the bridge
        if _delete(_link_exists, ["ip", "link", "del", link], link, failures):
            done.append(f"removed link {link}")
    for ns in netns:
        if _delete(_netns_exists, ["ip", "netns", "del", ns], ns, failures):
            done.append(f"removed network namespace {ns}")
    return done, failures


def cleanup_orphaned_labs(parent: Path | None = None, *, dry_run: bool = False) -> list[str]:
    """Remove what labs of dead hvbench processes left: for each ``lab-*/lab.json``
    under ``parent`` (default: the machine's records directory, and the work directory,
    where hvbench before 2026-11-28 kept them) whose owner is gone, kill the
    processes in its recorded namespaces, delete the recorded namespaces and links that
    still exist and then the record. Nothing unrecorded is touched. Returns lines
    saying what was removed (and what could not be, whose record then stays).

    ``dry_run``: only lines saying what would be removed (``would remove ...``).

    Call it before :func:`hvbench.host.paths.remove_orphaned_dirs`, which would delete
    the records without their devices.
    """
    bases = [parent] if parent else [RECORDS_DIR, work_dir()]
    lines: list[str] = []
    pattern = f"{LAB_DIR_PREFIX}*/{RECORD_FILE}"
    for path in [p for base in bases for p in sorted(base.glob(pattern))]:
        record = LabRecord.load(path.parent)
        if record is None or record.owner_alive():
            continue
        if dry_run:
            lines += _would_tear_down(record)
            continue
        done, failures = remove_recorded(record)
        lines += done + [f"could not remove {f}" for f in failures]
    return lines


def remove_recorded(record: LabRecord) -> tuple[list[str], list[str]]:
    """:func:`teardown` of what ``record`` lists, then, if nothing failed, its scratch
    directory and the record itself. Returns (lines saying what was removed, failures);
    after a failure the record stays, for :func:`cleanup_orphaned_labs`."""
    done, failures = teardown(record.netns, record.links)
    if failures:
        return done, failures
    if record.scratch is not None and record.scratch.exists():
        shutil.rmtree(record.scratch, ignore_errors=True)
        done.append(f"removed lab scratch {record.scratch}")
    shutil.rmtree(record.directory, ignore_errors=True)
    done.append(f"removed lab record {record.directory}")
    return done, failures


def _would_tear_down(record: LabRecord) -> list[str]:
    """What :func:`cleanup_orphaned_labs` would do for ``record`` (nothing done)."""
    lines = [f"would kill the processes in network namespace {ns}" for ns in record.netns
             if _netns_exists(ns)]
    lines += [f"would remove link {link}" for link in reversed(record.links)
              if _link_exists(link)]
    lines += [f"would remove network namespace {ns}" for ns in record.netns
              if _netns_exists(ns)]
    if record.scratch is not None and record.scratch.exists():
        lines.append(f"would remove lab scratch {record.scratch}")
    return [*lines, f"would remove lab record {record.directory}"]


# -- hosts -------------------------------------------------------------------------------
class LabHost:
    """One lab host: a network namespace whose ``eth0`` is on the lab bridge.

    Platform-like: commands run in the namespace (``ip netns exec``) on hvbench's own
    filesystem; ``scratch_dir()`` is a private directory removed with the lab.
    """

    kind = "lab"

    def __init__(self, spec: LabHostSpec, *, netns: str, address: str, veth: str,
                 scratch: Path, registry: ProcessRegistry = REGISTRY) -> None:
        self.spec = spec
        self.name = spec.name
        self.netns = netns
        self.address = address
        self.veth = veth
        self._scratch = scratch
        self._registry = registry
        self._procs: list[BackgroundProcess] = []

    def start(self) -> None:
        """Nothing to do: :class:`NetLab` creates its hosts."""

    def stop(self) -> None:
        """Stop the processes :meth:`spawn` started (the lab removes the namespace)."""
        for proc in reversed(self._procs):
            proc.stop()
        self._procs.clear()

    def exec(self, argv: Sequence[str], *, timeout: float, stdin: bytes | None = None,
             env: Mapping[str, str] | None = None) -> ExecResult:
        """Run ``argv`` in the host's namespace; see
        :func:`~hvbench.platforms.process.run_in_group` (GuestTimeoutError after
        ``timeout`` s, the process group killed)."""
        return run_in_group(netns_argv(argv, self.netns), timeout=timeout, stdin=stdin,
                            env=env, cwd=self._scratch, what=f"lab host {self.name}")

    def spawn(self, argv: Sequence[str], *, name: str, ready: Callable[[], bool] | None = None,
              timeout: float = 10.0) -> BackgroundProcess:
        """Start a server in the host's namespace and return it started; see
        :meth:`BackgroundProcess.start` (CommandError if not ready in ``timeout`` s).
        It is stopped with the host if the caller does not stop it first."""
        proc = BackgroundProcess(argv, name=name, netns=self.netns, registry=self._registry)
        proc.start(ready, timeout)
        self._procs.append(proc)
        return proc

    def write_file(self, path: str, data: bytes) -> None:
        Path(path).write_bytes(data)

    def read_file(self, path: str) -> bytes:
        return Path(path).read_bytes()

    def scratch_dir(self) -> str:
        self._scratch.mkdir(parents=True, exist_ok=True)
        return str(self._scratch)

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "label": f"lab-{self.name}",
                "netns": self.netns, "address": self.address, "veth": self.veth,
                "spec": self.spec.model_dump(mode="json")}


def _check_host(specs: Iterable[LabHostSpec]) -> None:
    """Raise before anything is built if this host cannot build the lab: not root
    (RootRequiredError), ip/tc/unshare missing (ToolMissingError), delay or loss without
    netem (HostError naming the host)."""
    specs = list(specs)
    if not facts.is_root():
        raise RootRequiredError("building a network lab (namespaces, veths, a bridge)")
    require_tool("ip")
    if any(s.shaped for s in specs):
        require_tool("tc")
    for spec in specs:
        if spec.needs_netem:
            require_tool("unshare")
            supported, reason = netem_support()
            if not supported:
                raise HostError(
                    f"lab host {spec.name!r}: its link asks for delay_ms={spec.delay_ms:g} "
                    f"and loss_pct={spec.loss_pct:g}, but {reason}; remove delay_ms and "
                    "loss_pct from that host or run on a kernel with netem"
                )


def used_networks() -> list[str]:
    """Every IPv4 network and address the root namespace uses (addresses and routes of
    all tables), from ``ip -j``. Raises CommandError if ip fails (10 s timeout)."""
    used: list[str] = []
    addrs = json.loads(_ip("-j", "-4", "addr", "show", what="listing addresses") or "[]")
    for link in addrs:
        used += [f"{a['local']}/{a['prefixlen']}" for a in link.get("addr_info", [])
                 if "local" in a]
    routes = json.loads(_ip("-j", "-4", "route", "show", "table", "all",
                            what="listing routes") or "[]")
    used += [str(r["dst"]) for r in routes if r.get("dst") not in (None, "default")]
    return used


# -- the lab -----------------------------------------------------------------------------
class NetLab(StartStop):
    """The lab of a :class:`LabSpec`; see the module docstring.

    Errors from :meth:`start` and :meth:`add_host`: :class:`RootRequiredError`,
    :class:`ToolMissingError`, :class:`HostError` (no free subnet, a name clash, delay or
    loss without netem), :class:`CommandError` (an ``ip``/``tc`` command failed, with
    argv and output). Whatever they had built is removed before they raise.
    """

    def __init__(self, spec: LabSpec, *, registry: ProcessRegistry = REGISTRY) -> None:
        self.spec = spec
        self.name = "netlab"
        self.hosts: dict[str, LabHost] = {}
        self.prefix_len = names.PREFIX_LEN
        self._registry = registry
        self._record: LabRecord | None = None
        self._plan: names.AddressPlan | None = None
        self._tag = ""
        self._count = 0
        self._guests: list[str] = []
        #: The lab hosts' scratch directories (in the work directory: a served file
        #: set or an exported image does not belong on /run's tmpfs).
        self._scratch: Path | None = None

    # -- properties ----------------------------------------------------------------------
    def _require_plan(self) -> names.AddressPlan:
        if self._plan is None or self._record is None:
            raise HostError("the network lab is not started")
        return self._plan

    @property
    def tag(self) -> str:
        return self._tag

    @property
    def bridge(self) -> str:
        self._require_plan()
        return names.bridge_name(self._tag)

    @property
    def host_address(self) -> str:
        """The root namespace's address on the lab (the bridge's, ``.1``)."""
        return self._require_plan().bridge_address

    @property
    def subnet(self) -> str:
        return self._require_plan().subnet

    @property
    def record_dir(self) -> Path | None:
        return self._record.directory if self._record else None

    def host(self, name: str) -> LabHost:
        """The lab host ``name``. Raises HostError naming the hosts there are."""
        if name not in self.hosts:
            known = ", ".join(sorted(self.hosts)) or "none"
            raise HostError(f"no lab host named {name!r} (lab hosts: {known})")
        return self.hosts[name]

    def interfaces(self) -> list[str]:
        """The lab's root-namespace interfaces: the bridge, then each host's veth end."""
        return [self.bridge] + [h.veth for h in self.hosts.values()]

    def allocate_address(self) -> str:
        """The next free guest address (``.100`` up). HostError when all are taken."""
        plan = self._require_plan()
        for address in plan.guest_addresses():
            if address not in self._guests:
                self._guests.append(address)
                return address
        raise HostError(f"lab subnet {plan.subnet} has no free guest address left")

    # -- start ---------------------------------------------------------------------------
    def start(self) -> None:
        """Build the bridge and every host of the spec (10 s timeout per command).
        Raises (see the class docstring) with nothing left behind."""
        if self._record is not None:
            raise HostError("the network lab is already started")
        _check_host(self.spec.hosts)
        try:
            self._start_bridge()
            for spec in self.spec.hosts:
                self._add(spec)
        except BaseException as exc:
            self._stop_after_failure(exc)
            raise

    def _stop_after_failure(self, exc: BaseException) -> None:
        try:
            self.stop()
        except HvbenchError as cleanup:
            exc.add_note(f"cleaning up the half-built lab failed too: {cleanup}")

    def _choose_subnet(self) -> str:
        used = used_networks()
        if self.spec.subnet is not None:
            if names.overlaps(self.spec.subnet, used):
                raise HostError(f"lab subnet {self.spec.subnet} overlaps a network this "
                                "host already uses (see `ip addr` and `ip route`)")
            return self.spec.subnet
        subnet = names.choose_subnet(used, start=int(self._tag, 16) % 256)
        if subnet is None:
            raise HostError(f"no free /24 left in {names.AUTO_BASE} for a network lab")
        return subnet

    def _start_bridge(self) -> None:
        self._tag = names.random_tag()
        self.name = f"netlab {self._tag}"
        subnet = self._choose_subnet()
        self._record = LabRecord.create(records_dir(), self._tag, subnet)
        self._scratch = make_owned_dir(work_dir(), f"{LAB_DIR_PREFIX}{self._tag}-")
        self._record.set_scratch(self._scratch)
        self._plan = names.AddressPlan(subnet)
        self._registry.add(self)
        bridge = names.bridge_name(self._tag)
        self._create("links", bridge, ["ip", "link", "add", bridge, "type", "bridge"])
        _ip("link", "set", "dev", bridge, "addrgenmode", "none", what="configuring the bridge")
        # The owner's pid in the bridge's alias: on a shared machine, whoever meets a
        # hvb- bridge (a test's leak check, an operator) can tell whose lab it is.
        _ip("link", "set", "dev", bridge, "alias", f"{OWNER_ALIAS_PREFIX}{os.getpid()}",
            what="labelling the lab bridge with its owner")
        _ip("addr", "add", self._plan.with_prefix(self._plan.bridge_address), "dev", bridge,
            what="addressing the lab bridge")
        if self.spec.mtu != DEFAULT_MTU:
            # A bridge takes the smallest MTU of its ports as they join; each port is set
            # before it joins (the veths here, a guest's tap in QemuPlatform).
            _ip("link", "set", "dev", bridge, "mtu", str(self.spec.mtu),
                what="setting the lab bridge's MTU")
        _ip("link", "set", "dev", bridge, "up", what="bringing the lab bridge up")

    def _create(self, kind: str, name: str, argv: list[str]) -> None:
        """Record ``name`` (kind ``links``/``netns``), then create it with ``argv``.
        HostError if the name is taken; on failure the name is unrecorded."""
        exists = _link_exists if kind == "links" else _netns_exists
        if exists(name):
            what = "link" if kind == "links" else "network namespace"
            raise HostError(f"cannot create {name}: a {what} of that name already exists")
        record = self._record
        if record is None:
            raise HostError("internal: the lab has no record")
        record.add(kind, name)
        try:
            run(argv, timeout=COMMAND_TIMEOUT_S, what=f"creating {name}")
        except BaseException:
            record.discard(kind, name)
            raise

    # -- hosts ---------------------------------------------------------------------------
    def add_host(self, spec: LabHostSpec) -> LabHost:
        """Add a host to a started lab (recorded for cleanup like the others). Raises
        HostError for a reserved or taken name or a lab that is not started, else as
        :meth:`start`; a host that fails half-way is removed again."""
        self._require_plan()
        if spec.name in RESERVED_HOST_NAMES:
            raise HostError(f"lab host name {spec.name!r} is reserved")
        if spec.name in self.hosts:
            raise HostError(f"the lab already has a host named {spec.name!r}")
        _check_host([spec])
        netns, veth = names.netns_name(self._tag, spec.name), self._next_veth()
        try:
            return self._add(spec, netns, veth)
        except BaseException as exc:
            self._forget(netns, veth, exc)
            raise

    def _forget(self, netns: str, veth: str, exc: BaseException) -> None:
        """Remove a half-built host: only what its record says this lab created."""
        record = self._record
        if record is None:
            return
        mine_ns = [n for n in record.netns if n == netns]
        mine_links = [n for n in record.links if n == veth]
        _, failures = teardown(mine_ns, mine_links)
        if failures:
            exc.add_note("removing the half-built host failed: " + "; ".join(failures))
            return
        for name in mine_ns:
            record.discard("netns", name)
        for name in mine_links:
            record.discard("links", name)

    def _next_veth(self) -> str:
        return names.veth_name(self._tag, self._count)

    def _add(self, spec: LabHostSpec, netns: str | None = None,
             veth: str | None = None) -> LabHost:
        plan = self._require_plan()
        if spec.name in self.hosts:
            raise HostError(f"the lab already has a host named {spec.name!r}")
        netns = netns or names.netns_name(self._tag, spec.name)
        veth = veth or self._next_veth()
        address = plan.lab_host_address(self._count)
        self._count += 1
        self._create("netns", netns, ["ip", "netns", "add", netns])
        self._create("links", veth, ["ip", "link", "add", veth, "type", "veth", "peer",
                                     "name", names.NETNS_IFNAME, "netns", netns])
        self._wire(netns, veth, plan.with_prefix(address))
        for argv in link_shaping_commands(spec, veth, netns, names.NETNS_IFNAME):
            run(argv, timeout=COMMAND_TIMEOUT_S, what=f"shaping the link of {spec.name}")
        scratch = (self._scratch or work_dir()) / "hosts" / spec.name
        scratch.mkdir(parents=True, exist_ok=True)
        host = LabHost(spec, netns=netns, address=address, veth=veth, scratch=scratch,
                       registry=self._registry)
        self.hosts[spec.name] = host
        return host

    def _wire(self, netns: str, veth: str, address: str) -> None:
        """Bridge the root end, address and raise both ends (IPv4 only: no IPv6
        link-local addresses, so the lab carries no background IPv6 chatter)."""
        eth = names.NETNS_IFNAME
        mtu = str(self.spec.mtu)
        steps: list[tuple[str, ...]] = [
            ("-n", netns, "link", "set", "dev", "lo", "up"),
            ("link", "set", "dev", veth, "mtu", mtu),
            ("-n", netns, "link", "set", "dev", eth, "mtu", mtu),
            ("link", "set", "dev", veth, "addrgenmode", "none"),
            ("link", "set", "dev", veth, "master", names.bridge_name(self._tag)),
            ("link", "set", "dev", veth, "up"),
            ("-n", netns, "link", "set", "dev", eth, "addrgenmode", "none"),
            ("-n", netns, "addr", "add", address, "dev", eth),
            ("-n", netns, "link", "set", "dev", eth, "up"),
        ]
        for step in steps:
            _ip(*step, what=f"wiring {netns}")

    # -- stop ----------------------------------------------------------------------------
    def stop(self) -> None:
        """Stop the hosts' servers, kill what else runs in their namespaces, delete the
        lab's links and namespaces and its record. Safe twice and after a failed start.
        Raises HostError if something could not be removed (its record then stays, for
        :func:`cleanup_orphaned_labs` once this process has exited)."""
        record = self._record
        if record is None:
            return
        try:
            for host in reversed(list(self.hosts.values())):
                with contextlib.suppress(Exception):
                    host.stop()
            _, failures = teardown(record.netns, record.links)
        finally:
            self._registry.discard(self)
            self._record = None
            self._plan = None
            self.hosts.clear()
            self._guests.clear()
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None
        if failures:
            raise HostError(f"could not remove all of network lab {self._tag} (its record "
                            f"stays in {record.directory}): " + "; ".join(failures))
        shutil.rmtree(record.directory, ignore_errors=True)
