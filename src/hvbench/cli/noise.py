"""``hvbench noise``: measure this host's noise floor from A/A pairs and store it.

``hvbench noise [STUDY] [--only PAT] [--pairs N]`` runs the selected cells (the quick
study's by default) ``2 N`` times as an ordinary run, each repetition its own guest boot
and time window, and stores per cell definition, phase and metric the spread of the A/A
differences of repetitions ``2i`` and ``2i + 1`` (:mod:`hvbench.analysis.noise`).
``--from RUN`` computes the floors of a run already stored; ``--show`` lists the stored
floors of this host. ``compare`` and ``check`` read them.

The table builder is pure; :func:`handle` runs, stores and prints.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from hvbench.cli.common import add_cell_filters, add_db_option, db_of, short_number
from hvbench.errors import SpecError

if TYPE_CHECKING:
    from hvbench.store.database import Store


#: A/A pairs per cell by default: 9 degrees of freedom for the floor's t quantile.
DEFAULT_PAIRS = 10
#: The sample size and level the table's "floor" column is shown for.
SHOWN_N = 5
SHOWN_ALPHA = 0.01


def register(sub: Any) -> None:
    """``hvbench noise``."""
    noise = sub.add_parser(
        "noise", help="measure this host's noise floor (A/A pairs) for compare and check",
        description="Run the study's cells 2 x PAIRS times and store, per cell and metric, "
                    "the spread of the difference between consecutive repetitions of the "
                    "same cell (an A/A pair). compare never calls a difference inside it "
                    "significant; check bounds may be a multiple of it.")
    noise.add_argument("study", nargs="?", help="study file (default: examples/quick.toml)")
    add_cell_filters(noise, what="cells to measure")
    noise.add_argument("--pairs", type=int, default=DEFAULT_PAIRS,
                       help=f"A/A pairs per cell (default {DEFAULT_PAIRS}; 3 at least)")
    noise.add_argument("--from", dest="from_run", metavar="RUN",
                       help="measure nothing: the floors of a stored run's repetitions")
    noise.add_argument("--show", action="store_true",
                       help="list the floors stored for this host")
    noise.add_argument("--all", action="store_true",
                       help="list every metric's floor (default: each phase's main metric)")
    add_db_option(noise)
    noise.set_defaults(handler=handle)


def handle(args: argparse.Namespace, out: Console, err: Console) -> int:
    """``hvbench noise``: exit 0, 2 on bad input, the run's code when cells failed."""
    import platform

    from hvbench.store.database import Store

    host = platform.node()
    if args.show:
        with Store(db_of(args), create=False) as store:
            rows = store.noise_floors(host)
        out.print(floors_table(rows, host, every=args.all))
        return 0
    if args.pairs < 3:
        raise SpecError(f"--pairs: expected 3 or more A/A pairs, got {args.pairs}")
    with Store(db_of(args), create=not args.from_run) as store:
        if args.from_run:
            from hvbench.cli.common import run_id_of

            run_id = run_id_of(store, argparse.Namespace(run=args.from_run))
        else:
            run_id = _measure(args, store, err)
        count = store_floors(store, run_id)
        rows = [r for r in store.noise_floors(host) if r.run_id == run_id]
    out.print(floors_table(rows, host, every=args.all))
    out.print(f"{count} noise floors stored from run {run_id} for host {host}", markup=False)
    return 0


def _measure(args: argparse.Namespace, store: Store, err: Console) -> str:
    from hvbench.cli.run import bundled_quick_study, run_with_progress
    from hvbench.model.study import select_cells, with_repetitions
    from hvbench.run.runner import load_study

    study = load_study(Path(args.study) if args.study else bundled_quick_study())
    if args.only or args.exclude:
        study = select_cells(study, args.only, args.exclude)
    study = with_repetitions(study, 2 * args.pairs)
    return run_with_progress(study, store, None, err, db_of(args))


def store_floors(store: Store, run_id: str) -> int:
    """Compute the floors of run ``run_id`` and store them under the run's host;
    returns how many. Raises :class:`SpecError` when no cell has 3 complete pairs."""
    from hvbench.analysis.noise import floors_of_rows
    from hvbench.store.records import NoiseFloorRecord, definition_key

    record = store.get_run(run_id)
    host = str(record.host or record.env.get("hostname") or "")
    cells = {c.name: definition_key(c.platform, c.workload) for c in store.cells(run_id)}
    floors = floors_of_rows(store.measurements(run_id))
    if not floors:
        raise SpecError(f"run {run_id}: no cell has 3 complete A/A pairs (repetitions 2i "
                        "and 2i+1 both ok); run it with 6 repetitions or more")
    store.add_noise_floors(run_id, host, [
        NoiseFloorRecord(definition=cells[cell], cell=cell, phase=phase, metric=metric,
                         pairs=f.pairs, mean=f.mean, sd_pct=f.sd_pct)
        for (cell, phase, metric), f in sorted(floors.items())])
    return len(floors)


def _shown(rows: Sequence[Any], every: bool) -> list[Any]:
    """The newest floor of each (definition, phase, metric); only each phase's main
    metric unless ``every``."""
    from hvbench.analysis.metrics import main_metric

    newest: dict[tuple[str, str, str], Any] = {}
    for row in rows:
        f = row.floor
        newest.setdefault((f.definition, f.phase, f.metric), row)
    if every:
        return list(newest.values())
    metrics: dict[tuple[str, str], list[str]] = {}
    for definition, phase, metric in newest:
        metrics.setdefault((definition, phase), []).append(metric)
    main = {key: main_metric(names, boot=False) for key, names in metrics.items()}
    return [row for (d, ph, m), row in newest.items() if main[(d, ph)] == m]


def floors_table(rows: Sequence[Any], host: str, *, every: bool = False) -> Table:
    """One row per stored floor, newest first (pure): the A/A spread, one repetition's
    spread and the floor a comparison of 5 repetitions per side has at alpha 0.01."""
    from hvbench.analysis.noise import NoiseFloor

    table = Table(title=f"noise floors of host {host}", title_justify="left")
    table.add_column("cell/phase", overflow="fold", min_width=12)
    table.add_column("metric", overflow="fold", min_width=6)
    for name in ("pairs", "mean", "A/A sd %", "1 rep %", f"floor % n={SHOWN_N}"):
        table.add_column(name, justify="right", no_wrap=True)
    shown = _shown(rows, every)
    runs = sorted({row.run_id for row in shown})
    if runs:
        table.caption = f"measured in run {', '.join(runs)}"
        table.caption_justify = "left"
    for row in shown:
        f = row.floor
        floor = NoiseFloor(sd_pct=f.sd_pct, pairs=f.pairs, mean=f.mean)
        table.add_row(f"{f.cell}/{f.phase}", f.metric, str(f.pairs), short_number(f.mean),
                      f"{f.sd_pct:.1f}", f"{floor.spread_pct():.1f}",
                      f"{floor.floor_pct(SHOWN_N, SHOWN_N, SHOWN_ALPHA):.1f}")
    return table
