"""Every shipped study in examples/ (found by glob, so a new one is covered the day it
lands) loads the way `hvbench run` loads it: parsed, expanded, job files found."""

from __future__ import annotations

from pathlib import Path

import pytest

from hvbench.model.study import WORKLOAD_KINDS
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
    assert {c.workload.spec.kind for c in study.cells} <= set(WORKLOAD_KINDS)
    names = [c.name for c in study.cells]
    assert len(names) == len(set(names)), "cell names must be unique"
