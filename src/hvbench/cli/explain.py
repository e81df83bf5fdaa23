"""``hvbench explain [RUN]``: the bottleneck of every cell, named from the host-side
evidence, with its numbers next to native and the fix (docs/diagnosis.md). The
verdicts are the report model's (:attr:`hvbench.report.model.RunReport.verdicts`)."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from rich.console import Console

from hvbench.analysis.verify import DEFAULT_REPETITIONS
from hvbench.cli.common import (
    add_cell_filters,
    add_db_option,
    add_format_option,
    add_output_option,
    add_run_argument,
    db_of,
    no_match_error,
    run_id_of,
    selected,
    warn_tcg,
)
from hvbench.errors import SpecError

if TYPE_CHECKING:
    from hvbench.analysis.diagnosis import Verdict
    from hvbench.analysis.verify import Plan, Unverifiable, VerifyResult
    from hvbench.report.model import RunReport
    from hvbench.store.database import Store


def register(sub: Any) -> None:
    explain = sub.add_parser("explain", help="name the bottleneck of every cell of a run")
    add_run_argument(explain)
    add_cell_filters(explain, what="cells PLATFORM/WORKLOAD/PHASE", old_name="--cell")
    add_format_option(explain)
    add_output_option(explain)
    explain.add_argument("--verify", action="store_true",
                         help="re-run each named cause's fix beside the original platform "
                              "(an A/B study in ABBA order, stored as its own run) and say "
                              "whether the measured effect confirms the cause")
    explain.add_argument("--repetitions", type=int, default=DEFAULT_REPETITIONS,
                         metavar="N", help="with --verify: A/B pairs per verification "
                                           f"(at least 3; default {DEFAULT_REPETITIONS})")
    explain.add_argument("--dry-run", action="store_true",
                         help="with --verify: print the verification studies, run nothing")
    explain.add_argument("--verbose", action="store_true",
                         help="also native and boot cells, and the rules that abstained")
    add_db_option(explain)
    explain.set_defaults(handler=handle)


def handle(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Every verdict (or those ``--only``/``--exclude`` select) as text or JSON.

    Raises:
        SpecError: no such run (or an ambiguous prefix); the patterns select no cell
            (the message lists the closest cells).
        StoreError: the database cannot be read.
    """
    from hvbench.report.calibration import calibration_json, calibration_line
    from hvbench.report.diagnosis import diagnosis_groups, diagnosis_lines, verdict_json
    from hvbench.report.model import load_run_report
    from hvbench.store.database import Store

    if (args.dry_run or args.repetitions != DEFAULT_REPETITIONS) and not args.verify:
        raise SpecError("--dry-run and --repetitions go with --verify")
    if args.repetitions < 3:
        raise SpecError(f"--repetitions: expected at least 3 A/B pairs, got {args.repetitions}")
    with Store(db_of(args), create=False) as store:
        report = load_run_report(store, run_id_of(store, args), monitors=[], steady=False)
        verdicts = [v for v in report.verdicts if selected(v.cell, args.only, args.exclude)]
        if not verdicts and (args.only or args.exclude):
            raise no_match_error(args.only or args.exclude,
                                 [v.cell for v in report.verdicts], "cell")
        if args.verify and verdicts:
            return _verify(args, store, report, verdicts, out=out, err=err)
    if args.format == "json":
        calibration = calibration_json(report.calibration) if report.calibration else None
        out.print_json(json.dumps({"run": report.run.id,
                                   "accelerator": report.run.env.get("accelerator"),
                                   "calibration": calibration,
                                   "verdicts": [verdict_json(v) for v in verdicts]}))
    else:
        warn_tcg(err, report.run.env.get("accelerator"))
        calibrated = calibration_line(report.calibration)
        if calibrated:
            out.print(calibrated, markup=False, highlight=False)
        # Cells under the fix they share, wrapped at the terminal's width; an --only
        # pattern or --verbose also shows native and boot cells and abstentions.
        groups = diagnosis_groups(verdicts, verbose=args.verbose or bool(args.only),
                                  long=True)
        for line in diagnosis_lines(groups, out.width):
            out.print(line, markup=False, highlight=False, soft_wrap=True)
    return 0


def _plans(report: RunReport, verdicts: list[Verdict]
           ) -> tuple[list[Plan], list[Unverifiable]]:
    from hvbench.analysis.verify import Plan, plan

    definitions = report.platform_definitions()
    plans: list[Plan] = []
    skipped: list[Unverifiable] = []
    for verdict in verdicts:
        made = plan(verdict, definitions.get(verdict.platform, {}))
        (plans if isinstance(made, Plan) else skipped).append(made)  # type: ignore[arg-type]
    return plans, skipped


def _main_metric(report: RunReport, the_plan: Plan) -> str | None:
    from hvbench.analysis.metrics import main_metric

    return main_metric((r.metric for r in report.rows
                        if r.platform == the_plan.original and r.workload == the_plan.workload
                        and r.phase == the_plan.phase), boot=False)


def _verify(args: argparse.Namespace, store: Store, report: RunReport,
            verdicts: list[Verdict], *, out: Console, err: Console) -> int:
    """``explain --verify``: run one A/B verification study per (platform, workload,
    fix) into the same database and classify each verdict's measured effect.

    Raises:
        SpecError: a verification study does not validate (its text is in the message).
        HostError: another study holds the run lock.
    """
    from hvbench.analysis.verify import grouped, study_text
    from hvbench.cli.run import run_with_progress
    from hvbench.report.verify import verify_json, verify_lines
    from hvbench.run.runner import study_from_text

    plans, skipped = _plans(report, verdicts)
    workloads = {c.workload_name: c.workload for c in report.cells}
    definitions = report.platform_definitions()
    results: list[tuple[VerifyResult | Unverifiable, str]] = []
    warn_tcg(err, report.run.env.get("accelerator"))
    groups = grouped(plans)
    for group in groups:
        first = group[0]
        text = study_text(first, definitions[first.original], workloads[first.workload],
                          run_id=report.run.id, repetitions=args.repetitions)
        if args.dry_run:
            out.print(text, markup=False, highlight=False, soft_wrap=True)
            continue
        try:
            study = study_from_text(text, report.run.study_path)
        except SpecError as exc:
            raise SpecError(f"verification study of {first.cell}: {exc}") from exc
        run_id = run_with_progress(study, store, None, err, db_of(args),
                                    quiet=bool(getattr(args, "quiet", False)))
        rows = [(r.platform, r.repetition, r.phase, r.metric, r.value)
                for r in store.measurements(run_id)]
        for the_plan in group:
            results.append((_classified(report, the_plan, rows, args.repetitions), run_id))
    if args.dry_run:
        err.print(f"dry run: {len(groups)} verification studies, nothing was run")
        return 0
    if args.format == "json":
        out.print_json(json.dumps({"run": report.run.id, **verify_json(results, skipped)}))
    else:
        for line in verify_lines(results, skipped):
            out.print(line, markup=False, highlight=False, soft_wrap=True)
    return 0


def _classified(report: RunReport, the_plan: Plan,
                rows: list[tuple[str, int, str, str, float]], pairs: int
                ) -> VerifyResult | Unverifiable:
    from hvbench.analysis.verify import Unverifiable, classify

    metric = _main_metric(report, the_plan)
    if metric is None:
        return Unverifiable(the_plan.cell, "the cell has no headline metric")
    cell = f"{the_plan.original}/{the_plan.workload}"
    floor = report.noise_floors.get((cell, the_plan.phase, metric))
    floors = [floor.floor_pct(pairs, pairs, 0.05)] if floor is not None else []
    return classify(the_plan, metric, rows, floors)
