"""Shell completion (bash, zsh) and the man page, generated from the argparse parser so
they never disagree with ``--help``. ``hvbench completion bash|zsh`` prints a
completion script; ``make cli-docs`` writes both scripts and ``hvbench.1`` with
``python -m hvbench.cli.parser_docs``.

argparse has no public API to list a parser's options and subcommands: the walk reads
``_actions`` and the subparsers action's ``choices``, stable since Python 3.2.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console

#: How a value of an option without choices is completed: file names for these
#: destinations, nothing otherwise.
_FILE_DESTS = {"db", "output", "study", "bounds", "path", "ssh_config", "winner_dir",
               "workdir", "host_workdir", "job", "file"}


@dataclass(frozen=True)
class Option:
    """One option or positional of a command."""

    flags: tuple[str, ...]
    help: str
    metavar: str | None
    choices: tuple[str, ...]
    takes_value: bool
    repeatable: bool
    files: bool


@dataclass(frozen=True)
class Command:
    """A command (``run``) or a command's action (``image build``)."""

    path: tuple[str, ...]
    help: str
    usage: str
    description: str
    epilog: str
    options: tuple[Option, ...]
    positionals: tuple[Option, ...]
    children: tuple[Command, ...]


def _help_of(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    if not action.help or action.help == argparse.SUPPRESS:
        return ""
    params = {**vars(action), "prog": parser.prog}
    params = {k: v for k, v in params.items() if v is not argparse.SUPPRESS}
    if params.get("choices") is not None:
        params["choices"] = ", ".join(str(c) for c in params["choices"])
    return " ".join((action.help % params).split())


def _option(parser: argparse.ArgumentParser, action: argparse.Action) -> Option:
    metavar = action.metavar if isinstance(action.metavar, str) else None
    return Option(
        flags=tuple(action.option_strings) or (action.dest,),
        help=_help_of(parser, action),
        metavar=metavar or (action.dest.upper() if action.nargs != 0 else None),
        choices=tuple(str(c) for c in action.choices) if action.choices else (),
        takes_value=action.nargs != 0,
        repeatable=isinstance(action, argparse._AppendAction),
        files=action.dest in _FILE_DESTS and metavar != "PATTERN")


def walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = (),
         help_text: str = "") -> Command:
    """The command tree of ``parser`` (pure)."""
    options: list[Option] = []
    positionals: list[Option] = []
    children: list[Command] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                children.append(walk(sub, (*path, name), helps.get(name, "")))
        elif isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
            continue
        elif action.option_strings:
            options.append(_option(parser, action))
        else:
            positionals.append(_option(parser, action))
    usage = " ".join(parser.format_usage().split()).removeprefix("usage: ")
    return Command(path=path, help=help_text, usage=usage,
                   description=parser.description or "", epilog=parser.epilog or "",
                   options=tuple(options), positionals=tuple(positionals),
                   children=tuple(children))


# -- bash ---------------------------------------------------------------------------------
def _words(values: Sequence[str]) -> str:
    return " ".join(values)


def _flags(command: Command) -> list[str]:
    flags = [f for o in command.options for f in o.flags]
    for child in command.children:
        flags += _flags(child)
    return list(dict.fromkeys([*flags, "--help"]))


def bash_completion(root: Command) -> str:
    """A bash completion script for ``root`` (pure): subcommand names, each command's
    options (its actions' too), the choices of an option's value, and file names."""
    lines = ["# bash completion for hvbench, generated from its parser (make cli-docs)",
             "_hvbench() {",
             '    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"',
             '    local cmd="" sub="" i',
             "    for ((i = 1; i < COMP_CWORD; i++)); do",
             '        case "${COMP_WORDS[i]}" in',
             "            -*) ;;",
             '            *) if [ -z "$cmd" ]; then cmd="${COMP_WORDS[i]}"; '
             'elif [ -z "$sub" ]; then sub="${COMP_WORDS[i]}"; fi ;;',
             "        esac",
             "    done",
             '    case "$cmd:$prev" in']
    for command in root.children:
        for option in _all_options(command):
            if option.choices:
                for flag in option.flags:
                    lines.append(f'        {command.path[0]}:{flag}) COMPREPLY=($(compgen -W '
                                 f'"{_words(option.choices)}" -- "$cur")); return ;;')
    lines += ["    esac",
              '    local words=""',
              '    case "$cmd" in',
              f'        "") words="{_words([c.path[0] for c in root.children])} --version '
              '--help" ;;']
    for command in root.children:
        actions = [c.path[-1] for c in command.children]
        head = (f'[ -z "$sub" ] && words="{_words(actions)}"; ' if actions else "")
        lines.append(f'        {command.path[0]}) {head}words="$words '
                     f'{_words(_flags(command))}" ;;')
    lines += ["    esac",
              '    if [[ "$cur" == -* || -z "$cmd" ]]; then',
              '        COMPREPLY=($(compgen -W "$words" -- "$cur"))',
              "    else",
              '        COMPREPLY=($(compgen -W "$words" -- "$cur") $(compgen -f -- "$cur"))',
              "    fi",
              "}",
              "complete -o filenames -F _hvbench hvbench", ""]
    return "\n".join(lines)


def _all_options(command: Command) -> list[Option]:
    found = list(command.options)
    for child in command.children:
        found += _all_options(child)
    return found


# -- zsh ----------------------------------------------------------------------------------
def _zsh_text(text: str, *, colons: bool = True) -> str:
    """``text`` inside a single-quoted ``_arguments``/``_describe`` spec; ``colons``:
    escape them (a ``_describe`` item or a message; an option's ``[help]`` keeps them)."""
    text = text.replace("'", "'\\''").replace("[", "(").replace("]", ")")
    return text.replace(":", "\\:") if colons else text


def _zsh_spec(option: Option) -> str:
    helptext = _zsh_text(option.help[:120], colons=False)
    if option.choices:
        action = f":{_zsh_text(option.metavar or 'value')}:({' '.join(option.choices)})"
    elif option.takes_value:
        action = f":{_zsh_text(option.metavar or 'value')}:" + ("_files" if option.files
                                                                else " ")
    else:
        action = ""
    star = "*" if option.repeatable else ""
    names = option.flags
    if len(names) > 1:
        return f"'{star}'{{{','.join(names)}}}'[{helptext}]{action}'"
    return f"'{star}{names[0]}[{helptext}]{action}'"


def _zsh_function(command: Command) -> list[str]:
    name = "_hvbench_" + "_".join(p.replace("-", "_") for p in command.path)
    lines = [f"{name}() {{"]
    specs = [_zsh_spec(o) for o in command.options]
    if command.children:
        described = " ".join(f"'{c.path[-1]}:{_zsh_text(c.help)}'" for c in command.children)
        own = " \\\n        ".join(specs) if specs else "''"
        lines += [f"    local -a actions=({described})",
                  "    if [[ $words[CURRENT] == -* ]] && (( CURRENT == 2 )); then",
                  f"        _arguments -s {own}; return",
                  "    fi",
                  "    if (( CURRENT == 2 )); then _describe 'action' actions; return; fi",
                  "    local action=$words[2]",
                  "    shift words; (( CURRENT-- ))",
                  "    case $action in"]
        lines += [f"        {c.path[-1]}) _hvbench_{'_'.join(p.replace('-', '_') for p in c.path)}"
                  " ;;" for c in command.children]
        lines += ["    esac", "}"]
        for child in command.children:
            lines += _zsh_function(child)
        return lines
    rest = ["'*:file:_files'"] if command.positionals else []
    lines.append("    _arguments -s " + " \\\n        ".join([*specs, *rest]))
    return [*lines, "}"]


def zsh_completion(root: Command) -> str:
    """A zsh completion function for ``root`` (pure): commands with their help, each
    command's options with their help and value choices, file names for files."""
    described = " \\\n        ".join(f"'{c.path[0]}:{_zsh_text(c.help)}'"
                                     for c in root.children)
    lines = ["#compdef hvbench",
             "# zsh completion for hvbench, generated from its parser (make cli-docs)",
             "_hvbench() {",
             f"    local -a commands=({described})",
             "    if (( CURRENT == 2 )); then _describe 'command' commands; return; fi",
             "    local cmd=$words[2]",
             "    shift words; (( CURRENT-- ))",
             "    case $cmd in"]
    lines += [f"        {c.path[0]}) _hvbench_{c.path[0].replace('-', '_')} ;;"
              for c in root.children]
    lines += ["    esac", "}"]
    for command in root.children:
        lines += _zsh_function(command)
    return "\n".join([*lines, '_hvbench "$@"', ""])


# -- man ----------------------------------------------------------------------------------
def _roff(text: str) -> str:
    """``text`` safe in a roff line: backslashes and hyphens escaped, no leading dot."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return re.sub(r"^([.'])", r"\\&\1", text, flags=re.MULTILINE)


def _man_option(option: Option) -> list[str]:
    if not option.flags[0].startswith("-"):  # a positional: its metavar alone
        return [".TP", f"\\fI{_roff(option.metavar or option.flags[0])}\\fR",
                _roff(option.help or "(no description)")]
    value = f" \\fI{_roff(option.metavar)}\\fR" if option.takes_value and option.metavar \
        else ""
    flags = ", ".join(f"\\fB{_roff(f)}\\fR" for f in option.flags)
    return [".TP", f"{flags}{value}", _roff(option.help or "(no description)")]


def _man_command(command: Command) -> list[str]:
    lines = [f'.SS "{_roff(" ".join(command.path))}"', _roff(command.help or ""),
             ".PP", f".B {_roff(command.usage)}"]
    if command.description:
        lines += [".PP", _roff(command.description)]
    for option in [*command.positionals, *command.options]:
        lines += _man_option(option)
    if command.epilog:
        lines += [".PP", ".nf", _roff(command.epilog), ".fi"]
    for child in command.children:
        lines += _man_command(child)
    return lines


def man_page(root: Command, version: str) -> str:
    """``hvbench.1`` in man(7) roff (pure): name, synopsis, every command with its
    options and examples, exit status and environment."""
    lines = [f'.TH HVBENCH 1 "" "hvbench {_roff(version)}" "User Commands"',
             ".SH NAME", "hvbench \\- measure what virtualization costs I/O",
             ".SH SYNOPSIS", ".B hvbench", "\\fICOMMAND\\fR [\\fIOPTIONS\\fR]",
             ".SH DESCRIPTION", _roff(root.description),
             ".SH COMMANDS"]
    for command in root.children:
        lines += _man_command(command)
    lines += [".SH EXIT STATUS",
              "0 success; 1 an error (run: some repetitions failed); 2 bad input; 3 every "
              "repetition of a run failed; 130 and 143 interrupted by SIGINT and SIGTERM.",
              ".SH ENVIRONMENT", ".TP", ".B HVBENCH_DB",
              "the results database when \\fB\\-\\-db\\fR is not given.",
              ".TP", ".B NO_COLOR", "set: no colours in the output.",
              ".SH SEE ALSO", "README.md and docs/ in hvbench's source tree.", ""]
    return "\n".join(lines)


def generate(kind: str, parser: argparse.ArgumentParser, version: str) -> str:
    """``bash``, ``zsh`` or ``man`` for ``parser``. Raises ValueError for another."""
    root = walk(parser)
    if kind == "bash":
        return bash_completion(root)
    if kind == "zsh":
        return zsh_completion(root)
    if kind == "man":
        return man_page(root, version)
    raise ValueError(f"unknown kind {kind!r}: bash, zsh or man")


def register(sub: Any) -> None:
    completion = sub.add_parser(
        "completion", help="print a shell completion script (bash or zsh)",
        epilog="examples:\n  source <(hvbench completion bash)\n"
               "  hvbench completion zsh > ~/.zfunc/_hvbench",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    completion.add_argument("shell", choices=("bash", "zsh"), help="the shell")
    completion.set_defaults(handler=handle)


def handle(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Print the completion script for ``args.shell``."""
    from hvbench import __version__
    from hvbench.cli.main import build_parser

    sys.stdout.write(generate(args.shell, build_parser(), __version__))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m hvbench.cli.parser_docs bash|zsh|man``: the file on stdout."""
    from hvbench import __version__
    from hvbench.cli.main import build_parser

    kinds = list(argv if argv is not None else sys.argv[1:])
    if len(kinds) != 1 or kinds[0] not in ("bash", "zsh", "man"):
        sys.stderr.write("usage: python -m hvbench.cli.parser_docs bash|zsh|man\n")
        return 2
    sys.stdout.write(generate(kinds[0], build_parser(), __version__))
    return 0


if __name__ == "__main__":
    sys.exit(main())
