"""Renderers of the one report model (:class:`hvbench.report.model.RunReport`): the
terminal's tables, ``--format json`` and the HTML report's input. Each prints the same
sections: the phase summaries, the kinds' own parts (:class:`~hvbench.report.model.KindPart`:
the propagation fits) and the scenario tables (the CoV
only where samples were loaded: JSON and HTML).
"""

from __future__ import annotations

import dataclasses
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console, ConsoleOptions, RenderResult
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from hvbench.analysis.latency import Histogram, cdf
from hvbench.analysis.leaderboard import leaderboards
from hvbench.analysis.stats import Summary
from hvbench.analysis.summaries import compared_to_native
from hvbench.report.diagnosis import (
    DIAGNOSIS_NOTE,
    DIAGNOSIS_TITLE,
    FixGroup,
    diagnosis_groups,
    diagnosis_lines,
    headline,
    listed,
    verdict_json,
)
from hvbench.report.export import measurement_table, to_csv, to_json, to_parquet
from hvbench.report.findings import findings_json, findings_table, is_seed_study, run_findings
from hvbench.report.html import ReportInput, SeriesChoice
from hvbench.report.leaderboard import leaderboard_json, leaderboard_table
from hvbench.report.model import RunReport, summary_meta
from hvbench.report.scenarios import scenario_json, scenario_tables
from hvbench.report.stages import stage_json, stage_tables
from hvbench.report.tables import (
    LAYER_TITLE,
    TCG_BANNER,
    layer_table,
    phase_table,
    rich_table,
    summary_json,
)
from hvbench.report.text import TextTable, mean_ci_text, pct_of_native_text

__all__ = ["DiagnosisView", "TerminalOptions", "brief_table", "export_bytes",
           "findings_choice", "findings_text_table", "html_input", "report_json",
           "section_titles", "terminal_header", "terminal_tables"]


def findings_choice(report: RunReport, requested: str | None) -> str | None:
    """Which findings a document shows: ``requested`` (``measured``/``all``), else, for
    a seed study (``examples/seeds/``), the measured ones; None: no findings."""
    if requested is not None:
        return requested
    return "measured" if is_seed_study(report) else None


def findings_text_table(report: RunReport, choice: str | None) -> TextTable | None:
    """The Findings table of ``choice`` (None: none)."""
    if choice is None:
        return None
    return findings_table(run_findings(report), include_unmeasured=choice == "all")


def terminal_header(report: RunReport) -> list[str]:
    """The first lines of the table format (rich markup): the run, and under TCG the
    red banner."""
    run, env = report.run, report.run.env
    lines = [f"[bold]run {run.id}[/]  study {run.study_name}  status {run.status}  "
             f"host {env.get('kernel')}  QEMU {env.get('qemu_version')}  "
             f"accelerator {env.get('accelerator')}"]
    if env.get("accelerator") == "tcg":
        lines.append(f"[bold white on red] {TCG_BANNER} [/]")
    lines += [f"guest kernel: {escape(line)}" for line in guest_kernel_lines(report)]
    summary = headline(report.verdicts)
    if summary is not None:
        lines.append(f"[bold]{escape(summary)}[/]")
    return lines


class DiagnosisView:
    """The Diagnosis for the terminal: its title, each fix once over the blocks of
    its cells, left-aligned and wrapped at the console's width when printed."""

    title = DIAGNOSIS_TITLE

    def __init__(self, groups: Sequence[FixGroup]) -> None:
        self.groups = list(groups)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield Text(DIAGNOSIS_TITLE, style="italic")
        for line in diagnosis_lines(self.groups, options.max_width):
            yield Text(line, no_wrap=True, overflow="ignore")
        for line in textwrap.wrap(DIAGNOSIS_NOTE, options.max_width,
                                  break_long_words=False, break_on_hyphens=False):
            yield Text(line, no_wrap=True, overflow="ignore")


def guest_kernel_lines(report: RunReport) -> list[str]:
    """One line per kernel setting the run's guests used, naming the guests when they
    differ."""
    kernels = report.guest_kernels()
    if len(kernels) == 1:
        return list(kernels)
    return [f"{text}: {', '.join(names)}" for text, names in kernels.items()]


@dataclass(frozen=True)
class TerminalOptions:
    """What the terminal report adds or leaves out (``report`` options)."""

    #: ``--stats``: the headline's median, min and max under its mean.
    stats: bool = False
    #: ``--verbose``: the Diagnosis also lists native, boot and abstaining cells.
    verbose: bool = False
    #: ``--brief``: one screen, the headline and the main table.
    brief: bool = False


def terminal_tables(report: RunReport, options: TerminalOptions = TerminalOptions()
                    ) -> list[Table | DiagnosisView]:
    """Every table the terminal prints: one per phase, then the kinds' own tables and
    the scenario tables (not the CoV, which needs every sample)."""
    tables: list[Table | DiagnosisView] = [
        phase_table(p, report.natives.get(p.workload), report.why(p.workload, p.phase),
                    extra=options.stats) for p in report.phases]
    tables += [rich_table(t) for t in leaderboard_tables(report)]
    tables += [t for part in report.kind_parts.values() for t in part.terminal_tables()]
    tables += [rich_table(t) for t in scenario_tables(report.scenarios)]
    tables += [rich_table(t) for t in stage_tables(report.stages)]
    if report.layers:
        tables.append(rich_table(layer_table(report.layers)))
    if listed(report.verdicts, options.verbose):
        tables.append(DiagnosisView(diagnosis_groups(report.verdicts,
                                                     verbose=options.verbose)))
    return tables + domain_io_tables(report)


def leaderboard_tables(report: RunReport) -> list[TextTable]:
    """The ranked "% of native" table of every phase with native and several guests
    (:func:`~hvbench.analysis.leaderboard.leaderboards`), each row's bottleneck from the
    diagnosis."""
    return [leaderboard_table(b)
            for b in leaderboards(report.phases, report.natives, report.verdicts)]


BRIEF_TITLE = ("Summary: each phase's headline metric, native's mean ± 95% CI, the "
               "guests' % of native")


def _brief_text(per: Mapping[str, Summary], platform: str, native: str | None,
                metric: str) -> str:
    """A guest's % of native (short enough not to wrap), else the mean ± CI."""
    if platform not in per:
        return ""
    if native and native != platform and native in per and compared_to_native(metric):
        return pct_of_native_text(per, platform, native).split(" [")[0]
    return mean_ci_text(per[platform])


def brief_table(report: RunReport) -> TextTable:
    """``report --brief``'s main table: a row per phase, a column per platform (in the
    order of first appearance): native's headline mean ± CI, each guest's % of native
    (its mean ± CI where there is no native to compare with, e.g. boot)."""
    platforms = list(dict.fromkeys(p for phase in report.phases for p in phase.platforms))
    rows = []
    for phase in report.phases:
        metric = phase.throughput_metric()
        if metric is None:
            continue
        per, native = phase.metrics[metric], report.natives.get(phase.workload)
        rows.append((f"{phase.workload}/{phase.phase}", phase.units.get(metric, ""),
                     *(_brief_text(per, p, native, metric) for p in platforms)))
    return TextTable(BRIEF_TITLE, ("phase", "unit", *platforms), tuple(rows), left=2)


def domain_io_tables(report: RunReport) -> list[Table]:
    """One table of the libvirt domains' I/O settings (from their stored XML), next to
    the numbers; none without libvirt platforms."""
    if not report.domain_io:
        return []
    table = Table(title="libvirt domains: I/O settings (from the domain XML)")
    table.add_column("platform")
    table.add_column("device settings")
    for platform, lines in report.domain_io.items():
        table.add_row(platform, "\n".join(lines))
    return [table]


def export_bytes(report: RunReport, fmt: str) -> bytes:
    """The run's measurements, one row each with its cell's definition, as ``csv``,
    ``json-rows`` or ``parquet`` (needs pyarrow: :class:`ExportError` otherwise)."""
    definitions = {c.name: (c.platform, c.workload) for c in report.cells}
    table = measurement_table(report.rows, report.run.id, definitions)
    encoders = {"csv": to_csv, "json-rows": to_json, "parquet": to_parquet}
    return encoders[fmt](table)


def report_json(report: RunReport, findings: str | None = None,
                fleet: Mapping[str, Any] | None = None) -> str:
    """``--format json``: every summary with its % of native, the run's environment,
    ``scenarios``, each registered kind's part under its key (``propagation``: the fits
    the terminal prints, see :class:`~hvbench.kinds.propagation.text.PropagationPart`),
    ``diagnosis`` (every cell's verdict), with a native and several guests in a phase
    ``leaderboard`` (the guests ranked by % of native, see
    :func:`~hvbench.analysis.leaderboard.leaderboard_json`), with staged cpu
    neighbours ``stages`` (CPU per stage), with libvirt platforms ``libvirt_domains``,
    and with ``findings``
    (:func:`findings_choice`) ``findings``: the seed papers' findings next to ours; with
    ``fleet`` (:func:`hvbench.report.fleet.fleet_json`, a fleet's host run) ``fleet``."""
    extra: dict[str, Any] = {"scenarios": scenario_json(report.scenarios),
                             **{key: part.json() for key, part in report.kind_parts.items()},
                             "diagnosis": [verdict_json(v) for v in report.verdicts]}
    boards = leaderboards(report.phases, report.natives, report.verdicts)
    if boards:
        extra["leaderboard"] = [leaderboard_json(b) for b in boards]
    if report.stages:
        extra["stages"] = stage_json(report.stages)
    if report.layers:
        extra["latency_layers"] = [dataclasses.asdict(row) for row in report.layers]
    if report.domain_io:
        extra["libvirt_domains"] = report.domain_io
    if any(s.tested for s in report.steady):
        extra["steady_state"] = [
            {"workload": s.workload, "phase": s.phase, "platform": s.platform,
             "steady": s.steady, "tested": s.tested, "drifting": s.drifting,
             "worst_drift_pct": s.worst_drift_pct} for s in report.steady]
    if findings is not None:
        extra["findings"] = findings_json(run_findings(report),
                                          include_unmeasured=findings == "all")
    if fleet is not None:
        extra["fleet"] = dict(fleet)
    kernels = report.guest_kernels()
    if kernels:
        extra["guest_kernel"] = {name: text for text, names in kernels.items()
                                 for name in names}
    return summary_json(report.phases, report.natives, summary_meta(report), extra)


def html_input(report: RunReport, series: SeriesChoice | None,
               latency: Mapping[tuple[str, str], Mapping[str, Histogram]] | None = None,
               findings: str | None = None) -> ReportInput:
    """The HTML renderer's input from the model; ``latency``: the histograms of
    :func:`~hvbench.report.model.latency_distributions` (None: no latency section);
    ``findings``: see :func:`findings_choice`."""
    run = report.run
    failures = [(f.cell, f.repetition, (f.error or "").splitlines()[0] if f.error else "")
                for f in report.failures]
    return ReportInput(
        run_id=run.id, study_name=run.study_name, status=run.status,
        created_at=run.created_at, finished_at=run.finished_at, env=run.env,
        study_text=run.study_text, rows=report.rows, natives=report.natives,
        samples=report.samples, series=series, failures=failures,
        cells=report.cell_dimensions(), platforms=report.platform_definitions(),
        guest_kernel=guest_kernel_lines(report),
        latency={key: {platform: cdf(h) for platform, h in per.items()}
                 for key, per in (latency or {}).items()},
        diagnosis=diagnosis_groups(report.verdicts),
        headline=headline(report.verdicts),
        layers=layer_table(report.layers) if report.layers else None,
        leaderboard=tuple(leaderboard_tables(report)),
        findings=findings_text_table(report, findings), warnings=report.warnings)


def section_titles(report: RunReport) -> dict[str, list[str]]:
    """The titles of the sections each renderer shows, for parity checks: phases as
    ``workload / phase``, then the leaderboards, the kinds' own tables (the propagation
    fits) and the scenario tables."""
    phases = [f"{p.workload} / {p.phase}" for p in report.phases]
    extra: list[str] = [t.title for t in leaderboard_tables(report)]
    extra += [title for part in report.kind_parts.values() for title in part.titles()]
    extra += [t.title for t in scenario_tables(report.scenarios)]
    extra += [t.title for t in stage_tables(report.stages)]
    if report.layers:
        extra.append(LAYER_TITLE)
    if listed(report.verdicts):
        extra.append(DIAGNOSIS_TITLE)
    out: dict[str, Any] = {"phases": phases, "extra": extra}
    return out
