"""The context-manager half every start/stop class of hvbench shares.

Processes, labs, cgroups, sampler threads and watchers all follow one habit:
``__init__`` only stores, ``start()`` acquires, ``stop()`` releases everything acquired
so far and is safe to call twice (also after a failed or partial ``start()``, and from
:meth:`ProcessRegistry.stop_all` on Ctrl-C). These two bases turn that habit into the
``with`` statement once, instead of one ``__enter__``/``__exit__`` pair per class.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from types import TracebackType
from typing import Self


class StopOnExit(ABC):
    """A context manager whose exit calls :meth:`stop`; entering only returns self.

    For things started elsewhere (a server handle returned already running) or started
    with arguments (``ImageRepository.start(methods)``). Subclasses implement
    :meth:`stop`, which must be safe to call twice and must not raise for something
    already gone: ``__exit__`` runs it while another exception may be propagating.
    """

    @abstractmethod
    def stop(self) -> object:
        """Release everything acquired; safe twice. The value (if any) is ignored by
        ``__exit__``."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class StartStop(StopOnExit):
    """A context manager that calls :meth:`start` on entry and :meth:`stop` on exit.

    If :meth:`start` raises (including KeyboardInterrupt), :meth:`stop` is called
    before the exception propagates, since ``__exit__`` never runs for a failed
    ``__enter__``; that is why :meth:`stop` must be safe after a partial start and
    safe twice (a ``start()`` that cleans up after itself is then stopped again).
    """

    @abstractmethod
    def start(self) -> None:
        """Acquire what the object manages; raise (an :class:`HvbenchError`) on
        failure."""

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self
