"""Request rates given as a share of a measured maximum (seed 003: "90 % of the
maximum", each file size's single-VM maximum of its Table 2).

A web rate is a number (requests/s) or a string ``"<p>%"``: ``p`` % of the highest rate
the same platform sustained alone for that file size, measured in the same run by a
``max-rate`` web workload of the study (the reference). The stored definitions keep
the rate as declared; the absolute rate is resolved at run time and stored as a
measured value (``offered_rps``, ``rate_ref_rps``). Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from hvbench.errors import HvbenchError

#: A declared rate: requests/s, or a percentage string such as ``"90%"``.
Rate = float | str

_RELATIVE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")
#: The highest share accepted: the seeds go to 120 % of the maximum (Fig. 23).
MAX_PCT = 1000.0


def check_rate(value: object) -> Rate:
    """``value`` as a rate: a positive number (at most 1e6 requests/s) or ``"<p>%"``
    with 0 < p <= :data:`MAX_PCT`. Raises ValueError saying what was expected (for
    pydantic validators, which turn it into a field error)."""
    if isinstance(value, bool):
        raise ValueError(f"expected requests/s or a percentage such as \"90%\", got {value!r}")
    if isinstance(value, int | float):
        if not 0 < value <= 1e6:
            raise ValueError(f"rate {value}: expected more than 0 and at most 1e6 requests/s")
        return float(value)
    if isinstance(value, str):
        pct = relative_pct(value)
        if pct is None:
            raise ValueError(f"rate {value!r}: expected requests/s or a percentage of the "
                             "measured maximum such as \"90%\"")
        if not 0 < pct <= MAX_PCT:
            raise ValueError(f"rate {value!r}: expected more than 0 % and at most "
                             f"{MAX_PCT:g} %")
        return value.strip()
    raise ValueError(f"expected requests/s or a percentage such as \"90%\", got {value!r}")


def relative_pct(rate: Rate) -> float | None:
    """The percentage of a relative rate (``"90%"`` -> 90.0); None for requests/s."""
    if not isinstance(rate, str):
        return None
    match = _RELATIVE_RE.match(rate)
    return float(match.group(1)) if match else None


def is_relative(rate: Rate) -> bool:
    return relative_pct(rate) is not None


def resolve_rate(rate: Rate, reference: float | None) -> float:
    """Requests/s of ``rate``: itself when absolute, else its share of ``reference``
    (the measured maximum). Raises ValueError when a relative rate has no reference or
    a reference of 0."""
    pct = relative_pct(rate)
    if pct is None:
        return float(rate)
    if reference is None or reference <= 0:
        raise ValueError(f"rate {rate}: no measured maximum to take it from")
    return reference * pct / 100.0


def rate_text(rate: Rate) -> str:
    """A rate as declared: ``90%`` or ``120`` (requests/s)."""
    pct = relative_pct(rate)
    return f"{pct:g}%" if pct is not None else f"{float(rate):g}"


def rate_suffix(rate: Rate) -> str:
    """A rate in a scenario variant's name: ``r90pct`` or ``r120`` (names are for
    reading only; the rate itself is stored in the scenario's definition)."""
    pct = relative_pct(rate)
    return f"r{pct:g}pct" if pct is not None else f"r{float(rate):g}"


def offered_rate(rate: Rate, rate_of: str, file_kb: int,
                 refs: Mapping[str, Mapping[int, float]], who: str) -> tuple[float, float | None]:
    """(requests/s to offer, the reference maximum or None for an absolute rate) for
    one file size; ``refs``: reference workload -> file size -> measured maximum.
    Raises :class:`HvbenchError` naming ``who`` when the maximum was not measured
    (the reference failed, or it is not part of the run)."""
    if not is_relative(rate):
        return float(rate), None
    reference = refs.get(rate_of, {}).get(file_kb)
    if reference is None:
        raise HvbenchError(f"{who}: rate {rate_text(rate)} of {rate_of}'s maximum for "
                           f"{file_kb} kB: no maximum was measured in this round (the "
                           f"reference cell failed or is not part of the run)")
    if reference <= 0:
        # A search that sustained not even its start rate leaves nothing to take a
        # share of; offering a made-up rate would measure something else.
        raise HvbenchError(f"{who}: rate {rate_text(rate)} of {rate_of}'s maximum for "
                           f"{file_kb} kB: the reference sustained no rate in this round "
                           f"(its maximum is 0: lower its start_rate)")
    return resolve_rate(rate, reference), reference


def absolute(rate: Rate) -> float:
    """Requests/s of a rate already resolved. Raises :class:`HvbenchError` for a
    relative one (a programming error: the runner resolves them before a phase)."""
    if is_relative(rate):
        raise HvbenchError(f"internal: rate {rate_text(rate)} was not resolved")
    return float(rate)
