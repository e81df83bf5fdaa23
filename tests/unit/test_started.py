"""The shared start/stop context-manager bases (hvbench.host.started)."""

from __future__ import annotations

import pytest

from hvbench.errors import HostError
from hvbench.host.started import StartStop, StopOnExit


class Recorder(StartStop):
    def __init__(self, fail: BaseException | None = None) -> None:
        self.calls: list[str] = []
        self.fail = fail

    def start(self) -> None:
        self.calls.append("start")
        if self.fail is not None:
            raise self.fail

    def stop(self) -> None:
        self.calls.append("stop")


class Handle(StopOnExit):
    def __init__(self) -> None:
        self.stopped = 0

    def stop(self) -> None:
        self.stopped += 1


def test_start_stop_enters_with_start_and_exits_with_stop() -> None:
    rec = Recorder()
    with rec as entered:
        assert entered is rec and rec.calls == ["start"]
    assert rec.calls == ["start", "stop"]


def test_stop_runs_when_the_body_raises() -> None:
    rec = Recorder()
    with pytest.raises(ValueError, match="body"), rec:
        raise ValueError("body")
    assert rec.calls == ["start", "stop"]


@pytest.mark.parametrize("error", [HostError("no"), KeyboardInterrupt()])
def test_failed_start_is_stopped_and_reraised(error: BaseException) -> None:
    rec = Recorder(fail=error)
    with pytest.raises(type(error)), rec:
        pytest.fail("the body must not run")
    assert rec.calls == ["start", "stop"]


def test_stop_on_exit_does_not_start() -> None:
    handle = Handle()
    with handle as entered:
        assert entered is handle and handle.stopped == 0
    assert handle.stopped == 1


def test_bases_are_abstract() -> None:
    with pytest.raises(TypeError):
        StartStop()  # type: ignore[abstract]
    with pytest.raises(TypeError):
        StopOnExit()  # type: ignore[abstract]
