"""The latency of a guest's disk I/O split into the layers it was measured at.

Pure. Three measured points on the path of one request, each a mean per request over
the phase:

- fio's completion latency (``clat_mean_us``): from the request's submission by the
  application to fio seeing it complete;
- the guest block device's await (``guest.disk.<dev>.await_ms``, the guest sampler):
  from the request entering the guest's block layer to its completion there;
- the host block device's await (``res.disk.await_ms``): the device itself.

Between them lie the layers (``res.lat.*`` in the metric catalogue):

==================  =====================================  ===========================
layer               measured as                            what it holds
==================  =====================================  ===========================
``res.lat.guest_ms``  clat - guest await                   the guest kernel above its
                                                           block layer, and the vCPU's
                                                           time to reap completions
``res.lat.virt_ms``   guest await - host await             the virtual device, QEMU's
                                                           block layer and the host's
                                                           file system and page cache
``res.lat.device_ms`` host await                           the host device
==================  =====================================  ===========================

A layer whose two ends were not both measured is absent, never estimated: no guest
sampler (``guest_sampling = false``, a native cell) leaves the first two out, no host
diskstats (a remote guest) the last two. A layer can come out negative when its ends
saw different requests: the host device also served others (it is device-wide), or
the host page cache served the guest's requests without the device; it is reported
as measured.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # resources imports this module: only the type, for annotations
    from hvbench.analysis.resources import CellModel

__all__ = ["GUEST_DISK_PREFIX", "LAYERS", "LayerRow", "guest_await_ms", "latency_layers",
           "layer_rows"]

GUEST_DISK_PREFIX = "guest.disk."
#: The layer metrics, from the application down to the device.
LAYERS = ("res.lat.guest_ms", "res.lat.virt_ms", "res.lat.device_ms")


def guest_await_ms(values: Mapping[str, float]) -> float | None:
    """The await of the guest device that moved most requests, if it moved any."""
    devices = {m.split(".")[2] for m in values if m.startswith(GUEST_DISK_PREFIX)}

    def requests(dev: str) -> float:
        return sum(values.get(f"{GUEST_DISK_PREFIX}{dev}.{k}", 0.0) for k in ("r_s", "w_s"))

    busy = [dev for dev in sorted(devices) if requests(dev) > 0]
    if not busy:
        return None
    return values.get(f"{GUEST_DISK_PREFIX}{max(busy, key=requests)}.await_ms")


def latency_layers(values: Mapping[str, float],
                   host_await_ms: float | None) -> dict[str, float]:
    """The ``res.lat.*`` layers of one guest cell's metric means (see the module
    docstring); ``host_await_ms`` is the host device's (None: not measured)."""
    out: dict[str, float] = {}
    clat_us = values.get("clat_mean_us")
    guest = guest_await_ms(values)
    if clat_us is not None and guest is not None:
        out["res.lat.guest_ms"] = clat_us / 1000.0 - guest
    if guest is not None and host_await_ms is not None:
        out["res.lat.virt_ms"] = guest - host_await_ms
    if host_await_ms is not None:
        out["res.lat.device_ms"] = host_await_ms
    return out


@dataclass(frozen=True)
class LayerRow:
    """One guest cell's latency per layer and requests in flight per layer (means over
    its repetitions; None: not measured)."""

    workload: str
    phase: str
    platform: str
    #: fio's mean completion latency, ms: the sum of the three layers when all exist.
    clat_ms: float | None
    guest_ms: float | None
    virt_ms: float | None
    device_ms: float | None
    #: Requests in flight: fio's mean iodepth, the guest device's and the host's.
    depth: float | None
    guest_queue: float | None
    host_queue: float | None


def _guest_queue(values: Mapping[str, float]) -> float | None:
    """avgqu-sz of the guest device that moved most requests (as for its await)."""
    devices = {m.split(".")[2] for m in values if m.startswith(GUEST_DISK_PREFIX)}
    busiest = sorted(devices, key=lambda d: -sum(
        values.get(f"{GUEST_DISK_PREFIX}{d}.{k}", 0.0) for k in ("r_s", "w_s")))
    return values.get(f"{GUEST_DISK_PREFIX}{busiest[0]}.avgqu_sz") if busiest else None


def layer_rows(models: Iterable[CellModel]) -> list[LayerRow]:
    """A row for every guest cell with at least one guest-side layer measured (the
    guest sampler ran), in the models' order."""
    rows = []
    for m in models:
        layers = {k: m.derived.get(k) for k in LAYERS}
        if m.is_native or (layers["res.lat.guest_ms"] is None
                           and layers["res.lat.virt_ms"] is None):
            continue
        clat = m.values.get("clat_mean_us")
        rows.append(LayerRow(
            m.workload, m.phase, m.platform, None if clat is None else clat / 1000.0,
            layers["res.lat.guest_ms"], layers["res.lat.virt_ms"], layers["res.lat.device_ms"],
            m.values.get("depth_mean"), _guest_queue(m.values), m.derived.get("res.disk.queue")))
    return rows
