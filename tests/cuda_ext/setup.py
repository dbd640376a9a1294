"""A tiny CUDA extension for testing the cuda_extension role: one kernel, no torch.

The build compiles src/*.cu with nvcc from CUDA_HOME for the architectures in
TORCH_CUDA_ARCH_LIST ("12.0" -> sm_120, "9.0a" -> sm_90a, "+PTX" adds PTX), MAX_JOBS files at a
time, each nvcc with --threads NVCC_THREADS, and links them with the CUDA runtime linked in
statically into one shared library, which the package loads with ctypes: importing it needs
neither a driver nor a GPU.

GPUHOST_CUDA_EXT_BUILD_SLEEP=N makes the build wait N seconds between compiling and linking, so
that a test can interrupt it half-way.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
SOURCES = ["src/kernel.cu", "src/info.cu"]
SLEEP_ENV = "GPUHOST_CUDA_EXT_BUILD_SLEEP"


def gencode_flags(arch_list: str) -> tuple[list[str], list[str]]:
    """nvcc -gencode flags and sm names for a TORCH_CUDA_ARCH_LIST such as "9.0a;12.0+PTX"."""
    flags, names = [], []
    for arch in re.split(r"[;\s]+", arch_list.strip()):
        match = re.fullmatch(r"(\d+)\.(\d+)([af]?)(\+PTX)?", arch)
        if not match:
            sys.exit(f"gpuhost-cuda-ext: expected TORCH_CUDA_ARCH_LIST entries like 12.0, 9.0a or 8.6+PTX; "
                     f"found {arch!r}")
        number = f"{match.group(1)}{match.group(2)}{match.group(3)}"
        codes = [f"sm_{number}"] + ([f"compute_{number}"] if match.group(4) else [])
        flags.append(f"-gencode=arch=compute_{number},code=[{','.join(codes)}]")
        names.append(f"sm_{number}")
    return flags, names


class NvccBuildExt(build_ext):
    def build_extension(self, ext: Extension) -> None:
        cuda_home = os.environ.get("CUDA_HOME", "")
        nvcc = Path(cuda_home) / "bin" / "nvcc"
        if not cuda_home or not nvcc.exists():
            sys.exit(f"gpuhost-cuda-ext: expected nvcc under CUDA_HOME; CUDA_HOME is {cuda_home!r}")
        arch_list = os.environ.get("TORCH_CUDA_ARCH_LIST", "")
        if not arch_list:
            sys.exit("gpuhost-cuda-ext: expected TORCH_CUDA_ARCH_LIST (e.g. 12.0); found it unset")
        gencode, names = gencode_flags(arch_list)
        jobs = max(1, int(os.environ.get("MAX_JOBS") or 1))
        threads = max(1, int(os.environ.get("NVCC_THREADS") or 1))
        print(f"gpuhost-cuda-ext: nvcc {nvcc}, archs {' '.join(names)}, MAX_JOBS={jobs}, NVCC_THREADS={threads}",
              flush=True)

        temp = Path(self.build_temp)
        temp.mkdir(parents=True, exist_ok=True)
        common = [str(nvcc), "-O2", "-Xcompiler", "-fPIC", "--threads", str(threads), *gencode,
                  f"-DGPUHOST_CUDA_EXT_ARCHS=\"{' '.join(names)}\""]

        def compile_one(source: str) -> Path:
            obj = temp / (Path(source).stem + ".o")
            argv = [*common, "-c", str(HERE / source), "-o", str(obj)]
            print(" ".join(argv), flush=True)
            subprocess.run(argv, check=True)
            return obj

        with ThreadPoolExecutor(max_workers=jobs) as pool:
            objects = list(pool.map(compile_one, SOURCES))

        pause = int(os.environ.get(SLEEP_ENV) or 0)
        if pause > 0:
            print(f"gpuhost-cuda-ext: {SLEEP_ENV}={pause}: waiting before linking", flush=True)
            time.sleep(pause)

        target = Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        argv = [str(nvcc), "-shared", "-cudart", "static", *gencode, *map(str, objects), "-o", str(target)]
        print(" ".join(argv), flush=True)
        subprocess.run(argv, check=True)


setup(
    name="gpuhost-cuda-ext",
    version="0.1.0",
    description="One CUDA kernel in a shared library loaded with ctypes, to test CUDA extension builds",
    packages=["gpuhost_cuda_ext"],
    ext_modules=[Extension("gpuhost_cuda_ext._kernel", sources=SOURCES)],
    cmdclass={"build_ext": NvccBuildExt},
    python_requires=">=3.9",
    zip_safe=False,
)
