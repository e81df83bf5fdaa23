"""One report model of a run: the store is read once here and every section computed
once; the terminal, JSON, HTML and export renderers print this model.

:func:`load_run_report` reads the store; :func:`build_run_report` is the pure part
(rows in, sections out), which the HTML renderer also uses for its input.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fnmatch
import json
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from hvbench.analysis.calibration import stored_thresholds
from hvbench.analysis.diagnosis import Verdict, diagnose_all, needs_flatness
from hvbench.analysis.latency import Histogram, fio_clat_histogram, merge, wrk_histogram
from hvbench.analysis.layers import LayerRow, layer_rows
from hvbench.analysis.noise import NoiseFloor
from hvbench.analysis.precision import cell_precision
from hvbench.analysis.resources import CellModel, build_models, with_flatness
from hvbench.analysis.scenarios import ScenarioReport, build_scenario_report
from hvbench.analysis.stages import (
    STAGE_MONITORS,
    StageRow,
    is_stage_mark,
    stage_rows,
    stage_windows,
)
from hvbench.analysis.steady import SteadyState, flatness, steady_states, steady_warnings
from hvbench.analysis.summaries import PhaseStats, phase_stats, warnings_for
from hvbench.errors import SpecError
from hvbench.host.hostconfig import RAW_KIND as HOST_CONFIG_KIND
from hvbench.model import settings
from hvbench.model.lab import parse_rate
from hvbench.model.libvirt_xml import (
    DOMAIN_XML_KIND,
    MISSING_METRICS_KIND,
    io_lines,
    io_settings,
)
from hvbench.model.platform import is_host_kind
from hvbench.model.qemu_argv import GUEST_CLOCKSOURCE_KIND
from hvbench.model.registry import register_once
from hvbench.model.study import parse_study, repetition_rule
from hvbench.report.precision import precision_line
from hvbench.store.records import (
    MONITOR_ERRORS_KIND,
    CalibrationRow,
    CellRow,
    FailureRow,
    MeasurementRow,
    RunRecord,
    SampleRow,
    definition_key,
)
from hvbench.workloads.fio import RAW_KIND as FIO_RAW_KIND
from hvbench.workloads.wrk import RAW_KIND as WRK_RAW_KIND

if TYPE_CHECKING:
    from rich.table import Table

    from hvbench.store.database import Store

__all__ = [
    "KindPart",
    "KindReport",
    "RunReport",
    "build_run_report",
    "latest_run_id",
    "load_run_report",
    "natives_of",
    "register_kind_report",
    "run_models",
]


class KindPart(Protocol):
    """A workload kind's own part of a run's terminal and JSON reports (the propagation
    fits and phase shares), built once from the run's rows by the kind's
    :class:`KindReport`; its HTML section is registered apart
    (:func:`hvbench.report.html.register_run_section`)."""

    def terminal_tables(self) -> list[Table]:
        """Its tables for the terminal, after the leaderboards (none: nothing of it)."""
        ...

    def json(self) -> dict[str, Any]:
        """Its object in ``--format json`` (present even when empty)."""
        ...

    def titles(self) -> list[str]:
        """The titles of its terminal tables, for the renderers' parity checks."""
        ...


@dataclass(frozen=True)
class KindReport:
    """How a workload kind adds its part to every run's report: ``key`` names it in
    :attr:`RunReport.kind_parts` and in the report's JSON (between ``scenarios`` and
    ``diagnosis``, in registration order); ``build`` makes it from the run's rows."""

    key: str
    build: Callable[[Sequence[MeasurementRow]], KindPart]


_KIND_REPORTS: dict[str, KindReport] = {}


def register_kind_report(report: KindReport) -> None:
    """Add ``report``'s part to every run's report. Raises :class:`HvbenchError` when
    another kind claims its key."""
    register_once(_KIND_REPORTS, report.key, report, "report part")


@dataclass(frozen=True)
class RunReport:
    """Everything a report of one run shows, computed once."""

    run: RunRecord
    cells: list[CellRow]
    rows: list[MeasurementRow]
    #: workload -> its native platform, if any.
    natives: dict[str, str | None]
    phases: list[PhaseStats]
    warnings: list[str]
    failures: list[FailureRow]
    scenarios: ScenarioReport
    samples: list[SampleRow] = field(default_factory=list)
    #: platform -> the I/O settings of its libvirt domain, one line each (from the
    #: domain XML stored with the run); empty without libvirt platforms.
    domain_io: dict[str, list[str]] = field(default_factory=dict)
    #: Each registered kind's own part (:func:`register_kind_report`), by its key.
    kind_parts: dict[str, KindPart] = field(default_factory=dict)
    #: The diagnosis of every (phase, platform) (``hvbench explain``), phase order.
    verdicts: list[Verdict] = field(default_factory=list)
    #: The steady-state test of every (phase, platform) with a throughput series.
    steady: list[SteadyState] = field(default_factory=list)
    #: CPU per stage of the windows with staged cpu neighbours (seed 004 Figs. 1-4).
    stages: list[StageRow] = field(default_factory=list)
    #: The latency of every guest disk cell split into its measured layers.
    layers: list[LayerRow] = field(default_factory=list)
    #: This host's newest stored noise floor of each (cell, phase, metric) of the run
    #: (``hvbench noise``); empty when none was measured.
    noise_floors: dict[tuple[str, str, str], NoiseFloor] = field(default_factory=dict)
    #: platform -> the clocksources its guests' kernels reported using (stored with each
    #: repetition since the clocksource became a setting; empty before).
    clocksources: dict[str, list[str]] = field(default_factory=dict)
    #: The newest calibration of the run's host (``hvbench calibrate``) whose thresholds
    #: the diagnosis read; None: none stored, the defaults apply.
    calibration: CalibrationRow | None = None

    @property
    def has_scenarios(self) -> bool:
        """True when a cell ran in a scenario."""
        return any(c.identity.scenario for c in self.cells)

    def cell_dimensions(self) -> dict[str, tuple[str, str]]:
        """cell -> (platform, workload)."""
        return {c.name: (c.platform_name, c.workload_name) for c in self.cells}

    def platform_definitions(self) -> dict[str, dict[str, Any]]:
        """platform name -> its stored definition."""
        return {c.platform_name: c.platform for c in self.cells}

    def guest_kernels(self) -> dict[str, list[str]]:
        """The guest kernel settings the run's guests booted with -> their platforms
        (see :func:`guest_kernel`); empty without guests hvbench defined."""
        found: dict[str, list[str]] = {}
        for name, definition in self.platform_definitions().items():
            text = guest_kernel(definition)
            used = self.clocksources.get(name)
            if text is not None and used:
                text += f" (guest used {', '.join(used)})"
            if text is not None:
                found.setdefault(text, []).append(name)
        return found

    def why(self, workload: str, phase: str) -> dict[str, str]:
        """platform -> the Why text of its verdict in one phase."""
        return {v.platform: v.why() for v in self.verdicts
                if v.workload == workload and v.phase == phase}


def guest_kernel(platform: Mapping[str, Any]) -> str | None:
    """How a guest's kernel was booted, from its stored definition: the mitigations, the
    clocksource and any extra command-line words. None for the bare host and existing
    libvirt domains (their kernel is theirs). A definition stored before a setting
    existed was booted with hvbench's built-in command line of the time:
    ``mitigations=off``, and ``tsc=reliable`` (the TSC as clocksource)."""
    if not isinstance(platform.get("vm"), Mapping):  # natively, or an existing domain
        return None
    mitigations = settings.get(platform, "mitigations")
    if mitigations is None:
        text = "mitigations=off (built in; not declared by this older run)"
    else:
        text = "mitigations on (kernel default)" if mitigations else "mitigations=off"
    text += ", " + clocksource_text(settings.get(platform, "clocksource"))
    extra = settings.get(platform, "kernel_args") or ()
    return text + "".join(f" {w}" for w in extra)


def clocksource_text(declared: object) -> str:
    """The declared clocksource as the report names it (None: a run from before it was
    declared, whose guests booted with ``tsc=reliable``)."""
    if declared is None:
        return "clocksource tsc (tsc=reliable built in; not declared by this older run)"
    if declared == "auto":
        return "clocksource auto (tsc under TCG, the kernel's own under KVM)"
    return f"clocksource {declared}"


def guest_clocksources(store: Store, run_id: str,
                       cells: Sequence[CellRow]) -> dict[str, list[str]]:
    """platform -> the distinct clocksources its guests reported, sorted."""
    platforms = {c.name: c.platform_name for c in cells}
    found: dict[str, set[str]] = {}
    for raw in store.raw_outputs(run_id, kind=GUEST_CLOCKSOURCE_KIND):
        found.setdefault(platforms.get(raw.cell, raw.cell), set()).add(raw.content.strip())
    return {platform: sorted(names) for platform, names in found.items()}


def link_rates(study_text: str) -> dict[str, float]:
    """Lab host -> the shaped rate of its link in Mbit/s, from the stored study text
    (hosts without a rate, or a text that does not parse, give nothing)."""
    try:
        hosts = tomllib.loads(study_text).get("lab", {}).get("host", [])
        return {h["name"]: parse_rate(h["rate"]) / 1e6 for h in hosts
                if isinstance(h, dict) and h.get("rate") and h.get("name")}
    except (tomllib.TOMLDecodeError, ValueError, KeyError, AttributeError, TypeError):
        return {}


#: Loads the throughput series of the given cell models (their cells' ok repetitions).
SeriesLoader = Callable[[Sequence[CellModel]], Sequence[SampleRow]]


def run_models(report: RunReport, series: Sequence[SampleRow] | SeriesLoader = (),
               host_configs: Mapping[str, Mapping[str, Any]] | None = None,
               thresholds: Mapping[str, float] | None = None) -> list[CellModel]:
    """The resource model of every (phase, platform) of a report; ``series``: the
    stored throughput series (:data:`THROUGHPUT_MONITORS`) whose flatness within each
    repetition the rules read, or a loader asked only for the cells whose diagnosis
    turns on flatness (:func:`~hvbench.analysis.diagnosis.needs_flatness`: reading
    every 10 Hz series of a 28-platform matrix costs seconds); ``host_configs``:
    platform -> its host configuration; ``thresholds``: the diagnosis thresholds
    calibrated on the run's host (:mod:`hvbench.analysis.calibration`)."""
    definitions = {(c.platform_name, c.workload_name): (c.platform, c.workload)
                   for c in report.cells}
    models = build_models(report.phases, report.natives, definitions,
                          accelerator=report.run.env.get("accelerator"),
                          link_rates=link_rates(report.run.study_text),
                          host_configs=host_configs)
    if thresholds:
        models = [dataclasses.replace(m, thresholds=dict(thresholds)) for m in models]
    if callable(series):
        wanted = [m for m in models if needs_flatness(m)]
        series = series(wanted) if wanted else ()
    if not series:
        return models
    flat = flatness(series, report.cell_dimensions())
    return [with_flatness(m, flat) for m in models]


def natives_of(cells: Iterable[CellRow]) -> dict[str, str | None]:
    """For each workload, the native platform that is its baseline (if any)."""
    natives: dict[str, str | None] = {}
    for cell in cells:
        natives.setdefault(cell.workload_name, None)
        if is_host_kind(cell.identity.platform_kind) and natives[cell.workload_name] is None:
            natives[cell.workload_name] = cell.platform_name
    return natives


def latest_run_id(store: Store, db: str) -> str:
    """The newest run's id.

    Raises:
        SpecError: the database holds no run.
    """
    run = store.latest_run()
    if run is None:
        raise SpecError(f"{db}: no runs yet (start one with `hvbench run STUDY.toml`)")
    return str(run.id)


def resolve_run_id(store: Store, run: str | None, db: str) -> str:
    """``run`` as a stored run id: an exact id, or a prefix that only one id has (what
    a user types after reading ``hvbench runs``); None: the latest run.

    Raises:
        SpecError: the database holds no run, no run id starts with ``run``, or more
            than one does (they are named).
    """
    if run is None:
        return latest_run_id(store, db)
    return _unique_prefix(run, store.run_ids(prefix=run), "run ids",
                          f"{db}: no run {run!r} (`hvbench runs --db {db}` lists them)", db)


def resolve_fleet_id(store: Store, fleet: str, db: str) -> str:
    """``fleet`` as a stored fleet run's id: an exact id, or a prefix only one has (as
    :func:`resolve_run_id` takes run ids).

    Raises:
        SpecError: no fleet id starts with ``fleet``, or more than one does (named).
    """
    if store.fleet_runs(fleet):
        return fleet
    # A fleet id is a column of its host runs: the runs whose fleet it may be are read.
    ids = sorted({f for f in (store.get_run(r).fleet_id for r in store.run_ids()) if f})
    return _unique_prefix(fleet, [f for f in ids if f.startswith(fleet)],
                          "fleet ids", f"{db}: no fleet run {fleet!r}"
                          + (f" (fleet runs: {', '.join(ids[-5:])})" if ids else ""), db)


def _unique_prefix(given: str, matches: Sequence[str], plural: str, none: str,
                   db: str) -> str:
    """The one of ``matches`` that is ``given`` or the only one; else a
    :class:`SpecError` (``none`` when nothing matches, the candidates when several do)."""
    if given in matches:
        return given
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise SpecError(none)
    # Every candidate, so the next try can copy one (a line stays readable up to 20).
    shown = ", ".join(matches[:20]) + (f" and {len(matches) - 20} more"
                                       if len(matches) > 20 else "")
    raise SpecError(f"{db}: {given!r} is the start of {len(matches)} {plural} ({shown}): "
                    "give more of it")


def build_run_report(run: RunRecord, cells: Sequence[CellRow], rows: Sequence[MeasurementRow],
                     failures: Sequence[FailureRow] = (), samples: Sequence[SampleRow] = (),
                     *, series: Sequence[SampleRow] | SeriesLoader = (),
                     host_configs: Mapping[str, Mapping[str, Any]] | None = None,
                     calibration: CalibrationRow | None = None) -> RunReport:
    """Every section of the report from what the store holds (pure); ``series``,
    ``host_configs`` and ``calibration``'s thresholds: the diagnosis's evidence and
    limits (:func:`run_models`)."""
    stats = phase_stats(rows)
    dimensions = {c.name: (c.platform_name, c.workload_name) for c in cells}
    scenarios = build_scenario_report(rows, samples, dimensions or None,
                                      {c.platform_name: c.platform for c in cells})
    report = RunReport(run=run, cells=list(cells), rows=list(rows),
                       natives=natives_of(cells), phases=stats, warnings=warnings_for(stats),
                       failures=list(failures), scenarios=scenarios, samples=list(samples),
                       kind_parts={k.key: k.build(rows) for k in _KIND_REPORTS.values()},
                       stages=stage_rows(stage_windows(rows, samples, dimensions)),
                       calibration=calibration)
    thresholds = stored_thresholds(calibration.thresholds) if calibration else None
    models = run_models(report, series, host_configs, thresholds)
    report.verdicts.extend(diagnose_all(models))
    report.layers.extend(layer_rows(models))
    return report


def ok_samples(store: Store, run_id: str, rows: Sequence[MeasurementRow],
               monitors: Sequence[str]) -> list[SampleRow]:
    """The samples of ``monitors`` from repetitions that succeeded (have measurements)."""
    ok = {(r.cell, r.repetition) for r in rows}
    return [s for monitor in monitors for s in store.samples(run_id, monitor=monitor)
            if (s.cell, s.repetition) in ok]


#: The monitors whose series the steady-state test reads (cheap: one device series per
#: phase at 10 Hz, iperf3's intervals).
THROUGHPUT_MONITORS = ("host.disk.*", "iperf3")
#: The headlines those series measure.
STEADY_METRICS = frozenset({"mb_s", "mbit_s"})


def load_run_report(store: Store, run_id: str, *,
                    monitors: Sequence[str] | None = None,
                    steady: bool = True) -> RunReport:
    """Read run ``run_id`` once and compute its report. ``monitors``: fnmatch patterns of
    the sample monitors to load; None: for a run with scenarios, every monitor (the
    CoV of every series), else none (a storage matrix's samples would make the
    summaries slow for nothing). ``steady``: run the steady-state test on the stored
    throughput series (:mod:`hvbench.analysis.steady`); ``explain`` does not need it.

    Raises:
        StoreError: no such run, or the database cannot be read.
    """
    run = store.get_run(run_id)
    cells = store.cells(run_id)
    rows = store.measurements(run_id)
    if monitors is None:
        monitors = ["*"] if any(c.identity.scenario for c in cells) else []
    wanted = [m for m in (store.sample_monitors(run_id) if monitors else [])
              if any(fnmatch.fnmatchcase(m, p) for p in monitors)]
    # The steady-state test reads every throughput series; without it (explain) only
    # the cells whose verdict needs flatness load theirs, through the loader.
    steady_series = ok_samples(store, run_id, rows, throughput_monitors(store, run_id)) \
        if steady else []
    series: list[SampleRow] | SeriesLoader = steady_series if steady \
        else series_loader(store, run_id, cells, rows)
    report = build_run_report(run, cells, rows, store.failures(run_id),
                              ok_samples(store, run_id, rows, wanted), series=series,
                              host_configs=host_configs(store, run_id, cells),
                              calibration=host_calibration(store, run))
    stage_series = [m for m in wanted if any(fnmatch.fnmatchcase(m, p) for p in STAGE_MONITORS)]
    if any(is_stage_mark(r.metric) for r in rows) and not stage_series:
        # The stage table needs its series whatever else is loaded (few: staged runs only).
        staged = [m for m in store.sample_monitors(run_id)
                  if any(fnmatch.fnmatchcase(m, p) for p in STAGE_MONITORS)]
        report.stages[:] = stage_rows(stage_windows(
            rows, ok_samples(store, run_id, rows, staged), report.cell_dimensions()))
    order = store.order(run_id)
    # The warnings again, knowing the repetitions each cell was planned with.
    report.warnings[:] = warnings_for(report.phases, planned_repetitions(cells, order))
    report.warnings.extend(adaptive_warnings(run, rows, order))
    report.warnings.extend(monitor_warnings(store, run_id))
    report.noise_floors.update(run_noise_floors(store, run, cells))
    report = dataclasses.replace(report, domain_io=domain_io(store, run_id, cells),
                                 clocksources=guest_clocksources(store, run_id, cells))
    if not steady:
        return report
    measured = {(r.cell, r.phase) for r in rows if r.metric in STEADY_METRICS}
    states = steady_states(steady_series, report.cell_dimensions(), measured)
    return dataclasses.replace(report, steady=states,
                               warnings=report.warnings + steady_warnings(states))


def host_calibration(store: Store, run: RunRecord) -> CalibrationRow | None:
    """The newest calibration stored for the host the run ran on (None: none)."""
    host = str(run.host or run.env.get("hostname") or "")
    if not host:
        return None
    found = store.calibrations(host)
    return found[0] if found else None


def run_noise_floors(store: Store, run: RunRecord, cells: Sequence[CellRow],
                     name: Callable[[CellRow], str] = lambda c: c.name
                     ) -> dict[tuple[str, str, str], NoiseFloor]:
    """The run's host's newest stored noise floor of each (cell, phase, metric), the
    cell named by ``name`` (default: its name); cells defined alike share one
    definition and so one floor.

    Raises:
        StoreError: the database cannot be read.
    """
    host = str(run.host or run.env.get("hostname") or "")
    names: dict[str, list[str]] = {}
    for cell in cells:
        names.setdefault(definition_key(cell.platform, cell.workload), []).append(name(cell))
    out: dict[tuple[str, str, str], NoiseFloor] = {}
    for row in store.noise_floors(host, list(names)):
        f = row.floor
        for cell_name in names[f.definition]:
            out.setdefault((cell_name, f.phase, f.metric), NoiseFloor(
                sd_pct=f.sd_pct, pairs=f.pairs, mean=f.mean, run_id=row.run_id,
                measured_at=row.created_at))
    return out


def planned_repetitions(cells: Iterable[CellRow], order: Mapping[int, Sequence[str]]
                        ) -> dict[tuple[str, str], int]:
    """(platform, workload) -> how many repetitions the run started for that cell (its
    recorded order: the study's count, or the one ``--repetitions`` chose)."""
    rounds: dict[str, int] = {}
    for names in order.values():
        for name in names:
            rounds[name] = rounds.get(name, 0) + 1
    return {(c.platform_name, c.workload_name): rounds[c.name] for c in cells
            if c.name in rounds}


def monitor_warnings(store: Store, run_id: str) -> list[str]:
    """One warning per monitor error a measured window kept (its figures from that
    monitor are partial or absent): cell, repetition, window, monitor and why. A
    document that does not parse is itself named.

    Raises:
        StoreError: no such run.
    """
    out = []
    for raw in store.raw_outputs(run_id, kind=MONITOR_ERRORS_KIND):
        where = f"{raw.cell} rep {raw.repetition + 1} ({raw.phase})"
        try:
            errors = json.loads(raw.content)
        except ValueError:
            errors = None
        if not isinstance(errors, dict):
            out.append(f"{where}: its monitor errors are not a JSON object")
            continue
        out += [f"{where}: monitor {name}: {why}" for name, why in sorted(errors.items())]
    return out


def adaptive_warnings(run: RunRecord, rows: Sequence[MeasurementRow],
                      order: Mapping[int, Sequence[str]]) -> list[str]:
    """One warning per cell with adaptive repetitions that stopped at its maximum
    before its CI target, with the interval and CoV it ended with (pure: the rules come
    from the study text stored with the run; a text that no longer parses gives
    none)."""
    if "ci_pct" not in run.study_text:
        return []
    try:
        # 0: the host-memory rule was checked when the run started
        study = parse_study(run.study_text, run.study_path, 0)
    except SpecError:
        return []
    rounds: dict[str, int] = {}
    for names in order.values():
        for name in names:
            rounds[name] = rounds.get(name, 0) + 1
    out = []
    for cell in study.cells:
        rule = repetition_rule(study, cell)
        if not rule.adaptive or cell.name not in rounds:
            continue
        mine = [r for r in rows if r.cell == cell.name and r.phase != "boot"]
        found = cell_precision(cell.name, rule, mine, rounds[cell.name])
        if found.state == "max":
            out.append(f"adaptive repetitions: {precision_line(found)}")
    return out


def latency_distributions(store: Store, run_id: str
                          ) -> dict[tuple[str, str], dict[str, Histogram]]:
    """(workload, phase) -> platform -> its completion-latency histogram, every stored
    repetition summed: fio's (``json+`` output; runs stored with plain ``json`` have no
    histograms and give nothing) and the web latency pass's (wrk's requests).

    Raises:
        StoreError: no such run.
    """
    cells = {c.name: (c.platform_name, c.workload_name) for c in store.cells(run_id)}
    found: dict[tuple[str, str], dict[str, Histogram]] = {}
    for kind in (FIO_RAW_KIND, WRK_RAW_KIND):
        for raw in store.raw_outputs(run_id, kind=kind):
            platform, workload = cells.get(raw.cell, (raw.cell, ""))
            histogram = (fio_clat_histogram(raw.content, raw.phase) if kind == FIO_RAW_KIND
                         else wrk_histogram(raw.content))
            if histogram:
                per = found.setdefault((workload, raw.phase), {})
                per[platform] = merge((per.get(platform, {}), histogram))
    return found


def throughput_monitors(store: Store, run_id: str) -> list[str]:
    """The run's monitors matching :data:`THROUGHPUT_MONITORS`."""
    return [m for m in store.sample_monitors(run_id)
            if any(fnmatch.fnmatchcase(m, p) for p in THROUGHPUT_MONITORS)]


def series_loader(store: Store, run_id: str, cells: Sequence[CellRow],
                  rows: Sequence[MeasurementRow]) -> SeriesLoader:
    """A loader of the throughput series of given cell models only (ok repetitions);
    it reads nothing, not even the monitor names, when asked for no model."""
    ok = {(r.cell, r.repetition) for r in rows}

    def load(models: Sequence[CellModel]) -> list[SampleRow]:
        names = {(c.platform_name, c.workload_name): c.name for c in cells}
        monitors = throughput_monitors(store, run_id)
        out: list[SampleRow] = []
        for model in models:
            name = names.get((model.platform, model.workload))
            for monitor in monitors if name is not None else ():
                out += [s for s in store.samples(run_id, cell=name, phase=model.phase,
                                                 monitor=monitor)
                        if (s.cell, s.repetition) in ok]
        return out
    return load


def host_configs(store: Store, run_id: str, cells: Sequence[CellRow]
                 ) -> dict[str, dict[str, Any]]:
    """platform -> the host configuration read at its first cell start (cgroup limits,
    queue settings, O_DIRECT of QEMU's image files), as stored with the run."""
    platforms = {c.name: c.platform_name for c in cells}
    found: dict[str, dict[str, Any]] = {}
    for raw in store.raw_outputs(run_id, kind=HOST_CONFIG_KIND):
        platform = platforms.get(raw.cell, raw.cell)
        if platform not in found:
            with contextlib.suppress(ValueError):
                data = json.loads(raw.content)
                if isinstance(data, dict):
                    found[platform] = data
    return found


def domain_io(store: Store, run_id: str, cells: Sequence[CellRow]) -> dict[str, list[str]]:
    """platform -> its libvirt domain's I/O settings (disks, NICs), from the first domain
    XML stored for it."""
    platforms = {c.name: c.platform_name for c in cells}
    found: dict[str, list[str]] = {}
    for raw in store.raw_outputs(run_id, kind=DOMAIN_XML_KIND):
        platform = platforms.get(raw.cell, raw.cell)
        if platform not in found:
            with contextlib.suppress(SpecError):
                found[platform] = io_lines(io_settings(raw.content))
    noted: set[str] = set()
    for raw in store.raw_outputs(run_id, kind=MISSING_METRICS_KIND):
        platform = platforms.get(raw.cell, raw.cell)
        if platform not in noted:
            noted.add(platform)
            with contextlib.suppress(ValueError, AttributeError):
                found.setdefault(platform, []).extend(
                    f"missing {metric}: {why}" for metric, why in json.loads(raw.content).items())
    return found


def summary_meta(report: RunReport) -> Mapping[str, Any]:
    """The ``run`` object of the JSON."""
    return {"id": report.run.id, "study": report.run.study_name,
            "status": report.run.status, "env": report.run.env}
