"""How long libvirt itself takes to start a domain, and why it is slow when it is.

libvirt checks its cached QEMU capabilities at every look-up (parsing a domain,
defining it, starting it). One check compares whether its probe of QEMU found KVM with
whether libvirt's QEMU user may open /dev/kvm now; when the two disagree (KVM present
but not accessible to that user, as on this project's test host) every look-up finds
the capabilities stale and starts QEMU again to re-probe them: each define then costs
several probes (measured here: a define 32 s, a createXML 36 s, a start of a defined
domain 4 s, one probe about 4 s under TCG).

:func:`start_verdict` times libvirt's define and start of the smallest domain
(:func:`~hvbench.model.libvirt_xml.tiny_domain_xml`, started paused, destroyed and
undefined at once) and names the cause in one line; the verdict is cached per boot
like the KVM verdict. :func:`time_tiny_start` is also what ``bench/libvirt_start.py``
runs for both paths (``createXML`` against define then start).
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import stat
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hvbench.errors import HostError
from hvbench.host import facts
from hvbench.host.paths import cache_dir
from hvbench.model.libvirt_xml import DOMAIN_PREFIX, caps_have_kvm, tiny_domain_xml
from hvbench.platforms.libvirt import QEMU_USER, connect

# libvirt's bindings are imported where a function talks to libvirt, as in
# hvbench.platforms.libvirt (which says why).
if TYPE_CHECKING:
    import libvirt

#: A define of the tiny domain slower than this ran at least one QEMU capability probe:
#: with valid cached capabilities a define starts no process and returns in
#: milliseconds, while one probe took about 4 s here (2 cores, TCG).
SLOW_DEFINE_S = 2.0
CACHE_FILE = "libvirt-start.json"
KVM_DEVICE = "/dev/kvm"


@dataclass(frozen=True)
class StartVerdict:
    """libvirt's own times for the tiny domain and, when slow, why."""

    uri: str
    define_s: float
    start_s: float
    slow: bool
    cause: str
    libvirt_version: int
    boot_id: str
    measured_at: str
    cached: bool = False


def time_tiny_start(conn: libvirt.virConnect, *, transient: bool) -> dict[str, float]:
    """Start the tiny domain paused and destroy it: ``{"create_s"}`` through
    ``createXML`` (``transient``), else ``{"define_s", "start_s"}`` (``defineXML``, then
    ``create``). The domain is named ``hvbench-<pid>-doctor`` with hvbench's owner
    element, so ``hvbench cleanup`` removes it after a ``kill -9``. Bounded by libvirt's
    own timeouts. Raises :class:`HostError` with libvirt's words."""
    import libvirt  # noqa: PLC0415 - deferred

    xml = tiny_domain_xml(f"{DOMAIN_PREFIX}{os.getpid()}-doctor", os.getpid())
    paused = libvirt.VIR_DOMAIN_START_PAUSED
    domain = None
    times: dict[str, float] = {}
    try:
        started = time.monotonic()
        if transient:
            domain = conn.createXML(xml, paused)
            times["create_s"] = time.monotonic() - started
        else:
            domain = conn.defineXML(xml)
            times["define_s"] = time.monotonic() - started
            started = time.monotonic()
            domain.createWithFlags(paused)
            times["start_s"] = time.monotonic() - started
    except libvirt.libvirtError as exc:
        raise HostError(f"libvirt could not start a tiny domain: {exc}") from exc
    finally:
        if domain is not None:
            with contextlib.suppress(libvirt.libvirtError):
                if domain.isActive():
                    domain.destroy()
            with contextlib.suppress(libvirt.libvirtError):
                if domain.isPersistent():
                    domain.undefine()
    return times


def may_read_write(mode: int, owner: int, group: int, uid: int, groups: set[int]) -> bool:
    """Whether a user (``uid``, ``groups``) may read and write a file with ``mode``,
    ``owner`` and ``group`` by its permission bits (ACLs aside; pure)."""
    if uid == 0:
        return True
    if uid == owner:
        shift = 6
    elif group in groups:
        shift = 3
    else:
        shift = 0
    return (mode >> shift) & 0o6 == 0o6


def user_kvm_access(user: str = QEMU_USER) -> bool | None:
    """Whether ``user`` may open /dev/kvm read-write; None when either is missing."""
    try:
        info = Path(KVM_DEVICE).stat()
        entry = pwd.getpwnam(user)
    except (OSError, KeyError):
        return None
    groups = set(os.getgrouplist(user, entry.pw_gid))
    return may_read_write(stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid,
                          entry.pw_uid, groups)


def slow_cause(define_s: float, caps_kvm: bool, user_kvm: bool | None,
               user: str = QEMU_USER) -> str:
    """Why a define took ``define_s`` seconds, in one line (pure); empty when it was
    not slow. ``caps_kvm``: libvirt's capabilities offer KVM; ``user_kvm``: libvirt's
    QEMU user may open /dev/kvm."""
    if define_s <= SLOW_DEFINE_S:
        return ""
    if caps_kvm and user_kvm is False:
        return (f"libvirt re-probes QEMU's capabilities at every look-up: its probe found "
                f"KVM but its QEMU user {user} cannot open {KVM_DEVICE}, so its cached "
                f"capabilities are stale each time (give {user} read-write access to "
                f"{KVM_DEVICE}, e.g. its group kvm and mode 0660, then restart libvirtd)")
    return (f"unexplained: defining a tiny domain took {define_s:.1f} s (over "
            f"{SLOW_DEFINE_S:g} s: at least one QEMU capability probe), and the KVM "
            f"mismatch that makes libvirt re-probe is absent (KVM in libvirt's "
            f"capabilities: {caps_kvm}; {user} may open {KVM_DEVICE}: {user_kvm})")


def measure(uri: str) -> StartVerdict:
    """Time the tiny domain's define and start at ``uri`` and name a slow probe.
    Raises :class:`HostError` when libvirt does not answer or refuses the domain."""
    import libvirt  # noqa: PLC0415 - deferred

    conn = connect(uri)
    try:
        times = time_tiny_start(conn, transient=False)
        cause = ""
        if times["define_s"] > SLOW_DEFINE_S:
            cause = slow_cause(times["define_s"], caps_have_kvm(conn.getCapabilities()),
                               user_kvm_access())
        version = conn.getLibVersion()
    except libvirt.libvirtError as exc:
        raise HostError(f"libvirt at {uri}: {exc}") from exc
    finally:
        conn.close()
    return StartVerdict(
        uri=uri, define_s=round(times["define_s"], 3), start_s=round(times["start_s"], 3),
        slow=bool(cause), cause=cause, libvirt_version=version, boot_id=facts.boot_id(),
        measured_at=datetime.now(UTC).isoformat(timespec="seconds"))


def _load(uri: str) -> StartVerdict | None:
    try:
        data = json.loads((cache_dir() / CACHE_FILE).read_text())[uri]
        verdict = StartVerdict(**{**data, "cached": True})
    except (OSError, ValueError, TypeError, KeyError):
        return None
    return verdict if verdict.boot_id == facts.boot_id() else None


def _store(verdict: StartVerdict) -> None:
    path = cache_dir() / CACHE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        stored: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        stored = {}
    stored[verdict.uri] = asdict(verdict)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(stored, indent=2))
    tmp.replace(path)


def start_verdict(uri: str, *, refresh: bool = False) -> dict[str, Any]:
    """For ``hvbench doctor``: the cached verdict for ``uri`` of this boot, else a new
    measurement (cached; up to a minute where libvirt re-probes on every look-up), as
    JSON-ready data; ``{"error": ...}`` when libvirt cannot be asked. Never raises."""
    verdict = None if refresh else _load(uri)
    if verdict is None:
        try:
            verdict = measure(uri)
        except HostError as exc:
            return {"error": str(exc).split(". Start")[0]}
        _store(verdict)
    return asdict(verdict)
