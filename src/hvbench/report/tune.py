"""The answer of a tuning run: the ranked table, the winner against the default and
native with its tests, why it wins (the diagnosis of both), the winner as ready-to-use
configuration, and the HTML report's tuning section.

Read from the store like any report (:func:`load_tune_report`); rendering is pure.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hvbench.analysis.compare import Comparison
from hvbench.analysis.diagnosis import Verdict
from hvbench.analysis.stats import Summary, summarize
from hvbench.analysis.summaries import fmt_value
from hvbench.analysis.tuning import (
    AxisEffect,
    TrialRow,
    axis_effects,
    native_means,
    objective_of,
    scores,
    test_against,
    trial_rows,
    winner_of,
)
from hvbench.errors import HvbenchError, SpecError
from hvbench.model.study import guest_vm
from hvbench.model.tune import (
    TuneSpec,
    libvirt_domain,
    libvirt_elements,
    params_of_definition,
    platform_toml,
    qemu_fragment,
)
from hvbench.report.diagnosis import explain_lines, verdict_json
from hvbench.report.model import load_run_report
from hvbench.report.text import TextTable
from hvbench.store.records import CellRow, MeasurementRow, RunRecord

if TYPE_CHECKING:
    from hvbench.store.database import Store


TCG_NOTE = ("emulation ranking: guests ran under TCG, so this ranks configurations of an "
            "emulated machine; under KVM the order may differ (the device, cache and "
            "image settings carry over more than the controller's and NIC's cost)")
CACHED_NOTE = ("the workload asked for O_DIRECT but the host page cache answered: the "
               "number measures the cache (writes not yet durable), not the device; such "
               "configurations are not crowned unless the tune file sets crown_cached = true")
ABOVE_NATIVE_NOTE = ("above native: the host page cache (or another shortcut), not the "
                     "device, served these configurations")


@dataclass(frozen=True)
class WinnerBlock:
    """The winner as configuration to apply."""

    platform_toml: str
    qemu_args: tuple[str, ...]
    #: The libvirt domain XML elements and a whole domain holding them; None with the
    #: reason when libvirt cannot express the configuration.
    libvirt_elements: str | None
    domain_xml: str | None
    libvirt_problem: str | None = None


@dataclass(frozen=True)
class TuneReport:
    """Everything the answer of one tuning run shows."""

    run: RunRecord
    spec: TuneSpec
    rows: list[TrialRow]
    native: Summary | None
    default: TrialRow | None
    winner: TrialRow | None
    vs_default: Comparison | None
    vs_native: Comparison | None
    #: The diagnosis of the winner and the default in the objective's phases.
    verdicts: list[Verdict]
    block: WinnerBlock | None
    #: (measurement number, configuration, objective) in the order measured.
    timeline: list[tuple[int, str, float]] = field(default_factory=list)
    effects: list[AxisEffect] = field(default_factory=list)
    #: Configurations that were not device measurements under an O_DIRECT workload
    #: (the page cache served them), with the evidence: flagged, and not crowned unless
    #: the tune file says ``crown_cached = true``.
    cached: dict[str, str] = field(default_factory=dict)

    @property
    def tcg(self) -> bool:
        return self.run.env.get("accelerator") == "tcg"


def winner_block(spec: TuneSpec, params: dict[str, Any]) -> WinnerBlock:
    """The study platform entry, QEMU fragment and libvirt elements of a configuration."""
    variant = spec.trial_variant(tuple(params.items()))
    vm = guest_vm(variant.spec)
    if vm is None:
        raise HvbenchError(f"internal: tune trial {variant.name} declares no guest")
    try:
        domain = libvirt_domain(vm)
    except SpecError as exc:
        return WinnerBlock(platform_toml(variant), tuple(qemu_fragment(vm)), None, None,
                           str(exc))
    return WinnerBlock(platform_toml(variant), tuple(qemu_fragment(vm)),
                       libvirt_elements(domain), domain)


def _timeline(rows: Sequence[MeasurementRow], per_config: dict[str, list[float]],
              objective_rows: set[tuple[str, str]]) -> list[tuple[int, str, float]]:
    """Each configuration's objective per repetition at the position it was measured."""
    first: dict[tuple[str, int], int] = {}
    for row in rows:
        if (row.workload, row.phase) in objective_rows:
            key = (row.platform, row.repetition)
            first[key] = min(first.get(key, row.position), row.position)
    points = []
    for name, values in per_config.items():
        reps = sorted(r for (p, r) in first if p == name)
        points += [(first[(name, r)], name, v) for r, v in zip(reps, values, strict=False)]
    points.sort()
    return [(i + 1, name, value) for i, (_, name, value) in enumerate(points)]


def load_tune_report(store: Store, run_id: str, spec: TuneSpec) -> TuneReport:
    """Read a tuning run and compute its answer; ``spec`` is the run's own tune spec
    (:func:`hvbench.run.tune.resume_tune`: the caller parses it, as report sits below run).

    Raises :class:`StoreError` (no such run)."""
    report = load_run_report(store, run_id, monitors=[])
    objective = objective_of(spec)
    native_name = spec.native.name if spec.native else None
    natives = native_means(report.rows, objective, native_name)
    axes = tuple(spec.axes)
    params: dict[str, dict[str, Any]] = {}
    order: list[str] = []
    for cell in report.cells:
        if cell.platform_name != native_name and cell.platform_name not in params:
            params[cell.platform_name] = dict(params_of_definition(cell.platform, axes))
            order.append(cell.platform_name)
    per_config = {n: scores(report.rows, n, objective, natives) for n in params}
    native_scores = scores(report.rows, native_name, objective, natives) if native_name \
        else []
    rows = trial_rows(per_config, params, order, objective, native_scores)
    targets = {(t.workload, t.phase) for t in spec.targets}
    cached = cached_configs(report.verdicts, report.cells, targets)
    crownable = rows if spec.section.crown_cached else \
        [r for r in rows if r.name not in cached]
    winner = winner_of(crownable, spec.section.halving.rungs[-1])
    default_name = spec.trial_variant(spec.default_params).name \
        if spec.default_params in spec.space else None
    default = next((r for r in rows if r.name == default_name), None)
    alpha = spec.section.alpha
    vs_default = vs_native = None
    if winner is not None and default is not None and winner.name != default.name:
        vs_default = test_against(per_config[winner.name], per_config[default.name],
                                  spec.metric, alpha=alpha, label="winner vs default")
    if winner is not None and native_scores:
        vs_native = test_against(per_config[winner.name], native_scores, spec.metric,
                                 alpha=alpha, label="winner vs native")
    wanted = {r.name for r in (winner, default) if r is not None}
    verdicts = [v for v in report.verdicts
                if v.platform in wanted and (v.workload, v.phase) in targets]
    return TuneReport(
        run=report.run, spec=spec, rows=rows,
        native=summarize(native_scores) if native_scores else None, default=default,
        winner=winner, vs_default=vs_default, vs_native=vs_native, verdicts=verdicts,
        block=winner_block(spec, dict(winner.params)) if winner is not None else None,
        timeline=_timeline(report.rows, per_config, targets),
        effects=axis_effects(per_config, params), cached=cached)


def cached_configs(verdicts: Sequence[Verdict], cells: Sequence[CellRow],
                   targets: set[tuple[str, str]]) -> dict[str, str]:
    """Configuration -> why it is not a device measurement, for every configuration
    whose objective cell under an O_DIRECT workload has that outcome (a buffered
    workload measures the page cache on purpose: it is left alone)."""
    direct = {(c.platform_name, c.workload_name) for c in cells if c.workload.get("direct")}
    return {v.platform: "; ".join(v.validity) for v in verdicts
            if v.outcome == "not-a-device-measurement" and (v.workload, v.phase) in targets
            and (v.platform, v.workload) in direct}


# -- text -------------------------------------------------------------------------------
def objective_label(spec: TuneSpec) -> str:
    """``mb_s of seq/write (maximize)``, or the weighted % of native of several."""
    if len(spec.targets) == 1:
        target = spec.targets[0]
        return f"{spec.metric} of {target.workload}/{target.phase} ({spec.goal})"
    terms = " + ".join(f"{t.weight:g} x {t.workload}/{t.phase}" for t in spec.targets)
    return f"weighted % of native of {spec.metric}: {terms} ({spec.goal})"


def _mean_ci(summary: Summary) -> str:
    if summary.n < 2:
        return f"{fmt_value(summary.mean)} (n=1)"
    return f"{fmt_value(summary.mean)} ± {fmt_value(summary.ci95_half_width)}"


def _pct(row: TrialRow) -> str:
    if row.pct_of_native is None:
        return "-"
    mean, low, high = row.pct_of_native
    text = f"{mean:.1f} %" if low is None or high is None else \
        f"{mean:.1f} % [{low:.1f}, {high:.1f}]"
    return text + (" *" if row.above_native else "")


def ranked_table(report: TuneReport) -> TextTable:
    """The ranked table: configuration (named from its settings, in axis order),
    objective mean ± CI, % of native, repetitions, and the order in which the search
    first measured it."""
    default = report.default.name if report.default else None
    winner = report.winner.name if report.winner else None
    rows = []
    for rank, row in enumerate(report.rows, 1):
        mark = " (winner)" if row.name == winner else ""
        mark += " (default)" if row.name == default else ""
        mark += " (not a device measurement)" if row.name in report.cached else ""
        rows.append((str(rank), row.name + mark, _mean_ci(row.summary), _pct(row),
                     str(row.summary.n), str(row.order + 1)))
    notes = []
    if any(r.above_native for r in report.rows):
        notes.append(f"* {ABOVE_NATIVE_NOTE}")
    if report.cached:
        notes.append(f"not a device measurement: {CACHED_NOTE}")
    if report.tcg:
        notes.append(TCG_NOTE)
    axes = ", ".join(a.split(".")[-1] for a in report.spec.axes)
    return TextTable(f"tuning: {objective_label(report.spec)}",
                     ("#", f"configuration (base.{axes})", "objective (mean ± 95 % CI)",
                      "% of native", "reps", "trial"), tuple(rows), left=2,
                     note="\n".join(notes))


def _test_line(test: Comparison | None, what: str) -> str:
    if test is None:
        return f"winner vs {what}: -"
    delta = "-" if test.delta_pct is None else f"{test.delta_pct:+.1f} %"
    p = "-" if test.p_value != test.p_value else f"{test.p_value:.3g}"
    return (f"winner vs {what}: {fmt_value(test.mean_b)} vs {fmt_value(test.mean_a)} "
            f"({delta}), permutation test p = {p} (n = {test.n_b} vs {test.n_a}): "
            f"{test.verdict}{' (' + test.change + ')' if test.change else ''}")


def answer_lines(report: TuneReport) -> list[str]:
    """The answer after the table: winner vs default and native, the labels, why."""
    if report.winner is None:
        return ["no configuration was measured successfully"]
    lines = [f"winner: {report.winner.name}", _test_line(report.vs_default, "default"),
             _test_line(report.vs_native, "native")]
    if report.winner.above_native:
        lines.append(f"note: the winner is {ABOVE_NATIVE_NOTE}")
    lines += _cached_lines(report)
    if report.tcg:
        lines.append(f"note: {TCG_NOTE}")
    lines.append(f"significance level alpha = {report.spec.section.alpha:g}")
    for verdict in report.verdicts:
        role = "winner" if report.winner and verdict.platform == report.winner.name \
            else "default"
        lines.append(f"why ({role}):")
        lines += [f"  {line}" for line in explain_lines(verdict)]
    return lines


def _cached_lines(report: TuneReport) -> list[str]:
    """The configurations the page cache served, and whether one was crowned anyway."""
    if not report.cached:
        return []
    winner = report.winner.name if report.winner else None
    crowned = winner in report.cached
    lines = [f"note: {name} is not a device measurement ({why}); "
             + ("crowned because crown_cached = true: its writes are not durable when "
                "reported" if name == winner else "not crowned")
             for name, why in report.cached.items()]
    if not crowned and not report.spec.section.crown_cached:
        lines.append(f"note: {CACHED_NOTE}")
    return lines


def block_lines(block: WinnerBlock) -> list[str]:
    """The winner as configuration: study platform entry, QEMU fragment, libvirt XML."""
    lines = ["# study [[platform]] entry", *block.platform_toml.splitlines(), "",
             "# QEMU command-line fragment (image paths, MACs and taps are placeholders)",
             " ".join(_shell_word(a) for a in block.qemu_args), ""]
    if block.libvirt_elements is None:
        lines.append(f"# libvirt: not expressible ({block.libvirt_problem})")
    else:
        lines += ["# libvirt domain XML elements", *block.libvirt_elements.splitlines()]
    return lines


def _shell_word(word: str) -> str:
    return word if all(c.isalnum() or c in "-_=,./:" for c in word) else f"'{word}'"


def tune_json(report: TuneReport) -> dict[str, Any]:
    """The answer as JSON (``hvbench tune --format json``)."""
    def row_json(row: TrialRow) -> dict[str, Any]:
        s = row.summary
        return {"configuration": row.name, "settings": dict(row.params), "n": s.n,
                "mean": s.mean, "ci95": [s.ci95_low, s.ci95_high],
                "pct_of_native": None if row.pct_of_native is None else list(row.pct_of_native),
                "above_native": row.above_native, "trial": row.order + 1}

    def test_json(test: Comparison | None) -> dict[str, Any] | None:
        if test is None:
            return None
        return {"mean_winner": test.mean_b, "mean_other": test.mean_a,
                "delta_pct": test.delta_pct, "n_winner": test.n_b, "n_other": test.n_a,
                "p_value": None if test.p_value != test.p_value else test.p_value,
                "verdict": test.verdict}

    block = report.block
    return {
        "run": report.run.id, "objective": objective_label(report.spec),
        "metric": report.spec.metric, "goal": report.spec.goal,
        "accelerator": report.run.env.get("accelerator"),
        "tcg_note": TCG_NOTE if report.tcg else None,
        "ranking": [row_json(r) for r in report.rows],
        "native": None if report.native is None else {
            "mean": report.native.mean, "n": report.native.n,
            "ci95": [report.native.ci95_low, report.native.ci95_high]},
        "default": report.default.name if report.default else None,
        "winner": report.winner.name if report.winner else None,
        "not_device_measurements": dict(report.cached),
        "winner_vs_default": test_json(report.vs_default),
        "winner_vs_native": test_json(report.vs_native),
        "alpha": report.spec.section.alpha,
        "why": [verdict_json(v) for v in report.verdicts],
        "winner_config": None if block is None else {
            "platform_toml": block.platform_toml, "qemu_args": list(block.qemu_args),
            "libvirt_elements": block.libvirt_elements, "domain_xml": block.domain_xml,
            "libvirt_problem": block.libvirt_problem},
    }


def tune_json_text(report: TuneReport) -> str:
    return json.dumps(tune_json(report), indent=2) + "\n"


# -- HTML -------------------------------------------------------------------------------
def tuning_html(report: TuneReport) -> str:
    """The HTML report's tuning section: the ranked table, the answer, the objective
    per measurement over time, the per-axis effect and the winner's configuration."""
    from hvbench.report.html import blocks, figure  # noqa: PLC0415
    from hvbench.report.plots import axis_effect_bars, objective_timeline  # noqa: PLC0415

    def e(text: object) -> str:
        return html.escape(str(text))

    table = ranked_table(report)
    head = "".join(f"<th>{e(h)}</th>" for h in table.headers)
    body = "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>"
                   for row in table.rows)
    native = report.native.mean if report.native else None
    timeline = objective_timeline(
        f"objective per measurement ({objective_label(report.spec)})", report.timeline,
        native, report.winner.name if report.winner else None)
    effects = axis_effect_bars("mean objective per axis value", report.effects, native)
    parts = ['<h2 id="tuning">Tuning</h2>',
             f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>",
             f"<p>{e(table.note)}</p>" if table.note else "",
             "<pre>" + e("\n".join(answer_lines(report))) + "</pre>",
             figure(timeline, "objective per measurement",
                    "every repetition's objective in the order the search measured it"),
             figure(effects, "per-axis effect",
                    "per axis value, the mean objective of the configurations with it")]
    if report.block is not None:
        parts.append("<h3>The winner as configuration</h3><pre>"
                     + e("\n".join(block_lines(report.block))) + "</pre>")
    return blocks([p for p in parts if p])
