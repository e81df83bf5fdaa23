"""The CLI follows its own conventions (issue 29, item 8): the parser is walked, every
command and every option, and each rule is checked; and bad input exits 2 in every
command (argparse usage errors and hvbench's own validation alike)."""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from hvbench.cli.common import HIDDEN_ALIASES
from hvbench.cli.main import build_parser, with_suggestion
from tests.unit.test_fixture_runs import RUNS, hvbench, scratch_copy

#: Option names that filter cells in any command; only the first two are visible.
CELL_FILTERS = {"--only", "--exclude"}
FORMER_FILTERS = {"--cell", "--cells", "--filter", "--include", "--select"}


def _commands(parser: argparse.ArgumentParser, path: str = "hvbench"
              ) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every parser of the command tree with its command line, depth first."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _commands(child, f"{path} {name}")


def _options(parser: argparse.ArgumentParser) -> Iterator[argparse.Action]:
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction | argparse._HelpAction):
            yield action


COMMANDS = dict(_commands(build_parser()))


def test_walk_finds_every_command() -> None:
    # The walk itself can fail: a command renamed or dropped shows up here.
    for name in ("doctor", "image info", "runs", "report", "explain", "compare", "run"):
        assert f"hvbench {name}" in COMMANDS


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_option_has_help(command: str) -> None:
    for action in _options(COMMANDS[command]):
        hidden = action.help == argparse.SUPPRESS
        names = set(action.option_strings)
        if hidden:
            assert names and names <= HIDDEN_ALIASES, f"{command}: {names} hidden"
        else:
            assert action.help, f"{command}: {action.option_strings or action.dest} " \
                                "has no help text"


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_output_format_is_one_vocabulary(command: str) -> None:
    options = {o: a for a in _options(COMMANDS[command]) for o in a.option_strings}
    for name in options:
        if re.search(r"json|yaml|csv|html", name):
            assert name in HIDDEN_ALIASES, f"{command}: {name}: use --format instead"
    if "--format" in options:
        choices = options["--format"].choices
        assert choices is not None and "json" in choices, command
        assert options["--format"].default == "table", command
        assert "-o" in options and options["-o"] is options.get("--output"), \
            f"{command}: --format without -o/--output FILE"


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_cell_filters_have_one_name(command: str) -> None:
    options = {o: a for a in _options(COMMANDS[command]) for o in a.option_strings}
    visible = {o for o, a in options.items() if a.help != argparse.SUPPRESS}
    assert not visible & FORMER_FILTERS, f"{command}: filter cells with --only/--exclude"
    if visible & CELL_FILTERS:
        assert visible >= CELL_FILTERS, f"{command}: --only without --exclude or back"
        assert options["--only"].dest == "only" and options["--exclude"].dest == "exclude"
    for alias in options.keys() & FORMER_FILTERS:
        assert options[alias].dest == "only", f"{command}: {alias} is not --only's alias"


def test_hidden_aliases_still_parse() -> None:
    parser = build_parser()
    assert parser.parse_args(["doctor", "--json"]).format == "json"
    args = parser.parse_args(["explain", "--cell", "a*", "--only", "b*"])
    assert args.only == ["a*", "b*"]


def test_subcommand_typo_suggests_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["reprot"])
    assert exit_info.value.code == 2
    assert "did you mean 'report'?" in capsys.readouterr().err


def test_option_typo_suggests_the_option(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["report", "--fromat", "json"])
    assert exit_info.value.code == 2
    assert "did you mean '--format'?" in capsys.readouterr().err
    assert with_suggestion("unrecognized arguments: --zzzzzz", ["--format"]) == \
        "unrecognized arguments: --zzzzzz"


def test_suggestion_only_for_close_choices() -> None:
    assert with_suggestion("argument COMMAND: invalid choice: 'zzzz' (choose from "
                           "'doctor', 'run')") == \
        "argument COMMAND: invalid choice: 'zzzz' (choose from 'doctor', 'run')"
    assert with_suggestion("the following arguments are required: A") == \
        "the following arguments are required: A"
    assert with_suggestion("argument --format: invalid choice: 'jsno' (choose from "
                           "'table', 'json')").endswith("did you mean 'json'?")


@pytest.fixture(scope="module")
def fixture_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    directory = tmp_path_factory.mktemp("conventions")
    name = sorted(p.stem for p in RUNS.glob("*.db"))[0]
    run_id = scratch_copy(name, directory)
    return directory / f"{name}.db", run_id


def _bad_inputs(db: Path, tmp: Path) -> list[list[str]]:
    missing = str(tmp / "missing.db")
    return [
        ["reprot"],
        ["report", "--format", "jsno", "--db", str(db)],
        ["report", "--db", missing],
        ["report", "no-such-run", "--db", str(db)],
        ["runs", "--db", missing],
        ["runs", "--format", "yaml", "--db", str(db)],
        ["explain", "--db", str(db), "--only", "nomatch*"],
        ["explain", "--db", str(db), "--cell", "nomatch*"],
        ["compare", "a", "b", "--db", missing],
        ["check", "--db", str(db), "--bounds", str(tmp / "missing.toml")],
        ["doctor", "--timeout", "soon"],
        ["run", str(tmp / "missing.toml"), "--dry-run"],
        ["tune", "--db", str(db)],
        ["noise", "--pairs", "1"],
        ["image", "inof"],
        ["db", "copy", missing, str(tmp / "out.db")],
    ]


def test_bad_input_exits_2_in_every_command(fixture_db: tuple[Path, str],
                                            tmp_path: Path) -> None:
    db, _ = fixture_db
    for argv in _bad_inputs(db, tmp_path):
        try:
            done = hvbench(tmp_path, *argv)
        except SystemExit as exc:  # argparse's usage errors
            assert exc.code == 2, argv
            continue
        assert done.returncode == 2, (argv, done.stderr.decode())


def test_explain_lists_close_cells_when_nothing_matches(fixture_db: tuple[Path, str],
                                                        tmp_path: Path) -> None:
    db, _ = fixture_db
    done = hvbench(tmp_path, "explain", "--db", str(db), "--format", "json")
    cells = [v["cell"] for v in json.loads(done.stdout)["verdicts"]]
    assert cells
    typo = cells[0][:-1] + "X"
    done = hvbench(tmp_path, "explain", "--db", str(db), "--only", typo)
    assert done.returncode == 2
    assert cells[0] in done.stderr.decode()


def test_output_file_for_printed_formats(fixture_db: tuple[Path, str],
                                         tmp_path: Path) -> None:
    db, run_id = fixture_db
    for argv in (["runs", "--format", "json"], ["explain", "--format", "json"]):
        target = tmp_path / f"{argv[0]}.json"
        done = hvbench(tmp_path, *argv, "--db", str(db), "-o", str(target))
        assert done.returncode == 0 and done.stdout == b"", argv
        assert run_id in target.read_text()
    done = hvbench(tmp_path, "runs", "--db", str(db), "--format", "json")
    assert json.loads(done.stdout)["runs"][0]["id"] == run_id


def test_image_info_text_is_readable() -> None:
    from hvbench.cli.image import image_lines

    lines = image_lines({"key": "abc", "kernel_release": "6.1.0-56-amd64",
                         "kernel": "/cache/images/abc/vmlinux",
                         "packages": {"fio": "3.33-3", "iperf3": "3.12-1"}})
    assert lines == ["key:            abc",
                     "kernel release: 6.1.0-56-amd64",
                     "kernel:         /cache/images/abc/vmlinux",
                     "packages:       2 Debian packages (--format json lists them)"]
