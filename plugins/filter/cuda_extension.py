"""Filters of the cuda_extension role: the build's settings in the form each build system reads them."""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.serving.build_jobs import flash_attn_archs


def cuda_extension_flash_attn_archs(archs: Any, cuda_release: Any = None) -> dict[str, Any]:
    """FLASH_ATTN_CUDA_ARCHS by flash-attention's setup.py rules, and the archs it would not build."""
    return flash_attn_archs([str(a) for a in archs or []], str(cuda_release) if cuda_release else None)


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"cuda_extension_flash_attn_archs": cuda_extension_flash_attn_archs}
