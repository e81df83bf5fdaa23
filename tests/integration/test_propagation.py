"""Image propagation with the real programs: a net lab whose ``headnode`` (on a 1 Gbit/s
link) runs the repository's dropbear, rsync daemon, lighttpd and globus-gridftp-server;
the root namespace fetches a 120 MiB image with scp, rsync, curl, curl | zstd,
globus-url-copy, or boots an overlay over its cached base, and boots it under TCG.
Then examples/propagation.toml, reduced with ``--set`` (every method, a 120 MiB image,
twice), through the runner into a store."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest

from hvbench.errors import CommandError
from hvbench.image.builder import GuestImage
from hvbench.kinds.propagation.analysis import phase_shares, propagation_workloads
from hvbench.kinds.propagation.driver import MARKS, RAW_KIND, run_propagation
from hvbench.kinds.propagation.spec import PROPAGATION_PHASES, PropagationWorkloadSpec
from hvbench.model.lab import LabHostSpec, LabSpec
from hvbench.model.spec import VmSpec
from hvbench.model.study import Study, parse_study
from hvbench.netlab.lab import NetLab
from hvbench.platforms.registry import REGISTRY
from hvbench.run.runner import run_study
from hvbench.store.database import Store
from hvbench.workloads.outcome import PhaseOutcome
from hvbench.workloads.repository import ImageRepository
from tests.integration.conftest import hvbench_links, hvbench_netns, new_network_objects

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="namespaces and guests need root"),
]

#: The smallest round size above the guest's root filesystem (~117 MiB).
SIZE = 120 << 20
VM = VmSpec(accel="tcg")
LAB = LabSpec(hosts=(LabHostSpec(name="headnode", rate="1gbit"),))
SERVERS = ("dropbear", "rsync", "lighttpd", "scp", "curl", "zstd", "globus-",
           "qemu-system")


class CountingWindow:
    """A window that records when it was entered and left."""

    def __init__(self) -> None:
        self.entered = 0
        self.exited = 0

    def __enter__(self) -> CountingWindow:
        self.entered += 1
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.exited += 1


def my_processes() -> list[str]:
    """Command lines of this session's server, client and QEMU processes (children of
    this pytest process, at any depth)."""
    out = subprocess.run(["ps", "-eo", "pid=,ppid=,args="], capture_output=True,
                         text=True, check=True).stdout
    parents: dict[int, int] = {}
    args: dict[int, str] = {}
    for line in out.splitlines():
        pid_text, ppid_text, cmd = line.strip().split(None, 2)
        parents[int(pid_text)], args[int(pid_text)] = int(ppid_text), cmd
    me, found = os.getpid(), []
    for pid, cmd in args.items():
        chain: set[int] = set()
        ancestor = pid
        while ancestor in parents and ancestor not in chain and ancestor != me:
            chain.add(ancestor)
            ancestor = parents[ancestor]
        if ancestor == me and pid != me and any(s in cmd for s in SERVERS):
            found.append(cmd)
    return found


def raw(outcomes: list[PhaseOutcome]) -> dict[str, Any]:
    assert {o.raw_kind for o in outcomes} == {RAW_KIND}
    document: dict[str, Any] = json.loads(outcomes[0].raw)
    return document


def metrics(outcomes: list[PhaseOutcome]) -> dict[str, dict[str, float]]:
    return {o.phase: {k: v for k, (v, _) in o.metrics.items()} for o in outcomes}


def check_common(outcomes: list[PhaseOutcome], repo: ImageRepository,
                 method: str) -> tuple[dict[str, dict[str, float]], dict[str, Any]]:
    """What every propagation must show: the four phases, increasing marks, the
    repository's image, a guest whose agent answered from that image."""
    assert [o.phase for o in outcomes] == list(PROPAGATION_PHASES)
    m, doc = metrics(outcomes), raw(outcomes)
    assert doc["method"] == method
    times = [doc["marks"][mark] for mark in MARKS]
    assert times == sorted(times) and times[0] == 0
    for phase in ("terminal", "shutdown"):
        assert m[phase]["duration_s"] > 0, phase
    assert doc["image"]["sha256"] == repo.images[SIZE].sha256
    assert m["transfer"]["link_rate_bits"] == 1e9
    guest = doc["guest"]
    assert guest["timings"]["agent_s"] > 0 and guest["timings"]["exited_s"] > 0
    assert any("id=sysroot" in a for a in guest["qemu_argv"])
    print(f"{method}: " + ", ".join(f"{p} {m[p]['duration_s']:.3f} s" for p in m)
          + f", {m['transfer']['mb_s']:.1f} MB/s, wire {m['transfer']['bytes_on_wire']:.0f} B")
    return m, doc


@pytest.mark.parametrize("method", ["scp", "rsync", "http", "http-zstd", "gridftp"])
def test_propagation_fetches_verifies_and_boots(method: str, image: GuestImage,
                                                no_leaks: Path) -> None:
    spec = PropagationWorkloadSpec.model_validate({"method": method, "image_size": SIZE})
    window = CountingWindow()
    with NetLab(LAB) as lab, ImageRepository(lab.host("headnode"), no_leaks) as repo:
        repo.start([method])
        outcomes = run_propagation(spec, VM, repo=repo, node_dir=no_leaks, image=image,
                                   window=window)
        m, doc = check_common(outcomes, repo, method)
        # Only the repository's own directory (and the lab's record) remain.
        assert sorted(p.name.split("-")[0] for p in no_leaks.iterdir()) == ["image", "lab"]
        assert {s.is_running() for s in repo.servers.values()} == {True}
    assert (window.entered, window.exited) == (1, 1)
    assert m["initial"]["duration_s"] > 0 and m["transfer"]["duration_s"] > 0
    assert m["transfer"]["size_bytes"] == SIZE
    assert doc["terminal"]["verified"] and doc["terminal"]["sha256"] == doc["image"]["sha256"]
    assert doc["client"]["exit"] == [0] * len(doc["client"]["argv"])
    wire = m["transfer"]["bytes_on_wire"]
    if method == "http-zstd":
        assert doc["compressed"]["compress_s"] > 0
        assert wire >= doc["compressed"]["size"]
        assert [a[0] for a in doc["client"]["argv"]] == ["curl", "zstd"]
    else:
        assert wire >= SIZE
    if method == "http":
        assert doc["curl"]["size_download"] == SIZE
    if method == "gridftp":
        assert [a[0] for a in doc["client"]["argv"]] == ["globus-url-copy"]
        assert doc["repository"]["servers"]["gridftp"]["port"] == 2811
    assert outcomes[1].series, "the transfer's progress series"
    assert my_processes() == []


def test_overlay_fetches_the_base_once_then_boots_overlays(image: GuestImage,
                                                          no_leaks: Path) -> None:
    spec = PropagationWorkloadSpec(method="overlay", image_size=SIZE, verify=False)
    cache = no_leaks / "node-cache"
    cache.mkdir()
    with NetLab(LAB) as lab:
        with ImageRepository(lab.host("headnode"), no_leaks, node_cache=cache) as repo:
            repo.start(["overlay"])
            first = run_propagation(spec, VM, repo=repo, node_dir=no_leaks, image=image)
            m1, doc1 = check_common(first, repo, "overlay")
            assert len(list(cache.iterdir())) == 1
            second = run_propagation(spec, VM, repo=repo, node_dir=no_leaks, image=image)
            m2, doc2 = check_common(second, repo, "overlay")
        # The repository's stop removed the cached base; the directory is the caller's.
        assert list(cache.iterdir()) == []
        cache.rmdir()
    # The first fetch moved the image and verified it although verify is off.
    assert m1["transfer"]["cache_hit"] == 0 and m1["transfer"]["size_bytes"] == SIZE
    assert m1["transfer"]["bytes_on_wire"] >= SIZE and doc1["terminal"]["verified"]
    assert doc1["terminal"]["sha256"] == doc1["image"]["sha256"]
    # The second moved nothing and booted a fresh overlay over the cached base.
    assert m2["transfer"]["cache_hit"] == 1 and m2["transfer"]["size_bytes"] == 0
    assert m2["transfer"]["bytes_on_wire"] < 64 << 10
    assert not doc2["terminal"]["verified"] and doc2["client"] is None
    assert doc2["terminal"]["base"] == doc1["terminal"]["base"]
    assert any("format=qcow2" in a for a in doc2["guest"]["qemu_argv"])
    assert m2["terminal"]["setup_s"] > 0
    assert my_processes() == []


def test_a_failed_fetch_leaves_nothing_behind(image: GuestImage, no_leaks: Path) -> None:
    spec = PropagationWorkloadSpec(method="http", image_size=SIZE)
    with NetLab(LAB) as lab, ImageRepository(lab.host("headnode"), no_leaks) as repo:
        repo.start(["http"])
        repo.servers["http"].stop()  # the client finds nobody listening
        with pytest.raises(CommandError) as caught:
            run_propagation(spec, VM, repo=repo, node_dir=no_leaks, image=image)
        assert caught.value.argv[0] == "curl" and caught.value.returncode == 7
        assert "Failed to connect" in caught.value.output
        assert not [p for p in no_leaks.iterdir() if p.name.startswith("propagation-")]
    assert my_processes() == []


#: examples/propagation.toml reduced with `--set`: every method, one small image, twice.
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "propagation.toml"
REDUCED = ["study.repetitions=2", "study.seed=5", "platform.vm.accel=tcg",
           f"workload.0.image_size={SIZE}", "workload.0.timeout_s=300"]


def reduced_example(*more: str) -> Study:
    return parse_study(EXAMPLE.read_text(), str(EXAMPLE), 24 << 30, [*REDUCED, *more])


METHODS = ("scp", "http", "rsync", "http-zstd", "overlay")


def test_a_propagation_study_through_the_runner(image: GuestImage, no_leaks: Path,
                                                tmp_path: Path) -> None:
    """Every method twice: four phases per repetition, a raw document each, bytes on
    the headnode's link close to the image for the uncompressed methods, the headnode's
    NIC samples with the transfer, a cache hit on the second overlay; nothing left."""
    links_before, netns_before = set(hvbench_links()), set(hvbench_netns())
    study = reduced_example()
    assert {c.workload.name for c in study.cells} == {f"propagation.{m}" for m in METHODS}
    assert study.lab is not None and [h.name for h in study.lab.hosts] == ["headnode"]
    with Store(tmp_path / "r.db") as store:
        outcome = run_study(study, store)
        failures = store.failures(outcome.run_id)
        assert outcome.failures == 0, "\n\n".join(f.error or "" for f in failures)
        rows = store.measurements(outcome.run_id)
        raws = store.raw_outputs(outcome.run_id)
        samples = store.samples(outcome.run_id, phase="transfer")
    value = {(r.workload, r.repetition, r.phase, r.metric): r.value for r in rows}
    for method in METHODS:
        workload = f"propagation.{method}"
        for rep in (0, 1):
            phases = {r.phase for r in rows if r.workload == workload and r.repetition == rep}
            assert phases == set(PROPAGATION_PHASES), (workload, rep, phases)
            hit = value.get((workload, rep, "transfer", "cache_hit")) == 1
            for phase in PROPAGATION_PHASES:
                duration = value[(workload, rep, phase, "duration_s")]
                assert duration > 0 or (hit and phase == "transfer"), (workload, phase)
            transfer = {m: v for (w, r, p, m), v in value.items()
                        if (w, r, p) == (workload, rep, "transfer")}
            assert transfer["link_rate_bits"] == 1e9
            # The headnode's link was sampled during the transfer window.
            assert "net.headnode.rx_mbit_s" in transfer or any(
                m.startswith("net.headnode.") for m in transfer), sorted(transfer)
            wire = transfer["bytes_on_wire"]
            if method in ("scp", "http", "rsync") or (method == "overlay" and not hit):
                assert SIZE <= wire <= 1.1 * SIZE, (workload, rep, wire)
                assert transfer["size_bytes"] == SIZE and transfer["mb_s"] > 0
            print(f"{workload} rep {rep}: " + ", ".join(
                f"{p} {value[(workload, rep, p, 'duration_s')]:.3f} s"
                for p in PROPAGATION_PHASES) + f", wire {wire:.0f} B"
                + (" (cache hit)" if hit else ""))
    # The overlay's first use fetched the base, the second found it in the node cache.
    hits = [value[("propagation.overlay", rep, "transfer", "cache_hit")] for rep in (0, 1)]
    assert hits == [0, 1]
    assert value[("propagation.overlay", 1, "transfer", "size_bytes")] == 0
    # Seed 000 Fig. 4: each fetch's phases share its propagation time (100 % together).
    shares = phase_shares(rows, propagation_workloads(rows))
    assert {s.method for s in shares} == {*METHODS, "overlay (cache hit)"}
    for share in shares:
        assert sum(v.mean for v in share.shares.values()) == pytest.approx(100.0)
        assert share.cache_hit or share.shares["transfer"].mean > 0, share
    # One raw document per repetition, next to the rows.
    assert sorted((r.cell, r.repetition) for r in raws) == sorted(
        (f"vm/propagation.{m}", rep) for m in METHODS for rep in (0, 1))
    assert {(r.phase, r.kind) for r in raws} == {("propagation", RAW_KIND)}
    for raw_row in raws:
        doc = json.loads(raw_row.content)
        assert doc["repository"]["host"] == "headnode"
        assert doc["guest"]["name"].startswith(f"hvbench-{os.getpid()}-p")
    # The transfer's progress series and the NIC sampler's series are stored.
    assert {"propagation", "net"} <= {s.monitor for s in samples}
    # Nothing is left: no guest, process, namespace or directory (the no_leaks fixture
    # also checks the work dir, TMPDIR and hvb- links).
    assert REGISTRY.live() == []
    assert my_processes() == []
    # hvb- objects other hvbench runs on this machine created meanwhile are not ours.
    assert new_network_objects(links_before, netns_before) == []
    assert list(no_leaks.iterdir()) == []


def test_ctrl_c_during_a_propagation_study_leaves_nothing(
        image: GuestImage, no_leaks: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C once the repository's servers run and the image is written: the run is
    marked interrupted; servers, repository, node directory and lab are gone."""
    seen: dict[str, Any] = {}

    def interrupted(spec: PropagationWorkloadSpec, vm: VmSpec, *, repo: ImageRepository,
                    node_dir: Path, **kwargs: Any) -> list[PhaseOutcome]:
        repo.ensure_image(spec.image_size, image)
        seen["servers"] = sorted(k for k, s in repo.servers.items() if s.is_running())
        seen["dirs"] = [repo.root, node_dir]
        raise KeyboardInterrupt

    monkeypatch.setattr("hvbench.kinds.propagation.cell.run_propagation", interrupted)
    study = reduced_example("study.repetitions=1")
    with Store(tmp_path / "r.db") as store:
        with pytest.raises(KeyboardInterrupt):
            run_study(study, store)
        assert [r.status for r in store.list_runs()] == ["interrupted"]
    assert seen["servers"] == ["http", "rsync", "ssh"]
    assert all(d is not None and not d.exists() for d in seen["dirs"])
    assert my_processes() == []
    assert list(no_leaks.iterdir()) == []
