"""Analysis returns data; the words and shapes people read are built in report/.

The import contracts keep analysis from importing report, rich or matplotlib; this test
catches what they cannot see: a text table, a JSON shape or a display line built inside
analysis with nothing but the standard library."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import hvbench.analysis

ANALYSIS = Path(hvbench.analysis.__file__).parent
#: Return types that are a table of text (rows of cells as strings).
TEXT_TABLE = re.compile(r"TextTable|list\[list\[str\]\]|tuple\[tuple\[str, \.\.\.\], \.\.\.\]"
                        r"|list\[tuple\[str, list\[str\]\]\]")
#: Names of builders that belong in report/: a table, a JSON shape, a display line (a
#: ``*_line(s)`` function that returns text; ``nic_lines`` returns reference lines).
PRESENTER = re.compile(r"^[a-z]\w*_(table|json)$")
LINE = re.compile(r"^[a-z]\w*_lines?$")
TEXT = {"str", "list[str]", "tuple[str, ...]"}
#: Modules that only render.
RENDERERS = {"html", "rich", "matplotlib", "csv", "textwrap"}


def _modules() -> list[tuple[str, ast.Module]]:
    found = sorted(ANALYSIS.glob("*.py"))
    assert len(found) > 10, f"no analysis modules found under {ANALYSIS}"
    return [(p.name, ast.parse(p.read_text(encoding="utf-8"))) for p in found]


def test_no_analysis_function_builds_a_text_table_or_a_json_shape() -> None:
    offenders = []
    for name, tree in _modules():
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef):
                continue
            returns = ast.unparse(node.returns) if node.returns is not None else ""
            if (PRESENTER.match(node.name) or TEXT_TABLE.search(returns)
                    or (LINE.match(node.name) and returns in TEXT)):
                offenders.append(f"{name}:{node.lineno} {node.name} -> {returns}")
    assert offenders == []


def test_no_analysis_module_defines_headers_or_imports_a_renderer() -> None:
    offenders = []
    for name, tree in _modules():
        for statement in tree.body:
            targets = statement.targets if isinstance(statement, ast.Assign) else []
            offenders += [f"{name}:{statement.lineno} {t.id}" for t in targets
                          if isinstance(t, ast.Name) and t.id.endswith("_HEADERS")]
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                roots = {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                roots = {node.module.split(".")[0]}
            else:
                continue
            offenders += [f"{name}:{node.lineno} imports {r}" for r in roots & RENDERERS]
    assert offenders == []


def test_the_checks_see_a_presenter() -> None:
    """The patterns match what was moved out (so the tests above can fail)."""
    assert PRESENTER.match("scenario_json") and PRESENTER.match("findings_table")
    assert LINE.match("precision_line") and not PRESENTER.match("degradation_rows")
    assert TEXT_TABLE.search("list[list[str]]") and TEXT_TABLE.search("TextTable | None")
