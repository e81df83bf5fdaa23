"""``hvbench calibrate``: measure this host's diagnosis thresholds on the planted matrix.

Runs the planted studies (``examples/diagnosis``: each plants a known bottleneck, listed
in its ``expected.json``) as ordinary runs, or reads runs of them already stored
(``--from``), and stores, per threshold of :mod:`hvbench.analysis.calibration`, the value
that separates the cells planted with its rule from the others on this host; the
diagnosis of every later run of this host reads them. ``--show`` lists the newest.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import platform
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from hvbench.cli.common import add_db_option, add_format_option, add_output_option, db_of
from hvbench.errors import SpecError

if TYPE_CHECKING:
    from hvbench.analysis.calibration import PlantedCell
    from hvbench.store.database import Store
    from hvbench.store.records import CalibrationRow

#: The planted matrix of a checkout (examples/diagnosis beside src/).
PLANTS = Path(__file__).resolve().parents[3] / "examples" / "diagnosis"
EXPECTED = "expected.json"


def register(sub: Any) -> None:
    """``hvbench calibrate``."""
    cal = sub.add_parser(
        "calibrate", help="measure this host's diagnosis thresholds on the planted matrix",
        description="Run the planted studies (each plants a known bottleneck) and store, "
                    "per diagnosis threshold, the value that separates the cells planted "
                    "with its cause from the others on this host. explain, report and "
                    "tune read the newest calibration of the run's host. A threshold the "
                    "planted cells do not decide keeps its default.",
        epilog="examples:\n  hvbench calibrate --plant clean-net --plant link --plant link-rx\n"
               "  hvbench calibrate --from 20261127-0712 --from 20261127-0714\n"
               "  hvbench calibrate --show",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    cal.add_argument("--plants", metavar="DIR", default=str(PLANTS),
                     help=f"planted studies with their {EXPECTED} (default: {PLANTS})")
    cal.add_argument("--plant", dest="plant_names", metavar="NAME", action="append",
                     default=[],
                     help="a plant to run, its study file's name without .toml (repeat "
                          "for each; default: every plant)")
    cal.add_argument("--rounds", type=int, default=1,
                     help="times each plant is run (default 1)")
    cal.add_argument("--from", dest="from_runs", metavar="RUN", action="append", default=[],
                     help="measure nothing: calibrate from this stored run of a planted "
                          "study (repeat for each)")
    cal.add_argument("--show", action="store_true",
                     help="list the newest calibration stored for this host")
    cal.add_argument("--dry-run", action="store_true",
                     help="list the plants that would run; run nothing")
    add_format_option(cal)
    add_output_option(cal)
    add_db_option(cal)
    cal.set_defaults(handler=handle)


@dataclass(frozen=True)
class Plant:
    """A planted study: its file, its study name, and its planted cells (shell pattern
    -> the rule planted there, ``none`` for a clean guest)."""

    name: str
    path: Path
    study: str
    planted: dict[str, str]


def _planted_rule(where: Path, name: str, pattern: str, spec: Any) -> str:
    if isinstance(spec, str):
        return spec
    if isinstance(spec, Mapping) and isinstance(spec.get("rule"), str):
        return str(spec["rule"])
    raise SpecError(f"{where}: {name}.{pattern}: expected a rule name or "
                    "{\"rule\": NAME, ...}")


def load_plants(directory: Path) -> list[Plant]:
    """The plants of ``directory`` (its ``expected.json``, one study file per entry).

    Raises:
        SpecError: the file is missing or malformed, or names a study that is not there
            (one line naming the file and the entry).
    """
    from hvbench.run.runner import load_study

    where = directory / EXPECTED
    try:
        expected = json.loads(where.read_text())
    except FileNotFoundError as exc:
        raise SpecError(f"{where}: no such file (--plants: a directory of planted studies "
                        f"with their {EXPECTED})") from exc
    except (OSError, ValueError) as exc:
        raise SpecError(f"{where}: not readable JSON: {exc}") from exc
    if not isinstance(expected, Mapping):
        raise SpecError(f"{where}: expected an object of plant name -> planted cells")
    plants = []
    for name, cells in sorted(expected.items()):
        if name.startswith("_"):
            continue  # a comment entry
        if not isinstance(cells, Mapping):
            raise SpecError(f"{where}: {name}: expected an object of cell pattern -> rule")
        path = directory / f"{name}.toml"
        if not path.is_file():
            raise SpecError(f"{where}: {name}: no study file {path}")
        planted = {p: _planted_rule(where, name, p, s) for p, s in cells.items()}
        plants.append(Plant(name, path, load_study(path).study.name, planted))
    return plants


def _selected(plants: Sequence[Plant], names: Sequence[str]) -> list[Plant]:
    if not names:
        return list(plants)
    known = {p.name for p in plants}
    unknown = [n for n in names if n not in known]
    if unknown:
        from hvbench.model.problems import did_you_mean

        raise SpecError(f"--plant: no plant {unknown[0]!r}{did_you_mean(unknown[0], sorted(known))}"
                        f"; plants: {', '.join(sorted(known))}")
    return [p for p in plants if p.name in names]


def handle(args: argparse.Namespace, out: Console, err: Console) -> int:
    """``hvbench calibrate``: exit 0, 2 on bad input, 1 when a planted run failed."""
    from hvbench.report.calibration import calibration_json, calibration_table
    from hvbench.report.tables import rich_table
    from hvbench.store.database import Store

    host = platform.node()
    if args.rounds < 1:
        raise SpecError(f"--rounds: expected 1 or more, got {args.rounds}")
    if args.show:
        with Store(db_of(args), create=False) as store:
            found = store.calibrations(host)
        if not found:
            raise SpecError(f"{db_of(args)}: no calibration of host {host}; run "
                            "hvbench calibrate")
        row = found[0]
    else:
        plants = _selected(load_plants(Path(args.plants)), args.plant_names)
        if args.dry_run:
            for plant in plants:
                out.print(f"{plant.name}: {plant.path} ({len(plant.planted)} planted cells: "
                          f"{', '.join(sorted(set(plant.planted.values())))}) "
                          f"x {args.rounds}", markup=False, soft_wrap=True)
            return 0
        with Store(db_of(args), create=not args.from_runs) as store:
            runs = _stored(store, args.from_runs, plants) if args.from_runs \
                else _measure(store, plants, args.rounds, err, db_of(args))
            row = calibrate_runs(store, host, runs)
    if args.format == "json":
        out.print_json(json.dumps(calibration_json(row)))
    else:
        out.print(rich_table(calibration_table(row)))
    return 0


def _measure(store: Store, plants: Sequence[Plant], rounds: int, err: Console,
             db: str) -> list[tuple[Plant, str]]:
    from hvbench.cli.run import run_with_progress
    from hvbench.run.runner import load_study

    runs = []
    for round_no in range(1, rounds + 1):
        for index, plant in enumerate(plants, 1):
            err.print(f"calibrate: round {round_no}/{rounds}, plant {index}/{len(plants)}: "
                      f"{plant.name}", markup=False)
            runs.append((plant, run_with_progress(load_study(plant.path), store, None, err,
                                                  db)))
    return runs


def _stored(store: Store, given: Sequence[str], plants: Sequence[Plant]
            ) -> list[tuple[Plant, str]]:
    """The plants of stored runs ``given`` (by their study's name).

    Raises:
        SpecError: a run is not of a planted study.
    """
    from hvbench.cli.common import run_id_of

    by_study = {p.study: p for p in plants}
    runs = []
    for text in given:
        run_id = run_id_of(store, argparse.Namespace(run=text))
        study = store.get_run(run_id).study_name
        if study not in by_study:
            raise SpecError(f"--from {text}: run {run_id} is of study {study!r}, not of a "
                            f"planted study ({', '.join(sorted(by_study))})")
        runs.append((by_study[study], run_id))
    return runs


def planted_cells(store: Store, runs: Sequence[tuple[Plant, str]]
                  ) -> list[PlantedCell]:
    """The planted cells of ``runs`` with their resource models (boot phases and cells
    no pattern names are left out)."""
    from hvbench.analysis.calibration import PlantedCell
    from hvbench.report.model import load_run_report, run_models

    cells = []
    for plant, run_id in runs:
        report = load_run_report(store, run_id, monitors=[], steady=False)
        for model in run_models(report):
            name = f"{model.platform}/{model.workload}/{model.phase}"
            rule = next((r for p, r in plant.planted.items()
                         if fnmatch.fnmatchcase(name, p)), None)
            if rule is not None and model.phase != "boot":
                cells.append(PlantedCell(model, rule))
    return cells


def calibrate_runs(store: Store, host: str, runs: Sequence[tuple[Plant, str]]
                   ) -> CalibrationRow:
    """Calibrate from ``runs``, store the calibration for ``host``, return it.

    Raises:
        SpecError: no planted cell was measured (every run failed).
    """
    from hvbench.analysis.calibration import calibrate
    from hvbench.store.database import new_run_id
    from hvbench.store.records import CalibrationRecord

    cells = planted_cells(store, runs)
    if not cells:
        raise SpecError("no planted cell was measured: nothing to calibrate from")
    outcomes = calibrate(cells)
    calibration = f"cal-{new_run_id()}"
    store.add_calibration(calibration, host, [run for _, run in runs], [
        CalibrationRecord(name=o.name, rule=o.rule, default_value=o.default, value=o.value,
                          calibrated=o.calibrated, positives=o.positives,
                          negatives=o.negatives, note=o.note) for o in outcomes])
    return next(c for c in store.calibrations(host) if c.calibration == calibration)
