"""fio job files as users have them: parsing, pointing every job at the target, the
workload's overrides, refusals natively, and the space check (pure, on the job files in
tests/fixtures/fio-jobs, written in the spirit of fio's own examples)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hvbench.errors import SpecError
from hvbench.kinds.disk.spec import DiskWorkloadSpec
from hvbench.workloads.jobfile import (
    JobTarget,
    Overrides,
    Rewrite,
    Section,
    check_fits,
    effective_jobs,
    parse_fio_size,
    parse_job_text,
    rewrite_jobs,
    space_needed,
    target_env,
)

JOBS = Path(__file__).parents[1] / "fixtures" / "fio-jobs"
FILE = JobTarget("/var/tmp/hvb/s1", "/var/tmp/hvb/s1/hvbench.dat", device=False)
DEVICE = JobTarget("/mnt/hvbench", "/dev/vdb", device=True)
MIB = 1 << 20


def sections(name: str) -> list[Section]:
    return parse_job_text((JOBS / name).read_text(), name,
                          lambda inc: (JOBS / inc).read_text())


def rewrite(name: str, target: JobTarget = FILE, native: bool = True,
            **over: Any) -> Rewrite:
    return rewrite_jobs(sections(name), target, Overrides(**over),
                        env=target_env(target), native=native, source=name)


def disk_spec(**fields: Any) -> DiskWorkloadSpec:
    """A workload as a study gives it (strings such as "16M" validated)."""
    return DiskWorkloadSpec.model_validate({"profile": "fio-job", **fields})


def job_lines(text: str, job: str) -> list[str]:
    block = text.split(f"[{job}]\n", 1)[1]
    return block.split("\n\n", 1)[0].splitlines()


def test_comments_flags_aliases_and_inheritance() -> None:
    jobs = effective_jobs(sections("threads-like.fio"))
    assert [s.name for s, _ in jobs] == ["wr", "rr"]
    rr = jobs[1][1]
    assert rr["numjobs"] == "4" and rr["stonewall"] is None
    assert rr["runtime"] == "120"          # timeout= is runtime's alias
    assert rr["filename"] == "thread.dat"


def test_flash_check_points_at_the_target_directory() -> None:
    result = rewrite("flash-check.fio", size=64 * MIB, runtime_s=2)
    assert job_lines(result.text, "seqread") == [
        "rw=read", "stonewall", "filename=/var/tmp/hvb/s1/flash.check.dat", "size=64M",
        "runtime=2s"]
    assert "directory=/mount-point" not in result.text and "10g" not in result.text
    assert ("job seqread: filename=flash.check.dat in directory=/mount-point -> "
            "filename=/var/tmp/hvb/s1/flash.check.dat") in result.changes
    assert "job seqread: size=10g -> 64M (the workload's file_size)" in result.changes
    assert "job seqread: runtime=60 -> 2s (the workload's runtime)" in result.changes
    # Four jobs share one file: it is counted once.
    assert space_needed(result.jobs, FILE) == 64 * MIB


def test_threads_get_the_directory_and_clones_count() -> None:
    result = rewrite("threads-like.fio", size=8 * MIB)
    assert "directory=/var/tmp/hvb/s1" in job_lines(result.text, "wr")
    assert "filename=/var/tmp/hvb/s1/thread.dat" in job_lines(result.text, "rr")
    assert "runtime=120" in job_lines(result.text, "rr")     # kept: no override
    # wr: 4 clones x 8M of their own; rr: one shared file.
    assert space_needed(result.jobs, FILE) == 5 * 8 * MIB


def test_a_raw_disk_job_goes_to_the_device() -> None:
    result = rewrite("randread-dev.fio", DEVICE, native=False, size=32 * MIB, runtime_s=3)
    assert job_lines(result.text, "dev")[-3:] == ["filename=/dev/vdb", "size=32M",
                                                 "runtime=3s"]
    assert "time_based" in result.text.split("[dev]")[0]
    assert "job dev: filename=/dev/sda -> filename=/dev/vdb (the target device)" in \
        result.changes


def test_a_device_job_on_a_file_target_becomes_a_file_with_a_size() -> None:
    result = rewrite("latency-target.fio", default_size=100 * MIB)
    assert job_lines(result.text, "probe")[-2:] == ["filename=/var/tmp/hvb/s1/sda",
                                                   "size=100M"]
    assert any("size unset -> 100M" in c for c in result.changes)


def test_target_variables_keep_working_and_includes_are_inlined() -> None:
    result = rewrite("with-include.fio")
    assert "ioengine=psync" in result.text.split("[mixed]")[0]
    assert "filename=/var/tmp/hvb/s1/mixed.dat" in job_lines(result.text, "mixed")
    assert "size=16m" in job_lines(result.text, "mixed")
    assert result.changes == ()


def test_unchanged_target_file_reports_nothing() -> None:
    text = "[j]\nrw=write\nsize=1m\nfilename=${HVBENCH_TARGET}\n"
    result = rewrite_jobs(parse_job_text(text, "j", lambda n: ""), DEVICE, Overrides(),
                          env=target_env(DEVICE), native=False)
    assert result.changes == ()
    assert "filename=/dev/vdb" in result.text


@pytest.mark.parametrize("line", ["write_iolog=/etc/x.log", "exec_prerun=rm -rf /tmp/x",
                                  "ioscheduler=none", "opendir=/home"])
def test_host_paths_and_actions_are_refused_natively(line: str) -> None:
    text = f"[j]\nrw=read\nsize=1m\n{line}\n"
    secs = parse_job_text(text, "j.fio", lambda n: "")
    with pytest.raises(SpecError, match=r"^j.fio: job j: ") as info:
        rewrite_jobs(secs, FILE, Overrides(), env={}, native=True, source="j.fio")
    assert "\n" not in str(info.value)
    rewrite_jobs(secs, FILE, Overrides(), env={}, native=False)   # a guest may


def test_host_paths_named_by_the_study_are_kept_natively() -> None:
    text = "[j]\nrw=read\nsize=1m\nfilename=/dev/nvme1n1\nwrite_iolog=/srv/io.log\n"
    secs = parse_job_text(text, "j.fio", lambda n: "")
    result = rewrite_jobs(secs, FILE, Overrides(), env={}, native=True,
                          host_paths=["/dev/nvme1n1", "/srv/io.log"])
    assert "filename=/dev/nvme1n1" in result.text and result.changes == ()


def test_does_not_fit_names_both_numbers() -> None:
    result = rewrite("threads-like.fio")    # 4 x 10g + 10g
    with pytest.raises(SpecError, match=r"need 51200 MiB .* has 1024 MiB"):
        check_fits(result.jobs, FILE, 1 << 30, "s.toml", "the guest's disk")


def test_bad_header_and_include_loop() -> None:
    with pytest.raises(SpecError, match="line 2: expected a section header"):
        parse_job_text("[global]\n[oops\n", "x.fio", lambda n: "")
    with pytest.raises(SpecError, match="include nested more than"):
        parse_job_text("include self.fio\n", "x.fio", lambda n: "include self.fio\n")
    with pytest.raises(SpecError, match="no job section"):
        rewrite_jobs(parse_job_text("[global]\nbs=4k\n", "x", lambda n: ""), FILE,
                     Overrides(), env={}, native=True)


def test_fio_sizes() -> None:
    assert parse_fio_size("10g") == 10 << 30
    assert parse_fio_size("512m") == 512 << 20
    assert parse_fio_size("4KiB") == 4096
    assert parse_fio_size("50%") is None


def test_overrides_only_when_given() -> None:
    given = disk_spec(job_file="x.fio", file_size="64M", runtime="20s", ramp_time="500ms")
    assert given.file_size_given() and given.runtime == 20.0 and given.ramp_time == 0.5
    default = disk_spec(job_file="x.fio")
    assert not default.file_size_given() and default.runtime is None
    with pytest.raises(ValueError, match="only valid with profile fio-job"):
        disk_spec(profile="dd", runtime="20s")
    with pytest.raises(ValueError, match="expected a duration"):
        disk_spec(job_file="x.fio", runtime="soon")


# -- the load-time check (real fio --parse-only on this host) ------------------------------
def study_with(tmp_path: Path, job: str, text: str) -> str:
    (tmp_path / job).write_text(text)
    study = tmp_path / "s.toml"
    study.write_text("")
    return str(study)


def test_check_job_file_rewrites_for_a_guest(tmp_path: Path) -> None:
    from hvbench.kinds.disk.driver import check_job_file, job_file_text
    from hvbench.kinds.qemu.spec import QemuPlatformSpec
    from hvbench.model.spec import DiskSpec, VmSpec

    study = study_with(tmp_path, "f.fio", (JOBS / "flash-check.fio").read_text())
    spec = disk_spec(job_file="f.fio", file_size="16M", runtime="1s")
    guest = QemuPlatformSpec(vm=VmSpec(disks=(DiskSpec(size=256 * MIB),)))
    changes = check_job_file(spec, study, guest)
    assert "-> filename=/mnt/hvbench/flash.check.dat" in changes[0]
    assert b"[seqread]" in job_file_text(spec, study)
    big = disk_spec(job_file="f.fio")
    with pytest.raises(SpecError, match=r"need 10240 MiB .* the guest's disk has 230 MiB"):
        check_job_file(big, study, guest)


def test_check_job_file_reports_fio_refusal(tmp_path: Path) -> None:
    from hvbench.kinds.disk.driver import check_job_file

    study = study_with(tmp_path, "bad.fio", "[j]\nrw=sideways\nsize=1m\n")
    spec = disk_spec(job_file="bad.fio")
    with pytest.raises(SpecError, match="fio refuses the job file: fio: failed parsing "
                                        "rw=sideways") as info:
        check_job_file(spec, study)
    assert "\n" not in str(info.value)


def test_job_file_that_is_binary_is_one_line(tmp_path: Path) -> None:
    from hvbench.kinds.disk.driver import job_file_text

    (tmp_path / "b.fio").write_bytes(b"\x7fELF\x02\x01\xff")
    study = study_with(tmp_path, "x", "")
    spec = disk_spec(job_file="b.fio")
    with pytest.raises(SpecError, match=r"byte 6 .* is not UTF-8"):
        job_file_text(spec, study)


def test_fio_parses_one_rewritten_job_file_once_per_process(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cells sharing a job file start fio once (each in its own scratch directory, the
    rewritten texts differ only there); fio's refusal is repeated from its answer, and
    another text is parsed again."""
    from hvbench.kinds.disk import driver as disk
    from hvbench.kinds.disk.driver import check_job_file

    started: list[str] = []
    real = disk._run_fio_parse_only

    def counted(scratch: Path, text: str, source: str) -> tuple[int, str, str]:
        started.append(text)
        return real(scratch, text, source)

    monkeypatch.setattr(disk, "_run_fio_parse_only", counted)
    # the job's name is this test's directory: a text no other test gave fio.
    study = study_with(tmp_path, "bad.fio", f"[{tmp_path.name}]\nrw=sideways\nsize=1m\n")
    for _ in range(2):
        with pytest.raises(SpecError, match="fio refuses the job file: fio: failed "
                                            "parsing rw=sideways"):
            check_job_file(disk_spec(job_file="bad.fio"), study)
    assert len(started) == 1
    (tmp_path / "bad.fio").write_text(f"[{tmp_path.name}]\nrw=read\nsize=1m\n")
    check_job_file(disk_spec(job_file="bad.fio"), study)
    check_job_file(disk_spec(job_file="bad.fio"), study)
    assert len(started) == 2 and "rw=read" in started[1]
