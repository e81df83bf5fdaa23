"""Every shipped study in examples/ (found by glob, so a new one is covered the day it
lands) loads the way `hvbench run` loads it: parsed, expanded, job files found."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from hvbench.model.study import select_cells
from hvbench.model.workload import spec_classes
from hvbench.run.runner import load_study

EXAMPLES = Path(__file__).parents[2] / "examples"
STUDIES = sorted(EXAMPLES.rglob("*.toml"))


def test_the_examples_are_found() -> None:
    assert len(STUDIES) >= 10
    # rglob reaches the subdirectories: the seed studies and the planted suite load too.
    assert len([p for p in STUDIES if p.parent.name == "seeds"]) >= 7


@pytest.mark.parametrize("path", STUDIES, ids=[str(p.relative_to(EXAMPLES)) for p in STUDIES])
def test_example_loads(path: Path) -> None:
    study = load_study(path)
    assert study.cells
    assert study.study.repetitions >= 1
    assert {c.workload.spec.kind for c in study.cells} <= set(spec_classes())
    names = [c.name for c in study.cells]
    assert len(names) == len(set(names)), "cell names must be unique"


# -- the reduced forms the integration suite runs ------------------------------------------
OVERRIDES = Path(__file__).parents[1] / "integration" / "example_overrides.toml"
#: Run as they are by tests/integration/test_diagnosis_planted.py.
PLANTED = EXAMPLES / "diagnosis"
ENTRY_KEYS = {"set", "only", "covered_by"}


def _entries() -> dict[str, dict[str, Any]]:
    return tomllib.loads(OVERRIDES.read_text())


def test_every_example_has_a_reduced_form() -> None:
    """A new example cannot land unexercised: it needs an entry in
    tests/integration/example_overrides.toml (or to be one of the planted suite)."""
    shipped = {str(p.relative_to(EXAMPLES)) for p in STUDIES if PLANTED not in p.parents}
    missing = sorted(shipped - set(_entries()))
    assert not missing, f"no entry in {OVERRIDES.name} for: {', '.join(missing)}"
    stale = sorted(set(_entries()) - shipped)
    assert not stale, f"{OVERRIDES.name} has entries for no example: {', '.join(stale)}"


@pytest.mark.parametrize("name", sorted(_entries()))
def test_reduced_form_loads_with_one_repetition(name: str) -> None:
    entry = _entries()[name]
    assert set(entry) <= ENTRY_KEYS, f"{name}: unknown keys {set(entry) - ENTRY_KEYS}"
    if "covered_by" in entry:
        assert set(entry) == {"covered_by"}, f"{name}: covered_by stands alone"
        test_file, _, function = entry["covered_by"].partition("::")
        source = (Path(__file__).parents[2] / test_file).read_text()
        assert f"def {function}(" in source, f"{name}: {entry['covered_by']} not found"
        return
    study = load_study(EXAMPLES / name, entry.get("set", []))
    assert study.overrides == tuple(entry.get("set", []))
    if entry.get("only"):
        study = select_cells(study, entry["only"], [])
    assert study.study.repetitions == 1
    assert study.study.adaptive is None
    full = load_study(EXAMPLES / name)
    assert len(study.cells) <= len(full.cells)
