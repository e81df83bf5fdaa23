"""Names a user gives things (studies, platforms, workloads, scenarios, lab hosts).

They end up in terminal output, file names, SQLite rows and report headings, so a name
holding a control character (a NUL, an escape sequence, a newline, a bidi override) is
refused here, at the bottom of the stack, before anything uses it.
"""

from __future__ import annotations

import unicodedata

#: Unicode categories refused in names: controls (C0, C1, DEL), format characters
#: (bidi overrides, zero-width joiners), line and paragraph separators, private use.
_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Co", "Cs", "Cn"})
MAX_NAME_LENGTH = 200


def name_problem(value: str) -> str | None:
    """Why ``value`` is not acceptable as a name, or None when it is (pure)."""
    if not value.strip():
        return "expected a non-empty name"
    if len(value) > MAX_NAME_LENGTH:
        return f"expected at most {MAX_NAME_LENGTH} characters, got {len(value)}"
    for index, char in enumerate(value):
        if unicodedata.category(char) in _REFUSED_CATEGORIES:
            return (f"expected printable characters, but character {index} is "
                    f"U+{ord(char):04X} (a control or format character)")
    return None


def check_name(value: str) -> str:
    """``value`` unchanged if it is an acceptable name; raises ValueError saying why not
    (for pydantic validators, which turn it into a field error)."""
    problem = name_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value
