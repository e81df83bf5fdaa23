"""``hvbench run STUDY --set PATH=VALUE``: changes to a study file's parsed TOML, made
before validation, so one file serves both its full and a reduced form (the tests run
every shipped example reduced this way).

``PATH`` is dotted keys from the top of the file. An array of tables (``[[platform]]``,
``[[workload]]``, ``[[scenario]]``, ``[[lab.host]]``) is entered by an entry's ``name``,
by its index, or by ``*`` for every entry. ``VALUE`` is a TOML value (``1``, ``true``,
``"virtio-blk"``, ``[1, 2]``, ``{ min = 1, max = 2 }``); text that is not one is taken as
a string, so ``8M`` means ``"8M"``.

Pure: no I/O."""

from __future__ import annotations

import copy
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hvbench.errors import SpecError

#: The segment that enters every entry of an array of tables.
EVERY = "*"
#: The run environment's key for the overrides a run applied to its stored study text
#: (which stays the file as written).
STUDY_OVERRIDES = "study_overrides"


@dataclass(frozen=True)
class Override:
    """One ``--set PATH=VALUE``: the path's keys, the parsed value and the text given."""

    keys: tuple[str, ...]
    value: Any
    text: str


def parse_override(text: str) -> Override:
    """Parse ``PATH=VALUE``. Raises :class:`SpecError` (one line) when there is no ``=``,
    or the path is empty or has an empty key."""
    path, sep, value_text = text.partition("=")
    keys = tuple(k.strip() for k in path.split("."))
    if not sep or not all(keys):
        raise SpecError(f"--set {text}: expected PATH=VALUE with a dotted PATH such as "
                        "study.repetitions=1 or workload.dd.file_size=16M")
    return Override(keys, parse_value(value_text.strip()), text)


def parse_value(text: str) -> Any:
    """``text`` as a TOML value, or as the string itself when it is not one (``8M``)."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def apply_overrides(raw: dict[str, Any], overrides: Sequence[Override],
                    path: str) -> dict[str, Any]:
    """A copy of the parsed study ``raw`` with every override applied in order.

    A key may be new only as the last one of a path into a single table (the model's
    validation then checks it like a key of the file); ``*`` changes the key in the
    entries that have it and needs at least one. Raises :class:`SpecError` naming the
    file, the ``--set`` and what exists where the path went astray."""
    out = copy.deepcopy(raw)
    for override in overrides:
        targets = _apply(out, override.keys, override, path, ())
        if not targets:
            where = ".".join(override.keys[:-1])
            raise SpecError(f"{path}: --set {override.text}: no entry of {where} has "
                            f"{override.keys[-1]!r}")
    return out


def _apply(node: Any, keys: tuple[str, ...], override: Override, path: str,
           done: tuple[str, ...]) -> int:
    """Set ``keys`` under ``node``; how many tables were changed."""
    key, rest = keys[0], keys[1:]
    if isinstance(node, list):
        entries = _entries(node, key, override, path, done)
        wildcard = key == EVERY
        return sum(_apply_entry(e, rest, override, path, (*done, key), wildcard=wildcard)
                   for e in entries)
    if not isinstance(node, dict):
        raise _astray(override, path, done, f"{'.'.join(done)} is a value, not a table")
    if not rest:
        node[key] = copy.deepcopy(override.value)
        return 1
    if key not in node:
        raise _astray(override, path, done, _what_exists(node, done))
    return _apply(node[key], rest, override, path, (*done, key))


def _apply_entry(entry: Any, rest: tuple[str, ...], override: Override, path: str,
                 done: tuple[str, ...], *, wildcard: bool) -> int:
    if not rest:
        raise _astray(override, path, done, "an entry of an array of tables is replaced "
                      "key by key: name a key after it")
    if wildcard and (not isinstance(entry, dict) or rest[0] not in entry):
        return 0  # `*` changes the entries that have the key
    return _apply(entry, rest, override, path, done)


def _entries(node: list[Any], key: str, override: Override, path: str,
             done: tuple[str, ...]) -> list[Any]:
    """The entries of array ``node`` that ``key`` selects: by name, index or ``*``."""
    if key == EVERY:
        return node
    named = [e for e in node if isinstance(e, dict) and e.get("name") == key]
    if named:
        return named
    if key.isdigit() and int(key) < len(node):
        return [node[int(key)]]
    names = [str(e.get("name", i)) if isinstance(e, dict) else str(i)
             for i, e in enumerate(node)]
    raise _astray(override, path, done, f"{'.'.join(done)} has no entry {key!r} (entries: "
                  f"{', '.join(names)}; or an index, or {EVERY})")


def _what_exists(node: dict[str, Any], done: tuple[str, ...]) -> str:
    where = ".".join(done) if done else "the file"
    keys = ", ".join(sorted(node)) or "nothing"
    return f"{where} has {keys}"


def _astray(override: Override, path: str, done: tuple[str, ...], why: str) -> SpecError:
    return SpecError(f"{path}: --set {override.text}: unknown path: {why}")


def blame(message: str, overrides: Sequence[Override]) -> str:
    """``message`` (a validation error of the overridden study) with the ``--set``
    overrides whose last key it names, so the reader knows the value came from the
    command line rather than the file; unchanged when it names none of them."""
    named = [o.text for o in overrides if o.keys[-1] in message]
    return f"{message} (value from --set {', '.join(named)})" if named else message
