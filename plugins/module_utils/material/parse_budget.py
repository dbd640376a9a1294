"""The time parsing one file of material may take, and the reason a file that could not be parsed is not used.

Reading has its limits (material/limits.py); parsing has this one: ``parse_seconds`` of CPU time per file
(gpu_analyze's ``parse_timeout``). Every reader over input runs in linear time (docs/development.md, "Regexes over
input"), so a file that runs out of it is hostile or far larger than any real output; it is listed under "Not
used" with the limit and how to raise it, and the others are analysed.

How the limit is kept, and why so: a deadline on the process's CPU time (``time.process_time``), checked when a
stage of parsing ends (a file's kind told and its outputs filed; the audit of the capture), holds in any thread
and never interrupts code halfway through. Where it can be done safely, the stage is also interrupted when the
time runs out, so that a runaway stage cannot stall the analysis: ``signal.setitimer(ITIMER_PROF)`` counts the
process's CPU time, but a signal handler runs only in the main thread, and the timer is one per process; so it is
armed only in the main thread and only when no one else (a test harness, a caller) has armed it, and the handler
is put back afterwards. Elsewhere the check at the stage's end is the limit. The interrupted stage's work is
thrown away by its caller (material/capture.py undoes what a file had filed), so no half-parsed file is used.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

DEFAULT_PARSE_SECONDS = 60.0


class ParseTimeout(Exception):
    """Parsing one file took longer than its limit."""


@contextmanager
def parse_budget(seconds: float | None) -> Iterator[None]:
    """Raise ``ParseTimeout`` when the block has used more than ``seconds`` of CPU time: at its end always, and
    when it runs out where the timer can be armed (see the module text). None: no limit."""
    if seconds is None:
        yield
        return
    started = time.process_time()
    armed = _arm(seconds)
    try:
        yield
    finally:
        if armed is not None:
            signal.setitimer(signal.ITIMER_PROF, 0)
            signal.signal(signal.SIGPROF, armed)
    if time.process_time() - started > seconds:
        raise ParseTimeout(f"parsing it took more than {seconds:g} s of CPU time")


def _arm(seconds: float) -> Any:
    """The SIGPROF handler to put back once the timer is armed, or None when it cannot be armed here."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "ITIMER_PROF"):
        return None
    if signal.getitimer(signal.ITIMER_PROF) != (0.0, 0.0) or signal.getsignal(signal.SIGPROF) not in (
            signal.SIG_DFL, signal.SIG_IGN, None):
        return None  # someone else's timer: theirs stays, and the check at the end is the limit

    def expired(signum: int, frame: Any) -> None:
        raise ParseTimeout(f"parsing it took more than {seconds:g} s of CPU time")

    previous = signal.signal(signal.SIGPROF, expired)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    return previous


def refusal(exc: BaseException, raise_with: str) -> str:
    """Why a file that raised ``exc`` while it was parsed is not used, in words a user can act on; ``raise_with``
    says how to raise the time limit."""
    if isinstance(exc, ParseTimeout):
        return f"not used: {exc}, the limit on parse time per file; {raise_with}"
    if isinstance(exc, RecursionError):
        return ("not used: nested too deeply to be read (thousands of levels, as no tool writes); give the tool's "
                "output as it printed it")
    if isinstance(exc, MemoryError):
        return "not used: reading it ran out of memory; give a smaller piece of the output"
    return (f"not used: reading it stopped on {type(exc).__name__} ({str(exc)[:200]}), a defect of the reader: report "
            "it with the file attached")
