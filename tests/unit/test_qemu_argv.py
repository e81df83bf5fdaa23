"""The QEMU argv for every bus, cache mode, NIC model and machine."""

from __future__ import annotations

import pytest

from hvbench.image.builder import RECOMMENDED_CMDLINE
from hvbench.model.qemu_argv import LaunchPlan, ResolvedAccel, build_qemu_argv, nic_cmdline
from hvbench.model.spec import DiskSpec, Machine, NicSpec, VmSpec


def plan(
    spec: VmSpec, accel: ResolvedAccel = "tcg", taps: tuple[str | None, ...] | None = None
) -> LaunchPlan:
    return LaunchPlan(
        spec=spec,
        accel=accel,
        name="g1",
        kernel="/k",
        initrd="/i",
        kernel_cmdline="console=ttyS0",
        qmp_socket="/s/qmp",
        agent_socket="/s/qga",
        console_log="/r/console.log",
        disk_images=tuple(f"/r/disk{i}.img" for i in range(len(spec.disks))),
        tap_names=taps if taps is not None else tuple(None for _ in spec.nics),
        macs=tuple(f"52:54:00:00:00:{i:02x}" for i in range(len(spec.nics))),
    )


def argv_of(spec: VmSpec, **kw: object) -> list[str]:
    return build_qemu_argv(plan(spec, **kw))  # type: ignore[arg-type]


def devices(argv: list[str]) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == "-device"]


def drives(argv: list[str]) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == "-drive"]


def test_base_tcg_q35() -> None:
    argv = argv_of(VmSpec(vcpus=2, memory_mib=1024))
    text = " ".join(argv)
    assert argv[0] == "qemu-system-x86_64"
    assert "-machine q35 -accel tcg,thread=multi -cpu qemu64 -smp 2 -m 1024M" in text
    assert "-nodefaults" in argv and "-no-reboot" in argv
    assert "virtserialport,bus=vserial0.0,chardev=agent0,name=org.qemu.guest_agent.0" in argv
    assert "virtio-serial-pci,id=vserial0" in argv
    assert argv[argv.index("-append") + 1] == (
        "console=ttyS0 clocksource=tsc tsc=reliable hvbench.drivers=")


def test_kvm_uses_host_cpu() -> None:
    text = " ".join(argv_of(VmSpec(), accel="kvm"))
    assert "-accel kvm -cpu host" in text


def test_virtio_blk_with_iothread_and_cache() -> None:
    spec = VmSpec(disks=(DiskSpec(cache="writethrough", aio="io_uring", iothread=True),))
    argv = argv_of(spec)
    assert drives(argv) == [
        "file=/r/disk0.img,if=none,id=drive0,format=raw,cache=writethrough,aio=io_uring"
    ]
    assert "iothread,id=iothread0" in argv
    assert "virtio-blk-pci,drive=drive0,serial=hvb-d0,iothread=iothread0" in devices(argv)


def test_virtio_scsi_one_controller_per_disk() -> None:
    spec = VmSpec(disks=(DiskSpec(bus="virtio-scsi"), DiskSpec(bus="virtio-scsi", format="qcow2")))
    devs = devices(argv_of(spec))
    assert "virtio-scsi-pci,id=vscsi0" in devs and "virtio-scsi-pci,id=vscsi1" in devs
    assert "scsi-hd,bus=vscsi1.0,drive=drive1,serial=hvb-d1" in devs
    assert "format=qcow2" in drives(argv_of(spec))[1]


def test_ide_on_pc_uses_builtin_controller() -> None:
    spec = VmSpec(machine="pc", disks=(DiskSpec(bus="ide"),) * 3)
    devs = devices(argv_of(spec))
    assert not any(d.startswith("piix3-ide") for d in devs)
    ide = [d for d in devs if d.startswith("ide-hd")]
    assert ide == [
        "ide-hd,bus=ide.0,unit=0,drive=drive0,serial=hvb-d0",
        "ide-hd,bus=ide.0,unit=1,drive=drive1,serial=hvb-d1",
        "ide-hd,bus=ide.1,unit=0,drive=drive2,serial=hvb-d2",
    ]


def test_ide_on_q35_adds_piix3() -> None:
    devs = devices(argv_of(VmSpec(disks=(DiskSpec(bus="ide"),))))
    assert "piix3-ide,id=pide0" in devs
    assert "ide-hd,bus=pide0.0,unit=0,drive=drive0,serial=hvb-d0" in devs


def test_ahci_and_lsi_share_one_controller_each() -> None:
    spec = VmSpec(
        disks=(
            DiskSpec(bus="ahci"),
            DiskSpec(bus="lsi-scsi"),
            DiskSpec(bus="ahci"),
            DiskSpec(bus="lsi-scsi"),
        )
    )
    devs = devices(argv_of(spec))
    assert devs.count("ahci,id=ahci0") == 1 and devs.count("lsi53c895a,id=lsi0") == 1
    assert "ide-hd,bus=ahci0.1,drive=drive2,serial=hvb-d2" in devs
    assert "scsi-hd,bus=lsi0.0,scsi-id=1,drive=drive3,serial=hvb-d3" in devs


def test_microvm_uses_mmio_devices() -> None:
    spec = VmSpec(machine="microvm", disks=(DiskSpec(),), nics=(NicSpec(),))
    argv = argv_of(spec)
    assert argv[argv.index("-machine") + 1].startswith("microvm")
    devs = devices(argv)
    assert "virtio-serial-device,id=vserial0" in devs
    assert any(d.startswith("virtio-blk-device,") for d in devs)
    assert any(d.startswith("virtio-net-device,") for d in devs)


@pytest.mark.parametrize(
    ("machine", "accel", "khz", "expected"),
    [
        ("microvm", "tcg", 2445406, " tsc_early_khz=2445406"),
        ("microvm", "tcg", None, ""),  # rate unknown: the guest calibrates as usual
        ("microvm", "kvm", 2445406, ""),  # kvmclock gives the rate
        ("q35", "tcg", 2445406, ""),  # HPET and PM timer are fallbacks
    ],
)
def test_tsc_rate_reaches_only_tcg_microvm(
    machine: Machine, accel: ResolvedAccel, khz: int | None, expected: str
) -> None:
    p = LaunchPlan(**{**plan(VmSpec(machine=machine), accel).__dict__, "host_tsc_khz": khz})
    append = build_qemu_argv(p)[build_qemu_argv(p).index("-append") + 1]
    assert ("tsc_early_khz=" in append) == bool(expected)
    if expected:
        assert append.startswith("console=ttyS0 clocksource=tsc tsc=reliable" + expected
                                 + " hvbench.drivers=")


def test_nic_models_and_user_forwards() -> None:
    spec = VmSpec(
        nics=(NicSpec(model="e1000", forwards=("tcp:8080:80",)), NicSpec(model="rtl8139"))
    )
    argv = argv_of(spec)
    devs = devices(argv)
    assert "e1000,netdev=net0,mac=52:54:00:00:00:00" in devs
    assert "rtl8139,netdev=net1,mac=52:54:00:00:00:01" in devs
    netdevs = [argv[i + 1] for i, a in enumerate(argv) if a == "-netdev"]
    assert netdevs == [
        "user,id=net0,net=10.0.2.0/24,hostfwd=tcp:127.0.0.1:8080-:80",
        "user,id=net1,net=10.0.3.0/24",
    ]


def test_tap_backend() -> None:
    spec = VmSpec(nics=(NicSpec(backend="tap", address="192.168.77.2/24"),))
    argv = argv_of(spec, taps=("hvb-tab120",))
    netdev = argv[argv.index("-netdev") + 1]
    assert netdev == "tap,id=net0,ifname=hvb-tab120,script=no,downscript=no"


def test_nic_cmdline_routes_only_first_gateway() -> None:
    nics = (NicSpec(), NicSpec(), NicSpec(backend="tap"))
    words = nic_cmdline(nics, ("m0", "m1", "m2")).split()
    assert words == ["hvbench.net=m0,10.0.2.15/24,10.0.2.2", "hvbench.net=m1,10.0.3.15/24"]


def test_commas_in_paths_are_escaped() -> None:
    p = plan(VmSpec(disks=(DiskSpec(),)))
    p = LaunchPlan(**{**p.__dict__, "disk_images": ("/r/a,b.img",)})
    assert drives(build_qemu_argv(p))[0].startswith("file=/r/a,,b.img,if=none")


def test_driver_hint_lists_declared_buses_and_nics_once() -> None:
    spec = VmSpec(disks=(DiskSpec(bus="ahci"), DiskSpec(bus="lsi-scsi"), DiskSpec(bus="ahci")),
                  nics=(NicSpec(model="rtl8139"),))
    append = argv_of(spec)[argv_of(spec).index("-append") + 1]
    assert "hvbench.drivers=ahci,sd_mod,sym53c8xx,8139cp " in append + " "


def test_root_disk_is_read_only_virtio() -> None:
    p = LaunchPlan(**{**plan(VmSpec(machine="microvm")).__dict__, "root_disk": "/img/root.ext4"})
    argv = build_qemu_argv(p)
    assert "file=/img/root.ext4,if=none,id=sysroot,format=raw,readonly=on" in drives(argv)
    assert "virtio-blk-device,drive=sysroot,serial=hvb-root" in devices(argv)


def test_disk_throttling_is_a_drive_option() -> None:
    spec = VmSpec(disks=(DiskSpec(bps_limit="40M"), DiskSpec()))  # type: ignore[arg-type]
    first, second = drives(argv_of(spec))
    assert first.endswith(",cache=none,aio=threads,throttling.bps-total=41943040")
    assert "throttling" not in second
    assert spec.disks[0].label() == "virtio-blk-none-raw-sparse-bps-40M"


def test_guest_kernel_settings_go_last_on_the_command_line() -> None:
    append = argv_of(VmSpec())[argv_of(VmSpec()).index("-append") + 1]
    assert "mitigations" not in append  # the kernel's default: on
    spec = VmSpec(mitigations=False, kernel_args=("nokaslr", "elevator=none"))
    append = argv_of(spec)[argv_of(spec).index("-append") + 1]
    assert append.endswith(" mitigations=off nokaslr elevator=none")
    assert spec.label().endswith("_mitigations-off_nokaslr_elevator=none")
    assert VmSpec().label() == "q35_1cpu_512M"


@pytest.mark.parametrize("word", ["a b", "x='y'", "init=/bin/sh\n", ""])
def test_kernel_args_refuse_words_that_are_not_one_word(word: str) -> None:
    with pytest.raises(ValueError, match="kernel_args"):
        VmSpec(kernel_args=(word,))


def _append(spec: VmSpec, accel: ResolvedAccel = "tcg") -> str:
    argv = argv_of(spec, accel=accel)
    return argv[argv.index("-append") + 1]


@pytest.mark.parametrize(("clocksource", "accel", "words"), [
    # auto: the TSC under TCG (as every earlier run), the kernel's own choice under KVM
    ("auto", "tcg", " clocksource=tsc tsc=reliable"),
    ("auto", "kvm", ""),
    ("kernel", "tcg", ""),
    ("tsc", "kvm", " clocksource=tsc tsc=reliable"),
    ("hpet", "tcg", " clocksource=hpet"),
    ("acpi_pm", "tcg", " clocksource=acpi_pm"),
    ("kvm-clock", "kvm", " clocksource=kvm-clock"),
])
def test_clocksource_words_on_the_command_line(clocksource: str, accel: ResolvedAccel,
                                               words: str) -> None:
    spec = VmSpec.model_validate({"clocksource": clocksource,
                                  "accel": "kvm" if clocksource == "kvm-clock" else "auto"})
    append = _append(spec, accel)
    assert ("clocksource=" in append) == bool(words)
    assert ("tsc=reliable" in append) == ("tsc=reliable" in words)
    if words:
        assert words in append
    # The image's own line no longer decides the clock.
    assert "tsc=reliable" not in RECOMMENDED_CMDLINE and "clocksource" not in RECOMMENDED_CMDLINE


def test_a_declared_clocksource_names_the_variant() -> None:
    assert VmSpec().label() == "q35_1cpu_512M"
    assert VmSpec(clocksource="hpet").label() == "q35_1cpu_512M_clock-hpet"


@pytest.mark.parametrize(("fields", "expected"), [
    ({"clocksource": "kvm-clock"}, "needs accel = \"kvm\""),
    ({"clocksource": "kvm-clock", "accel": "tcg"}, "needs accel = \"kvm\""),
    ({"clocksource": "hpet", "machine": "microvm"}, "no HPET"),
    ({"clocksource": "acpi_pm", "machine": "microvm"}, "no HPET and no ACPI PM"),
    ({"clocksource": "jiffies"}, "clocksource"),
])
def test_impossible_clocksources_are_refused(fields: dict[str, str], expected: str) -> None:
    with pytest.raises(ValueError, match=expected):
        VmSpec.model_validate(fields)
