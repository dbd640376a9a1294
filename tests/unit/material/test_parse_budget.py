"""material/parse_budget.py: the CPU time parsing one file may take, kept at a stage's end always and by a timer
where one can be armed, never over a timer someone else armed."""

from __future__ import annotations

import signal
import threading
import time

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.parse_budget import (
    ParseTimeout,
    parse_budget,
    refusal,
)

from tests.cpu_limit import cpu_limit


def spin(seconds: float) -> None:
    started = time.process_time()
    while time.process_time() - started < seconds:
        pass


def test_a_stage_that_runs_away_is_stopped_in_the_main_thread() -> None:
    started = time.process_time()
    with pytest.raises(ParseTimeout, match=r"more than 0\.2 s of CPU time"), parse_budget(0.2):
        spin(30)
    assert time.process_time() - started < 5
    assert signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0) and signal.getsignal(signal.SIGPROF) == signal.SIG_DFL


def test_under_someone_elses_timer_the_stage_is_judged_when_it_ends() -> None:
    with cpu_limit(30):
        with pytest.raises(ParseTimeout), parse_budget(0.1):
            spin(0.3)
        assert signal.getitimer(signal.ITIMER_PROF)[0] > 0  # theirs, still running


def test_in_another_thread_the_stage_is_judged_when_it_ends() -> None:
    raised: list[BaseException] = []

    def stage() -> None:
        try:
            with parse_budget(0.1):
                spin(0.3)
        except ParseTimeout as exc:
            raised.append(exc)

    thread = threading.Thread(target=stage)
    thread.start()
    thread.join()
    assert len(raised) == 1


def test_no_budget_and_a_quick_stage_pass() -> None:
    with parse_budget(None):
        spin(0.01)
    with parse_budget(5):
        spin(0.01)


@pytest.mark.parametrize(("exc", "start"), [
    (ParseTimeout("parsing it took more than 1 s of CPU time"), "not used: parsing it took more than 1 s of CPU time, "
                                                                "the limit on parse time per file; raise it"),
    (RecursionError(), "not used: nested too deeply to be read"),
    (MemoryError(), "not used: reading it ran out of memory"),
    (KeyError("x"), "not used: reading it stopped on KeyError ('x'), a defect of the reader"),
])
def test_each_failure_is_a_reason_a_user_can_act_on(exc: BaseException, start: str) -> None:
    assert refusal(exc, "raise it").startswith(start)
