"""Completion scripts and the man page generated from the parser: bash completes
commands, options and option values (run by the real bash); the man page names every
command and option and renders without a groff warning; zsh has a function per command."""

from __future__ import annotations

import argparse
import shutil
import subprocess
from pathlib import Path

import pytest

from hvbench import __version__
from hvbench.cli.main import build_parser, main
from hvbench.cli.parser_docs import Command, generate, walk


def _commands(command: Command) -> list[Command]:
    return [command, *(c for child in command.children for c in _commands(child))]


def _complete(script: Path, line: str) -> list[str]:
    """What bash's completion of ``line`` (cursor at its end) offers."""
    program = ('source "$1"; read -ra COMP_WORDS <<< "$2"; '
               '[[ "$2" == *" " ]] && COMP_WORDS+=(""); '
               'COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _hvbench; '
               'printf "%s\\n" "${COMPREPLY[@]}"')
    # In an empty directory: no file name joins what is offered.
    empty = script.parent / "empty"
    empty.mkdir(exist_ok=True)
    done = subprocess.run(["bash", "-c", program, "_", str(script), line], cwd=empty,
                          capture_output=True, text=True, check=True, timeout=30)
    return done.stdout.split()


@pytest.fixture(scope="module")
def bash_script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("completion") / "hvbench.bash"
    path.write_text(generate("bash", build_parser(), __version__))
    return path


@pytest.mark.parametrize(("line", "offered"), [
    ("hvbench rep", ["report"]),
    ("hvbench report --form", ["--format"]),
    ("hvbench report --format ", ["table", "json", "csv", "json-rows", "parquet", "html"]),
    ("hvbench runs --status i", ["interrupted"]),
    ("hvbench runs r", ["rm"]),
    ("hvbench image ", ["build", "info"]),
    ("hvbench cleanup --d", ["--dry-run"]),
])
def test_bash_completes_commands_options_and_choices(bash_script: Path, line: str,
                                                     offered: list[str]) -> None:
    got = _complete(bash_script, line)
    if line == "hvbench image ":  # the actions first, then every option
        assert "--force" in got
        got = [w for w in got if not w.startswith("-")]
    assert got == offered


def test_every_command_and_option_is_in_the_man_page_and_zsh() -> None:
    parser = build_parser()
    man = generate("man", parser, __version__)
    zsh = generate("zsh", parser, __version__)
    for command in _commands(walk(parser))[1:]:
        assert f'.SS "{" ".join(command.path)}"'.replace("-", "\\-") in man
        assert f"_hvbench_{'_'.join(p.replace('-', '_') for p in command.path)}()" in zsh
        for option in command.options:
            for flag in option.flags:
                assert "\\fB" + flag.replace("-", "\\-") + "\\fR" in man
                assert flag in zsh


@pytest.mark.skipif(shutil.which("groff") is None, reason="groff is not installed")
def test_the_man_page_renders_without_warnings(tmp_path: Path) -> None:
    page = tmp_path / "hvbench.1"
    page.write_text(generate("man", build_parser(), __version__))
    # -W break: long usage lines cannot be justified; that is layout, not an error.
    done = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-W", "break", "-z", str(page)],
                          capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 0 and done.stderr == "", done.stderr


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
def test_the_zsh_function_parses(tmp_path: Path) -> None:
    script = tmp_path / "_hvbench"
    script.write_text(generate("zsh", build_parser(), __version__))
    subprocess.run(["zsh", "-n", str(script)], check=True, timeout=30)


#: Drives an interactive zsh on a pseudo-terminal (zsh's own zpty module): with the
#: generated function on its fpath and compinit loaded, it types ``hvbench repo<TAB>``,
#: then `` --for<TAB>`` and Enter; ``hvbench`` is a shell function there that prints the
#: words it was called with, so the printed line is what completion made of the input.
_ZSH_DRIVER = r"""
zmodload zsh/zpty
zpty z 'zsh -f -i'
zpty -w z "PS1='> '; fpath=($1 \$fpath); autoload -Uz compinit; compinit -u -D"
zpty -w z 'hvbench() { print -r -- "RESULT<$*>" }'
zpty -w -n z $'hvbench repo\t'
zpty -w z $' --for\t\n'
out=''
while zpty -r z line; do
  out+=$line
  [[ $out == *'RESULT<'[a-z-]*'>'* ]] && break
done
zpty -d z
print -r -- ${${${out//$'\r'/}##*RESULT<}%%>*}
"""


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
def test_zsh_completes_a_subcommand_and_its_options(tmp_path: Path) -> None:
    """The generated function, loaded by zsh's completion system, completes a
    subcommand (``repo`` -> ``report``) and then one of that subcommand's options."""
    functions = tmp_path / "functions"
    functions.mkdir()
    (functions / "_hvbench").write_text(generate("zsh", build_parser(), __version__))
    driver = tmp_path / "drive.zsh"
    driver.write_text(_ZSH_DRIVER)
    done = subprocess.run(["zsh", "-f", str(driver), str(functions)], capture_output=True,
                          text=True, check=False, timeout=60)
    assert done.stdout.strip() == "report --format", (done.stdout, done.stderr)


def test_completion_command_prints_the_script(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", "bash"]) == 0
    assert "complete -o filenames -F _hvbench hvbench" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["completion", "fish"])
    with pytest.raises(ValueError, match="unknown kind"):
        generate("fish", argparse.ArgumentParser(), "0")
