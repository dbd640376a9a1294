"""NVML is read under a deadline (audit/nvml_bounded.py): a GPU whose driver call never returns costs the audit
NVML's readings and the time limit, never the audit.

The wedged GPU is a fake ``pynvml`` whose call blocks, as libnvidia-ml's ioctl does on a wedged GPU; the real
``read_nvml`` runs over it in the child process. The bounds allow a loaded machine (SLACK_S) but stay far below
the 60 s the fake blocks for.
"""

from __future__ import annotations

import os
import sys
import time
import types
from typing import Any

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit import facts
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.nvml_bounded import read_bounded
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.source import LiveSource
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.gpu_usable import unusable_cause
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.views import RuleOptions

from tests.unit.audit.test_capture_privacy import RecordingReplay
from tests.unit.captures import NO_NVML, capture
from tests.unit.stray_processes import SLACK_S

TIMEOUT_S = 1.0


class FakeNVMLError(Exception):
    pass


def blocking_pynvml(where: str) -> types.ModuleType:
    """A pynvml whose ``where`` call (nvmlInit, or nvmlDeviceGetCount after a good init) never returns."""
    fake = types.ModuleType("pynvml")
    fake.NVMLError = FakeNVMLError  # type: ignore[attr-defined]

    def block(*_args: Any) -> Any:
        time.sleep(60)

    for name in ("nvmlInit", "nvmlShutdown", "nvmlSystemGetDriverVersion", "nvmlSystemGetCudaDriverVersion",
                 "nvmlSystemGetNVMLVersion"):
        setattr(fake, name, block if name == where else (lambda *_args: None))
    fake.nvmlDeviceGetCount = block if where == "nvmlDeviceGetCount" else (lambda: 0)  # type: ignore[attr-defined]
    return fake


@pytest.mark.parametrize("where", ["nvmlInit", "nvmlDeviceGetCount"])
def test_a_wedged_nvml_call_ends_at_the_deadline_with_a_clear_error(where: str,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", blocking_pynvml(where))
    source = LiveSource(record=True, nvml_timeout_s=TIMEOUT_S)
    started = time.monotonic()
    snapshot = source.nvml()
    elapsed = time.monotonic() - started
    assert elapsed < TIMEOUT_S + SLACK_S, f"a {TIMEOUT_S:g} s NVML deadline returned after {elapsed:.1f} s"
    assert snapshot["kind"] == "timeout" and snapshot["error"].startswith(f"NVML did not answer within {TIMEOUT_S:g} s")
    assert source.problems == [{"what": "NVML readings", "error": snapshot["error"]}]
    assert source.recorded["nvml"] == snapshot  # a capture says NVML did not answer, not that it was not read
    assert unusable_cause({"source": "nvidia-smi", "nvml_error": snapshot["error"], "nvidia_smi_error": ""}) == "hung"


def test_the_audit_goes_on_with_nvidia_smi_when_nvml_hangs() -> None:
    source = RecordingReplay(capture(NO_NVML), nvml_timeout_s=TIMEOUT_S)
    source._nvml_reader = lambda: time.sleep(60) or {}  # nvidia-smi answers from the capture; NVML never does
    started = time.monotonic()
    result = facts.audit(source, facts.resolve_subsets(["all"]), RuleOptions())
    assert time.monotonic() - started < TIMEOUT_S + SLACK_S + 30
    gpus = result["gpus"]
    assert gpus["source"] == "nvidia-smi" and gpus["count"] == 8
    assert gpus["nvml_error"].startswith("NVML did not answer")
    assert any(p["what"] == "NVML readings" for p in result["problems"])


def test_a_quick_reader_answers_as_it_read() -> None:
    snapshot = {"driver_version": "580.95.05", "devices": [{"index": 0, "name": "GPU \u00e9"}], "errors": {}}
    assert read_bounded(lambda: snapshot, TIMEOUT_S) == snapshot


@pytest.mark.parametrize(("reader", "kind", "words"), [
    (lambda: os._exit(3), "nvml_error", "ended without an answer"),
    (lambda: 1 / 0, "nvml_error", "ZeroDivisionError"),
])
def test_a_reader_that_dies_or_raises_is_an_nvml_error(reader: Any, kind: str, words: str) -> None:
    answer = read_bounded(reader, TIMEOUT_S + 10)
    assert answer["kind"] == kind and words in answer["error"]
