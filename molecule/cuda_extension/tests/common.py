"""What both containers must show after converge, side_effect and the re-runs."""

from __future__ import annotations

import json
import os
from pathlib import Path

from elf_fatbin import fatbin_entries

# The release's own Python serves the venv (make molecule PLATFORM=...).
PYTHON = {"bookworm": "3.11", "trixie": "3.13", "noble": "3.12"}[os.environ.get("GPUHOST_PLATFORM", "bookworm")]
CP = "cp" + PYTHON.replace(".", "")
VENV = "/opt/serving/venv"
USER = "serving"
KEY_DIR = f"gpuhost-cuda-ext-0.1.0-torchnone-cu13.1-{CP}-sm120"
WORKDIR = f"/var/cache/cuda-extension/{KEY_DIR}"
WHEEL = f"gpuhost_cuda_ext-0.1.0-{CP}-{CP}-linux_x86_64.whl"
MARKER = f"{VENV}/.cuda-extension.gpuhost-cuda-ext.json"
KEY = {"package": "gpuhost-cuda-ext", "version": "0.1.0", "torch": "none", "cuda": "13.1", "python": CP,
       "archs": ["12.0"]}
# converge's wheelhouse, and the one side_effect's rebuild filled.
WHEELHOUSE = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "wheelhouse" / KEY_DIR
REBUILT_WHEELHOUSE = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "wheelhouse-rebuild" / KEY_DIR


def marker(host) -> dict:
    return json.loads(host.file(MARKER).content_string)


def installed_library(host) -> str:
    return host.check_output(f"ls {VENV}/lib/python{PYTHON}/site-packages/gpuhost_cuda_ext/_kernel.*.so")


def check_installed_as_user(host) -> None:
    probe = host.run(
        f"cd / && sudo -u {USER} {VENV}/bin/python -c 'import json, gpuhost_cuda_ext as g; "
        "print(json.dumps([g.built_archs(), g.cudart_version(), g.device_count()]))'"
    )
    assert probe.rc == 0, probe.stderr
    archs, cudart, devices = json.loads(probe.stdout)
    assert archs == ["sm_120"]
    assert cudart == 13010  # CUDART_VERSION of CUDA 13.1
    assert devices < 0  # no driver here: the runtime reports an error, and importing still worked


def check_gpu_code(host) -> None:
    entries = fatbin_entries(host.file(installed_library(host)).content)
    assert entries, "no GPU code in the library"
    assert {sm for kind, sm in entries if kind == "elf"} == {120}, entries
    assert [kind for kind, _ in entries if kind != "elf"] == [], "PTX was not asked for"


def check_ownership(host) -> None:
    for path in (VENV, f"{VENV}/lib/python{PYTHON}/site-packages/gpuhost_cuda_ext", installed_library(host), MARKER,
                 f"{VENV}/lib/python{PYTHON}/site-packages/gpuhost_cuda_ext-0.1.0.dist-info/RECORD"):
        assert host.file(path).user == USER, path
