"""Kind packages register into the core's registries: every workload kind a study may
name has a cell kind once :func:`install` ran, installing twice changes nothing, and a
second class claiming a registered kind is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from hvbench.analysis.metrics import lookup, main_metrics, register_metrics, vs_alone_metrics
from hvbench.errors import HvbenchError
from hvbench.kinds import install
from hvbench.kinds.disk.cell import DiskCell
from hvbench.kinds.lifecycle.cell import RepositoryImages
from hvbench.kinds.lifecycle.driver import RepositoryImage
from hvbench.kinds.network.cell import NetworkCell
from hvbench.model.study import parse_study
from hvbench.model.tune import NIC_AXES, NIC_KINDS, default_axes
from hvbench.model.workload import (
    IdentityFacts,
    WorkloadIntent,
    identity_facts,
    spec_classes,
    workload_intent,
)
from hvbench.run.cells import registry


def test_every_workload_kind_runs_after_install() -> None:
    install()
    before = (dict(registry.CELL_KINDS), list(registry.ROUND_MEMORIES))
    install()
    assert (dict(registry.CELL_KINDS), list(registry.ROUND_MEMORIES)) == before
    assert set(registry.CELL_KINDS) == set(spec_classes())


def test_a_kind_claimed_by_two_classes_is_refused() -> None:
    registry.register_cell_kind("disk", DiskCell)  # the same class again: fine
    with pytest.raises(HvbenchError, match="'disk' is registered twice"):
        registry.register_cell_kind("disk", NetworkCell)


def test_the_web_slice_of_the_catalogue_is_registered_once() -> None:
    install()
    spec = lookup("max_rate_rps")
    assert spec is not None and spec.producer == "httperf" and spec.layer == "workload"
    assert "max_rate_rps" in main_metrics() and "reply_ms" in vs_alone_metrics()
    with pytest.raises(HvbenchError, match="declared twice: max_rate_rps"):
        register_metrics([spec])


def test_tune_searches_the_nic_axes_for_the_kinds_that_measure_it() -> None:
    install()
    assert {"network", "web"} == NIC_KINDS
    study = parse_study('[study]\nname = "s"\n[[lab.host]]\nname = "client"\n'
                        '[[platform]]\nkind = "native"\n'
                        '[[workload]]\nname = "w"\nkind = "web"\nfile_kb = [1]\n',
                        "s.toml", 24 << 30)
    assert set(default_axes(study, (), allow_unsafe=False)) == set(NIC_AXES)


@pytest.mark.parametrize(("workload", "facts"), [
    # a definition without ``kind`` is a disk's; lifecycle fields missing take the defaults
    ({"file_size": 1 << 30}, IdentityFacts(file_size=1 << 30)),
    ({"kind": "lifecycle", "image_size": 64 << 20},
     IdentityFacts(method="raw-copy", image_size=64 << 20)),
    ({"kind": "propagation", "method": "", "image_size": 1.0}, IdentityFacts(image_size=1)),
    ({"kind": "web", "file_size": 7}, IdentityFacts()),
    ({"kind": "gone", "image_size": 7}, IdentityFacts())])
def test_a_kind_declares_its_identity_facts(workload: dict[str, object],
                                           facts: IdentityFacts) -> None:
    install()
    assert identity_facts(workload) == facts


def test_a_kind_keeps_its_run_wide_state_in_its_own_slot(tmp_path: Path) -> None:
    install()
    states = registry.run_states()
    images = states["lifecycle"]
    assert isinstance(images, RepositoryImages) and images.cache == {}
    owned = tmp_path / "repo" / "image.raw"
    owned.parent.mkdir()
    owned.write_bytes(b"x")
    images.cache[(1, "raw")] = RepositoryImage(owned, 1, "raw", "0" * 64, 0.0)
    images.close()
    images.close()  # safe twice
    assert not owned.parent.exists() and images.cache == {}
    assert registry.run_states()["lifecycle"] is not images  # one per run


@pytest.mark.parametrize(("workload", "found"), [
    ({"kind": "disk", "profile": "iozone", "ioengine": "libaio", "iodepth": 8,
      "record_size": 4096, "direct": True},
     WorkloadIntent(8.0, 4096.0, (("workload.ioengine", "libaio"), ("workload.iodepth", 16)))),
    ({"kind": "disk", "profile": "fio-job", "record_size": 4096}, WorkloadIntent()),
    ({"kind": "lifecycle", "image_size": 1 << 27}, WorkloadIntent())])
def test_a_kind_says_what_its_definition_asks_of_the_io_path(
        workload: dict[str, object], found: WorkloadIntent) -> None:
    install()
    assert workload_intent(workload) == found


def test_reading_stored_definitions_before_install_is_refused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A program that reads the store without installing the kinds would get every
    definition answered as an unknown kind's (no identity facts, no intent, no native
    baseline): each question refuses instead."""
    import hvbench.model.platform as platform_model
    import hvbench.model.workload as workload_model

    monkeypatch.setattr(workload_model, "_KINDS", {})
    monkeypatch.setattr(platform_model, "_KINDS", {})
    for ask in (lambda: identity_facts({"kind": "disk"}),
                lambda: workload_intent({"kind": "disk"}),
                lambda: platform_model.is_host_kind("native")):
        with pytest.raises(HvbenchError, match=r"install\(\) first"):
            ask()
