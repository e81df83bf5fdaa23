"""Every example in a `--help` epilog is a command line the parser accepts, and the
commands users type most show examples."""

from __future__ import annotations

import argparse
import shlex

import pytest

from hvbench.cli.main import build_parser


def _epilogs(parser: argparse.ArgumentParser) -> dict[str, str]:
    found: dict[str, str] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                if sub.epilog:
                    found[sub.prog] = sub.epilog
                found.update(_epilogs(sub))
    return found


EPILOGS = _epilogs(build_parser())
LINES = [(prog, line.strip()) for prog, text in EPILOGS.items()
         for line in text.splitlines() if line.strip().startswith("hvbench ")]


def test_the_common_commands_have_examples() -> None:
    for command in ("run", "report", "explain", "compare", "runs", "show", "init",
                    "cleanup", "completion"):
        assert f"hvbench {command}" in EPILOGS, command


@pytest.mark.parametrize(("prog", "line"), LINES, ids=[line for _, line in LINES])
def test_every_example_parses(prog: str, line: str) -> None:
    argv = shlex.split(line, comments=True)[1:]
    argv = argv[:argv.index(">")] if ">" in argv else argv  # a shell redirection
    args = build_parser().parse_args(argv)
    assert callable(args.handler)
