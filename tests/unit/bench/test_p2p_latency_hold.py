"""The P2P probe's GPU-side copy latency is latency, never the host's queueing.

The harness holds the source stream with a spin of fixed length while it queues the timed copies. A
simulated CUDA timeline (streams that run queued work in order, events that complete when their stream
reaches them, a host whose every enqueue takes time) shows what the figure is when the queueing outlasts
the hold: either measured again behind a longer hold, or null and so never judged nor priced.
"""

from __future__ import annotations

import contextlib

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench import p2p_harness, p2p_judge
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.host_ceiling import pair_latency_us

CYCLES_PER_US = 1500.0  # a 1.5 GHz GPU clock


class Timeline:
    """Simulated time in us: the host's clock and, per device, when its stream has drained."""

    def __init__(self, queue_us: float, copy_us: float) -> None:
        self.now = 0.0
        self.queue_us = queue_us
        self.copy_us = copy_us
        self.busy_until: dict[int, float] = {}

    def enqueue(self, device: int, gpu_us: float) -> float:
        self.now += self.queue_us
        start = max(self.now, self.busy_until.get(device, 0.0))
        self.busy_until[device] = start + gpu_us
        return self.busy_until[device]


class Stream:
    def __init__(self, timeline: Timeline, device: int) -> None:
        self.timeline = timeline
        self.device = device

    def wait_event(self, event: Event) -> None:
        line = self.timeline
        line.busy_until[self.device] = max(line.busy_until.get(self.device, 0.0), event.at)


class Event:
    def __init__(self, timeline: Timeline, enable_timing: bool = False) -> None:
        self.timeline = timeline
        self.at = 0.0

    def record(self, stream: Stream) -> None:
        line = self.timeline
        self.at = max(line.now, line.busy_until.get(stream.device, 0.0))

    def query(self) -> bool:
        return self.timeline.now >= self.at

    def elapsed_time(self, end: Event) -> float:
        return (end.at - self.at) / 1000.0  # ms, as torch says it


class Tensor:
    def __init__(self, timeline: Timeline, device: int | None) -> None:
        self.timeline = timeline
        self.device = device

    def copy_(self, other: Tensor, non_blocking: bool = False) -> None:
        # A copy runs on the source GPU's stream, or the destination's when the source is host memory.
        device = other.device if other.device is not None else self.device
        self.timeline.enqueue(device, self.timeline.copy_us)


class FakeTorch:
    uint8 = "uint8"

    def __init__(self, timeline: Timeline) -> None:
        self.timeline = timeline
        streams = {}
        outer = self

        class Cuda:
            @staticmethod
            def current_stream(device: int) -> Stream:
                return streams.setdefault(device, Stream(timeline, device))

            @staticmethod
            def synchronize(device: int) -> None:
                timeline.now = max(timeline.now, timeline.busy_until.get(device, 0.0))

            @staticmethod
            def Event(enable_timing: bool = False) -> Event:
                return Event(timeline, enable_timing)

            @staticmethod
            @contextlib.contextmanager
            def device(index: int):
                outer.current = index
                yield

            @staticmethod
            def _sleep(cycles: int) -> None:
                timeline.busy_until[outer.current] = (max(timeline.now, timeline.busy_until.get(outer.current, 0.0))
                                                      + cycles / CYCLES_PER_US)

        self.cuda = Cuda
        self.current = 0

    def empty(self, size: int, dtype: str, device: str | None = None, pin_memory: bool = False) -> Tensor:
        return Tensor(self.timeline, int(device.split(":")[1]) if device else None)


def probe_result(gpu_us_by_pair: dict[tuple[int, int], dict]) -> dict:
    """The probe's judged result from timing events of two GPUs that may peer."""
    events = [{"event": "start", "devices": [{"index": 0, "name": "GPU"}, {"index": 1, "name": "GPU"}],
               "access": [[None, True], [True, None]]}]
    for (src, dst), timing in gpu_us_by_pair.items():
        events.append({"event": "timing", "src": src, "dst": dst, "size_bytes": 16384, **timing})
    run = {"start": events[0], "proofs": [], "timings": events[1:], "summary": {"status": "ok"}}
    return p2p_judge.harness_result(run)


def timed(queue_us: float, copy_us: float = 1.0) -> dict:
    torch = FakeTorch(Timeline(queue_us=queue_us, copy_us=copy_us))
    return p2p_harness.time_paths(torch, torch.cuda._sleep, 0, 1, 16384)


def test_a_fast_queue_gives_the_copy_time_behind_the_first_hold() -> None:
    timing = timed(queue_us=2.0)
    assert timing["peer"]["gpu_us"] == 1.0
    assert timing["hold"] == {"cycles": p2p_harness.HOLD_CYCLES, "tries": 1, "held": True}


def test_a_queue_that_outlasts_the_hold_is_timed_again_behind_a_longer_one() -> None:
    # 50 copies at 40 us each take 2 ms to queue: the first hold (about 1.3 ms here) ends before the last.
    timing = timed(queue_us=40.0)
    assert timing["peer"]["gpu_us"] == 1.0, "the figure is the copy, not the 40 us of queueing per copy"
    assert timing["hold"]["tries"] == 2 and timing["hold"]["held"] is True


@pytest.mark.parametrize("queue_us", [1000.0, 5000.0])
def test_a_queue_no_hold_outlasts_gives_no_figure_and_nothing_is_judged_on_it(queue_us: float) -> None:
    timing = timed(queue_us=queue_us)
    assert timing["peer"]["gpu_us"] is None
    assert timing["hold"]["held"] is False and timing["hold"]["tries"] == p2p_harness.HOLD_TRIES
    result = probe_result({(0, 1): timing, (1, 0): timing})
    ids = [f["id"] for f in p2p_judge.findings(result)]
    assert "p2p_small_copy_latency" not in ids
    # Nor does it price the communication ceiling.
    assert pair_latency_us(result) is None


def test_without_a_hold_primitive_there_is_no_gpu_figure() -> None:
    torch = FakeTorch(Timeline(queue_us=2.0, copy_us=1.0))
    timing = p2p_harness.time_paths(torch, None, 0, 1, 16384)
    assert timing["peer"]["gpu_us"] is None and timing["hold"]["held"] is False
