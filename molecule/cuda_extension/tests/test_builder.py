"""The builder: CUDA 13.1 from wheels, the extension built here, rebuilt after an interrupted build."""

from __future__ import annotations

import hashlib
import io
import json
import re
import zipfile

from common import (
    KEY,
    KEY_DIR,
    MARKER,
    REBUILT_WHEELHOUSE,
    WHEEL,
    WHEELHOUSE,
    WORKDIR,
    check_gpu_code,
    check_installed_as_user,
    check_ownership,
    marker,
)
from elf_fatbin import fatbin_entries

testinfra_hosts = ["podman://cuda-extension-builder"]


def test_marker_records_the_key(host) -> None:
    recorded = marker(host)
    assert recorded["key"] == KEY
    assert recorded["key_dir"] == KEY_DIR
    assert recorded["wheel"] == WHEEL
    assert recorded["action"] == "built"  # the rebuild after the interrupted build, in side_effect
    assert host.file(MARKER).mode == 0o644


def test_installed_extension_works_without_a_gpu(host) -> None:
    check_installed_as_user(host)


def test_library_holds_sm_120_code_only(host) -> None:
    check_gpu_code(host)


def test_venv_and_package_belong_to_the_venv_user(host) -> None:
    check_ownership(host)


def test_build_log_kept_with_the_planned_environment(host) -> None:
    log = host.file(f"{WORKDIR}/build.log")
    assert log.exists and log.user == "serving"
    text = log.content_string
    environment = json.loads(re.search(r"^build_wheel: environment (\{.*\})$", text, re.MULTILINE).group(1))
    assert environment["TORCH_CUDA_ARCH_LIST"] == "12.0"
    assert environment["FLASH_ATTN_CUDA_ARCHS"] == "120"
    assert environment["CUDA_HOME"] == "/usr/local/cuda-13.1"
    assert environment["NVCC_THREADS"] == "1"  # one arch, one thread
    # sgl-kernel reads its thread count only as a CMake variable (CMAKE_ARGS); other extensions get none.
    assert "SGL_KERNEL_COMPILE_THREADS" not in environment and "CMAKE_ARGS" not in environment
    cpus = int(host.check_output("nproc"))
    assert 1 <= int(environment["MAX_JOBS"]) <= cpus
    # The test extension ran nvcc with what the environment asked for.
    assert re.search(rf"MAX_JOBS={environment['MAX_JOBS']}, NVCC_THREADS=1", text)
    assert "--threads 1 -gencode=arch=compute_120,code=[sm_120]" in text
    assert re.search(r"^build_wheel: exit status 0 after [0-9.]+ s; wheel " + re.escape(WHEEL) + "$", text,
                     re.MULTILINE)


def test_build_secrets_stay_private(host) -> None:
    log = host.file(f"{WORKDIR}/build.log")
    assert log.mode == 0o600
    text = log.content_string
    environment = json.loads(re.search(r"^build_wheel: environment (\{.*\})$", text, re.MULTILINE).group(1))
    assert environment["GPUHOST_BUILD_TOKEN"] == "***"
    assert environment["GPUHOST_MIRROR"] == "https://***@mirror.invalid/simple"
    for name in ("build.log", "build.log.interrupted", "build.status"):
        content = host.file(f"{WORKDIR}/{name}").content_string
        assert "molecule-token-s3cret" not in content and "molecule-url-s3cret" not in content, name
    assert host.file(f"{WORKDIR}/private").mode == 0o700
    assert not host.file(f"{WORKDIR}/private/build.env.json").exists  # read once by the wrapper, then removed


def test_interrupted_build_left_its_log_and_nothing_else(host) -> None:
    interrupted = host.file(f"{WORKDIR}/build.log.interrupted").content_string
    assert "-gencode=arch=compute_120" in interrupted  # nvcc had started
    assert "build_wheel: exit status" not in interrupted  # killed: the wrapper wrote no end
    for leftover in ("build.pid", "tmp", "source"):
        assert not host.file(f"{WORKDIR}/{leftover}").exists, leftover
    status = json.loads(host.file(f"{WORKDIR}/build.status").content_string)
    assert status["rc"] == 0
    assert status["wheel"] == WHEEL


def test_wheelhouses_on_the_controller_hold_the_wheels(host) -> None:
    for wheelhouse in (WHEELHOUSE, REBUILT_WHEELHOUSE):
        assert sorted(path.name for path in wheelhouse.glob("*.whl")) == [WHEEL]
        assert json.loads((wheelhouse / "key.json").read_text()) == KEY
        with zipfile.ZipFile(io.BytesIO((wheelhouse / WHEEL).read_bytes())) as wheel:
            library = next(name for name in wheel.namelist() if name.startswith("gpuhost_cuda_ext/_kernel"))
            assert {sm for kind, sm in fatbin_entries(wheel.read(library)) if kind == "elf"} == {120}
    # The wheel installed here is the one side_effect's rebuild brought to its wheelhouse.
    remote = host.check_output(f"sha256sum {WORKDIR}/dist/{WHEEL}").split()[0]
    assert hashlib.sha256((REBUILT_WHEELHOUSE / WHEEL).read_bytes()).hexdigest() == remote
