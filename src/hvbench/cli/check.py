"""``hvbench check [RUN] --bounds FILE``: a run against bounds per metric; exit 1 when
any bound fails (for CI).

The table builders are pure and golden-tested; :func:`handle` reads the files and the
store, prints and returns the exit code.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from hvbench.cli.common import add_db_option, add_run_argument, db_of, run_id_of, short_number
from hvbench.errors import SpecError

if TYPE_CHECKING:
    from hvbench.store.database import Store


def register(sub: Any) -> None:
    """``hvbench check``."""
    check = sub.add_parser("check", help="check a run against bounds; exit 1 if one fails")
    add_run_argument(check)
    check.add_argument("--bounds", required=True, metavar="FILE", help="bounds file (TOML)")
    add_db_option(check)
    check.set_defaults(handler=handle)


def handle(args: argparse.Namespace, out: Console, err: Console) -> int:
    """``hvbench check [RUN] --bounds FILE``: exit 1 when a bound fails, else 0."""
    from hvbench.analysis.bounds import evaluate, failed, parse_bounds
    from hvbench.report.model import natives_of
    from hvbench.store.database import Store

    path = Path(args.bounds)
    try:
        text = path.read_text()
    except OSError as exc:
        raise SpecError(f"{path}: cannot read the bounds file: {exc.strerror}") from exc
    bounds = parse_bounds(text, str(path))
    store = Store(db_of(args), create=False)
    try:
        run_id = run_id_of(store, args)
        noise = noise_spreads(store, run_id) if any(
            b.tolerance_noise is not None for b in bounds.bound) else {}
        results = evaluate(bounds, store.measurements(run_id), natives_of(store.cells(run_id)),
                           noise)
    finally:
        store.close()
    out.print(bounds_table(results, run_id))
    out.print(bounds_summary(results), markup=False)
    return 1 if failed(results) else 0


def noise_spreads(store: Store, run_id: str) -> dict[tuple[str, str, str, str], float]:
    """The run's host's newest noise floor of each (platform, workload, phase, metric)
    of the run, as one repetition's A/A spread in %."""
    from hvbench.analysis.noise import NoiseFloor
    from hvbench.store.records import definition_key

    record = store.get_run(run_id)
    host = str(record.host or record.env.get("hostname") or "")
    # Cells defined alike (an A/A pair under two names) share one definition and floor.
    cells: dict[str, list[Any]] = {}
    for cell in store.cells(run_id):
        cells.setdefault(definition_key(cell.platform, cell.workload), []).append(cell)
    out: dict[tuple[str, str, str, str], float] = {}
    for row in store.noise_floors(host, list(cells)):
        f = row.floor
        floor = NoiseFloor(sd_pct=f.sd_pct, pairs=f.pairs, mean=f.mean)
        for cell in cells[f.definition]:
            out.setdefault((cell.platform_name, cell.workload_name, f.phase, f.metric),
                           floor.spread_pct())
    return out


def _limit_text(low: float | None, high: float | None, unit: str) -> str:
    if low is None and high is None:
        return "-"
    if low is not None and high is not None:
        return f"{short_number(low)} .. {short_number(high)}{unit}"
    if low is not None:
        return f">= {short_number(low)}{unit}"
    return f"<= {short_number(high or 0.0)}{unit}"


def bounds_table(results: Any, run_id: str) -> Table:
    """One row per checked (bound, platform, workload, phase, metric) (pure)."""
    table = Table(title=f"bounds of run {run_id}", title_justify="left")
    for name in ("bound", "platform", "workload/phase", "metric", "value", "allowed"):
        table.add_column(name, justify="right" if name in ("value", "allowed") else "left",
                         overflow="fold")
    table.add_column("result", no_wrap=True)
    for r in results:
        unit = " %" if r.note.startswith("% of") else ""
        value = r.note if r.value is None else f"{r.stat} {short_number(r.value)}{unit}"
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
