"""A seed study's findings judged on a real run: a real lab with a shaped 1 Gbit/s link,
a real e1000 guest, iperf3 natively and in the guest over 3 repetitions; the verdict
scheme reads the stored rounds (paired by repetition) and checks the shaped-link
precondition from the stored study's lab. 1 s iperf3 windows (the
verdict needs the paired rounds, not long ones): 25 s under TCG here (measured)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hvbench.image.builder import GuestImage
from hvbench.model.study import parse_study
from hvbench.report.findings import run_findings
from hvbench.report.model import load_run_report
from hvbench.run.runner import run_study
from hvbench.store.database import Store

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="the net lab needs root"),
]
HOST_RAM = 24 << 30
SEED = Path(__file__).resolve().parents[2] / "examples" / "seeds" / "001-network.toml"
#: The seed study cut to the abstract's TX finding: e1000 and native to ext, transmit.
CHANGES = ["study.repetitions=3", "platform.guest.nic.model=e1000",
           'workload.iperf3.peer=["ext"]', 'workload.iperf3.direction=["tx"]',
           "workload.iperf3.duration_s=1", "workload.iperf3.omit_s=0.25"]
VERDICTS = {"reproduced", "same direction, weaker", "same direction, stronger",
            "effect absent", "paper's size excluded, direction open", "opposite",
            "inconclusive"}


def test_a_seed_finding_gets_a_paired_verdict_on_a_real_run(image: GuestImage,
                                                            tmp_path: Path) -> None:
    study = parse_study(SEED.read_text(), str(SEED), HOST_RAM, CHANGES)
    with Store(tmp_path / "r.db") as store:
        outcome = run_study(study, store)
        assert outcome.failures == 0
        report = load_run_report(store, outcome.run_id, monitors=[], steady=False)
    results = {r.finding.id: r for r in run_findings(report)}
    tx = results["001-abstract-tx-below-native"]
    assert tx.measured and len(tx.a_cells) == 1 and len(tx.b_cells) == 1
    assert tx.a_cells[0].startswith("guest") and tx.b_cells[0].startswith("native/")
    # The runner's rounds pair the two sides; the lab's 1 Gbit/s link is stored.
    assert tx.interval is not None and tx.interval.test == "paired t"
    assert (tx.interval.n_a, tx.interval.n_b) == (3, 3)
    assert [(c.name, c.met, c.measured) for c in tx.checks] == [
        ("shaped link", True, "link to ext: 1000 Mbit/s")]
    # Not a TCG-distorted finding and its precondition holds: a verdict of the scheme.
    assert tx.verdict in VERDICTS, (tx.verdict, tx.reason)
    assert tx.interval.low < tx.interval.ratio < tx.interval.high
    assert "001-abstract-rx-below-native" in results
    assert not results["001-abstract-rx-below-native"].measured
