"""Is KVM usable? Proven by booting a guest with KVM under a timeout, cached per boot.

/dev/kvm may exist and open yet a KVM guest hang after its kernel starts (broken nested
virtualization). Only a guest whose agent answers proves KVM usable, so the probe boots
one. The verdict is cached in the cache directory keyed by the kernel's boot id: a study
does not pay the probe again until the host reboots.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from hvbench.errors import GuestError, HvbenchError
from hvbench.host import facts, interrupt
from hvbench.host.paths import cache_dir
from hvbench.image.builder import find_image
from hvbench.model.spec import VmSpec
from hvbench.platforms.qemu import QemuPlatform

DEFAULT_PROBE_TIMEOUT = 20.0
CACHE_FILE = "kvm-probe.json"


@dataclass(frozen=True)
class KvmStatus:
    """The verdict on KVM. ``usable`` is None when it could not be probed."""

    present: bool
    present_reason: str
    usable: bool | None
    reason: str
    probe_seconds: float | None
    boot_id: str
    probed_at: str
    cached: bool = False


def _cache_path() -> Path:
    return cache_dir() / CACHE_FILE


def _load_cached() -> KvmStatus | None:
    try:
        data = json.loads(_cache_path().read_text())
        status = KvmStatus(**{**data, "cached": True})
    except (OSError, ValueError, TypeError):
        return None
    return status if status.boot_id == facts.boot_id() else None


def _store(status: KvmStatus) -> None:
    path = _cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(status), indent=2))
    tmp.replace(path)


def probe_kvm(timeout: float = DEFAULT_PROBE_TIMEOUT) -> KvmStatus:
    """Boot a minimal guest with KVM; usable only if its agent answers in ``timeout`` s.

    Never raises for a failed probe: the failure is the verdict. Not cached here.
    """
    now = datetime.now(UTC).isoformat(timespec="seconds")
    present, present_reason = facts.kvm_present()

    def verdict(usable: bool | None, reason: str, seconds: float | None) -> KvmStatus:
        return KvmStatus(present, present_reason, usable, reason, seconds, facts.boot_id(), now)

    if not present:
        return verdict(False, present_reason, None)
    if find_image() is None:
        return verdict(None, "not probed: no guest image (run `hvbench image build`)", None)
    started = time.monotonic()
    guest = QemuPlatform(VmSpec(accel="kvm", memory_mib=256), name="hvbench-kvm-probe",
                         boot_timeout=timeout)
    try:
        guest.launch()
    except GuestError as exc:
        # A signal is no verdict on KVM: it must neither be cached nor end the probe.
        interrupt.check(exc)
        return verdict(False, _failure_reason(exc, timeout), time.monotonic() - started)
    except HvbenchError as exc:
        interrupt.check(exc)
        return verdict(False, f"KVM guest could not start: {exc}", time.monotonic() - started)
    finally:
        guest.stop()
    seconds = time.monotonic() - started
    return verdict(True, f"a KVM guest booted and answered in {seconds:.1f} s", seconds)


def _failure_reason(exc: GuestError, timeout: float) -> str:
    """Why the probe guest failed: QEMU's own last words if it exited, else the hang."""
    if exc.exit_status is None:
        return (f"a KVM guest did not answer within {timeout:g} s (its kernel started "
                "but it hangs: nested virtualization is broken on this host?)")
    qemu_lines = exc.console_tail.split("[qemu.log]", 1)[-1].strip().splitlines()
    last = next((line for line in reversed(qemu_lines) if "error" in line.lower()),
                qemu_lines[-1] if qemu_lines else "no output")
    return f"a KVM guest's QEMU exited with status {exc.exit_status}: {last.strip()}"


def cached_kvm_status() -> KvmStatus | None:
    """This boot's cached verdict, or None when KVM was not probed since boot (never
    probes)."""
    return _load_cached()


def kvm_status(refresh: bool = False, timeout: float = DEFAULT_PROBE_TIMEOUT) -> KvmStatus:
    """The cached verdict for this boot, probing (and caching) when there is none.

    A verdict of "not probed" (no image yet) is not cached, so it is retried later.
    """
    if not refresh:
        cached = _load_cached()
        if cached is not None:
            return cached
    status = probe_kvm(timeout)
    if status.usable is not None:
        _store(status)
    return status
