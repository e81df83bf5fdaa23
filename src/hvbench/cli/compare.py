"""``hvbench compare A B``: is B different from A? Per cell, phase and metric a paired
t-test (two platforms of one run: repetitions that ran back to back) or a permutation
test (two runs, or two sets of runs compared by their run means), gated by this host's
noise floor when one was measured; refused when the runs' environments or definitions
differ.

The table builders are pure (a comparison in, a rich ``Table`` or lines out) and
golden-tested; :func:`handle` reads the store, prints and returns the exit code.
"""

from __future__ import annotations

import argparse
import dataclasses
import fnmatch
import json
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Console
from rich.table import Table

from hvbench.cli.common import (
    add_cell_filters,
    add_db_option,
    add_format_option,
    add_output_option,
    db_of,
    no_match_error,
    selected,
    short_number,
    write_document,
)
from hvbench.errors import SpecError

if TYPE_CHECKING:
    from hvbench.store.database import Store


def register(sub: Any) -> None:
    """``hvbench compare``."""
    from hvbench.analysis.compare import DEFAULT_ALPHA, DEFAULT_THRESHOLD_PCT

    compare = sub.add_parser(
        "compare", help="is B different from A? permutation test per cell and metric",
        description="A and B are two runs (RUN), two sets of runs (RUN1,RUN2,...: one "
                    "value per run, its mean), or two platforms of one run: RUN:PLATFORM, "
                    ":PLATFORM (latest run) or PLATFORM with --run RUN (paired by "
                    "repetition unless --unpaired).")
    compare.add_argument("a", metavar="A", help="the baseline: RUN, RUN1,RUN2,..., "
                         "RUN:PLATFORM, :PLATFORM or PLATFORM (with --run)")
    compare.add_argument("b", metavar="B", help="what is compared with A (same forms)")
    compare.add_argument("--run", metavar="RUN",
                         help="the run whose platforms A and B are")
    compare.add_argument("--metric", action="append", metavar="PATTERN",
                         help="metric name or fnmatch pattern, repeatable (default: the "
                              "throughput metric of each phase)")
    compare.add_argument("--alpha", type=float, default=DEFAULT_ALPHA,
                         help=f"significance level (default {DEFAULT_ALPHA:g})")
    compare.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD_PCT,
                         help="smallest |delta| %% that counts (default "
                              f"{DEFAULT_THRESHOLD_PCT:g})")
    compare.add_argument("--unpaired", action="store_true",
                         help="two platforms of one run: test them as independent samples "
                              "instead of pairing the repetitions that ran back to back")
    compare.add_argument("--force", action="store_true",
                         help="compare runs whose environments or cells differ")
    add_format_option(compare)
    add_output_option(compare)
    add_cell_filters(compare, what="cells (a workload name when A and B are platforms)")
    compare.add_argument("--by-host", action="store_true",
                         help="A is a fleet id and B one of its hosts: that host against "
                              "the pooled repetitions of the fleet's other hosts")
    add_db_option(compare)
    compare.set_defaults(handler=handle)


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


def _run_lists(args: argparse.Namespace, store: Store
               ) -> tuple[list[str], list[str]] | None:
    """``RUN1,RUN2,... RUN3,RUN4,...``: each side's run ids (prefixes resolved), or None
    when neither side lists several runs."""
    from hvbench.report.model import resolve_run_id

    if "," not in args.a and "," not in args.b:
        return None
    if ":" in args.a or ":" in args.b or args.run:
        raise SpecError("compare: a side of several runs (RUN1,RUN2,...) is compared run "
                        "by run, not by platform: drop the :PLATFORM and --run")
    sides = []
    for text in (args.a, args.b):
        names = [n for n in text.split(",") if n]
        ids = [resolve_run_id(store, n, store.location) for n in names]
        if len(set(ids)) != len(ids):
            raise SpecError(f"compare: {text!r} names a run twice")
        sides.append(ids)
    if set(sides[0]) & set(sides[1]):
        raise SpecError("compare: a run cannot be on both sides")
    return sides[0], sides[1]


def _resolve_sides(args: argparse.Namespace, store: Store
                   ) -> tuple[tuple[str, str | None], tuple[str, str | None]]:
    from hvbench.report.model import resolve_run_id

    a = _side_spec(args.a, args.run)
    b = _side_spec(args.b, args.run)
    if (a[1] is None) != (b[1] is None):
        raise SpecError("compare: give two runs or two platforms (RUN:PLATFORM or "
                        "--run RUN with platform names), not one of each")
    # A run may be named by a unique prefix of its id; none: the latest run.
    side_a = (resolve_run_id(store, a[0], store.location), a[1])
    side_b = (resolve_run_id(store, b[0], store.location), b[1])
    if side_a == side_b:
        raise SpecError(f"compare: A and B are the same ({_label(*side_a)})")
    return side_a, side_b


def _label(run: str, platform: str | None) -> str:
    return f"run {run}" + (f" platform {platform}" if platform else "")


def _check_comparable(store: Store, a: tuple[str, str | None], b: tuple[str, str | None],
                      force: bool) -> list[str]:
    """Refusals (as notes when forced) about differing environments and definitions."""
    from hvbench.analysis.compare import (
        ComparisonRefused,
        definition_differences,
        env_differences,
        setting_differences,
    )

    problems = []
    if a[0] != b[0]:
        diffs = env_differences(store.get_run(a[0]).env, store.get_run(b[0]).env)
        if diffs:
            problems.append("the environments differ in key fields: " + ", ".join(
                f"{f} ({va!r} vs {vb!r})" for f, va, vb in diffs))
        defs_a, defs_b = (_definitions(store, *side) for side in (a, b))
        changed = definition_differences(defs_a, defs_b)
        if changed:
            problems.append("these are defined differently: " + ", ".join(
                _changed_text(name, setting_differences(defs_a[name], defs_b[name]))
                for name in changed))
    if problems and not force:
        raise ComparisonRefused(f"compare {_label(*a)} with {_label(*b)}: refused, "
                                f"{'; '.join(problems)}; pass --force to compare anyway")
    return problems


def _changed_text(name: str, settings: list[tuple[str, Any, Any]]) -> str:
    """``vm/dd (disk.cache 'none' vs 'writeback')``: a cell and the platform settings
    it differs in (none named: its workload differs)."""
    if not settings:
        return name
    return f"{name} ({', '.join(f'{s} {va!r} vs {vb!r}' for s, va, vb in settings)})"


def _definitions(store: Store, run: str, platform: str | None) -> dict[str, Any]:
    cells = store.cells(run)
    if platform is None:
        return {c.name: (c.platform, c.workload) for c in cells}
    return {c.workload_name: c.workload for c in cells if c.platform_name == platform}


def _side(store: Store, run: str, platform: str | None) -> Any:
    """One run (values per repetition) or one platform of a run (values per
    repetition, with their repetition numbers so two platforms of one run pair up)."""
    from hvbench.analysis.compare import Side, side_repetitions, side_values

    rows = store.measurements(run)
    if platform is not None and not any(r.platform == platform for r in rows):
        known = sorted({r.platform for r in rows})
        raise SpecError(f"run {run} has no measurements of platform {platform!r} "
                        f"(platforms: {', '.join(known) or 'none'})")
    reps = side_repetitions(rows, platform) if platform is not None else {}
    return Side(_label(run, platform), side_values(rows, platform), reps)


def _runs_side(store: Store, runs: list[str]) -> Any:
    """Several runs: one value per run and key, the run's mean."""
    from hvbench.analysis.compare import Side, run_means

    return Side(f"runs {', '.join(runs)} (one value per run)",
                run_means([store.measurements(r) for r in runs]), unit="run")


def _check_run_lists(store: Store, a: list[str], b: list[str], force: bool) -> list[str]:
    """The refusals of :func:`_check_comparable` for every run against the first."""
    notes: list[str] = []
    first = a[0]
    for other in [*a[1:], *b]:
        notes += _check_comparable(store, (first, None), (other, None), force)
    return notes


def _floors(store: Store, run: str, platform: str | None) -> dict[Any, Any]:
    """This host's newest noise floor of each of A's (cell, phase, metric), keyed as
    A's side is (by workload for a platform side); empty when none was measured."""
    from hvbench.report.model import run_noise_floors

    cells = [c for c in store.cells(run) if platform is None or c.platform_name == platform]
    if platform is None:
        return dict(run_noise_floors(store, store.get_run(run), cells))
    return dict(run_noise_floors(store, store.get_run(run), cells,
                                 name=lambda c: c.workload_name))


def _host_sides(store: Store, fleet_id: str, host: str) -> tuple[Any, Any]:
    """``--by-host FLEET HOST``: A the pooled repetitions of the fleet's other hosts, B
    the host's (hosts differ by design: no environment check)."""
    from hvbench.analysis.compare import Side, side_values

    runs = store.fleet_runs(fleet_id)
    hosts = [str(r.host) for r in runs]
    if host not in hosts:
        raise SpecError(f"{store.location}: fleet {fleet_id!r} has no host {host!r} "
                        f"(hosts: {', '.join(hosts) or 'none'})")
    if len(hosts) < 2:
        raise SpecError(f"fleet {fleet_id} has one host: nothing to compare it with")
    rest = [r for r in runs if r.host != host]
    rows = [row for r in rest for row in store.measurements(r.id)]
    mine = next(r for r in runs if r.host == host)
    return (Side(f"fleet {fleet_id} hosts {', '.join(str(r.host) for r in rest)}",
                 side_values(rows)),
            Side(f"fleet {fleet_id} host {host}", side_values(store.measurements(mine.id))))


def handle(args: argparse.Namespace, out: Console, err: Console) -> int:
    """``hvbench compare A B``: exit 0 whatever the verdicts (2 on bad input or refusal)."""
    from hvbench.analysis.compare import compare_sides
    from hvbench.store.database import Store

    store = Store(db_of(args), create=False)
    floors: dict[Any, Any] = {}
    try:
        lists = None if args.by_host else _run_lists(args, store)
        if args.by_host:
            side_a, side_b = _host_sides(store, args.a, args.b)
            notes: list[str] = []
        elif lists is not None:
            notes = _check_run_lists(store, *lists, args.force)
            side_a, side_b = _runs_side(store, lists[0]), _runs_side(store, lists[1])
        else:
            a, b = _resolve_sides(args, store)
            notes = _check_comparable(store, a, b, args.force)
            side_a, side_b = _side(store, *a), _side(store, *b)
            floors = _floors(store, *a)
    finally:
        store.close()
    side_a, side_b = _filtered(side_a, args), _filtered(side_b, args)
    _check_metric_patterns(args.metric or (), side_a, side_b)
    result = compare_sides(side_a, side_b, metrics=args.metric or (), alpha=args.alpha,
                           threshold_pct=args.threshold, paired=not args.unpaired,
                           floors=floors)
    if args.format == "json":
        write_document(out, comparison_json(result, side_a.label, side_b.label, args.alpha,
                                            args.threshold))
        return 0
    for note in notes:
        err.print(f"forced: {note}", style="yellow", markup=False)
    for line in comparison_header(side_a.label, side_b.label, args.alpha, args.threshold,
                                  result):
        out.print(line, markup=False)
    out.print(comparison_table(result))
    for line in comparison_footer(result):
        out.print(line, markup=False)
    return 0


def _filtered(side: Any, args: argparse.Namespace) -> Any:
    """``side`` with only the cells ``--only``/``--exclude`` select; none left is bad
    input (the message lists the closest cells)."""
    if not (args.only or args.exclude):
        return side
    keep = {key for key in side.values if selected(key[0], args.only, args.exclude)}
    if not keep:
        raise no_match_error(args.only or args.exclude,
                             sorted({key[0] for key in side.values}), "cell")
    return dataclasses.replace(
        side, values={k: v for k, v in side.values.items() if k in keep},
        repetitions={k: v for k, v in side.repetitions.items() if k in keep})


def _check_metric_patterns(patterns: Sequence[str], a: Any, b: Any) -> None:
    """Every ``--metric`` pattern names a metric one side measured; a typo is bad input
    and the message lists the closest metrics."""
    metrics = sorted({key[2] for side in (a, b) for key in side.values})
    for pattern in patterns:
        if not any(fnmatch.fnmatchcase(m, pattern) for m in metrics):
            raise no_match_error([pattern], metrics, "metric")


def comparison_header(label_a: str, label_b: str, alpha: float, threshold: float,
                      result: Any = None) -> list[str]:
    """What is compared and how (pure): the tests the rows used and the verdict rule."""
    tests = {c.test for c in result.comparisons} if result is not None else {"permutation"}
    how = []
    if "paired t" in tests:
        how.append("paired t-test of B - A over the repetitions both ran back to back")
    if "permutation" in tests:
        how.append("two-sided permutation test of the difference of means")
    floored = result is not None and any(c.noise_floor_pct is not None
                                         for c in result.comparisons)
    rule = f"significant = p < {alpha:g} and |delta| > {threshold:g} %"
    if floored:
        rule += " and |delta| above this host's noise floor (hvbench noise)"
    return [f"A: {label_a}", f"B: {label_b}", "; ".join(how) + "; " + rule]


def _p_text(p: float) -> str:
    if math.isnan(p):
        return "-"
    return "<0.0001" if p < 1e-4 else f"{p:.3g}"


def comparison_table(result: Any) -> Table:
    """One row per (cell, phase, metric): means, delta %, p, verdict (pure)."""
    table = Table(title="compare", title_justify="left", box=box.SIMPLE_HEAD,
                  pad_edge=False, collapse_padding=True)
    table.add_column("cell/phase", overflow="fold", min_width=10)
    table.add_column("metric", overflow="fold", min_width=10)
    floors = any(c.noise_floor_pct is not None for c in result.comparisons)
    for name in ("n", "mean A", "mean B", "Δ %", "p", *(("floor %",) if floors else ())):
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("verdict", min_width=15)
    for c in result.comparisons:
        delta = "-" if c.delta_pct is None else f"{c.delta_pct:+.1f}"
        verdict = f"{c.verdict} ({c.change})" if c.change else c.verdict
        style = "bold red" if c.change == "worse" else "bold" if c.change else ""
        n = f"{c.n_a} pairs" if c.test == "paired t" else f"{c.n_a}/{c.n_b}"
        floor = ((f"{c.noise_floor_pct:.1f}" if c.noise_floor_pct is not None else "-",)
                 if floors else ())
        table.add_row(f"{c.cell}/{c.phase}", c.metric, n, short_number(c.mean_a),
                      short_number(c.mean_b), delta, _p_text(c.p_value), *floor, verdict,
                      style=style)
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
    few = [c for c in result.comparisons if c.verdict == "too few repetitions"]
    if any(c.test == "permutation" for c in few):
        lines.append("too few repetitions: even the most extreme split cannot reach alpha; "
                     "6 repetitions per side reach p = 0.002")
    if any(c.test == "paired t" for c in few):
        lines.append("too few repetitions: a paired test needs 3 repetitions that both "
                     "platforms completed")
    if any(c.verdict == "within noise floor" for c in result.comparisons):
        lines.append("within noise floor: identical cells measured back to back on this "
                     "host differ this much (hvbench noise --show)")
    return lines


def comparison_json(result: Any, label_a: str, label_b: str, alpha: float,
                    threshold: float) -> str:
    """The comparison as JSON (pure); NaN p-values become null."""
    rows = []
    for c in result.comparisons:
        item = dict(c.__dict__)
        item["p_value"] = None if math.isnan(c.p_value) else c.p_value
        for name in ("mean_a", "mean_b"):
            item[name] = None if math.isnan(c.__dict__[name]) else c.__dict__[name]
        rows.append(item)
    return json.dumps({"a": label_a, "b": label_b, "alpha": alpha, "threshold_pct": threshold,
                       "comparisons": rows,
                       "only_a": [list(k) for k in result.only_a],
                       "only_b": [list(k) for k in result.only_b]}, indent=2)
