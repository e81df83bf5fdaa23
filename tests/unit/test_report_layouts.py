"""Golden terminal layouts of issue 29 at 80 and 160 columns, on the stored storage
fixture run (tests/fixtures/runs/storage.db): the headline and the Diagnosis blocks of
``report``, ``report --brief``, ``report --verbose`` and ``explain``.

Regenerate with ``UPDATE_GOLDEN=1 pytest tests/unit/test_report_layouts.py`` and read
the diff before committing it."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest

from tests.unit.test_fixture_runs import hvbench, scratch_copy

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "layouts"
FIXTURE = "storage"

#: golden name -> the command's arguments after the run id.
COMMANDS = {"report": ("report",), "brief": ("report", "--brief"),
            "verbose": ("report", "--verbose", "--stats"), "explain": ("explain",)}


def _diagnosis_part(text: str) -> str:
    """The run header with its headline and the Diagnosis to its end: the phase tables
    between them are the other goldens' (tests/fixtures/runs)."""
    lines = text.splitlines(keepends=True)
    first_table = next(i for i, line in enumerate(lines) if line.startswith("┏"))
    start = next((i for i, line in enumerate(lines) if line.startswith("Diagnosis:")),
                 len(lines))
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("libvirt")),
               len(lines))
    # The line before the first table is that table's title.
    return "".join(lines[:first_table - 1] + lines[start:end])


@pytest.mark.parametrize("width", [80, 160])
@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_layout_golden(name: str, width: int, tmp_path: Path) -> None:
    run = scratch_copy(FIXTURE, tmp_path)
    done = hvbench(tmp_path, COMMANDS[name][0], run, "--db", f"{FIXTURE}.db",
                   *COMMANDS[name][1:], width=width)
    assert done.returncode == 0, done.stderr.decode()
    text = done.stdout.decode()
    if name in ("report", "verbose"):
        text = _diagnosis_part(text)
    golden = GOLDEN / f"{FIXTURE}.{name}.{width}.txt"
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(text)
    assert text == golden.read_text()
    # Left-aligned, within the width, no word broken: every line fits, and every word
    # of the Diagnosis is a word of the unwrapped verdicts.
    assert all(len(line) <= width for line in text.splitlines())


def test_layout_keeps_numbers_with_units_and_words_whole(tmp_path: Path) -> None:
    run = scratch_copy(FIXTURE, tmp_path)
    narrow, wide = (hvbench(tmp_path, "explain", run, "--db", f"{FIXTURE}.db",
                            width=width).stdout.decode() for width in (80, 400))
    lines = narrow.splitlines()
    # No line ends in a number whose unit starts the next line.
    assert not any(line.rstrip()[-1:].isdigit() and nxt.lstrip().startswith(("% ", "ms "))
                   for line, nxt in itertools.pairwise(lines))
    # No word broken: wrapped at 80 columns the text has the words it has unwrapped.
    assert narrow.split() == wide.split()
    assert max(len(line) for line in wide.splitlines()) > 80
    # Each fix once: the TCG fix heads one group however many cells it explains.
    assert sum(line.startswith('fix: accel = "kvm"') for line in lines) == 1
    assert narrow.count("cause: tcg-emulation") > 1


def test_brief_is_one_screen(tmp_path: Path) -> None:
    run = scratch_copy(FIXTURE, tmp_path)
    done = hvbench(tmp_path, "report", run, "--db", f"{FIXTURE}.db", "--brief", width=160)
    lines = done.stdout.decode().splitlines()
    assert len(lines) <= 40
    assert any(line.startswith("guests reach about") for line in lines)
    assert not any(line.startswith("Diagnosis") for line in lines)


def test_stats_adds_median_min_max_and_n1_shows_no_interval(tmp_path: Path) -> None:
    run = scratch_copy(FIXTURE, tmp_path)
    plain, stats = (hvbench(tmp_path, "report", run, "--db", f"{FIXTURE}.db", *extra)
                    .stdout.decode() for extra in ((), ("--stats",)))
    for label in ("MB/s median", "MB/s min", "MB/s max"):
        assert label not in plain and label in stats
    # vm.ide-writeback measured iozone/read once: its value with n=1, no ± and no CoV.
    read = plain.split("iozone / read")[1].split("iozone / write")[0]
    assert "658 (n=1)" in read and "658 ± 0" not in read
    cov = next(line for line in read.splitlines() if line.startswith("│ CoV %"))
    # n = 2, 2 and 1: no CoV below 3 values
    assert [c.strip() for c in cov.split("│")[2:5]] == ["-", "-", "-"]


def test_html_diagnosis_is_cards_under_one_heading_with_the_headline_on_top() -> None:
    page = (Path(__file__).resolve().parents[1] / "fixtures" / "runs"
            / f"{FIXTURE}.report.html").read_text()
    assert page.count('<h2 id="diagnosis">') == 1
    assert "Diagnosis: the bottleneck" not in page
    # 14 guest cells compared with native, under the 3 distinct fixes.
    assert page.count('class="card"') == 14 and page.count('<p class="fix">') == 3
    headline = page.index('<p class="headline">Guests reach about 21 % of native')
    assert headline < page.index('<h2 id="environment">')
