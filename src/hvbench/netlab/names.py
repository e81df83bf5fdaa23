"""Names and the address plan of a lab (pure: no process, no file).

Every network namespace and link of a lab carries the prefix ``hvb-`` and the lab's
random tag, so a lab is recognisable, two labs never clash and cleanup can tell its
devices from anyone else's:

============================  ===========================  ================
what                          name                         example
============================  ===========================  ================
bridge (root namespace)       ``hvb-b<tag>``               ``hvb-b3fa09c``
veth, root-namespace end      ``hvb-v<tag><i>``            ``hvb-v3fa09c0``
veth, namespace end           ``eth0`` (inside its netns)
network namespace             ``hvb-<tag>-<host>``         ``hvb-3fa09c-web``
============================  ===========================  ================

Address plan of the lab's /24: the bridge (the root namespace, "host") is ``.1``, lab
hosts ``.10`` to ``.99`` in order, guests ``.100`` to ``.254``.
"""

from __future__ import annotations

import ipaddress
import secrets
from collections.abc import Iterable, Iterator

PREFIX = "hvb-"
BRIDGE_PREFIX = "hvb-b"
VETH_PREFIX = "hvb-v"
#: Linux limits interface names to 15 bytes (IFNAMSIZ - 1).
IFNAME_MAX = 15
TAG_LEN = 6
NETNS_IFNAME = "eth0"
PREFIX_LEN = 24
BRIDGE_HOST = 1
FIRST_LAB_HOST, LAST_LAB_HOST = 10, 99
FIRST_GUEST, LAST_GUEST = 100, 254
#: Where an automatic subnet is searched: 10.213.N.0/24 for N in 0..255.
AUTO_BASE = ipaddress.IPv4Network("10.213.0.0/16")


def random_tag() -> str:
    """A fresh lab tag: 6 lowercase hex digits."""
    return secrets.token_hex(TAG_LEN // 2)


def bridge_name(tag: str) -> str:
    return _ifname(f"{BRIDGE_PREFIX}{tag}")


def veth_name(tag: str, index: int) -> str:
    """The root-namespace end of lab host number ``index``'s veth pair."""
    return _ifname(f"{VETH_PREFIX}{tag}{index}")


def netns_name(tag: str, host: str) -> str:
    return f"{PREFIX}{tag}-{host}"


def _ifname(name: str) -> str:
    if len(name) > IFNAME_MAX:
        raise ValueError(f"interface name {name!r} is longer than {IFNAME_MAX} characters")
    return name


def is_lab_name(name: str) -> bool:
    """True for the name of any hvbench network device or namespace (taps included)."""
    return name.startswith(PREFIX)


class AddressPlan:
    """The addresses of one lab's /24 ``subnet`` (e.g. ``10.213.7.0/24``)."""

    def __init__(self, subnet: str) -> None:
        self.network = ipaddress.IPv4Network(subnet, strict=True)
        if self.network.prefixlen != PREFIX_LEN:
            raise ValueError(f"lab subnet {subnet} is not a /{PREFIX_LEN}")
        self.prefix_len = PREFIX_LEN

    def _nth(self, n: int) -> str:
        return str(self.network.network_address + n)

    @property
    def subnet(self) -> str:
        return str(self.network)

    @property
    def bridge_address(self) -> str:
        """The root namespace's address on the lab (``.1``)."""
        return self._nth(BRIDGE_HOST)

    def lab_host_address(self, index: int) -> str:
        """Lab host number ``index`` (0-based): ``.10 + index``. ValueError past ``.99``."""
        if not 0 <= index <= LAST_LAB_HOST - FIRST_LAB_HOST:
            raise ValueError(f"a lab holds at most {LAST_LAB_HOST - FIRST_LAB_HOST + 1} hosts")
        return self._nth(FIRST_LAB_HOST + index)

    def guest_addresses(self) -> Iterator[str]:
        """The guest addresses in order: ``.100`` to ``.254``."""
        return (self._nth(n) for n in range(FIRST_GUEST, LAST_GUEST + 1))

    def with_prefix(self, address: str) -> str:
        return f"{address}/{self.prefix_len}"


def overlaps(candidate: str, used: Iterable[str]) -> bool:
    """True if network ``candidate`` overlaps any network or address in ``used``
    (strings such as ``10.0.0.0/8`` or ``192.0.2.2``; anything that is not IPv4 is
    ignored)."""
    net = ipaddress.IPv4Network(candidate)
    for item in used:
        try:
            other = ipaddress.IPv4Network(item, strict=False)
        except ValueError:
            continue
        if net.overlaps(other):
            return True
    return False


def choose_subnet(used: Iterable[str], start: int = 0) -> str | None:
    """The first /24 of 10.213.0.0/16, from ``10.213.<start>.0`` on and wrapping round,
    that overlaps nothing in ``used`` (the host's addresses and routes); None if every
    one is taken. Callers pass a random ``start`` so that two labs started at the same
    moment are unlikely to pick the same one."""
    used = [u for u in used if u not in ("default", "")]
    subnets = list(AUTO_BASE.subnets(new_prefix=PREFIX_LEN))
    for k in range(len(subnets)):
        candidate = str(subnets[(start + k) % len(subnets)])
        if not overlaps(candidate, used):
            return candidate
    return None
