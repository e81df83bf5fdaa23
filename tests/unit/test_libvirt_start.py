"""libvirt's start timing for `hvbench doctor` (pure parts): the tiny domain, the KVM
mismatch that makes libvirt re-probe, the one-line cause, and the boot phases a
libvirt guest stores."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from hvbench.analysis.metrics import lookup
from hvbench.kinds.libvirt.spec import LibvirtPlatformSpec
from hvbench.model.libvirt_xml import caps_have_kvm, owner_pid, tiny_domain_xml
from hvbench.model.spec import VmSpec
from hvbench.platforms.libvirt import LibvirtPlatform
from hvbench.platforms.libvirt_start import SLOW_DEFINE_S, may_read_write, slow_cause

CAPS = """<capabilities><host/><guest><os_type>hvm</os_type>
<arch name='x86_64'><domain type='qemu'/>{kvm}</arch></guest></capabilities>"""


def test_the_tiny_domain_has_no_devices_and_carries_the_owner_mark() -> None:
    xml = tiny_domain_xml("hvbench-7-doctor", 7)
    root = ET.fromstring(xml)  # noqa: S314 - built just above
    assert root.get("type") == "qemu" and root.findtext("memory") == "32"
    assert owner_pid(xml) == 7
    assert root.find("devices/disk") is None and root.find("devices/interface") is None


def test_kvm_in_libvirts_capabilities_is_read_from_its_xml() -> None:
    assert caps_have_kvm(CAPS.format(kvm="<domain type='kvm'/>"))
    assert not caps_have_kvm(CAPS.format(kvm=""))
    assert not caps_have_kvm("not xml")


def test_permission_bits_decide_access_to_dev_kvm() -> None:
    # crw------- root:root, as on this project's host: libvirt-qemu (64055, group kvm)
    assert not may_read_write(0o600, 0, 108, 64055, {108, 64055})
    assert may_read_write(0o660, 0, 108, 64055, {108, 64055})
    assert not may_read_write(0o640, 0, 108, 64055, {108})
    assert may_read_write(0o666, 0, 0, 1000, set())
    assert may_read_write(0o600, 0, 0, 0, set())


def test_a_slow_define_names_the_kvm_mismatch_or_says_unexplained() -> None:
    assert slow_cause(SLOW_DEFINE_S, True, False) == ""
    named = slow_cause(31.9, True, False, "libvirt-qemu")
    assert named.startswith("libvirt re-probes QEMU's capabilities at every look-up")
    assert "libvirt-qemu cannot open /dev/kvm" in named and "\n" not in named
    for caps, access in ((False, False), (True, True), (True, None)):
        assert slow_cause(10.0, caps, access).startswith("unexplained: ")


def test_the_boot_phases_are_declared_and_an_attach_has_none() -> None:
    for name in ("libvirt_define_s", "libvirt_start_s", "guest_boot_s"):
        spec = lookup(name)
        assert spec is not None and spec.unit == "s" and spec.detail is not None
    defined = LibvirtPlatform(LibvirtPlatformSpec(vm=VmSpec()), name="g")
    defined.timings.update(prepared_s=0.2, define_s=31.0, start_s=4.0, guest_boot_s=6.0)
    assert defined.boot_phases() == {"libvirt_define_s": 31.0, "libvirt_start_s": 4.0,
                                     "guest_boot_s": 6.0}
    assert defined.describe()["boot_phases"] == defined.boot_phases()
    existing = LibvirtPlatform(LibvirtPlatformSpec(domain="web"), name="x")
    assert existing.boot_phases() == {}


def test_doctor_shows_libvirts_start_and_the_cause_when_slow() -> None:
    from hvbench.platforms.doctor import _libvirt_lines

    slow = {"define_s": 31.9, "start_s": 4.3, "slow": True, "cached": True,
            "cause": slow_cause(31.9, True, False)}
    section = {"uris": {"qemu:///system": {"reachable": True, "domains": {},
                                           "start": slow}}}
    rows = dict(_libvirt_lines(section))
    line = rows["libvirt qemu:///system start"]
    assert line.startswith("a tiny domain: define 31.9 s, start 4.3 s (cached for this boot)"
                           "; SLOW: libvirt re-probes")
    fast = {**slow, "define_s": 0.1, "slow": False, "cause": "", "cached": False}
    section["uris"]["qemu:///system"]["start"] = fast
    assert dict(_libvirt_lines(section))["libvirt qemu:///system start"] == \
        "a tiny domain: define 0.1 s, start 4.3 s"


def test_the_boot_table_shows_libvirts_times_under_boot_s() -> None:
    from hvbench.analysis.stats import summarize
    from hvbench.analysis.summaries import PhaseStats
    from hvbench.report.text import phase_rows

    stats = PhaseStats("dd", "boot", ["libvirt"])
    for metric, values in (("boot_s", [60.3, 58.1]), ("libvirt_define_s", [51.4, 49.0]),
                           ("libvirt_start_s", [5.1, 5.0]), ("guest_boot_s", [3.8, 4.0])):
        stats.metrics[metric] = {"libvirt": summarize(values)}
        stats.units[metric] = "s"
    labels = [label for label, _ in phase_rows(stats, None)]
    assert labels[0] == "boot s mean ± 95% CI"
    assert labels.index("libvirt define s (libvirt's own time)") < \
        labels.index("libvirt start s (libvirt's own time)") < \
        labels.index("guest boot s (firmware and kernel to the agent)")


def test_the_runner_stores_a_platforms_boot_phases_in_phase_boot() -> None:
    from hvbench.run.runner import _boot_phases
    from hvbench.store.database import MeasurementRecord

    defined = LibvirtPlatform(LibvirtPlatformSpec(vm=VmSpec()), name="g")
    defined.timings.update(define_s=31.0, start_s=4.0, guest_boot_s=6.0)
    assert _boot_phases(defined) == [
        MeasurementRecord("boot", "libvirt_define_s", 31.0, "s"),
        MeasurementRecord("boot", "libvirt_start_s", 4.0, "s"),
        MeasurementRecord("boot", "guest_boot_s", 6.0, "s")]
