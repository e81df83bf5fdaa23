"""Propagation cells: one image from the cell's repository lab host to the node (this
host), booted as the platform's VM and terminated; the cell boots its own guest."""

from __future__ import annotations

from hvbench.errors import HvbenchError
from hvbench.kinds.propagation.driver import run_propagation
from hvbench.kinds.propagation.spec import PropagationWorkloadSpec
from hvbench.model.study import Study
from hvbench.model.workload import WorkloadSpec
from hvbench.monitors.sampler import MonitorResult
from hvbench.platforms.accel import choose_accel
from hvbench.run.cells.base import (
    CellContext,
    CellResult,
    MeasuredWindow,
    MonitorWindow,
    Simple,
    as_spec,
    cell_result,
    guest_vm_of,
)
from hvbench.workloads.outcome import PhaseOutcome
from hvbench.workloads.repository import ImageRepository

#: Rough seconds of one propagation under TCG besides the transfer and the guest's
#: boot (which a plan adds): the repository's image, verification, the shutdown.
OVERHEAD_S = 20.0


class PropagationCell(Simple):
    """``prepare`` starts the repository (once per run: it stays for the next
    repetition); ``run`` propagates one image under the lab's interface monitors."""

    kind = "propagation"
    boots_platform = False
    needs_lab = True

    def __init__(self) -> None:
        self._repo: ImageRepository | None = None

    def estimate_s(self, spec: WorkloadSpec) -> float:
        typed = as_spec(spec, PropagationWorkloadSpec)
        return OVERHEAD_S + typed.image_size * 8 / 1e9  # about a 1 Gbit/s link

    def guests(self, spec: WorkloadSpec) -> int:
        return 1

    def prepare(self, ctx: CellContext) -> None:
        """The repository on ``spec.repository``, with the servers of every method the
        study fetches from there. Raises :class:`HostError` (no such lab host),
        :class:`CommandError` (a server does not listen within 15 s),
        :class:`ToolMissingError`."""
        spec = ctx.spec(PropagationWorkloadSpec)
        methods = [*repository_methods(ctx.study, spec.repository), spec.method]
        self._repo = ctx.lab().repository(spec.repository, methods)

    def run(self, ctx: CellContext) -> CellResult:
        """Bounded by the workload's ``timeout_s``; raises what
        :func:`~hvbench.kinds.propagation.driver.run_propagation` raises. The window
        (the lab's interfaces, among them the repository's veth) spans the request to
        the client's exit and goes with the ``transfer`` phase; the other phases carry
        their own duration and no samples. The raw document is stored once."""
        spec = ctx.spec(PropagationWorkloadSpec)
        session = ctx.lab()
        if self._repo is None:
            raise HvbenchError("internal: a propagation cell ran before its prepare()")
        vm = session.guest_spec(guest_vm_of(ctx.cell), f"{ctx.cell.platform.name}-propagation")
        monitors = ctx.monitors(session.host, session.interfaces())
        window = MonitorWindow(monitors)
        try:
            outcomes = run_propagation(spec, vm, repo=self._repo, node_dir=session.node_dir(),
                                       window=window, name=session.guest_name(ctx.cell),
                                       accel=choose_accel(vm))
        except BaseException:
            monitors.abort()
            raise
        return cell_result([_window(o, window) for o in outcomes], raw_once="propagation")


def _window(outcome: PhaseOutcome, window: MonitorWindow) -> MeasuredWindow:
    if outcome.phase == "transfer":
        return window.measured([outcome])
    duration = outcome.metrics.get("duration_s", (0.0, "s"))[0]
    return MeasuredWindow([outcome], duration, MonitorResult())


def repository_methods(study: Study, host: str) -> list[str]:
    """Every propagation method the study's workloads fetch from lab host ``host``."""
    specs = [v.spec for v in study.workloads if isinstance(v.spec, PropagationWorkloadSpec)]
    return sorted({s.method for s in specs if s.repository == host})
