"""Validation problems in the study's own spelling (issue 29, item 7).

pydantic reports ``disks[0].buss: Extra inputs are not permitted``; a study author wrote
``disk``, line 12, and meant ``bus``. This module turns a :class:`ValidationError` into one
line per problem: ``FILE:LINE: platform[1]: disk.bus: unknown field 'buss' (did you mean
'bus'?)``. Pure: it reads the study text it is given and nothing else.
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from hvbench.errors import SpecError

Loc = tuple[int | str, ...]

_HEADER = re.compile(r"^\s*(\[\[?)\s*([A-Za-z0-9_.\-\s\"']+?)\s*\]\]?\s*(#.*)?$")


def did_you_mean(word: str, choices: Sequence[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``choices``, else ``""`` (pure)."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def field_path(loc: Loc) -> str:
    """``("disk", "cache")`` -> ``disk.cache``; ``("disks", 0, "bus")`` ->
    ``disks[0].bus`` (pure)."""
    out = ""
    for part in loc:
        name = printable(str(part))
        out += f"[{part}]" if isinstance(part, int) else (f".{name}" if out else name)
    return out


def printable(text: str) -> str:
    """``text``, quoted with escapes when a character would break a one-line message."""
    return text if text.isprintable() else repr(text)


@dataclass(frozen=True)
class TomlLines:
    """Where keys are in a study's text: the line of ``[[platform]]`` number 2's ``disk``
    key, of ``[study]``'s ``repetitions``. A best effort over the text (TOML parsers
    keep no positions): None when a key cannot be found, e.g. one set by ``--set``."""

    text: str
    _lines: list[str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_lines", self.text.splitlines())

    def _headers(self) -> Iterator[tuple[int, bool, str]]:
        """(0-based line, array table?, dotted name) of every table header."""
        for number, line in enumerate(self._lines):
            match = _HEADER.match(line)
            if match:
                name = re.sub(r"\s+", "", match.group(2)).replace('"', "").replace("'", "")
                yield number, match.group(1) == "[[", name

    def entry(self, section: str, index: int | None) -> tuple[int, int] | None:
        """0-based [first, end) lines of ``[section]`` or of its ``index``-th
        ``[[section]]`` table, sub-tables (``[section.x]``) included."""
        headers = list(self._headers())
        seen = -1
        for position, (number, array, name) in enumerate(headers):
            if name != section or array != (index is not None):
                continue
            seen += 1
            if index is not None and seen != index:
                continue
            end = next((n for n, _, other in headers[position + 1:]
                        if not other.startswith(f"{section}.")), len(self._lines))
            return number, end
        return None

    def line_of(self, section: str, index: int | None, keys: Loc) -> int | None:
        """1-based line of ``keys`` (list indexes skipped) in that entry; its header's
        line when the key is not written there; None when the entry is not either."""
        span = self.entry(section, index)
        if span is None:
            return None
        first, end = span
        names = [k for k in keys if isinstance(k, str)]
        found = self._key_line(first, end, names) if names else None
        return (found if found is not None else first) + 1

    def header_line(self, name: str) -> int | None:
        """1-based line of the first ``[name]`` or ``[[name]]`` header."""
        return next((n + 1 for n, _, other in self._headers() if other == name), None)

    def _key_line(self, first: int, end: int, names: list[str]) -> int | None:
        """0-based line of the longest prefix of ``names`` written between the lines:
        ``a.b = ...``, ``a = {...}`` or a ``[...a]`` sub-table's ``b = ...``."""
        for depth in range(len(names), 0, -1):
            dotted = r"\s*\.\s*".join(re.escape(n) for n in names[:depth])
            pattern = re.compile(rf"^\s*[\"']?{dotted}[\"']?\s*(=|\.)")
            for number in range(first, end):
                if pattern.match(self._lines[number]):
                    return number
            if depth >= 2:
                # [[platform]] ... [platform.disk] ... cache = "x"
                parent = ".".join(names[:depth - 1])
                for number, _, name in self._headers():
                    if first <= number < end and name.endswith(f".{parent}"):
                        sub = self._key_line(number + 1, self._sub_end(number, end),
                                             names[depth - 1:depth])
                        if sub is not None:
                            return sub
        return None

    def _sub_end(self, header: int, end: int) -> int:
        return next((n for n, _, _ in self._headers() if header < n < end), end)


@dataclass(frozen=True)
class Where:
    """A place in a study: its file, a section (``study``, ``platform``, ...), the entry
    index of a ``[[section]]`` array and the variant of that entry. ``str()`` is the
    prefix of a message about the entry as a whole (``FILE:LINE: platform[1]``);
    :meth:`at` the prefix for one of its keys."""

    path: str
    section: str
    index: int | None = None
    variant: str = ""
    lines: TomlLines | None = None

    def at(self, keys: Loc = ()) -> str:
        line = self.lines.line_of(self.section, self.index, keys) if self.lines else None
        place = f"{self.path}:{line}" if line is not None else self.path
        entry = self.section if self.index is None else f"{self.section}[{self.index}]"
        return f"{place}: {entry}{self.variant}"

    def __str__(self) -> str:
        return self.at()

    def error(self, key: str, message: str) -> SpecError:
        """One problem with ``key`` of this entry."""
        return SpecError(f"{self.at((key,))}: {key}: {message}")


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation can hold (through Optional, unions, lists,
    tuples and Annotated)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    origin = typing.get_origin(annotation)
    if origin is None and not isinstance(annotation, types.UnionType):
        return []
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def fields_at(model: type[BaseModel] | None, loc: Loc) -> list[str]:
    """The field names of the model found by following ``loc`` from ``model`` (list
    indexes skipped); empty when the path leaves the models."""
    models = [model] if model is not None else []
    for part in loc:
        if isinstance(part, int):
            continue
        nxt = [m for current in models if (f := current.model_fields.get(part)) is not None
               for m in _models_in(f.annotation)]
        models = nxt
    return sorted({name for m in models for name in m.model_fields})


def _message(error: Mapping[str, Any], model: type[BaseModel] | None, loc: Loc) -> str:
    """One pydantic error in the study's words."""
    kind = error.get("type", "")
    if kind == "extra_forbidden" and loc:
        known = fields_at(model, loc[:-1])
        hint = did_you_mean(str(loc[-1]), known)
        if not hint and known:
            hint = f" (fields: {', '.join(known)})"
        return f"unknown field{hint}"
    if kind == "missing":
        return "required, missing"
    message = str(error.get("msg", "")).removeprefix("Value error, ")
    if kind in ("literal_error", "enum") and isinstance(error.get("input"), str):
        expected = re.findall(r"'([^']*)'", str(error.get("ctx", {}).get("expected", "")))
        message += did_you_mean(error["input"], expected)
    return message


def rename(loc: Loc, renames: Mapping[Loc, Loc]) -> Loc:
    """``loc`` with its first matching prefix spelled as the study spells it, e.g.
    ``("disks", 0)`` -> ``("disk",)`` when the study wrote one ``disk`` table."""
    for old, new in renames.items():
        if loc[:len(old)] == old:
            return new + loc[len(old):]
    return loc


def problems(exc: ValidationError, source: str | Where, *,
             model: type[BaseModel] | None = None,
             renames: Mapping[Loc, Loc] | None = None) -> list[str]:
    """Every error of ``exc``, one line each, in the study's spelling: the file (and
    line, for a :class:`Where`), the entry, the field as the study spells it, and what
    was expected, with "did you mean" for an unknown field or value."""
    out: list[str] = []
    errors = exc.errors()
    for error in errors:
        raw: Loc = tuple(error["loc"])
        if error.get("type") == "too_short" and any(
                len(other["loc"]) > len(raw) and tuple(other["loc"][:len(raw)]) == raw
                for other in errors):
            continue  # a list emptied by its own items' errors: those say why
        loc = rename(raw, renames or {})
        prefix = source.at(loc) if isinstance(source, Where) else source
        name = field_path(loc)
        out.append(f"{prefix}: {name}: {_message(error, model, raw)}" if name
                   else f"{prefix}: {_message(error, model, raw)}")
    return list(dict.fromkeys(out))


def joined(errors: Sequence[SpecError]) -> SpecError:
    """One error listing every problem of ``errors`` (each a line, duplicates once)."""
    lines = list(dict.fromkeys(line for e in errors for line in str(e).splitlines()))
    return SpecError("\n".join(lines))
