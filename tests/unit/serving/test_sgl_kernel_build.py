"""The sgl-kernel build as its CMakeLists.txt and pyproject.toml make it (serving/sgl_kernel_build.py): the
gencode targets it hard-codes in the memory plan, the nvcc thread count through CMake (CMAKE_ARGS), its build
backend and CMake in the stack, and an offline build that says which FetchContent sources it lacks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cuda_build_jobs
import pytest
import yaml
from ansible_collections.gpuhost.gpu.plugins.module_utils.serving import sgl_kernel_build as skb
from ansible_collections.gpuhost.gpu.plugins.module_utils.serving.build_jobs import Resources

from tests.paths import ROOT
from tests.unit.modules import run_module

STACKS = sorted((ROOT / "roles" / "serving_stack" / "vars" / "stacks").glob("*.yml"))
ROLE = ROOT / "roles" / "cuda_extension"


@pytest.mark.parametrize(("cuda", "machine", "targets"), [
    ("12.8", "x86_64", ["sm_90", "sm_80", "sm_89", "sm_100a", "sm_120a", "sm_90a"]),
    ("13.0", "x86_64", ["sm_90", "sm_80", "sm_89", "sm_100a", "sm_120a", "sm_103a", "sm_90a"]),
    ("12.4", "x86_64", ["sm_90", "sm_80", "sm_89", "sm_90a"]),
    ("12.8", "aarch64", ["sm_90", "sm_100a", "sm_120a", "sm_101a", "sm_90a"]),
    ("13.1", "aarch64", ["sm_90", "sm_100a", "sm_120a", "sm_103a", "sm_110a", "sm_121a", "sm_90a"]),
])
def test_the_targets_sgl_kernel_hard_codes(cuda, machine, targets):
    assert skb.gencode_targets(cuda, machine) == targets


def test_a_cuda_version_it_cannot_read_is_refused_clearly():
    with pytest.raises(ValueError, match=r"expected MAJOR\.MINOR"):
        skb.gencode_targets("twelve")


def test_the_thread_count_goes_to_cmake_and_a_users_own_is_kept():
    assert skb.cmake_args(2) == "-DSGL_KERNEL_COMPILE_THREADS=2"
    assert skb.cmake_args(2, "-DFOO=1") == "-DFOO=1 -DSGL_KERNEL_COMPILE_THREADS=2"
    assert skb.cmake_args(2, "-DSGL_KERNEL_COMPILE_THREADS=8") == "-DSGL_KERNEL_COMPILE_THREADS=8"


def test_offline_sources_all_or_a_clear_list_of_what_is_missing():
    every = {name: f"/src/{name}" for name, _repo in skb.FETCHCONTENT}
    args, missing = skb.fetchcontent_args(every)
    assert missing == [] and args[-1] == "-DFETCHCONTENT_FULLY_DISCONNECTED=ON"
    assert "-DFETCHCONTENT_SOURCE_DIR_REPO-CUTLASS=/src/repo-cutlass" in args
    assert skb.offline_problem(every) is None
    problem = skb.offline_problem({"repo-cutlass": "/src/cutlass"})
    assert "repo-flashinfer (https://github.com/flashinfer-ai/flashinfer.git)" in problem
    assert "repo-cutlass" not in problem.split(":", 1)[1]


# --------------------------------------------------------------------------------------------------
# The plan counts the targets sgl-kernel compiles, not the stack's archs


def test_the_memory_plan_counts_the_hard_coded_targets(monkeypatch, capsys):
    monkeypatch.setattr(cuda_build_jobs, "read_resources", lambda: Resources(64, 256.0, 240.0, ()))
    archs_only = run_module(cuda_build_jobs.main, {"archs": ["12.0"], "mem_per_thread_gib": 4}, capsys)
    real = run_module(cuda_build_jobs.main, {"archs": ["12.0"], "mem_per_thread_gib": 4,
                                             "targets": skb.gencode_targets("12.8")}, capsys)
    assert archs_only["nvcc_threads"] == 1
    assert real["inputs"]["targets"] == 6 and real["nvcc_threads"] == 4
    assert real["plan"]["gib_per_job"] == 16.0 and real["max_jobs"] < archs_only["max_jobs"]


@pytest.mark.parametrize("stack", STACKS, ids=[s.stem for s in STACKS])
def test_the_stacks_build_sgl_kernel_with_its_backend_and_its_real_targets(stack):
    profile = yaml.safe_load(stack.read_text())["serving_stack"]
    kernels = [e for e in profile["extensions"] if e["name"] in ("sgl-kernel", "sglang-kernel")]
    for entry in kernels:
        assert entry["gencode_targets"] == skb.gencode_targets(profile["cuda"])
    if kernels:
        names = {p.split(">")[0].split("=")[0] for p in profile["packages"]}
        assert {"scikit-build-core", "cmake"} <= names


def test_the_roles_fetchcontent_list_is_sgl_kernels():
    role_vars = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    assert [(e["name"], e["repository"]) for e in role_vars["__cuda_extension_sgl_kernel_fetchcontent"]] == \
        list(skb.FETCHCONTENT)


# --------------------------------------------------------------------------------------------------
# The role's build environment, rendered as Ansible renders it


def build_env(name: str, **overrides: Any) -> dict[str, str]:
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template

    def trusted(path: Path) -> dict[str, Any]:
        loaded = yaml.safe_load(path.read_text())
        return {k: trust_as_template(v) if isinstance(v, str) else v for k, v in loaded.items()}

    variables = {**trusted(ROLE / "defaults" / "main.yml"), **trusted(ROLE / "vars" / "main.yml"),
                 "cuda_extension_name": name, "cuda_extension_venv": "/venv", "cuda_extension_pip_env": {},
                 "__cuda_extension_jobs": {"max_jobs": 3, "nvcc_threads": 2}, **overrides}
    return Templar(loader=DataLoader(), variables=variables).template(trust_as_template(
        "{{ __cuda_extension_build_env }}"))


def test_sgl_kernel_gets_its_thread_count_as_a_cmake_variable():
    env = build_env("sglang-kernel")
    assert env["CMAKE_ARGS"] == "-DSGL_KERNEL_COMPILE_THREADS=2"
    assert "SGL_KERNEL_COMPILE_THREADS" not in env  # an environment variable sgl-kernel never reads
    assert "CMAKE_ARGS" not in build_env("flash-attn")


def test_pre_fetched_sources_reach_cmake_and_it_fetches_nothing():
    env = build_env("sgl-kernel", cuda_extension_cmake_sources={"repo-cutlass": "/src/cutlass"},
                    cuda_extension_env={"CMAKE_ARGS": "-DENABLE_BELOW_SM90=OFF"})
    assert env["CMAKE_ARGS"] == ("-DENABLE_BELOW_SM90=OFF -DSGL_KERNEL_COMPILE_THREADS=2 "
                                 "-DFETCHCONTENT_SOURCE_DIR_REPO-CUTLASS=/src/cutlass "
                                 "-DFETCHCONTENT_FULLY_DISCONNECTED=ON")
