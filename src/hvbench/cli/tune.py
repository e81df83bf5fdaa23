"""``hvbench tune TUNE.toml``: search the I/O configuration space for the setting that
brings the workload closest to native, then print the answer (ranked table, winner
against the default and native, why, and the winner as configuration to apply)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from hvbench.cli.common import (
    add_db_option,
    add_format_option,
    add_output_option,
    db_of,
    warn_tcg,
)
from hvbench.cli.run import failure_lines, run_exit_code
from hvbench.errors import SpecError

if TYPE_CHECKING:
    from hvbench.store.database import Store


def register(sub: Any) -> None:
    tune = sub.add_parser("tune", help="search the I/O configurations for the one closest "
                                       "to native (a study file with a [tune] table)")
    tune.add_argument("tune_file", nargs="?", metavar="TUNE.toml",
                      help="tune file: a study with a [tune] table")
    tune.add_argument("--resume", metavar="RUN",
                      help="continue an interrupted search (nothing stored is measured "
                           "again); on a finished one, print its answer")
    add_db_option(tune)
    tune.add_argument("--seed", type=int, help="the sampler's seed instead of the file's")
    add_format_option(tune)
    add_output_option(tune)
    tune.add_argument("--winner-dir", metavar="DIR",
                      help="also write the winner as platform.toml, qemu-args.txt, "
                           "libvirt-elements.xml and domain.xml into DIR")
    tune.set_defaults(handler=handle)


def handle(args: argparse.Namespace, out: Console, err: Console) -> int:
    from hvbench.run.tune import load_tune, resume_tune
    from hvbench.store.database import Store

    if bool(args.tune_file) == bool(args.resume):
        raise SpecError("give a tune file or --resume RUN (not both)")
    if args.resume and args.seed is not None:
        raise SpecError("--resume continues with the seed the search started with: drop "
                        "--seed")
    with Store(db_of(args)) as store:
        if args.resume:
            spec = resume_tune(store, args.resume)
        else:
            spec = load_tune(args.tune_file, seed=args.seed)
        run_id = _search(spec, store, args.resume, err)
        for line in failure_lines(store, run_id):
            err.print(line, style="red", markup=False, soft_wrap=True)
        _answer(store, run_id, args, out, err)
        ok, failed = len(store.done(run_id)), len(store.failures(run_id))
    # As `hvbench run`: 0 every repetition ok, 1 some failed, 3 every one failed.
    return run_exit_code(ok, failed)


def _search(spec: Any, store: Store, resume: str | None, err: Console) -> str:
    from hvbench.run.tune import TuneEvent, run_tune

    err.print(f"tune [bold]{spec.study.study.name}[/]: {len(spec.space)} valid "
              f"configurations over {', '.join(spec.axes)}; budget "
              f"{_budget(spec)}", markup=True)

    def on_start(run_id: str) -> None:
        err.print(f"run {run_id} (resume with `hvbench tune --resume {run_id}`)",
                  markup=False)

    def progress(event: TuneEvent) -> None:
        if event.stage == "native":
            err.print(f"measuring the native baseline ({event.repetitions} repetitions)",
                      markup=False)
        if event.state == "running":
            return
        of = f" of {event.trials}" if event.trials else ""
        best = "-" if event.best_mean is None else f"{event.best} {event.best_mean:.4g}"
        left = "" if event.left_s is None else f", {event.left_s:.0f} s left"
        err.print(f"trial {event.trial}{of} [{event.stage}] {event.config} x"
                  f"{event.repetitions}: {event.state}; best so far {best}{left}",
                  markup=False, soft_wrap=True)

    outcome = run_tune(spec, store, resume=resume, progress=progress, on_start=on_start)
    share = 100.0 * outcome.overhead_s / outcome.wall_s if outcome.wall_s else 0.0
    err.print(f"search finished: {outcome.configs} configurations, {outcome.wall_s:.0f} s "
              f"wall, {outcome.measure_s:.0f} s measuring, search overhead "
              f"{outcome.overhead_s:.1f} s ({share:.2f} %)", markup=False)
    return outcome.run_id


def _budget(spec: Any) -> str:
    budget = spec.section.budget
    parts = []
    if budget.trials is not None:
        parts.append(f"{budget.trials} trials")
    if budget.seconds is not None:
        parts.append(f"{budget.seconds:.0f} s")
    return " and ".join(parts)


def _answer(store: Store, run_id: str, args: argparse.Namespace, out: Console,
            err: Console) -> None:
    from hvbench.report.tables import rich_table
    from hvbench.report.tune import (
        answer_lines,
        block_lines,
        load_tune_report,
        ranked_table,
        tune_json_text,
    )
    from hvbench.run.tune import resume_tune

    report = load_tune_report(store, run_id, resume_tune(store, run_id))
    if args.winner_dir and report.block is not None:
        _write_winner(Path(args.winner_dir), report.block, err)
    if args.format == "json":
        out.print(tune_json_text(report), markup=False, highlight=False, soft_wrap=True)
        return
    warn_tcg(err, report.run.env.get("accelerator"))
    out.print(rich_table(ranked_table(report)))
    for line in answer_lines(report):
        out.print(line, markup=False, soft_wrap=True)
    if report.block is not None:
        out.print("")
        for line in block_lines(report.block):
            out.print(line, markup=False, soft_wrap=True)


def _write_winner(directory: Path, block: Any, err: Console) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "platform.toml").write_text(block.platform_toml)
    (directory / "qemu-args.txt").write_text("\n".join(block.qemu_args) + "\n")
    if block.libvirt_elements is not None:
        (directory / "libvirt-elements.xml").write_text(block.libvirt_elements)
        (directory / "domain.xml").write_text(block.domain_xml)
    err.print(f"wrote the winner's configuration into {directory}", markup=False)
