"""Web cells: an HTTP server on the platform (natively: in the lab host ``native``),
httperf on the workload's client host; one measured window per file size, and with
``latency`` a wrk pass per size after its window (so the window's monitors, and
``phase_wall_s``, stay httperf's alone)."""

from __future__ import annotations

import contextlib

from hvbench.errors import HvbenchError
from hvbench.kinds.web.spec import WebWorkloadSpec
from hvbench.model.rates import is_relative, offered_rate
from hvbench.model.study import Cell, rate_reference
from hvbench.model.workload import WorkloadSpec
from hvbench.monitors.session import PhaseMonitors
from hvbench.run.cells.base import (
    CellContext,
    CellResult,
    MonitorWindow,
    Simple,
    as_spec,
    cell_result,
    vhost_records,
)
from hvbench.workloads.endpoints import Endpoint
from hvbench.workloads.web import run_web_phase, serve_web
from hvbench.workloads.wrk import RAW_KIND as WRK_RAW_KIND
from hvbench.workloads.wrk import check_wrk, run_wrk_pass

#: Rough seconds per file size besides the measured duration; a max-rate search runs
#: about this many rates per size.
OVERHEAD_S = 3.0
MAX_RATE_STEPS = 6
#: Seconds a wrk pass takes besides its own ``seconds`` (staging its script, start-up).
WRK_OVERHEAD_S = 0.5
#: The measured maximum a relative rate took its share of, per phase.
RATE_REF_METRIC = "rate_ref_rps"


class WebCell(Simple):
    """``prepare`` starts the server; ``run`` measures each file size."""

    kind = "web"
    boots_platform = True
    needs_lab = True

    def __init__(self) -> None:
        self._stack = contextlib.ExitStack()
        self._ends: tuple[Endpoint, Endpoint] | None = None
        self._monitors: PhaseMonitors | None = None

    def check(self, cell: Cell, study_path: str) -> None:
        """A latency pass needs wrk on the host (:class:`SpecError` before anything
        starts, not a failed repetition per cell)."""
        if as_spec(cell.workload.spec, WebWorkloadSpec).latency is not None:
            check_wrk(cell.workload.name)

    def server_ports(self, spec: WorkloadSpec) -> tuple[int, ...]:
        return (as_spec(spec, WebWorkloadSpec).port,)

    def estimate_s(self, spec: WorkloadSpec) -> float:
        typed = as_spec(spec, WebWorkloadSpec)
        rates = MAX_RATE_STEPS if typed.mode == "max-rate" else 1
        wrk = typed.latency.seconds + WRK_OVERHEAD_S if typed.latency else 0.0
        return len(typed.file_kb) * (typed.duration_s * rates + OVERHEAD_S + wrk)

    def prepare(self, ctx: CellContext) -> None:
        spec = ctx.spec(WebWorkloadSpec)
        session, platform = ctx.lab(), ctx.started()
        server = session.server_endpoint(platform)
        client = session.lab_endpoint(spec.client)
        self._monitors = ctx.monitors(platform, session.interfaces(platform))
        self._stack.enter_context(serve_web(spec, server))
        self._ends = (client, server)

    def run(self, ctx: CellContext) -> CellResult:
        spec = ctx.spec(WebWorkloadSpec)
        if self._ends is None or self._monitors is None:
            raise HvbenchError("internal: a web cell ran before its prepare()")
        client, server = self._ends
        windows = []
        for kb in spec.file_kb:
            phase_spec, reference = self._resolved(ctx, spec, kb)
            window = MonitorWindow(self._monitors)
            with window:
                outcome = run_web_phase(phase_spec, kb, client, server)
                window.focus = outcome.focus
            if reference is not None:
                outcome.metrics[RATE_REF_METRIC] = (reference, "req/s")
            if spec.latency is not None:
                latency = run_wrk_pass(spec, kb, client, server)
                outcome.metrics.update(latency.metrics)
                outcome.attachments.append((WRK_RAW_KIND, latency.raw))
            windows.append(window.measured([outcome]))
        result = cell_result(windows)
        result.measurements += vhost_records(ctx.started(), spec.phase_list())
        return result

    @staticmethod
    def _resolved(ctx: CellContext, spec: WebWorkloadSpec, kb: int
                  ) -> tuple[WebWorkloadSpec, float | None]:
        """``spec`` with a relative rate turned into requests/s for file size ``kb``,
        and the measured maximum it took (None: the rate was absolute). Raises
        :class:`HvbenchError` when the round has no maximum for it."""
        if not is_relative(spec.rate):
            return spec, None
        ref = rate_reference(ctx.study.workloads, spec.rate_of, f"cell {ctx.cell.name}")
        rate, reference = offered_rate(spec.rate, ref.name, kb, ctx.rate_refs,
                                       f"cell {ctx.cell.name}")
        # The maximum is in requests/s; httperf's rate is connections/s.
        conns = rate / spec.calls_per_conn
        return spec.model_copy(update={"rate": conns, "rate_of": None}), reference

    def release(self, ctx: CellContext) -> None:
        self._ends = self._monitors = None
        self._stack.close()
