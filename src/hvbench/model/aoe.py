"""ATA over Ethernet in the guest (seed 001's EBS protocol): the device an AoE address
becomes and the guest command that attaches it (pure; the server is
:class:`hvbench.workloads.aoe.AoeServer`)."""

from __future__ import annotations

#: How long the guest waits for the device after a discovery, seconds.
GUEST_WAIT_S = 20


def guest_device(shelf: int, slot: int) -> str:
    """The guest's block device of AoE address ``e<shelf>.<slot>``."""
    return f"/dev/etherd/e{shelf}.{slot}"


#: In the guest: load aoe on the NIC $1, discover, wait up to $2 s for device $3.
_ATTACH = ('modprobe aoe ${1:+aoe_iflist="$1"} && aoe-discover && i=0 && '
           'while [ ! -b "$3" ]; do '
           '[ "$i" -ge "$2" ] && echo "no $3 after $2 s" >&2 && exit 1; '
           'sleep 1; i=$((i+1)); aoe-discover; done')


def guest_attach_argv(*, shelf: int, slot: int, netif: str = "",
                      wait_s: int = GUEST_WAIT_S) -> list[str]:
    """The guest command attaching ``e<shelf>.<slot>``: the aoe module (on ``netif``
    only when given, else on every NIC), a discovery (repeated each second: the first
    query may leave before the NIC's link is up), ``wait_s`` seconds at most; it exits
    non-zero with "no <device> after <wait_s> s" when the device never appears."""
    return ["sh", "-c", _ATTACH, "aoe-attach", netif, str(wait_s),
            guest_device(shelf, slot)]
