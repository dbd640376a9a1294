"""scripts/gpu_prolog.py run as a scheduler runs it: a process whose exit code and one stdout line are the
contract (0 fit, 1 fit with warnings, 2 unfit, 3 not judged or no audit), on replayed real captures."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.check_status import EXIT_CODES, exit_code

from tests.paths import ROOT
from tests.unit import captures

SCRIPT = ROOT / "scripts" / "gpu_prolog.py"
GUEST_REPORT = ROOT / "tests" / "fixtures" / "bug-reports" / \
    "nvidia-bug-report_580_2xRTX-PRO-6000_kvm-guest_constructed.log"
LINE = re.compile(r"^GPUHOST (OK|WARNING|CRITICAL|UNKNOWN) - .+ \| critical=\d+ warning=\d+ info=\d+ gpus=\d+$")


def prolog(*args: str | Path) -> tuple[int, list[str], str]:
    run = subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    return run.returncode, run.stdout.splitlines(), run.stderr


def capture(name: str) -> tuple[str, Path]:
    return "--capture", captures.CAPTURES / f"{name}.json"


@pytest.mark.parametrize(("args", "code", "status", "verdict"), [
    ((*capture(captures.H100),), 0, "OK", "fit"),
    # A real capture with the BAR1 floor raised past its GPUs' BAR1: small_bar1, a warning.
    ((*capture(captures.PRO6000), "--min-bar1-mib", "99999999"), 1, "WARNING", "fit, with warnings"),
    ((*capture(captures.H100_SICK),), 2, "CRITICAL", "unfit"),
    ((*capture(captures.GPU_LOST),), 2, "CRITICAL", "unfit"),
    # A bug report holds no P2P matrix: the P2P rules could not judge it, which is no pass.
    (("--material", GUEST_REPORT), 3, "UNKNOWN", "not judged"),
], ids=["fit", "warnings", "unfit-xid", "unfit-gpu-lost", "not-judged"])
def test_every_verdict_exits_with_its_code(args: tuple, code: int, status: str, verdict: str) -> None:
    rc, out, err = prolog(*args)
    assert (rc, len(out)) == (code, 1), (out, err)
    assert LINE.match(out[0]) and out[0].startswith(f"GPUHOST {status} - {verdict} ("), out[0]
    assert "Traceback" not in err


def test_the_line_and_the_code_are_read_off_the_one_judgement(tmp_path: Path) -> None:
    rc, out, _err = prolog(*capture(captures.H100_SICK), "--json", tmp_path / "facts.json")
    facts = json.loads((tmp_path / "facts.json").read_text())
    summary = facts["summary"]
    assert rc == exit_code(facts) == EXIT_CODES[summary["verdict"]]
    assert f"action {summary['action']};" in out[0] and "critical: xid_needs_reset" in out[0]
    assert out[0].endswith(f"| critical={summary['counts']['critical']} warning={summary['counts']['warning']} "
                           f"info={summary['counts']['info']} gpus={summary['gpu_count']}")


@pytest.mark.parametrize("args", [
    ("--capture", ROOT / "README.md"),
    ("--capture", ROOT / "no-such-capture.json"),
    ("--tensor-parallel-gpus", "a,b"),
    ("--no-such-option",),
    ("--node", "gpu1"),
], ids=["not-json", "missing", "bad-gpu-list", "bad-option", "node-without-slurm"])
def test_a_check_that_could_not_look_is_unknown_never_a_traceback(args: tuple) -> None:
    rc, out, err = prolog(*args)
    assert rc == 3 and len(out) == 1 and out[0].startswith("GPUHOST UNKNOWN - audit did not run: "), (out, err)
    assert "Traceback" not in err


def test_a_verdict_outside_the_vocabulary_or_no_facts_is_unknown() -> None:
    assert exit_code({"summary": {"verdict": "maybe"}}) == 3
    assert exit_code({"summary": {}}) == exit_code({}) == exit_code(None) == 3
    assert EXIT_CODES == {"fit": 0, "fit, with warnings": 1, "unfit": 2, "not judged": 3}


def test_slurm_that_cannot_be_reached_is_said_on_stderr_and_the_verdict_code_stands(tmp_path: Path) -> None:
    """No scontrol on PATH (a node without Slurm's client): nothing is done, said why, and the exit code is still
    the verdict's, so that a prolog on a fit host does not fail the job for it."""
    run = subprocess.run([sys.executable, str(SCRIPT), *capture(captures.PRO6000), "--slurm", "--node", "gpu1"],
                         capture_output=True, text=True, timeout=120, cwd=ROOT, env={"PATH": str(tmp_path)})
    assert run.returncode == 0 and run.stdout.startswith("GPUHOST OK - fit"), (run.stdout, run.stderr)
    assert run.stderr.strip() == ("gpuhost slurm: node gpu1: nothing done: scontrol is not on PATH: install Slurm's "
                                  "client (Debian: slurm-client) or drop --slurm")
