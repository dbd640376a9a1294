"""A call under a limit on CPU time, for the fuzz harness, the growth test and the tests of hostile input: the
process's CPU time, not the wall clock, so that a loaded machine (two cores shared with lint and the fleet) slows a
case without failing it, and a runaway regex fails it however idle the machine.

``signal.setitimer(ITIMER_PROF)`` counts the process's CPU time and interrupts the main thread when it runs out;
pytest runs tests there. The interruption is a ``BaseException``, so that no ``except Exception`` of the code under
test swallows it."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


class CpuTimeout(BaseException):
    """The call ran out of its CPU time."""


@contextmanager
def cpu_limit(seconds: float) -> Iterator[None]:
    """Raise ``CpuTimeout`` in the block once it has used ``seconds`` of CPU time."""

    def expired(signum: int, frame: Any) -> None:
        raise CpuTimeout(f"ran longer than {seconds:g} s of CPU time")

    previous = signal.signal(signal.SIGPROF, expired)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


def within(seconds: float, call: Callable[[], Any]) -> Any:
    """``call()`` under ``cpu_limit(seconds)``."""
    with cpu_limit(seconds):
        return call()
