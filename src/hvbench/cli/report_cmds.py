"""``hvbench compare``, ``hvbench check``, the export formats of ``hvbench report``
(``csv``, ``json-rows``, ``parquet``, ``html``), and what its ``table`` and ``json``
formats add to the phase summaries: the propagation fits and the scenario tables
(``hvbench report`` itself is :func:`hvbench.cli.study_cmds.cmd_report`).

The table builders here are pure (rows in, a rich ``Table`` out) and golden-tested;
the ``cmd_*`` functions read the store and the files, print, and return exit codes.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from hvbench.errors import SpecError
from hvbench.store.sqlite import Store

#: ``hvbench report --format`` values handled here (``table`` and ``json`` are not).
EXPORT_FORMATS = ("csv", "json-rows", "parquet", "html")


# -- report exports ------------------------------------------------------------------------
def add_report_options(report: argparse.ArgumentParser) -> None:
    """Options of ``hvbench report`` that only the HTML format uses."""
    report.add_argument(
        "--series", metavar="MONITOR:KEY[+KEY]",
        help="time series drawn in the HTML report, e.g. host.disk.*:util_pct, "
             "host.cpu:busy_pct, qemu:vcpu.cpu_pct, iperf3:mbit_s (default: iperf3 "
             "Mbit/s, else host disk MB/s, else host CPU busy %%)")


def cmd_report_export(args: argparse.Namespace, out: Console, err: Console) -> int:
    """``hvbench report --format csv|json-rows|parquet|html``."""
    from hvbench.report.model import latest_run_id

    binary = args.format == "parquet"
    if binary and not args.output and sys.stdout.isatty():
        raise SpecError("--format parquet writes binary data: give -o FILE or redirect "
                        "stdout")
    store = Store(Path(args.db), create=False)
    try:
        run_id = args.run or latest_run_id(store, args.db)
        data = _export_bytes(store, run_id, args)
    finally:
        store.close()
    if args.output:
        Path(args.output).write_bytes(data)
        err.print(f"wrote {args.output} ({len(data)} bytes)")
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    return 0


def _export_bytes(store: Store, run_id: str, args: argparse.Namespace) -> bytes:
    if args.format == "html":
        return _html(store, run_id, args.series).encode()
    from hvbench.report.export import measurement_table, to_csv, to_json, to_parquet

    definitions = {c.name: (c.platform, c.workload) for c in store.cells(run_id)}
    table = measurement_table(store.measurements(run_id), run_id, definitions)
    encoders = {"csv": to_csv, "json-rows": to_json, "parquet": to_parquet}
    return encoders[args.format](table)


def _html(store: Store, run_id: str, series: str | None) -> str:
    from hvbench.report.html import (
        AUTO_SERIES,
        SCENARIO_MONITORS,
        parse_series_choice,
        render_html,
    )
    from hvbench.report.model import load_run_report
    from hvbench.report.render import html_input

    choice = parse_series_choice(series) if series else None
    # Only the monitors a series choice (or the automatic ones) can draw, plus, for a
    # run with scenarios, those its Scenarios section reads.
    patterns = [choice.monitor] if choice else [c.monitor for c in AUTO_SERIES]
    if any(c.identity.scenario for c in store.cells(run_id)):
        patterns += SCENARIO_MONITORS
    report = load_run_report(store, run_id, monitors=patterns)
    return render_html(html_input(report, choice))


# -- the extra tables of `hvbench report` (table format) ---------------------------------------
def extra_report_tables(rows: Sequence[Any], platforms: Mapping[str, Mapping[str, Any]]
                        ) -> list[Table]:
    """What the ``table`` format prints after the phase tables: the propagation fits,
    then the scenario tables (degradation against alone, aggregated throughput ratio,
    guests started on demand, CPU weights; no CoV, which would read every sample).
    Pure: empty for a run with neither. ``platforms``: stored platform definitions by
    name (the weights columns read them)."""
    from hvbench.analysis.scenarios import build_scenario_report, scenario_tables
    from hvbench.report.tables import propagation_fit_table, rich_table

    tables = [t for t in (propagation_fit_table(rows),) if t is not None]
    report = build_scenario_report(rows, platforms=platforms)
    return tables + [rich_table(t) for t in scenario_tables(report)]


# -- compare -------------------------------------------------------------------------------
def _side_spec(text: str, run: str | None) -> tuple[str | None, str | None]:
    """``RUN``, ``RUN:PLATFORM``, ``:PLATFORM`` (the --run or latest run), or, with
    ``--run``, a bare ``PLATFORM``: (run or None for latest, platform or None)."""
    if ":" in text:
        run_part, platform = text.split(":", 1)
        if not platform:
            raise SpecError(f"{text!r}: expected RUN:PLATFORM (the platform is empty)")
        return run_part or run, platform
    if run is not None:
        return run, text
    return text, None


def _resolve_sides(args: argparse.Namespace, store: Store
                   ) -> tuple[tuple[str, str | None], tuple[str, str | None]]:
    from hvbench.report.model import latest_run_id

    a = _side_spec(args.a, args.run)
    b = _side_spec(args.b, args.run)
    if (a[1] is None) != (b[1] is None):
        raise SpecError("compare: give two runs or two platforms (RUN:PLATFORM or "
                        "--run RUN with platform names), not one of each")
    latest = None
    if a[0] is None or b[0] is None:
        latest = latest_run_id(store, args.db)
    side_a, side_b = (a[0] or latest or "", a[1]), (b[0] or latest or "", b[1])
    if side_a == side_b:
        raise SpecError(f"compare: A and B are the same ({_label(*side_a)})")
    return side_a, side_b


def _label(run: str, platform: str | None) -> str:
    return f"run {run}" + (f" platform {platform}" if platform else "")


def _check_comparable(store: Store, a: tuple[str, str | None], b: tuple[str, str | None],
                      force: bool) -> list[str]:
    """Refusals (as notes when forced) about differing environments and definitions."""
    from hvbench.analysis.compare import ComparisonRefused, definition_differences, env_differences

    problems = []
    if a[0] != b[0]:
        diffs = env_differences(store.get_run(a[0]).env, store.get_run(b[0]).env)
        if diffs:
            problems.append("the environments differ in key fields: " + ", ".join(
                f"{f} ({va!r} vs {vb!r})" for f, va, vb in diffs))
        changed = definition_differences(*(_definitions(store, *side) for side in (a, b)))
        if changed:
            problems.append("these are defined differently: " + ", ".join(changed))
    if problems and not force:
        raise ComparisonRefused(f"compare {_label(*a)} with {_label(*b)}: refused, "
                                f"{'; '.join(problems)}; pass --force to compare anyway")
    return problems


def _definitions(store: Store, run: str, platform: str | None) -> dict[str, Any]:
    cells = store.cells(run)
    if platform is None:
        return {c.name: (c.platform, c.workload) for c in cells}
    return {c.workload_name: c.workload for c in cells if c.platform_name == platform}


def _side(store: Store, run: str, platform: str | None) -> Any:
    from hvbench.analysis.compare import Side, side_values

    rows = store.measurements(run)
    if platform is not None and not any(r.platform == platform for r in rows):
        known = sorted({r.platform for r in rows})
        raise SpecError(f"run {run} has no measurements of platform {platform!r} "
                        f"(platforms: {', '.join(known) or 'none'})")
    return Side(_label(run, platform), side_values(rows, platform))


def cmd_compare(args: argparse.Namespace, out: Console, err: Console) -> int:
    """``hvbench compare A B``: exit 0 whatever the verdicts (2 on bad input or refusal)."""
    from hvbench.analysis.compare import compare_sides

    store = Store(Path(args.db), create=False)
    try:
        a, b = _resolve_sides(args, store)
        notes = _check_comparable(store, a, b, args.force)
        side_a, side_b = _side(store, *a), _side(store, *b)
    finally:
        store.close()
    result = compare_sides(side_a, side_b, metrics=args.metric or (), alpha=args.alpha,
                           threshold_pct=args.threshold)
    if args.format == "json":
        print(comparison_json(result, side_a.label, side_b.label, args.alpha, args.threshold))
        return 0
    for note in notes:
        err.print(f"forced: {note}", style="yellow", markup=False)
    for line in comparison_header(side_a.label, side_b.label, args.alpha, args.threshold):
        out.print(line, markup=False)
    out.print(comparison_table(result))
    for line in comparison_footer(result):
        out.print(line, markup=False)
    return 0


def comparison_header(label_a: str, label_b: str, alpha: float, threshold: float) -> list[str]:
    """What is compared and how (pure)."""
    return [f"A: {label_a}", f"B: {label_b}",
            f"two-sided permutation test of the difference of means over the repetitions; "
            f"significant = p < {alpha:g} and |delta| > {threshold:g} %"]


def _p_text(p: float) -> str:
    if math.isnan(p):
        return "-"
    return "<0.0001" if p < 1e-4 else f"{p:.3g}"


def _num(value: float) -> str:
    return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.3g}"


def comparison_table(result: Any) -> Table:
    """One row per (cell, phase, metric): means, delta %, p, verdict (pure)."""
    table = Table(title="compare", title_justify="left", box=box.SIMPLE_HEAD,
                  pad_edge=False, collapse_padding=True)
    table.add_column("cell/phase", overflow="fold", min_width=10)
    table.add_column("metric", overflow="fold", min_width=10)
    for name in ("n", "mean A", "mean B", "Δ %", "p"):
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("verdict", min_width=15)
    for c in result.comparisons:
        delta = "-" if c.delta_pct is None else f"{c.delta_pct:+.1f}"
        verdict = f"{c.verdict} ({c.change})" if c.change else c.verdict
        style = "bold red" if c.change == "worse" else "bold" if c.change else ""
        table.add_row(f"{c.cell}/{c.phase}", c.metric, f"{c.n_a}/{c.n_b}", _num(c.mean_a),
                      _num(c.mean_b), delta, _p_text(c.p_value), verdict, style=style)
    return table


def comparison_footer(result: Any) -> list[str]:
    """Counts of the verdicts and what only one side has (pure)."""
    counts: dict[str, int] = {}
    for c in result.comparisons:
        counts[c.verdict] = counts.get(c.verdict, 0) + 1
    lines = [", ".join(f"{n} {v}" for v, n in sorted(counts.items())) or "nothing compared"]
    for side, keys in (("A", result.only_a), ("B", result.only_b)):
        if keys:
            lines.append(f"only in {side}: " + ", ".join("/".join(k) for k in keys))
    if any(c.verdict == "too few repetitions" for c in result.comparisons):
        lines.append("too few repetitions: even the most extreme split cannot reach alpha; "
                     "6 repetitions per side reach p = 0.002")
    return lines


def comparison_json(result: Any, label_a: str, label_b: str, alpha: float,
                    threshold: float) -> str:
    """The comparison as JSON (pure); NaN p-values become null."""
    rows = []
    for c in result.comparisons:
        item = dict(c.__dict__)
        item["p_value"] = None if math.isnan(c.p_value) else c.p_value
        rows.append(item)
    return json.dumps({"a": label_a, "b": label_b, "alpha": alpha, "threshold_pct": threshold,
                       "comparisons": rows,
                       "only_a": [list(k) for k in result.only_a],
                       "only_b": [list(k) for k in result.only_b]}, indent=2)


# -- check ---------------------------------------------------------------------------------
def cmd_check(args: argparse.Namespace, out: Console, err: Console) -> int:
    """``hvbench check [RUN] --bounds FILE``: exit 1 when a bound fails, else 0."""
    from hvbench.analysis.bounds import evaluate, failed, parse_bounds
    from hvbench.report.model import latest_run_id, natives_of

    path = Path(args.bounds)
    try:
        text = path.read_text()
    except OSError as exc:
        raise SpecError(f"{path}: cannot read the bounds file: {exc.strerror}") from exc
    bounds = parse_bounds(text, str(path))
    store = Store(Path(args.db), create=False)
    try:
        run_id = args.run or latest_run_id(store, args.db)
        results = evaluate(bounds, store.measurements(run_id), natives_of(store.cells(run_id)))
    finally:
        store.close()
    out.print(bounds_table(results, run_id))
    out.print(bounds_summary(results), markup=False)
    return 1 if failed(results) else 0


def _limit_text(low: float | None, high: float | None, unit: str) -> str:
    if low is not None and high is not None:
        return f"{_num(low)} .. {_num(high)}{unit}"
    if low is not None:
        return f">= {_num(low)}{unit}"
    return f"<= {_num(high or 0.0)}{unit}"


def bounds_table(results: Any, run_id: str) -> Table:
    """One row per checked (bound, platform, workload, phase, metric) (pure)."""
    table = Table(title=f"bounds of run {run_id}", title_justify="left")
    for name in ("bound", "platform", "workload/phase", "metric", "value", "allowed"):
        table.add_column(name, justify="right" if name in ("value", "allowed") else "left",
                         overflow="fold")
    table.add_column("result", no_wrap=True)
    for r in results:
        unit = " %" if r.note.startswith("% of") else ""
        value = r.note if r.value is None else f"{r.stat} {_num(r.value)}{unit}"
        table.add_row(r.bound, r.platform, f"{r.workload}/{r.phase}", r.metric, value,
                      _limit_text(r.low, r.high, unit),
                      "PASS" if r.status == "pass" else "FAIL",
                      style="" if r.status == "pass" else "bold red")
    return table


def bounds_summary(results: Any) -> str:
    """``N of M checks passed`` and, on failure, that the exit code is 1 (pure)."""
    passed = sum(1 for r in results if r.status == "pass")
    tail = "" if passed == len(results) else "; exit code 1"
    return f"{passed} of {len(results)} checks passed{tail}"


# -- registration --------------------------------------------------------------------------
def add_report_commands(sub: Any) -> None:
    """Register ``compare`` and ``check`` on the top-level subparsers."""
    from hvbench.analysis.compare import DEFAULT_ALPHA, DEFAULT_THRESHOLD_PCT

    compare = sub.add_parser(
        "compare", help="is B different from A? permutation test per cell and metric",
        description="A and B are two runs (RUN), or two platforms: RUN:PLATFORM, "
                    ":PLATFORM (latest run) or PLATFORM with --run RUN.")
    compare.add_argument("a", metavar="A")
    compare.add_argument("b", metavar="B")
    compare.add_argument("--run", help="the run whose platforms A and B are")
    compare.add_argument("--metric", action="append", metavar="PATTERN",
                         help="metric name or fnmatch pattern, repeatable (default: the "
                              "throughput metric of each phase)")
    compare.add_argument("--alpha", type=float, default=DEFAULT_ALPHA,
                         help=f"significance level (default {DEFAULT_ALPHA:g})")
    compare.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD_PCT,
                         help="smallest |delta| %% that counts (default "
                              f"{DEFAULT_THRESHOLD_PCT:g})")
    compare.add_argument("--force", action="store_true",
                         help="compare runs whose environments or cells differ")
    compare.add_argument("--format", choices=("table", "json"), default="table")
    compare.add_argument("--db", default="hvbench.db")
    compare.set_defaults(study_handler=cmd_compare)

    check = sub.add_parser("check", help="check a run against bounds; exit 1 if one fails")
    check.add_argument("run", nargs="?", help="run id (default: the latest)")
    check.add_argument("--bounds", required=True, metavar="FILE", help="bounds file (TOML)")
    check.add_argument("--db", default="hvbench.db")
    check.set_defaults(study_handler=cmd_check)
