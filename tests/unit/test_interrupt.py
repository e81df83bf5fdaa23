"""The stop request: the first signal raises, a later one only records, and inside
``interrupt.deferred()`` the first one is held until the block ends."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

from hvbench.errors import InterruptedRun
from hvbench.host import interrupt


@pytest.fixture(autouse=True)
def clean() -> Iterator[None]:
    interrupt.reset()
    yield
    interrupt.reset()


def test_the_first_signal_raises_and_a_later_one_only_records() -> None:
    with pytest.raises(InterruptedRun) as caught:
        interrupt.deliver(signal.SIGTERM)
    assert caught.value.signum == signal.SIGTERM
    interrupt.deliver(signal.SIGINT)  # the stop under way goes on
    assert interrupt.received() == signal.SIGTERM


def test_a_signal_inside_a_deferred_block_raises_when_the_block_ends() -> None:
    steps: list[str] = []
    with pytest.raises(InterruptedRun) as caught, interrupt.deferred():
        interrupt.deliver(signal.SIGINT)
        steps.append("the step finished")  # not cut short
        with interrupt.deferred():  # nested: only the outermost block raises
            steps.append("nested")
        steps.append("after nested")
    assert steps == ["the step finished", "nested", "after nested"]
    assert caught.value.signum == signal.SIGINT
    with interrupt.deferred():  # nothing held any more
        pass


def test_a_block_that_fails_keeps_its_own_error_and_the_request_for_check() -> None:
    with pytest.raises(OSError, match="socket"), interrupt.deferred():
        interrupt.deliver(signal.SIGTERM)
        raise OSError("socket closed")
    with interrupt.deferred():  # the held request was dropped with the failure
        pass
    with pytest.raises(InterruptedRun):
        interrupt.check()  # ... and is still what check() sees


def test_no_signal_no_raise() -> None:
    with interrupt.deferred():
        pass
    interrupt.check()
