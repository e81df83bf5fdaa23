"""What a paper's finding needs of the set-up before a run can test it.

Pure. A finding may list ``requires = { ... }`` in ``findings.toml``; each requirement
is checked from the stored run (its cells' definitions, its measurements, its
environment and the lab of its study) and reported with the value measured, so that
"precondition not met" names what to change:

``saturated = true``
    something is saturated: on at least one side the served rate (``replies_s``) is
    below :data:`SATURATED_SHARE` of the offered rate (``offered_rps``). A scheduler's
    weights or a neighbour can only cost throughput when demand exceeds what is served.
``saturated = "all"``
    every guest serving web load in the compared cells is saturated, on both sides:
    the measured guest (``replies_s`` against ``offered_rps``) and each web neighbour
    (``nb<i>.load.replies_per_s`` against ``nb<i>.load.offered_rps``). "Both flat out"
    (seed 004 Figs. 12-14) holds only when neither guest could serve all it was
    offered; a neighbour that keeps up takes less from the other than one that cannot,
    and a side read from a neighbour's metric says nothing of the paper's effect
    unless that neighbour was flat out.
``shaped_link = true`` or ``shaped_link = <Mbit/s>``
    every cell talks to a lab host (the workload's ``peer`` or ``client``) whose link
    has a ``rate``: "below the wire" needs a wire; with a number, that rate and no
    other (a finding whose side B is the paper's line, 100 Mbit/s, holds only on a
    link of that rate).
``host_cores = N``
    the host has N cores or more (the paper's CPU split needs its core count).
``io = "buffered" | "direct"``
    every cell's disk workload uses that I/O mode (``direct = false`` / ``true``).
``file_over_ram = K``
    every cell's file is at least K times the memory that could cache it: the guest's
    RAM, the native side's memory cgroup (``memory_mib``) or else the host's RAM. The
    rule exists to keep the page cache out of the numbers (seed 000 Sect. 4), so a cell
    doing direct I/O (``direct = true``, O_DIRECT: no page cache) meets it whatever its
    file size.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "SATURATED_SHARE",
    "Check",
    "HostFacts",
    "Requirements",
    "Saturation",
    "check",
    "parse_requirements",
]

#: Served below this share of offered counts as saturated. httperf at a rate the server
#: sustains serves the offered rate to within a percent or two (its connection ramp and
#: the window's edges), so 5 % below it is a server that could not keep up.
SATURATED_SHARE = 0.95
Io = Literal["buffered", "direct"]
#: ``saturated = true`` (at least one side) or ``"all"`` (every web guest of every side).
Saturation = Literal["one", "all"]
_NB_OFFERED = re.compile(r"^(nb(\d+))\.load\.offered_rps$")


@dataclass(frozen=True)
class Requirements:
    """A finding's preconditions (none by default)."""

    saturated: Saturation | None = None
    shaped_link: bool = False
    #: The rate (Mbit/s) ``shaped_link`` must have, when given as a number.
    link_mbit: float | None = None
    host_cores: int | None = None
    io: Io | None = None
    file_over_ram: float | None = None

    def any(self) -> bool:
        """True when at least one requirement is set."""
        return (self.saturated is not None or self.shaped_link or self.host_cores is not None
                or self.io is not None or self.file_over_ram is not None)


@dataclass(frozen=True)
class HostFacts:
    """What a run stored about its host and lab."""

    cpus: int | None = None
    memory_bytes: int | None = None
    #: Lab host name -> its shaped link rate in Mbit/s (unshaped hosts are absent).
    lab_rates: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Check:
    """One requirement checked: its name, whether it holds, and what was measured."""

    name: str
    met: bool
    measured: str


def _saturation_value(value: Any) -> str:
    ok = value is True or value == "all"
    return "" if ok else 'expected true or "all" (leave it out otherwise)'


def _saturation(value: Any) -> Saturation | None:
    if value is None:
        return None
    return "all" if value == "all" else "one"


def _link_value(value: Any) -> str:
    ok = value is True or (isinstance(value, int | float) and not isinstance(value, bool)
                           and value > 0)
    return "" if ok else "expected true or a rate in Mbit/s > 0 (leave it out otherwise)"


def _cores_value(value: Any) -> str:
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= 1
    return "" if ok else "expected a whole number >= 1"


def _io_value(value: Any) -> str:
    return "" if value in ("buffered", "direct") else 'expected "buffered" or "direct"'


def _factor_value(value: Any) -> str:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and value > 0
    return "" if ok else "expected a number > 0"


_VALIDATORS = {"saturated": _saturation_value, "shaped_link": _link_value,
               "host_cores": _cores_value, "io": _io_value, "file_over_ram": _factor_value}


def parse_requirements(raw: Any) -> tuple[Requirements | None, str]:
    """A ``requires`` table parsed: ``(requirements, "")`` or ``(None, "field: what was
    expected")`` for the caller to name in its error."""
    if raw is None:
        return Requirements(), ""
    if not isinstance(raw, Mapping):
        return None, "expected a table of requirement = value"
    for key, value in raw.items():
        validate = _VALIDATORS.get(key)
        problem = (validate(value) if validate is not None else
                   f"unknown requirement (expected one of {', '.join(sorted(_VALIDATORS))})")
        if problem:
            return None, f"{key}: {problem}"
    factor, link = raw.get("file_over_ram"), raw.get("shaped_link")
    return Requirements(saturated=_saturation(raw.get("saturated")),
                        shaped_link=link is not None,
                        link_mbit=None if link is None or link is True else float(link),
                        host_cores=raw.get("host_cores"), io=raw.get("io"),
                        file_over_ram=float(factor) if factor is not None else None), ""


def _mib(n: float) -> str:
    return f"{n / 2**20:.0f} MiB" if n < 2**30 else f"{n / 2**30:.1f} GiB"


def _cores(want: int, host: HostFacts) -> Check:
    if host.cpus is None:
        return Check("host cores", False, f"the run stored no core count (needs {want})")
    return Check("host cores", host.cpus >= want,
                 f"this host has {host.cpus} cores (the paper's effect needs {want})")


def _peer(facts: Mapping[str, Any]) -> str:
    return str(facts.get("workload.peer") or facts.get("workload.client") or "")


def _shaped(facts: Sequence[Mapping[str, Any]], host: HostFacts,
            want: float | None = None) -> Check:
    seen = []
    met = True
    for peer in sorted({_peer(f) for f in facts}):
        rate = host.lab_rates.get(peer)
        met = met and rate is not None and (want is None or math.isclose(rate, want))
        shown = f"{rate:g} Mbit/s" if rate is not None else "unshaped"
        seen.append(f"link to {peer or 'no lab host'}: {shown}")
    name = "shaped link" if want is None else f"link shaped to {want:g} Mbit/s"
    return Check(name, met and bool(seen), "; ".join(seen) or "no cells")


def _io(want: Io, facts: Sequence[Mapping[str, Any]]) -> Check:
    modes = sorted({"direct" if f.get("workload.direct") else "buffered" for f in facts})
    return Check(f"{want} I/O", modes == [want], "the cells ran " + " and ".join(modes)
                 + " I/O")


def _file_over_ram(factor: float, facts: Sequence[Mapping[str, Any]], host: HostFacts
                   ) -> Check:
    worst: tuple[float, str] | None = None
    name = f"file >= {factor:g} x RAM"
    buffered = [f for f in facts if not f.get("workload.direct")]
    if facts and not buffered:
        return Check(name, True, "direct I/O on every cell: no page cache to fill")
    for f in buffered:
        size = f.get("workload.file_size")
        memory_mib = f.get("memory_mib")
        ram = (float(memory_mib) * 2**20 if isinstance(memory_mib, int | float)
               else float(host.memory_bytes or 0))
        if not isinstance(size, int | float) or ram <= 0:
            return Check(name, False, "a cell's file size or memory is not stored")
        share = float(size) / ram
        text = f"{f.get('kind', '?')}: a {_mib(float(size))} file, {_mib(ram)} of RAM"
        if worst is None or share < worst[0]:
            worst = (share, text)
    if worst is None:
        return Check(name, False, "no cells")
    return Check(name, worst[0] >= factor, worst[1])


def _ratio(served: Sequence[float], offered: Sequence[float]) -> float | None:
    if not served or not offered or math.fsum(offered) <= 0:
        return None
    return (math.fsum(served) / len(served)) / (math.fsum(offered) / len(offered))


def _share(side: Mapping[str, Sequence[float]]) -> float | None:
    return _ratio(side.get("replies_s", ()), side.get("offered_rps", ()))


def _saturated(sides: Sequence[Mapping[str, Sequence[float]]]) -> Check:
    shares = [_share(s) for s in sides]
    known = [s for s in shares if s is not None]
    text = ", ".join(f"{label} served {s * 100:.1f} % of offered"
                     for label, s in zip("AB", shares, strict=False) if s is not None)
    if not known:
        return Check("saturated", False, "no offered rate stored (not a fixed-rate run)")
    return Check("saturated", min(known) < SATURATED_SHARE,
                 f"{text} (saturated: below {SATURATED_SHARE * 100:.0f} %)")


def _guest_shares(side: Mapping[str, Sequence[float]]) -> dict[str, float | None]:
    """Served / offered of each web guest of one side: ``guest`` (the measured one)
    and ``nb<i>`` for every neighbour whose offered rate is stored."""
    found = sorted((int(m.group(2)), m.group(1))
                   for m in map(_NB_OFFERED.match, side) if m is not None)
    out = {"guest": _share(side)}
    for _, label in found:
        out[label] = _ratio(side.get(f"{label}.load.replies_per_s", ()),
                            side[f"{label}.load.offered_rps"])
    return out


def _all_saturated(sides: Sequence[Mapping[str, Sequence[float]]]) -> Check:
    name = "every guest saturated"
    shares = {f"{side} {guest}": share
              for side, rates in zip("AB", sides, strict=False)
              for guest, share in _guest_shares(rates).items()}
    missing = [who for who, share in shares.items() if share is None]
    if missing:
        return Check(name, False, f"{', '.join(missing)}: no served or offered rate "
                                  "stored (not a fixed-rate run)")
    rule = f"each guest must serve below {SATURATED_SHARE * 100:.0f} % of what it is offered"
    idle = [f"{who} served {s * 100:.1f} % of offered" for who, s in shares.items()
            if s is not None and s >= SATURATED_SHARE]
    text = ", ".join(f"{who} {s * 100:.1f} %" for who, s in shares.items() if s is not None)
    if idle:
        return Check(name, False, f"{'; '.join(idle)} ({rule}; {text})")
    return Check(name, True, f"served of offered: {text} ({rule})")


def check(req: Requirements, facts: Sequence[Mapping[str, Any]], host: HostFacts,
          rates: Sequence[Mapping[str, Sequence[float]]] = ()) -> list[Check]:
    """Every requirement of ``req`` checked: ``facts`` are the cell facts of both sides
    (:func:`hvbench.analysis.findings.cell_facts`), ``rates`` one mapping per measured
    side (A, then B unless it is a fixed reference) of ``replies_s`` and
    ``offered_rps`` values and, for ``saturated = "all"``, each web neighbour's
    ``nb<i>.load.replies_per_s`` and ``nb<i>.load.offered_rps`` (the saturation
    check)."""
    out = []
    if req.host_cores is not None:
        out.append(_cores(req.host_cores, host))
    if req.shaped_link:
        out.append(_shaped(facts, host, req.link_mbit))
    if req.io is not None:
        out.append(_io(req.io, facts))
    if req.file_over_ram is not None:
        out.append(_file_over_ram(req.file_over_ram, facts, host))
    if req.saturated == "one":
        out.append(_saturated(rates))
    elif req.saturated == "all":
        out.append(_all_saturated(rates))
    return out
