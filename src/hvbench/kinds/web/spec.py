"""The web workload kind's spec (``kind = "web"``): an HTTP server on the platform,
httperf (and wrk) on a lab host; its checks of the client and of relative rates, and
the max-rate cells relative rates take a share of."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from hvbench.errors import SpecError
from hvbench.model.rates import Rate, check_rate, is_relative
from hvbench.model.scenario import ScenarioSpec
from hvbench.model.study import (
    Cell,
    Study,
    Variant,
    guest_vm,
    rate_reference,
    require_nic,
)
from hvbench.model.workload import (
    DEFAULT_REPLY_TIMEOUT_S,
    ServedLoad,
    StudyChecks,
    WorkloadSpec,
)


def _latency_switch(value: object) -> object:
    """``latency = true`` is the default pass, ``false`` none."""
    if value is True:
        return {}
    if value is False:
        return None
    return value


class WebLatencySpec(BaseModel):
    """``latency = { tool = "wrk", ... }`` of a web workload: after httperf, per file size,
    a closed-loop wrk run of ``seconds`` (whole seconds: wrk's ``-d`` takes no fraction)
    with ``connections`` open connections on ``threads`` threads, whose latency
    percentiles are stored next to httperf's means (docs/network-workloads.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool: Literal["wrk"] = "wrk"
    seconds: int = Field(default=5, ge=1, le=3600)
    connections: int = Field(default=4, ge=1, le=10000)
    threads: int = Field(default=1, ge=1, le=64)

    @model_validator(mode="after")
    def _check(self) -> WebLatencySpec:
        # wrk's own rule ("number of connections must be >= threads"), caught early.
        if self.connections < self.threads:
            raise ValueError(f"latency: connections ({self.connections}) must be at least "
                             f"threads ({self.threads})")
        return self


class WebWorkloadSpec(WorkloadSpec):
    """``kind = "web"``: an HTTP server on the platform, httperf on a lab host (seed 003).

    One phase per served file size (``1kB``, ``10kB``, ...). ``fixed`` offers ``rate``
    requests/s; ``max-rate`` ramps the rate and reports the highest one sustained with
    fewer than ``max_error_pct`` % errors and achieved/offered >= ``min_achieved_ratio``.
    ``latency`` (off unless given; ``true`` for the defaults) adds a wrk pass per size
    for latency percentiles (:class:`WebLatencySpec`).
    """

    kind: Literal["web"] = "web"
    VALUE_LISTS: ClassVar[tuple[str, ...]] = ("file_kb",)
    client: str = Field(default="client", min_length=1)
    file_kb: tuple[int, ...] = Field(default=(1, 10, 30, 50, 70, 100, 200), min_length=1)
    mode: Literal["fixed", "max-rate"] = "fixed"
    #: fixed: requests/s, or ``"90%"``: that share of the maximum the platform sustained
    #: alone for each file size, measured in the same run (:mod:`hvbench.model.rates`).
    rate: Annotated[Rate, BeforeValidator(check_rate)] = 50.0
    #: With a relative rate: the max-rate web workload (variant name) whose maximum it
    #: is taken from; None: the study's only max-rate web workload.
    rate_of: str | None = Field(default=None, min_length=1)
    duration_s: float = Field(default=10.0, gt=0, le=3600)
    calls_per_conn: int = Field(default=1, ge=1, le=1000)
    reply_timeout_s: float = Field(default=DEFAULT_REPLY_TIMEOUT_S, gt=0, le=600)
    start_rate: float = Field(default=10.0, gt=0)
    rate_factor: float = Field(default=1.5, gt=1.0, le=10.0)
    max_rate: float = Field(default=20000.0, gt=0)
    max_error_pct: float = Field(default=1.0, ge=0, le=100)
    min_achieved_ratio: float = Field(default=0.99, gt=0, le=1)
    port: int = Field(default=8080, ge=1024, le=65535)
    timeout_s: float = Field(default=1800.0, gt=0)
    latency: Annotated[WebLatencySpec | None, BeforeValidator(_latency_switch)] = None

    @field_validator("file_kb")
    @classmethod
    def _check_sizes(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        for size in value:
            # Files are generated in memory and copied into a guest through its agent.
            if not 1 <= size <= 1 << 16:
                raise ValueError(f"file size {size} kB: expected 1 to 65536 kB")
        if len(set(value)) != len(value):
            raise ValueError("file sizes must be distinct")
        return value

    @model_validator(mode="after")
    def _check(self) -> WebWorkloadSpec:
        if self.mode == "max-rate" and is_relative(self.rate):
            raise ValueError("a relative rate applies to mode = \"fixed\" (a max-rate "
                             "search measures the maximum itself)")
        if self.rate_of is not None and not is_relative(self.rate):
            raise ValueError("rate_of applies to a relative rate such as \"90%\"")
        if self.start_rate > self.max_rate:
            raise ValueError(f"start_rate ({self.start_rate:g}) is above max_rate "
                             f"({self.max_rate:g})")
        return self

    def phase_list(self) -> tuple[str, ...]:
        return tuple(f"{kb}kB" for kb in self.file_kb)

    def needs_lab(self) -> bool:
        return True

    def is_rate_reference(self) -> bool:
        return self.mode == "max-rate"

    def served_load(self) -> ServedLoad:
        """Its first file size at its rate, to its client, with its reply timeout."""
        return ServedLoad(self.client, self.file_kb[0], self.rate, self.rate_of,
                          self.reply_timeout_s)


def default_name(entry: Mapping[str, Any]) -> str:
    """A web entry's name: ``web``."""
    del entry
    return "web"


def check_cell(cell: Cell, checks: StudyChecks) -> None:
    """A web cell's client is a lab host, and a guest has a NIC to serve on. Raises
    :class:`SpecError`."""
    workload = cell.workload.spec
    if not isinstance(workload, WebWorkloadSpec):
        return
    lab = checks.lab
    hosts = [h.name for h in lab.hosts] if lab else []
    where = f"{checks.path}: cell {cell.name}"
    if workload.client not in hosts:
        raise SpecError(f"{where}: client: expected a [[lab.host]] name "
                        f"({', '.join(hosts) or 'none declared'}), got {workload.client!r}")
    require_nic(guest_vm(cell.platform.spec), where)


def check_variants(workloads: Sequence[Variant[WorkloadSpec]],
                   scenarios: Sequence[Variant[ScenarioSpec]],
                   cells: Sequence[Cell], path: str) -> None:
    """Relative rates have a reference measuring their sizes; identical guests copy one
    fixed-rate web workload."""
    check_rates(workloads, scenarios, path)
    check_identical(cells, path)


def _check_sizes(reference: Variant[WorkloadSpec], sizes: Sequence[int], where: str) -> None:
    spec = reference.spec
    measured = spec.file_kb if isinstance(spec, WebWorkloadSpec) else ()
    missing = [kb for kb in sizes if kb not in measured]
    if missing:
        raise SpecError(f"{where}: file_kb: {missing[0]} kB is not measured by the "
                        f"reference max-rate workload {reference.name!r} (its file_kb: "
                        f"{', '.join(map(str, measured))})")


def check_rates(workloads: Sequence[Variant[WorkloadSpec]],
                scenarios: Sequence[Variant[ScenarioSpec]], path: str) -> None:
    """Every relative rate has a reference that measures its file sizes."""
    for w in workloads:
        spec = w.spec
        if isinstance(spec, WebWorkloadSpec) and is_relative(spec.rate):
            where = f"{path}: workload {w.name}"
            _check_sizes(rate_reference(workloads, spec.rate_of, where), spec.file_kb, where)
    for sc in scenarios:
        for index, nb in enumerate(sc.spec.neighbours):
            if nb.role == "net" and nb.load == "web" and is_relative(nb.rate):
                where = f"{path}: scenario {sc.name}: neighbours[{index}]"
                _check_sizes(rate_reference(workloads, nb.rate_of, where), (nb.file_kb,),
                             where)


def check_identical(cells: Sequence[Cell], path: str) -> None:
    """A scenario with ``identical`` applies to one fixed-rate web workload with one
    file size: its neighbours serve that workload's file at its rate."""
    seen: dict[str, str] = {}
    for cell in cells:
        if cell.scenario is None or cell.scenario.spec.identical is None:
            continue
        where = f"{path}: scenario {cell.scenario.name}: identical"
        spec = cell.workload.spec
        if not isinstance(spec, WebWorkloadSpec) or spec.mode != "fixed" \
                or len(spec.file_kb) != 1:
            raise SpecError(f"{where}: applies to a web workload with mode = \"fixed\" and "
                            f"one file size; workload {cell.workload.name} is not one (set "
                            "the scenario's workloads)")
        first = seen.setdefault(cell.scenario.name, cell.workload.name)
        if first != cell.workload.name:
            raise SpecError(f"{where}: applies to one workload, got {first} and "
                            f"{cell.workload.name} (set the scenario's workloads)")


def cell_references(study: Study, cell: Cell) -> dict[str, Cell]:
    """The alone max-rate cells (on the cell's platform) whose measured maxima the cell's
    relative rates are shares of, by reference workload name: its own rate's, its
    scenario's web neighbours' and identical guests'. Empty without relative rates."""
    rates: list[tuple[Rate, str | None]] = []
    spec = cell.workload.spec
    if isinstance(spec, WebWorkloadSpec):
        rates.append((spec.rate, spec.rate_of))
    if cell.scenario is not None:
        rates += [(nb.rate, nb.rate_of) for nb in cell.scenario.spec.neighbours
                  if nb.role == "net" and nb.load == "web"]
    out: dict[str, Cell] = {}
    for rate, rate_of in rates:
        if not is_relative(rate):
            continue
        ref = rate_reference(study.workloads, rate_of, f"{study.path}: cell {cell.name}")
        for other in study.cells:
            if other.scenario is None and other.platform.name == cell.platform.name \
                    and other.workload.name == ref.name:
                out[ref.name] = other
    return out
