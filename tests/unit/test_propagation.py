"""The propagation workload's deterministic parts: server configs and argv, the client
argv per method, phase splitting, metrics, outcomes, the client runner (with sh), the
arrival poll and the node's base-image cache."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from hvbench.errors import CommandError, HostError, SpecError
from hvbench.kinds.propagation.driver import (
    MARKS,
    PHASE_BOUNDS,
    RAW_KIND,
    ArrivalWatch,
    ClientRun,
    PropagationRecord,
    _curl_json,
    _Fetch,
    check_order,
    client_commands,
    curl_argv,
    directory_bytes,
    first_arrival,
    gridftp_argv,
    progress_series,
    propagation_outcomes,
    rsync_argv,
    run_client,
    scp_argv,
    split_phases,
    transfer_metrics,
    zstd_argv,
)
from hvbench.kinds.propagation.spec import PROPAGATION_PHASES
from hvbench.model.lab import LabHostSpec
from hvbench.netlab.lab import LabHost
from hvbench.platforms.registry import REGISTRY
from hvbench.workloads.repository import (
    METHOD_SERVERS,
    GridftpServer,
    HttpServer,
    ImageRepository,
    NodeImageCache,
    RepoImage,
    RsyncServer,
    SshServer,
    check_safe_path,
    dropbear_argv,
    dropbear_public_key,
    gridftp_hosts,
    gridftp_server_argv,
    image_name,
    known_hosts_line,
    rsyncd_config,
)
from tests.unit.waiting import wait_until

SIZE = 120 << 20


def lab_host(tmp_path: Path, rate: str | None = "1gbit") -> LabHost:
    return LabHost(LabHostSpec(name="headnode", rate=rate), netns="hvb-abc123-headnode",
                   address="10.213.7.10", veth="hvb-vabc1230", scratch=tmp_path / "scratch")


# -- repository: configs and server argv ------------------------------------------------
def test_rsyncd_config_serves_one_read_only_unlisted_module() -> None:
    text = rsyncd_config(module="images", path="/w/repo/images", log_file="/w/rsyncd.log")
    lines = text.splitlines()
    assert lines[:3] == ["use chroot = no", "max connections = 16",
                         "log file = /w/rsyncd.log"]
    assert lines[3] == "[images]"
    assert [line.strip() for line in lines[4:]] == [
        "path = /w/repo/images", "read only = yes", "list = no", "uid = root", "gid = root"]
    with pytest.raises(HostError, match="newline"):
        rsyncd_config(module="images", path="/w/x\nuid = nobody", log_file="/w/l")
    with pytest.raises(HostError):
        rsyncd_config(module="im]ages", path="/w", log_file="/w/l")


def test_known_hosts_line_brackets_ports_other_than_22() -> None:
    key = "ssh-ed25519 AAAAC3Nza root@vm"
    assert known_hosts_line("10.0.0.10", 22, key) == "10.0.0.10 ssh-ed25519 AAAAC3Nza\n"
    assert known_hosts_line("10.0.0.10", 2222, key) == "[10.0.0.10]:2222 ssh-ed25519 AAAAC3Nza\n"
    with pytest.raises(HostError):
        known_hosts_line("10.0.0.10", 22, "garbage")


def test_dropbear_public_key_is_the_ssh_line() -> None:
    out = ("Public key portion is:\nssh-ed25519 AAAAC3NzaC1 root@vm\n"
           "Fingerprint: SHA256:q08c3W1\n")
    assert dropbear_public_key(out) == "ssh-ed25519 AAAAC3NzaC1 root@vm"
    with pytest.raises(HostError, match="no public key"):
        dropbear_public_key("Fingerprint: x\n")


def test_dropbear_runs_in_a_private_mount_namespace_with_its_own_home() -> None:
    argv = dropbear_argv(address="10.0.0.10", port=22, host_key="/r/hk", pid_file="/r/pid",
                         home="/r/home", root_home="/root")
    assert argv[:4] == ["unshare", "--mount", "--propagation", "private"]
    # Fixed shell text; the paths are positional parameters, never part of the script.
    assert argv[4:6] == ["sh", "-c"] and "/r/home" not in argv[6]
    assert argv[7:10] == ["sh", "/r/home", "/root"]
    dropbear = argv[10:]
    assert dropbear[0] == "dropbear" and {"-F", "-E", "-s"} <= set(dropbear)
    assert dropbear[dropbear.index("-p") + 1] == "10.0.0.10:22"
    assert dropbear[dropbear.index("-r") + 1] == "/r/hk"
    assert dropbear[dropbear.index("-P") + 1] == "/r/pid"


def test_safe_paths_only_reach_the_remote_shell() -> None:
    assert check_safe_path("/var/tmp/hvbench/image-repo-ab_c.hvb12/images/system-1.raw")
    for bad in ("/w/a b.raw", "/w/$(reboot)", "/w/a;b", "/w/a'b"):
        with pytest.raises(HostError, match="remote shell"):
            check_safe_path(bad)


def test_every_method_has_a_server() -> None:
    assert set(METHOD_SERVERS) == {"scp", "rsync", "http", "http-zstd", "overlay",
                                   "gridftp"}
    assert image_name(SIZE) == f"system-{SIZE}.raw"


def test_unknown_method_is_refused_before_anything_is_created(tmp_path: Path) -> None:
    repo = ImageRepository(lab_host(tmp_path), tmp_path / "repo")
    with pytest.raises(SpecError, match="'ftp'"):
        repo.start(["http", "ftp"])
    assert repo.root is None and not (tmp_path / "repo").exists()
    with pytest.raises(HostError, match="not started"):
        _ = repo.images_dir
    with pytest.raises(HostError, match="serves no 'scp'"):
        repo.server("scp")
    repo.stop()
    repo.stop()  # safe twice


def test_gridftp_server_is_anonymous_read_only_to_the_images_on_the_lab_address() -> None:
    argv = gridftp_server_argv(address="10.0.0.10", port=2811, images="/r/images",
                               config="/r/g/gridftp.conf", hosts="/r/g/hosts")
    # Its own /etc/hosts, in a private mount namespace, then the server.
    assert argv[:4] == ["unshare", "--mount", "--propagation", "private"]
    assert argv[argv.index("/r/g/hosts") + 1] == "/etc/hosts"
    server = argv[argv.index("globus-gridftp-server"):]
    assert "-S" not in server  # foreground
    assert server[server.index("-c") + 1] == "/r/g/gridftp.conf"
    assert "-aa" in server and server[server.index("-anonymous-user") + 1] == "root"
    assert server[server.index("-rp") + 1] == "/r/images"
    assert server[server.index("-p") + 1] == "2811"
    for flag in ("-control-interface", "-data-interface"):
        assert server[server.index(flag) + 1] == "10.0.0.10"
    assert gridftp_hosts("10.0.0.10").splitlines() == ["127.0.0.1 localhost",
                                                        "10.0.0.10 hvbench-repository"]


# -- client argv --------------------------------------------------------------------------
def test_scp_argv_uses_the_classic_protocol_and_checks_the_host_key() -> None:
    argv = scp_argv(address="10.0.0.10", port=22, key="/r/k", known_hosts="/r/kh",
                    remote_path="/r/images/system-1.raw", dest="/n/in/system-1.raw")
    assert argv[:2] == ["scp", "-O"]
    assert argv[-2:] == ["root@10.0.0.10:/r/images/system-1.raw", "/n/in/system-1.raw"]
    options = [argv[i + 1] for i, a in enumerate(argv) if a == "-o"]
    assert "StrictHostKeyChecking=yes" in options and "UserKnownHostsFile=/r/kh" in options
    assert "BatchMode=yes" in options and "IdentitiesOnly=yes" in options
    assert argv[argv.index("-F") + 1] == "/dev/null"
    assert argv[argv.index("-i") + 1] == "/r/k" and argv[argv.index("-P") + 1] == "22"
    with pytest.raises(HostError):
        scp_argv(address="a", port=22, key="k", known_hosts="kh", remote_path="/x y",
                 dest="/d")


def test_rsync_curl_and_zstd_argv() -> None:
    assert rsync_argv(address="10.0.0.10", port=873, module="images", name="s.raw",
                      dest="/n/s.raw", timeout_s=0) == [
        "rsync", "--no-motd", "--stats", "--timeout=1",
        "rsync://10.0.0.10:873/images/s.raw", "/n/s.raw"]
    argv = curl_argv("http://10.0.0.10:80/s.raw", "/n/s.raw")
    assert argv[0] == "curl" and argv[-1] == "http://10.0.0.10:80/s.raw"
    assert argv[argv.index("--output") + 1] == "/n/s.raw" and "--fail" in argv
    assert argv[argv.index("--noproxy") + 1] == "*"
    assert argv[argv.index("--write-out") + 1] == "%{stderr}%{json}"
    assert "--output" not in curl_argv("http://x/s.raw.zst", None)
    assert gridftp_argv("ftp://10.0.0.10:2811/r/s.raw", "/n/s.raw") == [
        "globus-url-copy", "-vb", "ftp://10.0.0.10:2811/r/s.raw", "file:///n/s.raw"]
    with pytest.raises(ValueError, match="absolute"):
        gridftp_argv("ftp://10.0.0.10:2811/r/s.raw", "n/s.raw")
    assert zstd_argv("/n/s.raw") == ["zstd", "-d", "-q", "--no-progress", "--no-sparse",
                                      "-f", "-o", "/n/s.raw", "-"]


def _repo_with_servers(tmp_path: Path) -> tuple[ImageRepository, RepoImage]:
    host = lab_host(tmp_path)
    repo = ImageRepository(host, tmp_path)
    repo.root = tmp_path / "image-repo-x"
    images = repo.root / "images"
    repo.servers = {"ssh": SshServer(host, repo.root / "ssh"),
                    "rsync": RsyncServer(host, repo.root / "rsync", images),
                    "http": HttpServer(host, repo.root / "http", images),
                    "gridftp": GridftpServer(host, repo.root / "gridftp", images)}
    image = RepoImage(image_name(SIZE), images / image_name(SIZE), SIZE, "ab" * 32)
    return repo, image


def test_client_commands_per_method(tmp_path: Path) -> None:
    repo, image = _repo_with_servers(tmp_path)
    dest = tmp_path / "in" / image.name
    (scp,) = client_commands("scp", repo, image, dest, 60)
    assert scp[-2:] == [f"root@10.213.7.10:{image.path}", str(dest)]
    assert f"UserKnownHostsFile={repo.root}/ssh/known_hosts" in scp
    (rsync,) = client_commands("rsync", repo, image, dest, 60.7)
    assert rsync[-2:] == [f"rsync://10.213.7.10:873/images/{image.name}", str(dest)]
    assert "--timeout=60" in rsync
    for method in ("http", "overlay"):
        (curl,) = client_commands(method, repo, image, dest, 60)
        assert curl[-1] == f"http://10.213.7.10:80/{image.name}"
    (gridftp,) = client_commands("gridftp", repo, image, dest, 60)
    assert gridftp[-2:] == [f"ftp://10.213.7.10:2811{image.path}", f"file://{dest}"]


# -- phases, metrics, outcomes ------------------------------------------------------------
def marks(**override: float) -> dict[str, float]:
    base = dict(zip(MARKS, (100.0, 100.05, 101.25, 105.0, 105.0, 105.1), strict=True))
    return base | override


def test_phases_follow_the_spec_and_split_the_marks() -> None:
    assert tuple(PHASE_BOUNDS) == PROPAGATION_PHASES
    phases = split_phases(marks())
    assert phases == pytest.approx({"initial": 0.05, "transfer": 1.2, "terminal": 3.75,
                                    "shutdown": 0.1})
    check_order(marks())
    with pytest.raises(ValueError, match=r"first_byte .* before request"):
        check_order(marks(first_byte=99.0))
    with pytest.raises(ValueError, match="missing: agent_ready"):
        check_order({k: v for k, v in marks().items() if k != "agent_ready"})


def test_first_arrival_and_progress_series() -> None:
    samples = [(10.0, 0), (10.005, 0), (10.010, 4096), (10.2, 20_000_000),
               (10.25, 25_000_000), (10.4, 40_000_000)]
    assert first_arrival(samples) == 10.010
    assert first_arrival([(1.0, 0)]) is None
    rows = progress_series(samples, 10.010)
    assert [round(t, 3) for t, _ in rows] == [0.19, 0.39]
    assert rows[0][1]["received_mb"] == 20.0
    assert rows[0][1]["mb_s"] == pytest.approx(20.0 / 0.19)
    assert rows[1][1]["mb_s"] == pytest.approx(20.0 / 0.2)


def test_transfer_metrics() -> None:
    m = transfer_metrics(size=125_000_000, seconds=1.25, rx_bytes=126_000_000,
                         tx_bytes=100_000, rate_bits=10**9, cache_hit=None)
    assert m["mb_s"] == (100.0, "MB/s") and m["bytes_on_wire"] == (126e6, "bytes")
    assert m["link_share_pct"][0] == pytest.approx(80.0)
    assert m["link_rate_bits"] == (1e9, "bit/s") and "cache_hit" not in m
    hit = transfer_metrics(size=0, seconds=0.0, rx_bytes=0, tx_bytes=0, rate_bits=None,
                           cache_hit=True)
    assert hit["mb_s"] == (0.0, "MB/s") and hit["cache_hit"] == (1.0, "flag")
    assert "link_rate_bits" not in hit and "link_share_pct" not in hit


def test_outcomes_one_per_phase_with_the_raw_document() -> None:
    image = RepoImage(image_name(SIZE), Path("/r/x.raw"), SIZE, "ab" * 32)
    m = marks()
    samples = [(100.05, 1), (100.3, 30_000_000), (101.25, SIZE)]
    fetch = _Fetch(dict(m), None, samples, 250, SIZE + 1000, 5000, None, False)
    record = PropagationRecord(image, fetch, m, {"verify_s": 0.1, "setup_s": 0.01,
                                                 "boot_s": 3.6}, {})
    out = propagation_outcomes(record, 10**9, "{}")
    assert [o.phase for o in out] == list(PROPAGATION_PHASES)
    assert all(o.raw_kind == RAW_KIND and o.raw == "{}" for o in out)
    transfer = out[1].metrics
    assert transfer["size_bytes"] == (float(SIZE), "bytes") and transfer["cache_hit"][0] == 0
    assert transfer["duration_s"][0] == pytest.approx(1.2)
    assert out[2].metrics["boot_s"] == (3.6, "s")
    assert out[1].series and not out[0].series and not out[2].series
    hit = _Fetch(dict(m), None, [], 0, 0, 0, None, True)
    out = propagation_outcomes(PropagationRecord(image, hit, m, {}, {}), None, "{}")
    assert out[1].metrics["size_bytes"] == (0.0, "bytes")
    assert out[1].metrics["cache_hit"] == (1.0, "flag")


def test_curl_json_is_the_last_json_line() -> None:
    assert _curl_json('curl: warning\n{"time_starttransfer": 0.0007}\n') == {
        "time_starttransfer": 0.0007}
    assert _curl_json("curl: (7) Failed to connect\n") is None


# -- the client runner and the arrival poll ----------------------------------------------
def test_run_client_pipeline(tmp_path: Path) -> None:
    dest = tmp_path / "out"
    run = run_client([["sh", "-c", "printf hello; echo oops >&2"],
                      ["sh", "-c", 'cat >"$1"; echo done', "sh", str(dest)]],
                     cwd=tmp_path, logs=tmp_path, timeout=10)
    assert run.ok and run.returncodes == [0, 0] and dest.read_text() == "hello"
    assert run.outputs == ["oops\n", "done\n"] and run.started <= run.ended
    assert run.argv[3] == "|" and run.describe()["exit"] == [0, 0]


def test_run_client_reports_failures_and_kills_on_timeout(tmp_path: Path) -> None:
    run = run_client([["sh", "-c", "echo nope >&2; exit 7"]], cwd=tmp_path, logs=tmp_path,
                     timeout=10)
    assert not run.ok and run.returncodes == [7] and run.output() == "nope\n"
    started = time.monotonic()
    with pytest.raises(CommandError, match="timed out") as caught:
        run_client([["sh", "-c", "sleep 30 & wait"], ["sleep", "30"]], cwd=tmp_path,
                   logs=tmp_path, timeout=0.3)
    assert time.monotonic() - started < 5
    assert caught.value.returncode is None and "|" in caught.value.argv
    with pytest.raises(ValueError, match="pipeline of two"):
        run_client([], cwd=tmp_path, logs=tmp_path, timeout=1)


def test_run_client_processes_are_registered_and_stopped_by_stop_all(tmp_path: Path) -> None:
    # What Ctrl-C does: the CLI's REGISTRY.stop_all() reaches a running client.
    runs: list[ClientRun] = []
    worker = threading.Thread(target=lambda: runs.append(run_client(
        [["sh", "-c", "echo started >&2; exec sleep 30"], ["cat"]], cwd=tmp_path,
        logs=tmp_path, timeout=60)))
    worker.start()
    deadline = time.monotonic() + 10
    names: list[str] = []
    while time.monotonic() < deadline and len(names) < 2:
        names = [p.name for p in REGISTRY.live() if p.name.startswith("propagation client")]
        time.sleep(0.01)
    assert names == ["propagation client sh", "propagation client cat"]
    started = time.monotonic()
    assert REGISTRY.stop_all()[-2:] == ["propagation client cat", "propagation client sh"]
    worker.join(10)
    assert not worker.is_alive() and time.monotonic() - started < 5
    assert runs[0].returncodes[0] < 0 and not runs[0].ok
    assert not [p for p in REGISTRY.live() if p.name.startswith("propagation client")]

def test_arrival_watch_sees_the_first_bytes(tmp_path: Path) -> None:
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    (incoming / "sub").mkdir()  # directories do not count
    assert directory_bytes(incoming) == 0 and directory_bytes(tmp_path / "gone") == 0
    with ArrivalWatch(incoming, interval=0.002) as watch:
        assert wait_until(lambda: watch.polls > 5)  # it keeps polling an empty directory
        before = time.monotonic()
        (incoming / ".img.XyZ").write_bytes(b"x" * 1000)
        # Seen by the polling thread itself (stop() takes one more sample).
        assert wait_until(lambda: watch.first_byte is not None)
    assert watch.first_byte is not None and watch.first_byte >= before
    assert watch.samples[-1][1] == 1000
    watch.stop()  # safe twice


# -- the node cache ---------------------------------------------------------------------
def test_node_cache_admits_verified_bases_and_clears_only_its_own(tmp_path: Path) -> None:
    image = RepoImage("system-8.raw", Path("/r/system-8.raw"), 8, "cd" * 32)
    cache = NodeImageCache(tmp_path / "cache")
    assert cache.lookup(image) is None
    fetched = tmp_path / "fetched.raw"
    fetched.write_bytes(b"12345678")
    base = cache.admit(image, fetched)
    assert base == tmp_path / "cache" / f"base-8-{'cd' * 8}.raw" and not fetched.exists()
    assert cache.lookup(image) == base
    base.write_bytes(b"123")  # truncated: no longer a hit
    assert cache.lookup(image) is None
    cache.clear()
    assert not (tmp_path / "cache").exists()
    # A directory the caller owns stays; only the admitted files go.
    owned = tmp_path / "owned"
    owned.mkdir()
    (owned / "other").write_text("keep")
    cache = NodeImageCache(owned)
    fetched.write_bytes(b"12345678")
    cache.admit(image, fetched)
    assert json.dumps(cache.describe())
    cache.clear()
    assert sorted(p.name for p in owned.iterdir()) == ["other"]
