"""SGLang's cached P2P verdict (gpu_p2p_access_cache_for_<devices>.json, written once by --enable-p2p-check and
never expired: custom_all_reduce_utils.py gpu_p2p_access_check, 0.5.10.post1 and 0.5.23) is tied to the P2P
facts it was made under: the gate fingerprints them (gate/p2p_cache.py), the unit's environment carries the
fingerprint, and the serving launcher removes the cached verdict when it changes, saying so."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate import decide as gate

from tests.unit.captures import INCIDENT, PRO6000, audited
from tests.unit.gate.test_all_reduce import LLAMA70_TP2

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "roles" / "sglang_serve" / "files" / "sglang_launch.py"


def launch_of(facts: dict) -> dict:
    return gate.decide(facts, LLAMA70_TP2)["launch"]


def test_the_gate_names_the_cache_sglang_reads_and_fingerprints_the_facts():
    result = gate.decide(audited(PRO6000), LLAMA70_TP2)
    cache = result["launch"]["p2p_cache"]
    assert result["launch"]["args"] == ["--tp", "2", "--enable-p2p-check"]
    assert cache["read_by_sglang"] is True
    assert cache["file"] == f"gpu_p2p_access_cache_for_{result['launch']['cuda_visible_devices']}.json"
    assert cache["env"] == "GPUHOST_P2P_FACTS" and len(cache["facts"]) == 16
    assert any("never tests again" in n and cache["facts"] in n for n in result["notes"])


def test_the_fingerprint_moves_with_the_driver_and_the_p2p_status_only():
    facts = audited(PRO6000)
    before = launch_of(facts)["p2p_cache"]["facts"]
    assert launch_of(copy.deepcopy(facts))["p2p_cache"]["facts"] == before
    newer = copy.deepcopy(facts)
    newer["gpus"]["driver_version"] = "999.99"
    assert launch_of(newer)["p2p_cache"]["facts"] != before
    refused = copy.deepcopy(facts)
    gpus = launch_of(facts)["gpus"]
    refused["p2p"]["read"][gpus[0]][gpus[1]] = refused["p2p"]["read"][gpus[1]][gpus[0]] = "NS"
    assert launch_of(refused)["p2p_cache"]["facts"] != before


def test_one_gpu_has_no_cache():
    one = dict(LLAMA70_TP2, tensor_parallel_size=1, weights_gib=20)
    assert gate.decide(audited(INCIDENT), one)["launch"]["p2p_cache"] is None


# --------------------------------------------------------------------------------------------------
# The launcher


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "sglang.yaml"
    path.write_text(f"api-key: {json.dumps('k3y')}\n")
    return path


def start(secret: Path, home: Path, facts: str | None) -> subprocess.CompletedProcess[bytes]:
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "CUDA_VISIBLE_DEVICES": "0,1"}
    if facts is not None:
        env["GPUHOST_P2P_FACTS"] = facts
    return subprocess.run([sys.executable, "-I", str(SCRIPT), "--secret-file", str(secret), "--",
                           sys.executable, "-c", "print('served')"], env=env, capture_output=True, timeout=60,
                          check=False)


def cached(home: Path) -> Path:
    path = home / ".cache" / "sglang" / "gpu_p2p_access_cache_for_0,1.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"0->1": true, "1->0": true}')
    return path


def test_a_verdict_made_under_other_facts_is_removed_and_said(secret, tmp_path):
    verdict = cached(tmp_path)
    done = start(secret, tmp_path, "aaaa")
    assert done.returncode == 0 and b"served" in done.stdout
    assert not verdict.exists()
    assert b"P2P facts changed" in done.stderr and b"SGLang tests CUDA IPC again" in done.stderr
    # SGLang writes its verdict again; under the same facts it is kept from then on.
    verdict = cached(tmp_path)
    again = start(secret, tmp_path, "aaaa")
    assert again.returncode == 0 and verdict.exists() and b"P2P" not in again.stderr
    # The facts change (a driver or hypervisor change): the verdict goes.
    changed = start(secret, tmp_path, "bbbb")
    assert not verdict.exists() and b"aaaa -> bbbb" in changed.stderr


def test_without_a_fingerprint_nothing_is_touched(secret, tmp_path):
    verdict = cached(tmp_path)
    done = start(secret, tmp_path, None)
    assert done.returncode == 0 and verdict.exists()


def test_sglang_cache_dir_is_where_newer_releases_keep_it(secret, tmp_path):
    elsewhere = tmp_path / "cache-dir"
    elsewhere.mkdir()
    verdict = elsewhere / "gpu_p2p_access_cache_for_0,1.json"
    verdict.write_text("{}")
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "CUDA_VISIBLE_DEVICES": "0,1",
           "SGLANG_CACHE_DIR": str(elsewhere), "GPUHOST_P2P_FACTS": "cccc"}
    done = subprocess.run([sys.executable, "-I", str(SCRIPT), "--secret-file", str(secret), "--", sys.executable,
                           "-c", "pass"], env=env, capture_output=True, timeout=60, check=False)
    assert done.returncode == 0 and not verdict.exists()


def test_a_stale_verdict_that_cannot_be_removed_keeps_the_server_down(secret, tmp_path):
    # A directory where the verdict file should be: os.remove fails for root too.
    (tmp_path / ".cache" / "sglang" / "gpu_p2p_access_cache_for_0,1.json").mkdir(parents=True)
    done = start(secret, tmp_path, "dddd")
    assert done.returncode == 1 and b"served" not in done.stdout
    assert b"cannot remove SGLang's cached P2P verdict" in done.stderr
