"""`hvbench run --set PATH=VALUE`: paths into the parsed study, TOML values, one-line
errors for unknown paths and bad values (naming the --set), and the overrides recorded
with the run and applied again on resume."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from hvbench.cli.main import main
from hvbench.errors import SpecError
from hvbench.model.overrides import apply_overrides, parse_override, parse_value
from hvbench.model.study import declared_vm, parse_study
from hvbench.report.html import ReportInput, render_html
from hvbench.run.runner import load_study, resume_study
from hvbench.store.database import Store
from hvbench.store.records import cell_record

EXAMPLES = Path(__file__).parents[2] / "examples"
QUICK = EXAMPLES / "quick.toml"
RAW: dict[str, Any] = {
    "study": {"name": "s", "repetitions": 3},
    "platform": [{"kind": "native"}, {"name": "vm", "disk": {"bus": ["ide", "virtio-blk"]}}],
    "workload": [{"name": "a", "duration_s": 3}, {"name": "b"}, {"name": "c", "duration_s": 9}],
}


def _apply(*changes: str) -> dict[str, Any]:
    return apply_overrides(RAW, [parse_override(c) for c in changes], "s.toml")


@pytest.mark.parametrize(("text", "value"), [
    ("1", 1), ("2.5", 2.5), ("true", True), ('"1"', "1"), ("8M", "8M"), ("virtio-blk",
     "virtio-blk"), ("[1, 70]", [1, 70]), ("{ min = 1, max = 2 }", {"min": 1, "max": 2}),
])
def test_values_are_toml_or_else_strings(text: str, value: object) -> None:
    assert parse_value(text) == value


def test_paths_reach_tables_entries_by_name_and_index_and_every_entry() -> None:
    out = _apply("study.repetitions=1", "platform.vm.disk.bus=virtio-blk",
                 "platform.0.memory_mib=128", "workload.*.duration_s=1")
    assert out["study"]["repetitions"] == 1
    assert out["platform"][1]["disk"]["bus"] == "virtio-blk"
    assert out["platform"][0]["memory_mib"] == 128
    # `*` changes the key where it is set and leaves the other entries alone.
    assert [w.get("duration_s") for w in out["workload"]] == [1, None, 1]
    assert RAW["study"]["repetitions"] == 3, "the parsed file itself is left unchanged"


def test_later_overrides_win() -> None:
    assert _apply("study.repetitions=1", "study.repetitions=2")["study"]["repetitions"] == 2


@pytest.mark.parametrize(("change", "words"), [
    ("studdy.repetitions=1", "unknown path: the file has platform, study, workload"),
    ("platform.vn.disk.bus=ide", "platform has no entry 'vn' (entries: 0, vm; or an index"),
    ("platform.vm.disc.bus=ide", "platform.vm has disk, name"),
    ("study.name.x=1", "study.name is a value, not a table"),
    ("workload.*.iodepth=4", "no entry of workload.* has 'iodepth'"),
    ("workload.a=1", "name a key after it"),
])
def test_unknown_paths_are_one_line_naming_what_exists(change: str, words: str) -> None:
    with pytest.raises(SpecError) as error:
        _apply(change)
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith(f"s.toml: --set {change}: ")
    assert words in message


@pytest.mark.parametrize("text", ["repetitions", "=1", "study..repetitions=1"])
def test_malformed_set_is_one_line(text: str) -> None:
    with pytest.raises(SpecError, match=r"expected PATH=VALUE"):
        parse_override(text)


def test_validation_names_the_file_the_field_and_the_set() -> None:
    with pytest.raises(SpecError) as error:
        parse_study(QUICK.read_text(), str(QUICK), 0, ["study.repetitions=0"])
    assert re.match(rf"{re.escape(str(QUICK))}:\d+: study: repetitions: ", str(error.value))
    assert str(error.value).endswith("(value from --set study.repetitions=0)")
    with pytest.raises(SpecError, match=r"disk\.buss: unknown field .* --set "
                                        r"platform.guest.disk.buss=ide\)$"):
        parse_study(QUICK.read_text(), str(QUICK), 0, ["platform.guest.disk.buss=ide"])


def test_the_study_keeps_its_text_and_the_overrides() -> None:
    changes = ["study.repetitions=1", "platform.guest.disk.bus=ide"]
    study = load_study(QUICK, changes)
    assert study.text == QUICK.read_text()
    assert study.overrides == tuple(changes)
    assert study.study.repetitions == 1
    assert [c.name for c in study.cells] == ["native/dd", "guest/dd"]


def test_dry_run_takes_set(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["run", str(QUICK), "--dry-run", "--db", str(tmp_path / "x.db"),
                 "--set", "study.repetitions=1", "--set", "platform.guest.disk.bus=ide"]) == 0
    out = capsys.readouterr().out
    assert "2 cells x 1 repetitions" in out
    assert main(["run", str(QUICK), "--dry-run", "--set", "platform.nope.x=1"]) == 2
    assert "platform has no entry 'nope'" in capsys.readouterr().err


def test_resume_refuses_set(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--resume", "r1", "--set", "study.repetitions=1", "--dry-run"]) == 2
    assert "drop --only, --exclude, --repetitions and --set" in capsys.readouterr().err


def test_a_fleet_host_applies_the_set_changes(tmp_path: Path) -> None:
    """A fleet host parses the study text with the coordinator's ``--set`` changes, and
    its scratch run stores them, so the host's ``hvbench run --resume`` applies them."""
    from hvbench.run import fleet
    from hvbench.run.runner import resume_study

    changes = ("study.repetitions=1", "platform.guest.disk.bus=ide")
    study = load_study(QUICK, changes)
    job = fleet.HostJob(study.text, str(QUICK), tuple(c.name for c in study.cells), 1,
                        "run-h1", (), "q", "e", changes)
    with Store(tmp_path / "scratch.db") as scratch:
        fleet.seed_scratch(scratch, job, "h1")
        resumed = resume_study(scratch, "run-h1")
    assert resumed.study.repetitions == 1 and resumed.overrides == changes
    assert declared_vm(resumed.platforms[1].spec).disks[0].bus == "ide"


def test_resume_applies_the_stored_overrides(tmp_path: Path) -> None:
    changes = ["study.repetitions=1", "platform.guest.disk.bus=ide"]
    study = load_study(QUICK, changes)
    with Store(tmp_path / "r.db") as store:
        store.create_run(run_id="20261125-000000-abcd", study_name=study.study.name,
                         study_path=str(QUICK), study_text=study.text, seed=0,
                         env={"study_overrides": changes}, hvbench_version="0",
                         git_commit=None)
        store.add_cells("20261125-000000-abcd", [cell_record(c) for c in study.cells])
        again = resume_study(store, "20261125-000000-abcd")
    assert again.overrides == tuple(changes)
    assert [c.name for c in again.cells] == [c.name for c in study.cells]
    assert declared_vm(again.platforms[1].spec).disks[0].bus == "ide"


def test_the_html_report_names_the_overrides() -> None:
    data = ReportInput(run_id="r", study_name="quick", status="complete",
                       created_at="2026-11-25T00:00:00+00:00", finished_at=None,
                       env={"study_overrides": ["study.repetitions=1"]},
                       study_text=QUICK.read_text(), rows=[], natives={}, samples=[])
    page = render_html(data)
    assert "<code>--set</code>): <code>study.repetitions=1</code>" in page
    plain = render_html(ReportInput(**{**data.__dict__, "env": {}}))
    assert "<code>--set</code>" not in plain
