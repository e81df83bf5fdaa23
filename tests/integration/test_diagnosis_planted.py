"""The planted-bottleneck suite: each study of examples/diagnosis plants one known
bottleneck; `hvbench explain` must name it as the dominant cause of the planted cell
(examples/diagnosis/expected.json). The studies of its ``_make_test`` list, one repetition
each, small files, short runs; the whole matrix over 3 rounds, with its confusion matrix,
is bench/diagnosis_accuracy.py."""

from __future__ import annotations

import fnmatch
import json
from pathlib import Path

import pytest

from hvbench.image.builder import GuestImage
from hvbench.model.study import parse_study
from hvbench.report.diagnosis import explain_lines
from hvbench.report.model import load_run_report
from hvbench.run.runner import run_study
from hvbench.store.database import Store
from tests.integration.conftest import hvbench

pytestmark = pytest.mark.integration
SUITE = Path(__file__).resolve().parents[2] / "examples" / "diagnosis"
_MATRIX = json.loads((SUITE / "expected.json").read_text())
#: The reduced matrix `make test` runs (the whole one is bench/diagnosis_accuracy.py's):
#: studies whose planted cells name a rule (no clean guests among them); an entry that
#: also lists its fix's changes is checked here by its rule.
EXPECTED: dict[str, dict[str, str]] = {
    name: {pattern: spec if isinstance(spec, str) else spec["rule"]
           for pattern, spec in _MATRIX[name].items()}
    for name in _MATRIX["_make_test"]}
#: study -> pattern -> what the fix's text must name (one of), for entries whose fix is
#: outside the study file (``fix_names``: a cgroup limit's control file).
FIX_NAMES: dict[str, dict[str, list[str]]] = {
    name: {pattern: [spec["fix_names"]] if isinstance(spec["fix_names"], str)
           else list(spec["fix_names"])
           for pattern, spec in _MATRIX[name].items()
           if isinstance(spec, dict) and "fix_names" in spec}
    for name in _MATRIX["_make_test"]}
HOST_RAM = 24 << 30


def planted_verdicts(name: str, db: Path
                     ) -> tuple[dict[str, str | None], str, dict[str, set[str]],
                                dict[str, str]]:
    """Run one planted study into ``db``; planted cell -> the dominant rule named, the
    explanation of those cells (shown when the test fails), planted cell -> the
    rules that abstained for want of evidence, and planted cell -> the dominant fix."""
    path = SUITE / f"{name}.toml"
    study = parse_study(path.read_text(), str(path), HOST_RAM)
    with Store(db) as store:
        outcome = run_study(study, store)
        assert outcome.failures == 0, store.failures(outcome.run_id)
        report = load_run_report(store, outcome.run_id, monitors=[])
    found: dict[str, str | None] = {}
    abstained: dict[str, set[str]] = {}
    fixes: dict[str, str] = {}
    text: list[str] = []
    for pattern in EXPECTED[name]:
        matched = [v for v in report.verdicts if fnmatch.fnmatchcase(v.cell, pattern)
                   and v.phase != "boot"]
        assert matched, f"{name}: no cell matches {pattern}"
        for verdict in matched:
            found[verdict.cell] = None if verdict.dominant is None else verdict.dominant.rule
            abstained[verdict.cell] = {rule for rule, _ in verdict.abstained}
            fixes[verdict.cell] = "" if verdict.dominant is None else verdict.dominant.fix
            text += explain_lines(verdict)
    return found, "\n".join(text), abstained, fixes


@pytest.fixture(scope="module")
def matrix_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One database for the module's planted runs: ``hvbench calibrate --from`` reads
    them all after the planted tests (no guest boots of its own)."""
    return tmp_path_factory.mktemp("planted") / "matrix.db"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_planted_cause_is_dominant(name: str, image: GuestImage, matrix_db: Path) -> None:
    found, text, abstained, fixes = planted_verdicts(name, matrix_db)
    for cell, rule in found.items():
        pattern = next(p for p in EXPECTED[name] if fnmatch.fnmatchcase(cell, p))
        expected = EXPECTED[name][pattern]
        assert rule == expected, f"{cell}: named {rule}, planted {expected}\n{text}"
        names = FIX_NAMES[name].get(pattern)
        if names is not None:
            assert any(n in fixes[cell] for n in names), f"{cell}: fix {fixes[cell]}"
        if name == "link":
            # The link's own counters were sampled and attributed (the guest alone on
            # its link: not a shared link, but the rule had its evidence).
            assert "shared-link" not in abstained[cell], text


def test_calibrate_from_the_planted_runs(matrix_db: Path) -> None:
    # The calibration path on real planted runs: each threshold is calibrated between
    # its groups or kept with the reason, and explain then reports what it read.
    if not matrix_db.exists():
        pytest.skip("reads the runs of the planted tests above (run the module)")
    with Store(matrix_db) as store:
        runs = store.run_ids()
    from_runs = [arg for run in runs for arg in ("--from", run)]
    done = hvbench("calibrate", "--db", str(matrix_db), "--format", "json", *from_runs)
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert sorted(shown["runs"]) == sorted(runs)
    for threshold in shown["thresholds"]:
        if threshold["calibrated"]:
            assert threshold["note"].startswith("between "), threshold
        else:
            assert threshold["value"] == threshold["default"], threshold
            assert threshold["note"].startswith(("too few cells", "the groups overlap")), \
                threshold
    explained = hvbench("explain", runs[0], "--db", str(matrix_db), "--format", "json")
    assert explained.returncode == 0, explained.stderr
    assert json.loads(explained.stdout)["calibration"]["calibration"] == \
        shown["calibration"]
