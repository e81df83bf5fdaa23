"""Declarative description of a study's network lab: extra hosts and their links.

Each :class:`LabHostSpec` becomes a Linux network namespace joined to one lab bridge
by a veth pair, whose link may be shaped (rate, delay, loss). This module is at the
bottom of the layer stack: it validates values only; :mod:`hvbench.netlab` builds the
lab. Validation errors read well through :func:`hvbench.model.spec.spec_error`.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field, field_validator

#: Host names the study runner uses for itself: the root namespace and the guests.
RESERVED_HOST_NAMES: frozenset[str] = frozenset({"host", "guest"})
HOST_NAME_PATTERN = r"^[a-z][a-z0-9]{0,9}$"
#: Private ranges a lab subnet may come from (RFC 1918).
PRIVATE_RANGES: tuple[ipaddress.IPv4Network, ...] = (
    ipaddress.IPv4Network("10.0.0.0/8"),
    ipaddress.IPv4Network("172.16.0.0/12"),
    ipaddress.IPv4Network("192.168.0.0/16"),
)
#: tc's rate units (decimal, as tc reads them: 1kbit = 1000 bit/s).
RATE_UNITS: dict[str, int] = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9}
#: The lab's MTU range, bytes: IPv4's smallest datagram every host must take, up to
#: jumbo frames (seed 001's private network ran 9000 for ATA over Ethernet).
DEFAULT_MTU = 1500
MIN_MTU = 576
MAX_MTU = 9000
MIN_RATE_BITS = 10_000
MAX_RATE_BITS = 100 * 10**9
_RATE_RE = re.compile(r"^(\d+(?:\.\d+)?)(bit|kbit|mbit|gbit)$")


def parse_rate(value: str) -> int:
    """Bits per second of a tc-style rate such as ``100mbit``, ``1gbit``, ``500kbit``.

    Raises ValueError naming the accepted forms and range.
    """
    match = _RATE_RE.match(value.strip().lower())
    if not match:
        raise ValueError(
            f"rate {value!r}: expected a number and a unit bit, kbit, mbit or gbit "
            "(decimal, as tc reads them), such as 100mbit, 1gbit or 500kbit"
        )
    bits = round(float(match.group(1)) * RATE_UNITS[match.group(2)])
    if not MIN_RATE_BITS <= bits <= MAX_RATE_BITS:
        raise ValueError(f"rate {value!r}: must be between 10kbit and 100gbit")
    return bits


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LabHostSpec(_Frozen):
    """One extra network host and the shaping of its link to the lab bridge.

    Shaping applies to both directions of the link: ``rate`` caps each direction,
    ``delay_ms`` is added to each direction (a ping's round trip grows by twice it),
    ``loss_pct`` drops that share of the packets in each direction.
    """

    name: str = Field(pattern=HOST_NAME_PATTERN)
    rate: str | None = None
    delay_ms: float = Field(default=0.0, ge=0.0, le=60_000.0)
    loss_pct: float = Field(default=0.0, ge=0.0, le=100.0)

    @field_validator("name", mode="before")
    @classmethod
    def _check_name(cls, value: object) -> object:
        if isinstance(value, str) and not re.fullmatch(HOST_NAME_PATTERN, value):
            raise ValueError(
                f"host name {value!r}: expected 1 to 10 lowercase letters and digits, "
                "starting with a letter"
            )
        return value

    @field_validator("rate")
    @classmethod
    def _check_rate(cls, value: str | None) -> str | None:
        if value is not None:
            parse_rate(value)
            return value.strip().lower()
        return value

    @property
    def rate_bits(self) -> int | None:
        """The rate in bits per second (None: the link is not rate-limited)."""
        return parse_rate(self.rate) if self.rate is not None else None

    @property
    def needs_netem(self) -> bool:
        """True when the link needs the kernel's netem qdisc (delay or loss)."""
        return self.delay_ms > 0 or self.loss_pct > 0

    @property
    def shaped(self) -> bool:
        return self.rate is not None or self.needs_netem


def host_name_problems(names: Sequence[str],
                       reserved: Mapping[str, str] | None = None) -> list[tuple[int, str]]:
    """(index, problem) for every host name that is reserved or repeats an earlier one
    (pure). ``reserved`` adds names the caller keeps for itself, each with its reason."""
    taken = dict.fromkeys(RESERVED_HOST_NAMES, "hvbench's own host and its guests")
    taken.update(reserved or {})
    out: list[tuple[int, str]] = []
    seen: set[str] = set()
    for index, name in enumerate(names):
        if name in taken:
            own = ", ".join(sorted(RESERVED_HOST_NAMES))
            why = (f"the names {own} stand for {taken[name]}" if name in RESERVED_HOST_NAMES
                   else f"it stands for {taken[name]}")
            out.append((index, f"host name {name!r} is reserved ({why})"))
        elif name in seen:
            out.append((index, f"host name {name!r} appears twice"))
        seen.add(name)
    return out


class LabSpec(_Frozen):
    """The lab: its hosts (unique names, not ``host`` or ``guest``) and its subnet.

    ``subnet`` is an IPv4 /24 network inside 10.0.0.0/8, 172.16.0.0/12 or
    192.168.0.0/16, e.g. ``10.213.7.0/24``; None picks a free one when the lab starts.
    ``mtu`` is the bridge's, every veth end's and every guest tap's MTU in bytes
    (576 to 9000; 9000: jumbo frames).
    """

    hosts: tuple[LabHostSpec, ...] = ()
    subnet: str | None = None
    mtu: int = DEFAULT_MTU

    @field_validator("mtu", mode="before")
    @classmethod
    def _check_mtu(cls, value: object) -> object:
        if (isinstance(value, bool) or not isinstance(value, int)
                or not MIN_MTU <= value <= MAX_MTU):
            raise ValueError(f"mtu {value!r}: expected a whole number of bytes from "
                             f"{MIN_MTU} to {MAX_MTU} (9000: jumbo frames)")
        return value

    @field_validator("hosts")
    @classmethod
    def _check_hosts(cls, value: tuple[LabHostSpec, ...]) -> tuple[LabHostSpec, ...]:
        found = host_name_problems([host.name for host in value])
        if found:
            raise ValueError("; ".join(problem for _, problem in found))
        return value

    @field_validator("subnet")
    @classmethod
    def _check_subnet(cls, value: str | None) -> str | None:
        if value is None:
            return value
        try:
            net = ipaddress.IPv4Network(value.strip(), strict=True)
        except ValueError as exc:
            raise ValueError(
                f"subnet {value!r}: expected an IPv4 network such as 10.213.7.0/24 ({exc})"
            ) from None
        if net.prefixlen != 24:
            raise ValueError(f"subnet {value!r}: must be a /24 network, such as 10.213.7.0/24")
        if not any(net.subnet_of(r) for r in PRIVATE_RANGES):
            raise ValueError(
                f"subnet {value!r}: must lie inside a private range (10.0.0.0/8, "
                "172.16.0.0/12 or 192.168.0.0/16)"
            )
        return str(net)

    def host(self, name: str) -> LabHostSpec | None:
        """The host called ``name``, or None."""
        return next((h for h in self.hosts if h.name == name), None)
