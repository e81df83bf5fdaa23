"""Fixtures several unit-test modules share (one instance per session for all of them)."""

from __future__ import annotations

import pytest

from tests.unit.test_fixture_runs import Rendered, Renders


@pytest.fixture(scope="session")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Rendered]:
    """name -> the outputs of tests/fixtures/runs/NAME.db (reports, HTML with the figures
    it drew, explain), each rendered the first time a test asks."""
    return Renders(tmp_path_factory)
