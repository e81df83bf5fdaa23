"""What is on an existing domain's disk, from the guest's kernel tables (pure): the
device numbers the probe script prints, matched against mount tables and swaps."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from hvbench.platforms.guest_disk import PROBE_SCRIPT, GuestDevices, disk_usage, parse_probe

#: A Debian guest: root on vda1, /srv on vdb1 (ext4), swap on vdb2, LVM on vdc.
MOUNTINFO = """\
22 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw,errors=remount-ro
25 22 0:22 / /proc rw,nosuid - proc proc rw
31 22 254:17 / /srv rw,relatime shared:8 - ext4 /dev/vdb1 rw
32 22 253:0 / /data rw,relatime shared:9 - xfs /dev/mapper/vg-data rw
"""
SWAPS = """Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority
/dev/vdb2                               partition\t1048572\t\t0\t\t-2
"""


def _probe(lines: str) -> GuestDevices:
    return parse_probe(lines)


def test_root_mounts_swap_and_stacked_devices_are_named() -> None:
    root = _probe("part vda 254:0\npart vda1 254:1\nroot /dev/vda1\n")
    assert disk_usage(root, [MOUNTINFO], SWAPS) == [
        "the guest's root file system / (ext4 on vda1)"]
    data = _probe("part vdb 254:16\npart vdb1 254:17\npart vdb2 254:18\n")
    assert disk_usage(data, [MOUNTINFO, MOUNTINFO], SWAPS) == [
        "/srv (ext4 on vdb1)", "swap on vdb2"]
    lvm = _probe("part vdc 254:32\nholder dm-0 253:0\n")
    assert disk_usage(lvm, [MOUNTINFO], SWAPS) == [
        "/data (xfs on dm-0)", "dm-0 (device-mapper, md or LVM) stacked on it"]


def test_a_free_disk_holds_nothing() -> None:
    free = _probe("part vdd 254:48\nroot /dev/vda1\n")
    assert free.parts == {"vdd": "254:48"} and free.root == "/dev/vda1"
    assert disk_usage(free, [MOUNTINFO], SWAPS) == []


def test_a_root_hidden_from_the_mount_tables_is_found_by_root_equals() -> None:
    # After a switch_root the old root's mount may be outside every visible table.
    hidden = _probe("part vda 254:0\nroot /dev/vda\nnoise line\n")
    assert disk_usage(hidden, [""], SWAPS) == ["the guest's root device vda (kernel root=)"]


@pytest.mark.skipif(shutil.which("sh") is None, reason="no sh")
def test_the_probe_script_runs_under_sh_and_prints_only_its_lines() -> None:
    # A device that does not exist: no part lines, and the script still exits 0.
    done = subprocess.run(["sh", "-c", PROBE_SCRIPT, "probe", "/dev/hvb-no-such-disk"],
                          capture_output=True, text=True, check=False, timeout=10)
    assert done.returncode == 0, done.stderr
    probed = parse_probe(done.stdout)
    assert probed.parts == {} and probed.holders == {}
