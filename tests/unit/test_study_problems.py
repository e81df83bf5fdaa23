"""Study validation errors in the study's own spelling (issue 29, item 7): every problem,
one line each, with FILE:LINE, the field as the study writes it and "did you mean".
Golden: tests/fixtures/studies-bad/NAME.toml -> NAME.errors.txt."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from hvbench.errors import SpecError
from hvbench.model.lab import host_name_problems
from hvbench.model.problems import TomlLines, Where, did_you_mean, fields_at, problems
from hvbench.model.spec import VmSpec
from hvbench.model.study import parse_study
from tests.unit.test_fixture_runs import hvbench

BAD = Path(__file__).resolve().parents[1] / "fixtures" / "studies-bad"
HOST_RAM = 24 << 30
STUDIES = sorted(p.name for p in BAD.glob("*.toml"))


@pytest.mark.parametrize("name", STUDIES)
def test_malformed_study_errors_match_golden(name: str) -> None:
    path = BAD / name
    with pytest.raises(SpecError) as info:
        parse_study(path.read_text(), name, HOST_RAM)
    assert f"{info.value}\n" == path.with_suffix(".errors.txt").read_text()


@pytest.mark.parametrize(("name", "count"), [("typos", 8), ("scenarios", 7), ("lab", 8)])
def test_every_problem_is_listed_with_its_line(name: str, count: int) -> None:
    """Every problem of the file, not the first: one per misspelt or bad key, and each
    reserved or repeated name (the fixture's comment says what it holds)."""
    text = (BAD / f"{name}.toml").read_text().splitlines()
    with pytest.raises(SpecError) as info:
        parse_study("\n".join(text), f"{name}.toml", HOST_RAM)
    lines = str(info.value).splitlines()
    assert len(lines) == count
    for line in lines:
        # FILE:LINE: ... and the named line of the file holds the key the message names.
        _, number, rest = line.split(":", 2)
        # " platform[1]: disk.buss: ..." -> buss; " studdy: unknown section" -> studdy
        names = [part.split(".")[-1] for part in rest.strip().split(": ")[:2]]
        assert any(name in text[int(number) - 1] for name in names), line
    assert not any("Extra inputs" in line or "disks[0]" in line for line in lines)


def test_cli_prints_each_problem_and_exits_2(tmp_path: Path) -> None:
    done = hvbench(tmp_path, "run", str(BAD / "typos.toml"), "--dry-run")
    assert done.returncode == 2
    errors = done.stderr.decode().splitlines()
    assert len(errors) == 8
    assert all(e.startswith(f"hvbench: error: {BAD / 'typos.toml'}:") for e in errors)


def test_a_set_override_is_blamed_in_study_spelling(tmp_path: Path) -> None:
    done = hvbench(tmp_path, "run", "--dry-run", "--set", "platform.*.disk.buss=ide")
    assert done.returncode == 2
    assert "disk.buss: unknown field (did you mean 'bus'?)" in done.stderr.decode()
    assert "(value from --set platform.*.disk.buss=ide)" in done.stderr.decode()


TEXT = """\
[study]
name = "x"

[[platform]]
kind = "native"

[[platform]]
kind = "qemu"
disk.bus = "ide"

[platform.nic]
model = "e1000"

[[workload]]
profile = "dd"
"""


@pytest.mark.parametrize(("section", "index", "keys", "line"), [
    ("study", None, ("name",), 2),
    ("study", None, ("seed",), 1),          # not written: the table's header
    ("platform", 0, ("kind",), 5),
    ("platform", 1, ("disk", "bus"), 9),    # a dotted key
    ("platform", 1, ("nic", "model"), 12),  # a sub-table's key
    ("platform", 1, ("disks", 0, "bus"), 7),
    ("workload", 0, ("profile",), 15),
    ("platform", 2, ("kind",), None),       # no such entry
])
def test_toml_lines_find_keys(section: str, index: int | None, keys: tuple[str, ...],
                              line: int | None) -> None:
    assert TomlLines(TEXT).line_of(section, index, keys) == line


def test_where_prefixes_name_file_line_entry_and_variant() -> None:
    where = Where("s.toml", "platform", 1, " (variant disk.bus=ide)", TomlLines(TEXT))
    assert str(where) == "s.toml:7: platform[1] (variant disk.bus=ide)"
    assert str(where.error("disk", "bad")) == \
        "s.toml:9: platform[1] (variant disk.bus=ide): disk: bad"
    assert str(Where("s.toml", "study")) == "s.toml: study"


def test_did_you_mean_and_fields() -> None:
    assert did_you_mean("cahce", ["cache", "aio"]) == " (did you mean 'cache'?)"
    assert did_you_mean("zzz", ["cache", "aio"]) == ""
    assert "cache" in fields_at(VmSpec, ("disks", 0))
    assert "disks" in fields_at(VmSpec, ())


def test_problems_lists_every_error_of_a_model() -> None:
    with pytest.raises(ValidationError) as info:
        VmSpec.model_validate({"vcpus": "many", "machin": "pc"})
    lines = problems(info.value, "cli", model=VmSpec)
    assert lines == ["cli: vcpus: Input should be a valid integer, unable to parse string "
                     "as an integer",
                     "cli: machin: unknown field (did you mean 'machine'?)"]


def test_platform_scenario_and_lab_problems_are_listed_together() -> None:
    """A problem in [[platform]] does not hide those of [[scenario]] and [lab]."""
    text = "\n".join([
        '[study]', 'name = "mixed"', '[[platform]]', 'kind = "qemu"', 'machine = "q36"',
        '[[workload]]', 'profile = "dd"', 'direct = true',
        '[[scenario]]', 'name = "x"', 'weights = { io = 0 }',
        '[lab]', 'subnet = "10.0.0.0/16"',
    ])
    with pytest.raises(SpecError) as info:
        parse_study(text, "mixed.toml", HOST_RAM)
    entries = [line.split(": ")[1] for line in str(info.value).splitlines()]
    assert entries == ["platform[0]", "scenario[0]", "lab"]


def test_a_lab_lists_every_reserved_or_repeated_name() -> None:
    found = host_name_problems(["a", "host", "a", "guest", "b"], {"b": "someone"})
    assert [index for index, _ in found] == [1, 2, 3, 4]
    assert "appears twice" in found[1][1] and "stands for someone" in found[3][1]
