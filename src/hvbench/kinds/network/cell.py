"""Network cells: iperf3 between the platform (the client) and its peer (the root
namespace, a lab host, or a second guest of the same spec booted for the cell)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from hvbench.errors import HvbenchError
from hvbench.kinds.network.spec import NetworkWorkloadSpec
from hvbench.model.workload import WorkloadSpec
from hvbench.platforms.base import Platform
from hvbench.platforms.kinds import platform_kind
from hvbench.run.cells.base import (
    CellContext,
    CellResult,
    MonitorWindow,
    Simple,
    as_spec,
    cell_result,
    vhost_records,
)
from hvbench.run.lab_session import LabSession, lab_guest_endpoint
from hvbench.workloads.endpoints import Endpoint
from hvbench.workloads.iperf3 import run_iperf3

#: Rough seconds besides the measured duration (servers, JSON, the peer's boot aside).
OVERHEAD_S = 5.0


class NetworkCell(Simple):
    """``prepare`` reaches (or boots) the peer; ``run`` measures one window."""

    kind = "network"
    boots_platform = True
    needs_lab = True

    def __init__(self) -> None:
        self._stack = contextlib.ExitStack()
        self._client: Endpoint | None = None
        self._server: Endpoint | None = None
        self._peers: list[Platform] = []

    def estimate_s(self, spec: WorkloadSpec) -> float:
        return as_spec(spec, NetworkWorkloadSpec).duration_s + OVERHEAD_S

    def guests(self, spec: WorkloadSpec) -> int:
        return 1 if as_spec(spec, NetworkWorkloadSpec).peer == "guest" else 0

    def prepare(self, ctx: CellContext) -> None:
        session, platform = ctx.lab(), ctx.started()
        self._client = session.platform_endpoint(platform)
        self._server, self._peers = self._stack.enter_context(_peer(ctx, session, platform))

    def run(self, ctx: CellContext) -> CellResult:
        spec = ctx.spec(NetworkWorkloadSpec)
        session, platform = ctx.lab(), ctx.started()
        if self._client is None or self._server is None:
            raise HvbenchError("internal: a network cell ran before its prepare()")
        # Made once the peer is up, so a peer guest's taps are sampled too.
        monitors = ctx.monitors(platform, session.interfaces(platform, *self._peers))
        window = MonitorWindow(monitors)
        outcome = run_iperf3(spec, self._client, self._server, window=window)
        result = cell_result([window.measured([outcome])])
        result.measurements += vhost_records(platform, spec.phase_list())
        return result

    def release(self, ctx: CellContext) -> None:
        self._peers = []
        self._stack.close()


@contextlib.contextmanager
def _peer(ctx: CellContext, session: LabSession, platform: Platform
          ) -> Iterator[tuple[Endpoint, list[Platform]]]:
    """The peer endpoint of a network cell; boots (and stops) a second guest of the
    platform's spec for ``peer = "guest"``. Raises what booting it raises
    (:class:`GuestBootError`) and :class:`HostError` for a lab host the lab lacks."""
    spec = ctx.spec(NetworkWorkloadSpec)
    cell = ctx.cell
    if spec.peer == "host":
        yield session.root_endpoint(), []
        return
    if spec.peer != "guest":
        yield session.lab_endpoint(spec.peer), []
        return
    if not platform.is_guest:
        raise HvbenchError(f"cell {cell.name}: peer = guest needs a guest platform")
    key = f"{cell.platform.name}-peer"
    peer = platform_kind(cell.platform.spec).build(
        cell.platform.spec, name=f"{platform.name[:24]}-peer",
        wire=lambda vm: session.guest_spec(vm, key))
    peer.start()  # stops itself when it fails
    try:
        yield lab_guest_endpoint(peer, session.lab.host_address), [peer]
    finally:
        peer.stop()
