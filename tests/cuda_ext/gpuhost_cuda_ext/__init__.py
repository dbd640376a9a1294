"""One CUDA kernel (out = a + b), loaded with ctypes. Importing needs no driver and no GPU."""

from __future__ import annotations

import ctypes
from pathlib import Path

__version__ = "0.1.0"

_LIBRARY = next(Path(__file__).resolve().parent.glob("_kernel*.so"))
_lib = ctypes.CDLL(str(_LIBRARY))
_lib.gpuhost_cuda_ext_cudart_version.restype = ctypes.c_int
_lib.gpuhost_cuda_ext_archs.restype = ctypes.c_char_p
_lib.gpuhost_cuda_ext_device_count.restype = ctypes.c_int
_lib.gpuhost_cuda_ext_error_string.restype = ctypes.c_char_p
_lib.gpuhost_cuda_ext_error_string.argtypes = [ctypes.c_int]
_lib.gpuhost_cuda_ext_add.restype = ctypes.c_int

library_path = str(_LIBRARY)


def cudart_version() -> int:
    """CUDART_VERSION the library was compiled with: 13010 for CUDA 13.1."""
    return _lib.gpuhost_cuda_ext_cudart_version()


def built_archs() -> list[str]:
    """The sm_XX the library holds code for."""
    return _lib.gpuhost_cuda_ext_archs().decode().split()


def device_count() -> int:
    """GPUs the CUDA runtime sees; minus the CUDA error code when it cannot look (no driver: -35)."""
    return _lib.gpuhost_cuda_ext_device_count()


def add(a: list[float], b: list[float]) -> list[float]:
    """a + b, element by element, on the first GPU."""
    if len(a) != len(b):
        raise ValueError(f"expected lists of one length; found {len(a)} and {len(b)}")
    array = ctypes.c_float * len(a)
    out = array()
    code = _lib.gpuhost_cuda_ext_add(array(*a), array(*b), out, len(a))
    if code != 0:
        raise RuntimeError(f"CUDA error {code}: {_lib.gpuhost_cuda_ext_error_string(code).decode()}")
    return list(out)
