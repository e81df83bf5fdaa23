"""The libvirt platform with real libvirtd, virtlogd and TCG guests.

- the same declared guest through ``kind = "qemu"`` and ``kind = "libvirt"`` gives the same
  numbers within noise (``hvbench compare``), and the report shows the domain's I/O
  settings next to them;
- an existing domain of the "user's" (defined and started by the test, not by hvbench)
  is measured through ``domain =`` on the disk it names, and is left running, defined
  and unchanged, its other disk unwritten;
- that domain is also the decoy: its name starts with ``hvbench-`` but it carries no
  owner element, and it survives ``hvbench cleanup``, also after ``kill -9`` of an
  hvbench whose own domain cleanup then destroys.

Both guests of the equivalence test are throttled (as in test_compare.py): under TCG an
unthrottled guest's throughput follows how much CPU emulation gets on a shared host.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import libvirt
import pytest

from hvbench.errors import SpecError
from hvbench.image.builder import RECOMMENDED_CMDLINE, GuestImage
from hvbench.kinds.libvirt.spec import LibvirtPlatformSpec
from hvbench.model.libvirt_xml import (
    DOMAIN_XML_KIND,
    DomainPlan,
    build_domain_xml,
    caps_have_kvm,
    owner_pid,
)
from hvbench.model.spec import VmSpec
from hvbench.model.study import parse_study
from hvbench.platforms import libvirt as lv
from hvbench.platforms.libvirt import IMAGES_DIR, LibvirtAgent, LibvirtPlatform, connect
from hvbench.platforms.libvirt_start import SLOW_DEFINE_S, user_kvm_access
from hvbench.run.runner import load_study, run_study
from hvbench.store.database import Store
from tests.integration.conftest import hvbench
from tests.integration.libvirt_daemons import running_daemons
from tests.integration.test_compare import JOB

pytestmark = pytest.mark.integration
HOST_RAM = 24 << 30
SRC = Path(__file__).parent.parent.parent / "src"
URI = "qemu:///system"


GUEST = ('machine = "pc"\nmemory_mib = 256\n'
         'disk = { bus = "virtio-blk", cache = "none", aio = "native", size = "64M", '
         'bps_limit = "40M" }\n')
#: Paired by repetition (a paired t-test, 3 pairs at least): 3 pairs decide (p < 0.01
#: at |t| > 9.92, which a steady difference between two throttled guests reaches), so
#: the verdict can be "significant"; each pair fewer saves a libvirt domain start (here
#: about a minute: every define re-probes QEMU, see hvbench.platforms.libvirt_start).
EQUIVALENCE_REPETITIONS = 3
EQUIVALENCE = f"""
[study]
name = "libvirt-equivalence"
repetitions = {EQUIVALENCE_REPETITIONS}
seed = 5

[[platform]]
kind = "qemu"
name = "qemu"
{GUEST}
[[platform]]
kind = "libvirt"
name = "libvirt"
{GUEST}
[[workload]]
name = "read"
profile = "fio-job"
target = "device"
job_file = "read.fio"
"""


def _hvbench(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``hvbench ARGS`` as a process of its own: for the commands that start or stop
    processes (cleanup, doctor); those that only read a store run in-process
    (conftest.hvbench)."""
    env = dict(os.environ, PYTHONPATH=str(SRC))
    return subprocess.run([sys.executable, "-m", "hvbench.cli.main", *args], env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def daemons() -> Iterator[list[str]]:
    with running_daemons() as started:
        yield started


def _hvbench_domains(conn: libvirt.virConnect, owner: int | None = None) -> list[str]:
    """Domains whose hvbench owner element names ``owner`` (default: this test
    process, which runs the studies in-process): another hvbench's domains on a shared
    machine are not this test's."""
    pid = os.getpid() if owner is None else owner
    return [d.name() for d in conn.listAllDomains(0) if owner_pid(d.XMLDesc(0)) == pid]


@pytest.fixture(scope="module")
def user_domain(daemons: list[str], image: GuestImage) -> Iterator[dict[str, str]]:
    """A persistent, running domain that hvbench did not create (no owner element) but
    whose name starts with hvbench's prefix: the user's domain and the cleanup decoy.
    Disks: vdb (to measure), vdc (never named: must stay unwritten) and vdd (holds the
    user's ext4 file system, mounted at /srv/data in the guest)."""
    stage = IMAGES_DIR / f"hvbtest-user-{os.getpid()}"
    stage.mkdir(mode=0o755)
    name = f"hvbench-{os.getpid()}-decoy"
    conn = connect(URI)
    domain = None
    try:
        for source in (image.kernel, image.initrd, image.rootfs):
            assert source is not None
            shutil.copyfile(source, stage / source.name)
        disks = []
        for index, size in ((0, 64 << 20), (1, 16 << 20), (2, 16 << 20)):
            path = stage / f"user{index}.raw"
            path.write_bytes(bytes([index + 7]) * size)
            lv._give_to_qemu(path)
            disks.append(str(path))
        vm = VmSpec.model_validate({"machine": "pc", "memory_mib": 256, "accel": "tcg",
                                    "disks": [{"cache": "writeback"}, {}, {}]})
        xml = build_domain_xml(DomainPlan(
            spec=vm, accel="tcg", name=name, owner_pid=0, kernel=str(stage / "vmlinux"),
            initrd=str(stage / "initrd.img"), kernel_cmdline=RECOMMENDED_CMDLINE,
            root_disk=str(stage / "rootfs.img"), console_log=str(stage / "console.log"),
            disk_images=tuple(disks), tap_names=(), macs=()))
        root = ET.fromstring(xml)  # noqa: S314 - built just above
        metadata = root.find("metadata")
        assert metadata is not None
        root.remove(metadata)  # the user's domain: no hvbench owner element
        domain = conn.defineXML(ET.tostring(root, encoding="unicode"))
        domain.create()
        agent = LibvirtAgent(domain)
        agent.connect(time.monotonic() + 90, lambda: True)
        # The user's data: a mounted file system on vdd (found by its serial).
        mounted = agent.run(["sh", "-c", "for b in /sys/block/vd*; do "
                             "[ \"$(cat $b/serial)\" = hvb-d2 ] && d=/dev/${b##*/}; done; "
                             "/sbin/mkfs.ext4 -q -F $d && mkdir -p /srv/data && "
                             "mount $d /srv/data"], timeout=60)
        assert mounted.ok, mounted.stderr
        yield {"name": name, "vdc": disks[1]}
    finally:
        if domain is not None:
            if domain.isActive():
                domain.destroy()
            domain.undefine()
        conn.close()
        shutil.rmtree(stage, ignore_errors=True)


def _existing_study(domain: str, *, repetitions: int, uri: str = URI) -> str:
    """dd on disk vdb of the existing domain ``domain`` at ``uri``."""
    return f"""
[study]
name = "existing"
repetitions = {repetitions}

[[platform]]
kind = "libvirt"
name = "mine"
uri = "{uri}"
domain = "{domain}"
disk = "vdb"

[[workload]]
name = "dd"
profile = "dd"
target = "device"
file_size = "32M"
direct = true
"""


def _run(study: str, path: Path, db: Path) -> str:
    path.write_text(study)
    store = Store(db)
    try:
        outcome = run_study(parse_study(study, str(path), HOST_RAM), store)
        assert outcome.failures == 0, store.failures(outcome.run_id)
        return outcome.run_id
    finally:
        store.close()


def test_same_guest_through_qemu_and_libvirt_gives_the_same_numbers(
    daemons: list[str], image: GuestImage, tmp_path: Path
) -> None:
    (tmp_path / "read.fio").write_text(JOB)
    db = tmp_path / "eq.db"
    run_id = _run(EQUIVALENCE, tmp_path / "eq.toml", db)

    done = hvbench("compare", ":qemu", ":libvirt", "--db", str(db), "--format", "json")
    assert done.returncode == 0, done.stderr
    rows = [c for c in json.loads(done.stdout)["comparisons"]
            if c["phase"] == "read" and c["metric"] == "mb_s"]
    assert len(rows) == 1 and rows[0]["n_a"] == rows[0]["n_b"] == EQUIVALENCE_REPETITIONS, rows
    print("equivalence", json.dumps(rows[0]))
    assert rows[0]["verdict"] != "too few repetitions", rows[0]  # decided, not skipped
    assert rows[0]["verdict"] != "significant", rows[0]
    assert abs(float(rows[0]["delta_pct"])) < 10.0, rows[0]

    store = Store(db)
    try:
        xmls = store.raw_outputs(run_id, kind=DOMAIN_XML_KIND)
    finally:
        store.close()
    assert {r.cell for r in xmls} == {"libvirt/read"}
    assert len(xmls) == EQUIVALENCE_REPETITIONS
    assert "<total_bytes_sec>" in xmls[0].content and "cache='none'" in xmls[0].content

    report = hvbench("report", run_id, "--db", str(db))
    assert report.returncode == 0, report.stderr
    assert "libvirt domains: I/O settings" in report.stdout
    assert "cache=none io=native" in report.stdout
    explained = hvbench("explain", run_id, "--db", str(db), "--format", "json")
    assert explained.returncode == 0, explained.stderr
    measured = [v for v in json.loads(explained.stdout)["verdicts"]
                if v["platform"] == "libvirt" and v["phase"] != "boot"]
    assert measured, explained.stdout
    # libvirtd's QEMU is found and sampled like hvbench's own: no rule lacks its threads.
    for verdict in measured:
        missing = {m for a in verdict["abstained"] for m in a["missing"]}
        assert not missing & {"res.vcpu.util_pct", "res.main.util_pct"}, verdict

    conn = connect(URI)
    try:
        assert _hvbench_domains(conn) == []
    finally:
        conn.close()
    assert not list(IMAGES_DIR.glob(f"hvbench-{os.getpid()}-*.hvb{os.getpid()}"))


#: examples/libvirt.toml reduced: tests/integration/example_overrides.toml names the test
#: below (covered_by), which runs it as test_examples_run.py runs the other examples.
LIBVIRT_EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "libvirt.toml"
LIBVIRT_EXAMPLE_SET = ["study.repetitions=1", "workload.dd.file_size=16M",
                       "platform.*.disk.size=48M"]


def test_the_libvirt_example_runs_and_is_explained(daemons: list[str], image: GuestImage,
                                                   tmp_path: Path) -> None:
    """examples/libvirt.toml through `hvbench run --set ...` (one repetition of a smaller
    dd): native, the QEMU guest and the libvirt domain each store an ok repetition and
    nothing fails, the overrides are stored with the run, `hvbench report` renders it
    in the terminal and as HTML, `hvbench explain` gives every measured cell a verdict,
    the domain's included, and the run leaves no domain of its own behind."""
    study = load_study(LIBVIRT_EXAMPLE, LIBVIRT_EXAMPLE_SET)
    assert study.study.repetitions == 1, "a reduced example runs 1 repetition"
    db = tmp_path / "example.db"
    sets = [arg for change in LIBVIRT_EXAMPLE_SET for arg in ("--set", change)]
    proc = subprocess.Popen([sys.executable, "-m", "hvbench.cli.main", "run",
                             str(LIBVIRT_EXAMPLE), *sets, "--db", str(db)],
                            env=dict(os.environ, PYTHONPATH=str(SRC)),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-4000:]
    with Store(db) as store:
        (run,) = store.list_runs()
        assert store.failures(run.id) == []
        cells = {c.id: c.name for c in store.cells(run.id)}
        stored = {cells[cell_id] for cell_id, _ in store.done(run.id)}
        assert store.get_run(run.id).env["study_overrides"] == LIBVIRT_EXAMPLE_SET
    assert stored == {c.name for c in study.cells}
    report = hvbench("report", run.id, "--db", str(db))
    assert report.returncode == 0, report.stderr
    page = tmp_path / "report.html"
    report = hvbench("report", run.id, "--db", str(db), "--format", "html", "-o", str(page))
    assert report.returncode == 0, report.stderr
    assert "--set" in page.read_text()
    explained = hvbench("explain", run.id, "--db", str(db), "--format", "json")
    assert explained.returncode == 0, explained.stderr
    verdicts = json.loads(explained.stdout)["verdicts"]
    assert {v["platform"] for v in verdicts if v["phase"] != "boot"} == {
        "native", "guest", "libvirt"}, verdicts
    conn = connect(URI)
    try:
        assert _hvbench_domains(conn, proc.pid) == []
    finally:
        conn.close()


def test_existing_domain_is_measured_on_the_named_disk_and_left_unchanged(
    user_domain: dict[str, str], tmp_path: Path
) -> None:
    name = user_domain["name"]
    conn = connect(URI)
    try:
        domain = conn.lookupByName(name)
        xml_before = domain.XMLDesc(0)
        vdc_before = hashlib.sha256(Path(user_domain["vdc"]).read_bytes()).hexdigest()
        db = tmp_path / "ex.db"
        run_id = _run(_existing_study(name, repetitions=2), tmp_path / "ex.toml", db)
        assert domain.isActive() and domain.isPersistent()
        assert domain.XMLDesc(0) == xml_before
        assert hashlib.sha256(Path(user_domain["vdc"]).read_bytes()).hexdigest() == vdc_before
    finally:
        conn.close()
    store = Store(db)
    try:
        every = store.measurements(run_id)
    finally:
        store.close()
    rows = [r for r in every if r.metric == "mb_s"]
    assert {r.phase for r in rows} == {"write", "read"} and all(r.value > 0 for r in rows)
    # Attaching to the user's running domain is no boot, and not stored as one.
    assert not [r for r in every if r.phase == "boot"]
    report = hvbench("report", run_id, "--db", str(db))
    assert report.returncode == 0, report.stderr
    assert "disk vdc" in report.stdout and "cache=writeback" in report.stdout


def test_existing_domain_errors_name_what_is_missing(
    user_domain: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    name = user_domain["name"]
    for spec, words in (
        (LibvirtPlatformSpec(domain="hvb-no-such-domain"), "hvb-no-such-domain"),
        (LibvirtPlatformSpec(domain=name, disk="vdz"), "has no disk vdz (its disks: vda, "
                                                      "vdb, vdc, vdd)"),
    ):
        platform = LibvirtPlatform(spec, name="x")
        with pytest.raises(SpecError, match=words.replace("(", r"\(").replace(")", r"\)")):
            platform.start()
        platform.stop()
    monkeypatch.setattr(lv, "GUEST_TOOLS", ("fio", "hvb-no-such-tool"))
    platform = LibvirtPlatform(LibvirtPlatformSpec(domain=name, disk="vdb"), name="x")
    with pytest.raises(SpecError, match="lacks hvb-no-such-tool"):
        platform.start()
    platform.stop()


def test_a_libvirt_start_stores_libvirts_own_times_apart_from_the_guests_boot(
    daemons: list[str], image: GuestImage
) -> None:
    platform = LibvirtPlatform(LibvirtPlatformSpec(vm=VmSpec(
        machine="pc", memory_mib=256, accel="tcg")), name=f"hvbench-{os.getpid()}-phases")
    conn = connect(URI)
    try:
        with platform:
            domain = conn.lookupByName(platform.name)
            # Defined, started, then undefined: transient while it runs, as createXML's.
            assert domain.isActive() and not domain.isPersistent()
            phases = platform.boot_phases()
            boot_s = platform.timings["boot_s"]
        print("libvirt start phases", json.dumps(phases), f"boot_s {boot_s:.2f}")
        assert set(phases) == {"libvirt_define_s", "libvirt_start_s", "guest_boot_s"}
        assert all(v > 0 for v in phases.values())
        # The phases are the start's parts: they add up to no more than boot_s, and
        # hvbench's own staging (hard links, XML) is the small rest.
        assert sum(phases.values()) <= boot_s < sum(phases.values()) + 10
        assert platform.name not in [d.name() for d in conn.listAllDomains(0)]
    finally:
        conn.close()


def test_doctor_times_libvirts_start_and_names_a_slow_capability_probe(
    daemons: list[str]
) -> None:
    done = _hvbench("doctor", "--json", "--refresh", timeout=300)
    assert done.returncode == 0, done.stderr
    start = json.loads(done.stdout)["libvirt"]["uris"][URI]["start"]
    print("doctor libvirt start", json.dumps(start))
    assert start["define_s"] > 0 and start["start_s"] > 0 and not start["cached"]
    conn = connect(URI)
    try:
        mismatch = caps_have_kvm(conn.getCapabilities()) and user_kvm_access() is False
    finally:
        conn.close()
    if start["slow"] and mismatch:
        assert start["cause"].startswith("libvirt re-probes QEMU's capabilities"), start
    elif start["slow"]:
        assert start["cause"].startswith("unexplained: "), start
    else:
        assert start["define_s"] <= SLOW_DEFINE_S and start["cause"] == ""
    again = _hvbench("doctor", "--json")
    cached = json.loads(again.stdout)["libvirt"]["uris"][URI]["start"]
    assert cached["cached"] and cached["define_s"] == start["define_s"]


def test_a_disk_in_use_is_refused_before_any_run_exists(
    user_domain: dict[str, str], tmp_path: Path
) -> None:
    name = user_domain["name"]
    study = tmp_path / "used.toml"
    db = tmp_path / "used.db"
    study.write_text(_existing_study(name, repetitions=1).replace('"vdb"', '"vdd"'))
    done = _hvbench("run", str(study), "--db", str(db))
    assert done.returncode == 2, done.stderr
    error = " ".join(done.stderr.split())
    assert f"platform mine: domain '{name}' disk vdd holds /srv/data (ext4 on vd" in error
    assert "destroy_contents = true" in error
    store = Store(db)
    try:
        assert store.run_ids() == []  # nothing was created, so nothing is left interrupted
    finally:
        store.close()
    for spec, words in (
        # The bundled guest's root disk is read-only in the domain's XML.
        (LibvirtPlatformSpec(domain=name, disk="vda"), "disk vda is read-only"),
        (LibvirtPlatformSpec(domain="hvb-no-such-domain"), f"its domains: .*{name}"),
    ):
        with pytest.raises(SpecError, match=words):
            lv.check_existing_domain(spec, name="mine")
    # The study's explicit word lets it through; nothing in the guest was touched.
    lv.check_existing_domain(LibvirtPlatformSpec(domain=name, disk="vdd",
                                                 destroy_contents=True), name="mine")
    platform = LibvirtPlatform(LibvirtPlatformSpec(domain=name, disk="vdd",
                                                   destroy_contents=True), name="mine")
    with platform:
        assert platform.disk_usage("vdd")[0].startswith("/srv/data (ext4 on vd")
        assert platform.disk_usage("vdb") == []


def test_kill_9_then_cleanup_leaves_no_hvbench_domain_and_spares_the_decoy(
    user_domain: dict[str, str], tmp_path: Path
) -> None:
    study = tmp_path / "long.toml"
    study.write_text("""
[study]
name = "long"
repetitions = 1

[[platform]]
kind = "libvirt"
name = "victim"
machine = "pc"
memory_mib = 256
disk = { size = "64M" }

[[workload]]
name = "dd"
profile = "dd"
target = "device"
file_size = "48M"
direct = true
""")
    env = dict(os.environ, PYTHONPATH=str(SRC))
    proc = subprocess.Popen([sys.executable, "-m", "hvbench.cli.main", "run", str(study),
                             "--db", str(tmp_path / "k.db")], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    conn = connect(URI)
    try:
        deadline = time.monotonic() + 120
        while not _hvbench_domains(conn, proc.pid):
            assert proc.poll() is None and time.monotonic() < deadline, "no domain came up"
            time.sleep(0.2)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert _hvbench_domains(conn, proc.pid)

        done = _hvbench("cleanup")
        assert done.returncode == 0, done.stderr
        assert f"hvbench-{proc.pid}-" in done.stdout, done.stdout
        assert _hvbench_domains(conn, proc.pid) == []
        assert not list(IMAGES_DIR.glob(f"*.hvb{proc.pid}"))
        decoy = conn.lookupByName(user_domain["name"])
        assert decoy.isActive() and decoy.isPersistent()

        again = _hvbench("cleanup")  # every cleanup spares it
        assert again.returncode == 0 and conn.lookupByName(user_domain["name"]).isActive()
        doctor = _hvbench("doctor")
        assert f"{user_domain['name']} (running)" in doctor.stdout.replace("\n", " ") or \
            user_domain["name"] in doctor.stdout
    finally:
        conn.close()


@pytest.fixture(scope="module")
def remote_uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A qemu+ssh URI to this host's libvirtd through a throwaway sshd on a loopback
    port (its own host key and client key; root's known_hosts is never written)."""
    sshd = shutil.which("sshd") or "/usr/sbin/sshd"
    if not Path(sshd).exists():
        pytest.skip("sshd (openssh-server) is not installed")
    keys = tmp_path_factory.mktemp("ssh")
    for name in ("host", "client"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f",
                        str(keys / name)], check=True)
    shutil.copyfile(keys / "client.pub", keys / "authorized_keys")
    wrapper = keys / "ssh"
    wrapper.write_text("#!/bin/sh\nexec ssh -o UserKnownHostsFile=/dev/null "
                       "-o StrictHostKeyChecking=no -o LogLevel=ERROR \"$@\"\n")
    wrapper.chmod(0o755)
    Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege-separation directory
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen(
        [sshd, "-D", "-e", "-p", str(port), "-o", "ListenAddress=127.0.0.1",
         "-h", str(keys / "host"), "-o", f"AuthorizedKeysFile={keys / 'authorized_keys'}",
         "-o", "StrictModes=no", "-o", "PermitRootLogin=prohibit-password",
         "-o", f"PidFile={keys / 'sshd.pid'}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as client:
                if client.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        yield (f"qemu+ssh://root@127.0.0.1:{port}/system?command={wrapper}"
               f"&keyfile={keys / 'client'}&no_tty=1")
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_a_domain_behind_a_remote_uri_is_measured_and_the_missing_metrics_named(
    user_domain: dict[str, str], remote_uri: str, tmp_path: Path
) -> None:
    db = tmp_path / "remote.db"
    study = _existing_study(user_domain["name"], repetitions=1, uri=remote_uri)
    run_id = _run(study, tmp_path / "remote.toml", db)
    store = Store(db)
    try:
        rows = store.measurements(run_id)
    finally:
        store.close()
    assert {r.phase for r in rows if r.metric == "mb_s"} == {"write", "read"}
    # No host-side metrics at all: QEMU's pid is not known through a remote URI, and
    # this machine's disk and CPU figures are not the remote host's.
    assert not [r for r in rows if r.metric.startswith(("qemu", "host."))], rows
    report = hvbench("report", run_id, "--db", str(db))
    text = " ".join(report.stdout.split())
    assert "missing qemu_threads: QEMU runs on the remote host" in text, report.stdout
    assert "disk vdb" in text
