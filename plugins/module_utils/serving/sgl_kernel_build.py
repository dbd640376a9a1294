"""What an sgl-kernel source build really compiles, reads and fetches, for the build plan.

Read from sgl-kernel's ``CMakeLists.txt`` and ``pyproject.toml`` in SGLang's repository (the ``sgl-kernel``
directory of the ref a stack builds; the lines cited below are in the releases the stacks pin):

- the gencode targets are hard-coded in ``SGL_KERNEL_CUDA_FLAGS``, whatever ``TORCH_CUDA_ARCH_LIST`` says
  (``clear_cuda_arches``): ``sm_90`` always; ``sm_80`` and ``sm_89`` with ``ENABLE_BELOW_SM90`` (on, off on
  aarch64); ``sm_100a`` and ``sm_120a`` from CUDA 12.8; ``sm_103a`` from CUDA 13.0 (with ``sm_110a`` and
  ``sm_121a`` on aarch64; ``sm_101a`` on aarch64 before 13.0); ``sm_90a`` from CUDA 12.4;
- the main library is compiled twice from the same sources (``common_ops_sm90_build`` with ``-use_fast_math``
  and ``common_ops_sm100_build``): twice the compile time of one pass, each job as large as before;
- ``SGL_KERNEL_COMPILE_THREADS`` is a CMake cache variable (``set(... 32 CACHE STRING ...)``) that becomes
  ``--threads=N`` of every nvcc; an environment variable of that name is never read, so it has to reach CMake
  as ``-DSGL_KERNEL_COMPILE_THREADS=N`` through ``CMAKE_ARGS``, which scikit-build-core passes on;
- the build backend is scikit-build-core (``build-backend = "scikit_build_core.build"``), which needs CMake:
  with ``pip wheel --no-build-isolation`` both must already be in the venv;
- third-party sources come by ``FetchContent_Declare`` + ``FetchContent_Populate`` from GitHub at configure
  time: without GitHub the build needs each of them pre-fetched and named to CMake with
  ``-DFETCHCONTENT_SOURCE_DIR_<NAME>=DIR`` (and ``-DFETCHCONTENT_FULLY_DISCONNECTED=ON``).

Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

THREADS_VARIABLE = "SGL_KERNEL_COMPILE_THREADS"
BUILD_PASSES = 2
BUILD_REQUIRES = ("scikit-build-core>=0.10", "cmake>=3.31", "ninja")
# FetchContent_Declare names of sgl-kernel's CMakeLists.txt (the repositories it clones at configure time).
FETCHCONTENT = (
    ("repo-cutlass", "https://github.com/NVIDIA/cutlass"),
    ("repo-deepgemm", "https://github.com/sgl-project/DeepGEMM"),
    ("repo-fmt", "https://github.com/fmtlib/fmt"),
    ("repo-triton", "https://github.com/triton-lang/triton"),
    ("repo-flashinfer", "https://github.com/flashinfer-ai/flashinfer.git"),
    ("repo-flash-attention", "https://github.com/sgl-project/sgl-attn"),
    ("repo-flash-attention-origin", "https://github.com/Dao-AILab/flash-attention.git"),
    ("repo-mscclpp", "https://github.com/microsoft/mscclpp.git"),
    ("repo-fast-hadamard-transform", "https://github.com/sgl-project/fast-hadamard-transform.git"),
)


def _version(text: str) -> tuple[int, int]:
    match = re.match(r"^\s*(\d+)\.(\d+)", str(text))
    if not match:
        raise ValueError(f"cuda_version: expected MAJOR.MINOR such as 12.8; found {text!r}")
    return int(match.group(1)), int(match.group(2))


def gencode_targets(cuda_version: str, machine: str = "x86_64") -> list[str]:
    """The targets sgl-kernel compiles with this CUDA on this machine, in CMakeLists.txt's order."""
    cuda = _version(cuda_version)
    arm = machine in ("aarch64", "arm64")
    targets = ["sm_90"]
    if not arm:  # ENABLE_BELOW_SM90 is on unless aarch64
        targets += ["sm_80", "sm_89"]
    if cuda >= (12, 8):
        targets += ["sm_100a", "sm_120a"]
        if cuda >= (13, 0):
            targets += ["sm_103a"] + (["sm_110a", "sm_121a"] if arm else [])
        elif arm:
            targets += ["sm_101a"]
    if cuda >= (12, 4):
        targets += ["sm_90a"]
    return targets


def cmake_args(nvcc_threads: int, existing: str = "") -> str:
    """CMAKE_ARGS with the thread count as the CMake variable sgl-kernel reads; one the user set is kept."""
    if re.search(rf"-D{THREADS_VARIABLE}(:[A-Z]+)?=", existing or ""):
        return existing
    return f"{existing} -D{THREADS_VARIABLE}={int(nvcc_threads)}".strip()


def fetchcontent_args(sources: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """(-D arguments for the pre-fetched sources, what is missing as 'name (repository)').

    ``sources`` maps a FetchContent name (``repo-cutlass``) to the directory it was fetched into.
    """
    args, missing = [], []
    for name, repository in FETCHCONTENT:
        where = sources.get(name)
        if where:
            args.append(f"-DFETCHCONTENT_SOURCE_DIR_{name.upper()}={where}")
        else:
            missing.append(f"{name} ({repository})")
    if not missing:
        args.append("-DFETCHCONTENT_FULLY_DISCONNECTED=ON")
    return args, missing


def offline_problem(sources: Mapping[str, str], names: Sequence[str] = ()) -> str | None:
    """What an sgl-kernel build without GitHub lacks, as one sentence; None when nothing is missing."""
    _args, missing = fetchcontent_args(sources)
    missing = [m for m in missing if not names or m.split(" ", 1)[0] in names]
    if not missing:
        return None
    return ("sgl-kernel fetches its third-party sources from GitHub when CMake configures it; without GitHub, "
            "fetch each of these at the commit its CMakeLists.txt pins (FetchContent_Declare GIT_TAG) and name "
            f"its directory: {', '.join(missing)}")
