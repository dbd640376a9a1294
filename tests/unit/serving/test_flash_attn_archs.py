"""FLASH_ATTN_CUDA_ARCHS as flash-attention 2.8.3's setup.py reads it: only 80, 90, 100 and 120 build anything (100
and 120 from CUDA 12.8); every other value is dropped without a word. One case per arch the stacks can target."""

from __future__ import annotations

import pytest
import yaml
from ansible_collections.gpuhost.gpu.plugins.filter.cuda_extension import cuda_extension_flash_attn_archs

from tests.paths import ROOT


@pytest.mark.parametrize(("arch", "value"), [
    ("8.0", "80"), ("8.6", "80"), ("8.7", "80"), ("8.9", "80"), ("8.6+PTX", "80"),
    ("9.0", "90"), ("9.0a", "90"),
    ("10.0", "100"), ("10.0a", "100"), ("10.3", "100"),
    ("12.0", "120"), ("12.0a", "120"), ("12.1", "120")])
def test_each_supported_arch_maps_to_its_family(arch: str, value: str) -> None:
    assert cuda_extension_flash_attn_archs([arch], "12.8") == {"value": value, "unbuilt": []}


@pytest.mark.parametrize("arch", ["7.5", "7.0", "11.0", "6.1"])
def test_archs_flash_attention_never_builds_are_named(arch: str) -> None:
    result = cuda_extension_flash_attn_archs([arch], "13.1")
    assert result["value"] == "" and result["unbuilt"][0].startswith(arch)


def test_blackwell_needs_cuda_12_8() -> None:
    result = cuda_extension_flash_attn_archs(["9.0", "12.0"], "12.6")
    assert result["value"] == "90" and "12.8 or newer" in result["unbuilt"][0]


def test_families_once_in_order() -> None:
    assert cuda_extension_flash_attn_archs(["8.0", "8.6", "8.9", "9.0a", "12.0"], None)["value"] == "80;90;120"


def test_the_role_passes_the_mapped_value() -> None:
    role_vars = yaml.safe_load((ROOT / "roles/cuda_extension/vars/main.yml").read_text())
    env = role_vars["__cuda_extension_build_env"]
    assert "'FLASH_ATTN_CUDA_ARCHS': __cuda_extension_flash_attn.value" in env
    assert "gpuhost.gpu.cuda_extension_flash_attn_archs" in role_vars["__cuda_extension_flash_attn"]


def test_the_build_environment_carries_it() -> None:
    from tests.unit.serving.test_sgl_kernel_build import build_env

    # Before: "8.9" became "89", which flash-attention's setup.py knows nothing of: no -gencode, the build fails.
    env = build_env("flash-attn", cuda_extension_archs=["8.9", "12.0"])
    assert env["FLASH_ATTN_CUDA_ARCHS"] == "80;120" and env["TORCH_CUDA_ARCH_LIST"] == "8.9;12.0"
