"""Property test: whatever a study file says, parsing ends in a Study or a one-line
SpecError, never in another exception."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from hvbench.errors import SpecError
from hvbench.host.inputs import decode_text
from hvbench.model.study import parse_study

from .test_study import BASE, HOST_RAM

VALUES = st.one_of(
    st.integers(-5, 1 << 40),
    st.text(max_size=12),
    st.booleans(),
    st.floats(allow_nan=False),
    st.lists(st.sampled_from(["none", "ide", "virtio-blk", "1G", "qcow2", "x"]), max_size=3),
    st.just({"bus": "ahci"}),
)


def check(text: str) -> None:
    try:
        parse_study(text, "fuzz.toml", HOST_RAM)
    except SpecError as exc:
        # Every problem is listed, one line each, and each line names the file.
        lines = str(exc).split("\n")
        assert all(line.startswith(("fuzz.toml", "cell ")) for line in lines), lines


def check_bytes(data: bytes) -> None:
    """Raw bytes as a study file: decoded as ``hvbench run`` decodes them, then parsed."""
    try:
        text = decode_text(data, "fuzz.toml", "a study")
    except SpecError as exc:
        assert str(exc).startswith("fuzz.toml")
        assert "\n" not in str(exc)
        return
    check(text)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_raw_bytes(data: bytes) -> None:
    check_bytes(data)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, len(BASE)), st.binary(max_size=12))
def test_byte_insertions(start: int, insert: bytes) -> None:
    raw = BASE.encode()
    check_bytes(raw[:start] + insert + raw[start:])


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(['name = "t"', 'name = "vm"']),
       st.text(alphabet=st.characters(max_codepoint=0x20FF), max_size=8))
def test_names_with_any_character(line: str, name: str) -> None:
    """Study and platform names with any character (control characters written as TOML
    escapes) parse or are refused in one line."""
    escaped = "".join(f"\\u{ord(c):04x}" for c in name)
    check(BASE.replace(line, line[:-1] + escaped + '"', 1))


@settings(max_examples=300, deadline=None)
@given(st.integers(0, len(BASE)), st.integers(0, 40), st.text(max_size=20))
def test_text_mutations(start: int, length: int, insert: str) -> None:
    check(BASE[:start] + insert + BASE[start + length :])


def _render(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_render(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_render(v)}" for k, v in value.items()) + " }"
    return repr(value)


FIELDS = [
    "repetitions",
    "seed",
    "machine",
    "vcpus",
    "memory_mib",
    "profile",
    "file_size",
    "record_size",
    "direct",
    "target",
    "accel",
    "disk",
    "only",
    "exclude",
    "kind",
    "bogus",
    "files",
    "iodepth",
    "phases",
]


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(["[study]", "[[platform]]", "[[workload]]"]), st.sampled_from(FIELDS), VALUES
)
def test_field_mutations(section: str, field: str, value: object) -> None:
    text = BASE
    marker = section + "\n"
    index = text.rfind(marker) + len(marker)
    mutated = text[:index] + f"{field} = {_render(value)}\n" + text[index:]
    # Duplicate keys make invalid TOML: still a valid test of the error path.
    check(mutated)
