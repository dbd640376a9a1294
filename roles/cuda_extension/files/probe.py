"""What a venv holds for one CUDA extension, and the wheel cache key it calls for. Prints JSON.

    probe.py --name N --version V --archs JSON --cuda-home DIR [--cuda-release X.Y] --marker PATH

Run with the venv's own interpreter. The cache key is (package, version, torch version or "none",
CUDA release, Python tag, archs). The CUDA release is what nvcc under --cuda-home says; a host with
no nvcc there (one that installs from the wheelhouse) takes --cuda-release, else torch's CUDA, else
the release in the toolkit directory's name (cuda-12.8). torch.version.cuda must equal that release:
a wheel built against one CUDA and loaded by a torch of another fails at import or worse, at run
time. Refusals go to "problems"; the role fails on them.

Standard library only; torch is not imported (slow, and it may need a driver): its version comes
from its metadata, its CUDA release from torch/version.py.
"""

from __future__ import annotations

import argparse
import ast
import grp
import importlib.util
import json
import os
import pwd
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

RELEASE_IN_NVCC = re.compile(r"release (\d+\.\d+),")
RELEASE_IN_PATH = re.compile(r"cuda-(\d+\.\d+)$")


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def dist_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def torch_cuda(version_py: str) -> str | None:
    """The value of ``cuda`` in torch/version.py (``cuda = '12.8'`` or ``cuda: Optional[str] = '12.8'``)."""
    for node in ast.parse(version_py).body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else \
            node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(target, ast.Name) and target.id == "cuda" and isinstance(node.value, ast.Constant):
            return node.value.value if isinstance(node.value.value, str) else None
    return None


def read_torch() -> dict | None:
    version = dist_version("torch")
    if version is None:
        return None
    spec = importlib.util.find_spec("torch")
    cuda = None
    if spec is not None and spec.submodule_search_locations:
        path = Path(next(iter(spec.submodule_search_locations))) / "version.py"
        try:
            cuda = torch_cuda(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, ValueError):
            cuda = None
    return {"version": version, "cuda": cuda}


def read_nvcc(cuda_home: str) -> dict | None:
    nvcc = Path(cuda_home) / "bin" / "nvcc"
    if not nvcc.exists():
        return None
    try:
        proc = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, timeout=60, check=False,
                              env={**os.environ, "LC_ALL": "C"})
    except (OSError, subprocess.TimeoutExpired) as err:
        return {"path": str(nvcc), "release": None, "error": str(err)}
    match = RELEASE_IN_NVCC.search(proc.stdout)
    return {"path": str(nvcc), "release": match.group(1) if match else None,
            "error": "" if match else f"exit {proc.returncode}: {(proc.stdout + proc.stderr).strip()[-300:]}"}


def arch_tag(arch: str) -> str:
    """'12.0' -> '120', '9.0a' -> '90a', '8.6+PTX' -> '86ptx'."""
    return re.sub(r"[^0-9a-z]", "", arch.strip().lower().replace("+ptx", "ptx"))


def key_dir(key: dict) -> str:
    name = (f"{key['package']}-{key['version']}-torch{key['torch']}-cu{key['cuda']}-{key['python']}"
            f"-sm{'_'.join(arch_tag(arch) for arch in key['archs'])}")
    return re.sub(r"[^A-Za-z0-9._+-]", "_", name)


def python_tag() -> str:
    prefix = {"cpython": "cp", "pypy": "pp"}.get(sys.implementation.name, sys.implementation.name)
    return f"{prefix}{sys.version_info.major}{sys.version_info.minor}"


def cuda_release(nvcc: dict | None, configured: str, torch: dict | None, cuda_home: str) -> tuple[str | None, str]:
    if nvcc is not None and nvcc.get("release"):
        return nvcc["release"], f"nvcc at {nvcc['path']}"
    if configured:
        return configured, "cuda_extension_cuda_release"
    if torch is not None and torch.get("cuda"):
        return torch["cuda"], f"torch {torch['version']}"
    match = RELEASE_IN_PATH.search(cuda_home.rstrip("/"))
    if match:
        return match.group(1), f"the name of {cuda_home}"
    return None, ""


def problems_of(report: dict, configured: str, cuda_home: str) -> list[str]:
    problems = []
    nvcc, torch, release = report["nvcc"], report["torch"], report["cuda_release"]
    if nvcc is not None and not nvcc.get("release"):
        problems.append(f"expected {nvcc['path']} --version to print 'release X.Y,'; found {nvcc['error']}. "
                        "Check the CUDA toolkit under cuda_extension_cuda_home")
    if release is None:
        problems.append(f"cannot tell the CUDA release: no nvcc under {cuda_home}, no cuda_extension_cuda_release, "
                        f"no torch with CUDA in the venv, and '{cuda_home}' does not end in cuda-X.Y. Set "
                        "cuda_extension_cuda_release to the release the wheel was built with")
    if nvcc is not None and nvcc.get("release") and configured and configured != nvcc["release"]:
        problems.append(f"cuda_extension_cuda_release is {configured}, but {nvcc['path']} is release "
                        f"{nvcc['release']}. Point cuda_extension_cuda_home at the CUDA {configured} toolkit, or "
                        "correct cuda_extension_cuda_release")
    if torch is not None and release is not None and torch.get("cuda") != release:
        problems.append(f"torch {torch['version']} in the venv reports CUDA {torch.get('cuda') or 'none (a CPU build)'}"
                        f", but the extension is built for CUDA {release} ({report['cuda_release_source']}). An "
                        f"extension built against another CUDA than torch's fails to load or misbehaves. Install the "
                        f"torch for CUDA {release}, or build with the CUDA {torch.get('cuda')} toolkit "
                        "(cuda_extension_cuda_home)")
    return problems


def probe(name: str, version: str, archs: list[str], cuda_home: str, configured: str, marker_path: str) -> dict:
    torch = read_torch()
    nvcc = read_nvcc(cuda_home)
    release, source = cuda_release(nvcc, configured, torch, cuda_home)
    report = {
        "python": ".".join(str(part) for part in sys.version_info[:3]),
        "python_tag": python_tag(),
        "prefix": sys.prefix,
        "user": pwd.getpwuid(os.getuid()).pw_name,
        "group": grp.getgrgid(os.getgid()).gr_name,
        "pip": dist_version("pip"),
        "installed": dist_version(name),
        "torch": torch,
        "nvcc": nvcc,
        "cuda_release": release,
        "cuda_release_source": source,
        "marker": None,
    }
    report["key"] = {"package": normalize(name), "version": version,
                     "torch": torch["version"] if torch else "none", "cuda": release or "unknown",
                     "python": report["python_tag"], "archs": list(archs)}
    report["key_dir"] = key_dir(report["key"])
    try:
        marker = json.loads(Path(marker_path).read_text(encoding="utf-8"))
        report["marker"] = marker if isinstance(marker, dict) else None
    except (OSError, ValueError):
        report["marker"] = None
    report["problems"] = problems_of(report, configured, cuda_home)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--name", required=True)
    parser.add_argument("--version", required=True)
    parser.add_argument("--archs", required=True, help="JSON list, e.g. [\"12.0\"]")
    parser.add_argument("--cuda-home", required=True)
    parser.add_argument("--cuda-release", default="")
    parser.add_argument("--marker", required=True)
    args = parser.parse_args(argv)
    print(json.dumps(probe(args.name, args.version, json.loads(args.archs), args.cuda_home, args.cuda_release,
                           args.marker), sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
