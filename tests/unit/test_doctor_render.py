"""Golden output of `hvbench doctor` for a stored report."""

from __future__ import annotations

import json
import os
from pathlib import Path

from rich.console import Console

from hvbench.cli.doctor import doctor_table
from hvbench.platforms.doctor import render

FIXTURES = Path(__file__).parent.parent / "fixtures"


def rendered(report: dict[str, object]) -> str:
    with Path(os.devnull).open("w") as sink:
        console = Console(width=140, record=True, color_system=None, file=sink)
        console.print(doctor_table(render(report)))
        return console.export_text()


def test_doctor_golden() -> None:
    report = json.loads((FIXTURES / "doctor-report.json").read_text())
    text = rendered(report)
    golden = FIXTURES / "doctor.golden.txt"
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(text)
    assert text == golden.read_text()


def test_missing_pieces_are_named() -> None:
    report = json.loads((FIXTURES / "doctor-report.json").read_text())
    report["root"] = False
    report["unavailable_without_root"] = ["tap networking"]
    report["qemu"]["binary"] = None
    report["guest_image"] = {"built": False}
    rows = dict(render(report))
    assert rows["root"] == "no; unavailable: tap networking"
    assert rows["qemu"].startswith("MISSING")
    assert rows["httperf"] == "MISSING"
    assert "hvbench image build" in rows["guest image"]
    assert rows["kvm"].startswith("present, unusable: a KVM guest did not answer within 20 s")
