"""scripts/gpu-check.sh: on a bare machine every step that needs no torch runs, each skipped step says why, the
evidence (JSON and Markdown) says what each figure was compared with, and nothing is left in the checkout.

No GPU here: a GPU host is stood in for by an nvidia-smi that replays the outputs of a captured one
(tests/captures), the way the audit's own tests replay captures.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit import facts as audit_facts
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.facts import audit, resolve_subsets
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.source import ReplaySource
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.views import RuleOptions

from tests.paths import CAPTURES, ROOT

SCRIPT = ROOT / "scripts" / "gpu-check.sh"
# A guest of 8 RTX PRO 6000 whose audit read no NVML: nvidia-smi answers every query.
GUEST = CAPTURES / "proxmox-q35-guest-8xRTXPRO6000-no-nvml.json"
FAKE_SMI = """#!{python}
import json, sys
commands = json.load(open({capture!r}))["commands"]
found = commands.get(" ".join(["nvidia-smi", *sys.argv[1:]]))
if found is None:
    sys.stderr.write("not in the capture\\n")
    sys.exit(9)
sys.stdout.write(found.get("stdout") or "")
sys.stderr.write(found.get("stderr") or "")
sys.exit(found.get("rc") or 0)
"""
# What the check may leave in the checkout: nothing under the paths it runs from.
WATCHED = ("scripts", "plugins", "collections", "tests/cuda_ext")


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A Python >= 3.11 with nothing installed: no nvidia-ml-py, no torch."""
    where = tmp_path_factory.mktemp("bare") / "venv"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(where)
    return str(where / "bin" / "python")


def tree() -> set[str]:
    return {str(path.relative_to(ROOT)) for top in WATCHED for path in (ROOT / top).rglob("*")}


def gpu_check(tmp_path: Path, bare_python: str, *args: str, smi_capture: Path | None = None,
              wheels: Path | None = None, cuda_home: str | None = None,
              script: Path = SCRIPT) -> subprocess.CompletedProcess[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    if smi_capture is not None:
        smi = bin_dir / "nvidia-smi"
        smi.write_text(FAKE_SMI.format(python=sys.executable, capture=str(smi_capture)))
        smi.chmod(smi.stat().st_mode | stat.S_IXUSR)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "GPU_CHECK_CHECK_PYTHON": bare_python,
           "GPU_CHECK_PYTHON": bare_python, "CUDA_HOME": cuda_home or str(tmp_path / "no-cuda"),
           "GPU_CHECK_WHEELS": str(wheels or tmp_path / "no-wheels")}
    return subprocess.run(["bash", str(script), *args], capture_output=True, text=True, timeout=300, env=env,
                          check=False)


def pinned_nvml_version() -> str:
    """requirements-audit.txt's nvidia-ml-py pin."""
    return next(line.split("==")[1] for line in (ROOT / "requirements-audit.txt").read_text().splitlines()
                if line.startswith("nvidia-ml-py=="))


def pinned_wheel_path(tmp_path: Path) -> Path:
    """Where the wheel of that pin goes in a fresh wheels directory."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    return wheels / f"nvidia_ml_py-{pinned_nvml_version()}-py3-none-any.whl"


def test_on_a_bare_machine_without_a_gpu_it_says_what_runs_and_what_is_skipped(tmp_path: Path,
                                                                                bare_python: str) -> None:
    before = tree()
    proc = gpu_check(tmp_path, bare_python, str(tmp_path / "out"))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    no_gpu = "no NVIDIA GPU: the audit found none (NVML, nvidia-smi, PCI)"
    no_torch = f"no Python with torch (tried {bare_python}; set GPU_CHECK_PYTHON to one)"
    plan = [line for line in proc.stdout.splitlines() if line.startswith("gpu-check: plan: ")]
    assert plan == [
        f"gpu-check: plan: nvidia_smi: skip: {no_gpu}; no nvidia-smi on PATH",
        f"gpu-check: plan: cuda_ext: skip: {no_gpu}; CUDA_HOME={tmp_path / 'no-cuda'} has no bin/nvcc",
        f"gpu-check: plan: p2p_probe: skip: {no_gpu}; {no_torch}",
        f"gpu-check: plan: nccl: skip: {no_gpu}; {no_torch}",
    ]
    assert "gpu-check: audit: ok" in proc.stdout
    assert proc.stdout.rstrip().splitlines()[-1].startswith(
        "gpu-check: exit 3 (no NVIDIA GPU here: nothing on a GPU was checked)")
    results = json.loads((tmp_path / "out" / "gpu-check.json").read_text())
    assert results["steps"]["audit"]["status"] == "ok"
    assert {n: s["status"] for n, s in results["steps"].items()} == {
        "audit": "ok", "nvidia_smi": "skipped", "cuda_ext": "skipped", "p2p_probe": "skipped", "nccl": "skipped"}
    assert results["exit_code"] == 3
    # No NVML binding and no wheel: said, not hidden.
    assert "no wheel is in" in results["tools"]["nvml"]["reason"]
    assert json.loads((tmp_path / "out" / "audit.json").read_text())["schema_version"] == audit_facts.SCHEMA_VERSION
    assert "**Exit 3**" in (tmp_path / "out" / "gpu-check.md").read_text()
    assert tree() == before, "the check left files in the checkout"


def test_the_carried_wheel_is_what_reads_nvml(tmp_path: Path, bare_python: str) -> None:
    import pynvml

    wheel = pinned_wheel_path(tmp_path)
    wheels = wheel.parent
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.write(pynvml.__file__, "pynvml.py")
    proc = gpu_check(tmp_path, bare_python, str(tmp_path / "out"), wheels=wheels)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    results = json.loads((tmp_path / "out" / "gpu-check.json").read_text())
    assert results["tools"]["nvml"] == {"binding": f"nvidia-ml-py {pinned_nvml_version()}", "origin": str(wheel)}
    # The binding came from the wheel: NVML itself is what is missing here, not the binding.
    nvml_error = results["steps"]["audit"]["nvml_error"]
    assert "not installed" not in nvml_error and "LibraryNotFound" in nvml_error, nvml_error


def test_on_a_gpu_host_without_nvml_nvidia_smi_is_not_compared_with_itself(tmp_path: Path, bare_python: str) -> None:
    proc = gpu_check(tmp_path, bare_python, str(tmp_path / "out"), smi_capture=GUEST)
    out = tmp_path / "out"
    results = json.loads((out / "gpu-check.json").read_text())
    smi = results["steps"]["nvidia_smi"]
    assert results["steps"]["audit"]["gpu_source"] == "nvidia-smi"
    assert smi["comparison"].startswith("skipped: NVML was not read (")
    assert not [c for c in results["comparisons"] if c["step"] == "nvidia_smi"]
    assert smi["status"] == "ok", smi
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert results["machine"]["models"] == ["NVIDIA RTX PRO 6000 Blackwell Server Edition"]
    # Every form the parsers read was asked for; what nvidia-smi printed is kept and was read by its parser.
    forms = smi["forms"]
    assert {"query-gpu", "query-gpu-health", "q-x", "q", "topo-m", "topo-p2p-r", "list-gpus"} <= set(forms)
    kept = {form: entry for form, entry in forms.items() if entry["rc"] == 0}
    assert {"query-gpu", "q-x", "topo-m", "topo-p2p-r"} <= set(kept)
    assert all(entry["parsed"] == "ok" for entry in kept.values())
    name = "q-x_590_8xRTX-PRO-6000-Blackwell-Server-Edition_real-gpu.xml"
    assert kept["q-x"]["file"] == f"fixtures/nvidia-smi/{name}"
    assert (out / kept["q-x"]["file"]).read_text().startswith("<?xml")
    sources = (out / "fixtures" / "nvidia-smi" / "SOURCES.md").read_text()
    row = next(line for line in sources.splitlines() if name in line)
    assert "real GPU: 8x NVIDIA RTX PRO 6000 Blackwell Server Edition, driver 590.44.01" in row
    markdown = (out / "gpu-check.md").read_text()
    assert "skipped: NVML was not read" in markdown and name in markdown


def test_nvml_is_compared_with_nvidia_smi_field_by_field_and_a_difference_is_evidence() -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import gpu_check
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    capture = json.loads(GUEST.read_text())
    facts = audit(ReplaySource(capture), resolve_subsets(["all"]), RuleOptions())
    # The same GPUs as NVML would give them, one figure off.
    facts["gpus"]["source"] = "nvml"
    facts["gpus"]["devices"][3]["memory_total_mib"] += 1
    # A value one reading does not tell is not compared, nor counted as a difference.
    facts["gpus"]["devices"][5]["uuid"] = None
    comparisons: list[dict] = []
    assert gpu_check.compare_with_nvidia_smi(facts, comparisons, ReplaySource(capture)) == "compared"
    differs = [c for c in comparisons if c["equal"] is False]
    assert [c["what"] for c in differs] == ["GPU3 memory_total_mib"]
    assert [c["what"] for c in comparisons if c["equal"] is None] == ["GPU5 uuid"]
    assert differs[0]["source"] == "audit (NVML)" and differs[0]["against_source"] == "audit (nvidia-smi)"
    assert {"GPU count", "driver version", "P2P read matrix", "topology matrix", "GPU0 name"} <= {
        c["what"] for c in comparisons}
    results = {"host": "h", "steps": {}, "comparisons": comparisons, "exit_code": 1,
               "exit_meaning": gpu_check.EXIT_MEANINGS[1]}
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from gpu_check_md import render
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    assert "| nvidia_smi | GPU3 memory_total_mib |" in render(results)


@pytest.mark.skipif(not (Path("/usr/local/cuda") / "bin" / "nvcc").is_file(), reason="no CUDA toolkit here")
def test_the_kernels_are_built_with_the_machines_nvcc_and_a_kernel_that_cannot_run_says_why(
        tmp_path: Path, bare_python: str) -> None:
    proc = gpu_check(tmp_path, bare_python, str(tmp_path / "out"), smi_capture=GUEST, cuda_home="/usr/local/cuda")
    cuda = json.loads((tmp_path / "out" / "gpu-check.json").read_text())["steps"]["cuda_ext"]
    # Built for the stand-in GPU (compute capability 12.0); no driver here to run it on.
    assert (cuda["arch"], cuda["archs"], cuda["status"]) == ("sm_120", ["sm_120"], "failed")
    assert cuda["cudart"] >= 12000 and cuda["build_seconds"] > 0
    assert cuda["error"].startswith("the kernel did not run: CUDA error ")
    assert proc.returncode == 1


def test_carry_prints_the_paths_their_sizes_and_the_call(tmp_path: Path, bare_python: str) -> None:
    wheel = pinned_wheel_path(tmp_path)
    wheels = wheel.parent
    wheel.write_bytes(b"0" * 50_000)
    proc = gpu_check(tmp_path, bare_python, "--carry", wheels=wheels)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    head = lines[0]
    assert head.startswith("gpu-check: carry these ") and head.endswith(" MiB of 64 MiB:")
    assert float(head.split(", ")[1].split(" MiB")[0]) < 64
    listed = {line.split("KiB  ")[1].split("  (")[0] for line in lines if "KiB  " in line}
    assert listed == {"scripts/gpu-check.sh", "scripts/gpu_check.py", "scripts/gpu_check_md.py", "collections",
                      "plugins/module_utils",
                      "tests/cuda_ext", "requirements-audit.txt", str(wheel)}
    assert any(f"{wheel}  (git-ignored: name it when copying)" in line for line in lines)
    assert "  tar -xzf gpu-check.tar.gz && scripts/gpu-check.sh OUT" in lines
    # What it lists is all the check needs: copied as printed, unpacked elsewhere, the check runs there.
    pack = next(line.strip() for line in lines if line.startswith("  git ls-files"))
    archive = tmp_path / "gpu-check.tar.gz"
    subprocess.run(pack.replace("-czf gpu-check.tar.gz", f"-czf {archive}"), shell=True, cwd=ROOT,
                   check=True, capture_output=True)
    node = tmp_path / "node"
    node.mkdir()
    subprocess.run(["tar", "-xzf", str(archive), "-C", str(node)], check=True)
    wheel_in_copy = node / str(wheel).lstrip("/")
    assert wheel_in_copy.is_file()
    proc = gpu_check(tmp_path, bare_python, str(tmp_path / "node-out"), script=node / "scripts" / "gpu-check.sh")
    assert proc.returncode == 3, proc.stdout + proc.stderr


def test_a_multi_gpu_run_records_what_calibrates_the_torch_loop(tmp_path: Path, monkeypatch) -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import gpu_check
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    from ansible_collections.gpuhost.gpu.plugins.module_utils.bench import nccl_runner, nccl_sweeps, nccl_thresholds

    def rows(time_us: float) -> list[dict]:
        return [{"size_bytes": 16384, "count": 4096, "type": "float", "redop": "sum", "out_of_place": None,
                 "in_place": {"time_us": time_us, "algbw_gbps": 0.5, "busbw_gbps": 0.9, "wrong": 0}}]

    asked = []

    def run_bench(params: dict, tmpdir: str | None = None) -> dict:
        asked.append((params["engine"], params["env"]))
        time_us = {"torch-nccl": 55.0 if params["env"].get("NCCL_P2P_DISABLE") else 30.0, "nccl-tests": 21.0}
        return {"engine": params["engine"], "status": "ok", "nranks": 2, "nccl_version": "2.27.5",
                "results": rows(time_us[params["engine"]]),
                "thresholds": nccl_thresholds.default_thresholds(2, params["engine"]), "violations": [], "findings": []}

    monkeypatch.setattr(nccl_runner, "run_bench", run_bench)
    monkeypatch.setattr(nccl_sweeps, "find_nccl_tests", lambda directory, collective: "/usr/bin/all_reduce_perf")
    outcome = gpu_check.nccl_step(tmp_path, "python-with-torch")
    assert [engine for engine, _env in asked] == ["torch-nccl", "torch-nccl", "nccl-tests"]
    assert asked[1][1] == {"NCCL_P2P_DISABLE": "1"}
    calibration = outcome["calibration"]
    assert (calibration["engine"], calibration["timing"], calibration["calibrated"]) == (
        "torch-nccl", "max over ranks", False)
    runs = calibration["at_size_bytes"]["16384"]["runs"]
    assert {label: run["time_us"] for label, run in runs.items()} == {
        "torch-nccl": 30.0, "torch-nccl NCCL_P2P_DISABLE=1": 55.0, "nccl-tests": 21.0}
    assert [t["calibration"] for t in outcome["thresholds"]] == [None, None]
