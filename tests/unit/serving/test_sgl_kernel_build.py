"""The sgl-kernel build as its CMakeLists.txt and pyproject.toml make it, checked against the one place each fact
lives: the gencode targets it hard-codes in the stack profiles that build it (the memory plan counts them), the
FetchContent list in the cuda_extension role's vars (an offline build says which sources it lacks), the nvcc thread
count through CMake (CMAKE_ARGS), its build backend and CMake in the stack."""

from __future__ import annotations

import re
from typing import Any

import cuda_build_jobs
import pytest
import yaml
from ansible_collections.gpuhost.gpu.plugins.filter.cuda_extension import cuda_extension_flash_attn_archs
from ansible_collections.gpuhost.gpu.plugins.module_utils.serving.build_jobs import Resources

from tests.paths import ROOT
from tests.unit.modules import run_module

STACKS = sorted((ROOT / "roles" / "serving_stack" / "vars" / "stacks").glob("*.yml"))
ROLE = ROOT / "roles" / "cuda_extension"
KERNEL_NAMES = ("sgl-kernel", "sglang-kernel")


def cmakelists_targets(cuda_version: str, machine: str = "x86_64") -> list[str]:
    """What sgl-kernel's CMakeLists.txt puts in SGL_KERNEL_CUDA_FLAGS, in its order, whatever TORCH_CUDA_ARCH_LIST
    says (clear_cuda_arches), in the releases the stacks pin: sm_90 always; sm_80 and sm_89 with ENABLE_BELOW_SM90
    (on, off on aarch64); sm_100a and sm_120a from CUDA 12.8; sm_103a from 13.0 (with sm_110a and sm_121a on
    aarch64; sm_101a on aarch64 before 13.0); sm_90a from CUDA 12.4; and sm_86 of its FA3 target. The expectation the
    stacks are held to."""
    major, minor = (int(part) for part in re.match(r"^(\d+)\.(\d+)", cuda_version).groups())
    cuda, arm = (major, minor), machine in ("aarch64", "arm64")
    targets = ["sm_90"] + ([] if arm else ["sm_80", "sm_89"])
    if cuda >= (12, 8):
        targets += ["sm_100a", "sm_120a"]
        targets += (["sm_103a"] + (["sm_110a", "sm_121a"] if arm else [])) if cuda >= (13, 0) else \
            (["sm_101a"] if arm else [])
    targets += ["sm_90a"] if cuda >= (12, 4) else []
    # Its FA3 target (flash_ops) compiles sm_86 too, beside the main library's targets: the plan counts every
    # target the build compiles, not only the main library's.
    return targets + ([] if arm else ["sm_86"])


def stack_kernels() -> list[tuple[str, str, dict[str, Any]]]:
    found = []
    for stack in STACKS:
        profile = yaml.safe_load(stack.read_text())["serving_stack"]
        found += [(stack.stem, profile["cuda"], e) for e in profile["extensions"] if e["name"] in KERNEL_NAMES]
    return found


def role_vars() -> dict[str, Any]:
    return yaml.safe_load((ROLE / "vars" / "main.yml").read_text())


def test_some_stack_builds_sgl_kernel():
    assert stack_kernels(), "no stack profile builds sgl-kernel: the checks below would check nothing"


@pytest.mark.parametrize("stack", STACKS, ids=[s.stem for s in STACKS])
def test_the_stacks_build_sgl_kernel_with_its_backend_and_its_real_targets(stack):
    profile = yaml.safe_load(stack.read_text())["serving_stack"]
    kernels = [e for e in profile["extensions"] if e["name"] in KERNEL_NAMES]
    for entry in kernels:
        # The stacks are x86_64 builds.
        assert entry["gencode_targets"] == cmakelists_targets(profile["cuda"])
    if kernels:
        names = {p.split(">")[0].split("=")[0] for p in profile["packages"]}
        assert {"scikit-build-core", "cmake"} <= names


# --------------------------------------------------------------------------------------------------
# The plan counts the targets sgl-kernel compiles, not the stack's archs


def test_the_memory_plan_counts_the_hard_coded_targets(monkeypatch, capsys):
    _stack, _cuda, kernel = stack_kernels()[0]
    monkeypatch.setattr(cuda_build_jobs, "read_resources", lambda: Resources(64, 256.0, 240.0, ()))
    archs_only = run_module(cuda_build_jobs.main, {"archs": ["12.0"], "mem_per_thread_gib": 4}, capsys)
    real = run_module(cuda_build_jobs.main, {"archs": ["12.0"], "mem_per_thread_gib": 4,
                                             "targets": kernel["gencode_targets"]}, capsys)
    assert archs_only["nvcc_threads"] == 1
    assert real["inputs"]["targets"] == 7 and real["nvcc_threads"] == 4
    assert real["plan"]["gib_per_job"] == 16.0 and real["max_jobs"] < archs_only["max_jobs"]


# --------------------------------------------------------------------------------------------------
# The FetchContent list: what sgl-kernel's CMakeLists.txt clones from GitHub when CMake configures


def test_the_roles_fetchcontent_list_names_each_repository_once():
    entries = role_vars()["__cuda_extension_sgl_kernel_fetchcontent"]
    names = [e["name"] for e in entries]
    assert len(names) == len(set(names)) and all(re.fullmatch(r"repo-[a-z0-9-]+", n) for n in names)
    assert all(e["repository"].startswith("https://github.com/") for e in entries)
    # The ones a build cannot go without, in CMakeLists.txt's FetchContent_Declare names.
    assert {"repo-cutlass", "repo-deepgemm", "repo-flashinfer", "repo-flash-attention"} <= set(names)


def offline_missing(name: str, sources: dict[str, str]) -> list[str]:
    """The role's offline check (tasks/main.yml), its vars as Ansible renders them: the FetchContent names missing."""
    tasks = yaml.safe_load((ROLE / "tasks" / "main.yml").read_text())
    task = next(t for t in tasks if str(t.get("name", "")).startswith("Check that an offline sgl-kernel build"))
    return render("{{ __cuda_extension_fetchcontent_missing }}", cuda_extension_name=name,
                  cuda_extension_cmake_sources=sources, **task["vars"])


def test_an_offline_build_names_every_source_it_lacks():
    every = {e["name"]: f"/src/{e['name']}" for e in role_vars()["__cuda_extension_sgl_kernel_fetchcontent"]}
    assert offline_missing("sgl-kernel", every) == []
    missing = offline_missing("sgl-kernel", {"repo-cutlass": "/src/cutlass"})
    assert "repo-flashinfer" in missing and "repo-cutlass" not in missing
    assert len(missing) == len(every) - 1
    # Online (no sources given) and another extension: nothing to check.
    assert offline_missing("sgl-kernel", {}) == [] and offline_missing("flash-attn", {"x": "/y"}) == []


# --------------------------------------------------------------------------------------------------
# The role's build environment, rendered as Ansible renders it


def render(template: str, **overrides: Any) -> Any:
    """``template`` over the role's defaults and vars, as Ansible renders them."""
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template

    def trusted(loaded: dict[str, Any]) -> dict[str, Any]:
        return {k: trust_as_template(v) if isinstance(v, str) else v for k, v in loaded.items()}

    variables = {**trusted(yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())), **trusted(role_vars()),
                 "cuda_extension_venv": "/venv", "cuda_extension_pip_env": {},
                 "__cuda_extension_jobs": {"max_jobs": 3, "nvcc_threads": 2},
                 # A plain Templar has no collection filters: the mapping's result as the role's filter gives it
                 # (tests/unit/serving/test_flash_attn_archs.py).
                 "__cuda_extension_flash_attn": cuda_extension_flash_attn_archs(
                     overrides.get("cuda_extension_archs", ["12.0"]), "12.8"), **trusted(overrides)}
    return Templar(loader=DataLoader(), variables=variables).template(trust_as_template(template))


def build_env(name: str, **overrides: Any) -> dict[str, str]:
    return render("{{ __cuda_extension_build_env }}", cuda_extension_name=name, **overrides)


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
