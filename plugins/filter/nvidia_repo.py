"""Filters over NVIDIA's repository table (module_utils/serving/nvidia_repos.py), for the nvidia_driver and
cuda_toolkit roles: the one place both read the repository, its key, the branches and the package names from.

Each filter returns plain data; a request the table cannot serve comes back as ``problem`` (a sentence saying what to
choose), which the roles assert on, so a user sees the sentence and not a template traceback.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.serving import nvidia_repos


def _repo(row: Any) -> nvidia_repos.Repo:
    name = row.get("name") if isinstance(row, dict) else row
    for repo in nvidia_repos.REPOSITORIES:
        if repo.name == name:
            return repo
    raise nvidia_repos.RepoError(f"{name!r} is not one of NVIDIA's repositories in the table")


def nvidia_repo(distribution: Any, version: Any, architecture: Any = "x86_64") -> dict[str, Any]:
    """The table's row for this host, with ``problem`` None; or only ``problem``."""
    try:
        repo = nvidia_repos.find(str(distribution), str(version), str(architecture))
    except nvidia_repos.RepoError as exc:
        return {"problem": str(exc)}
    row = repo.as_dict()
    row["arch_dir"] = nvidia_repos.ARCH_DIRS[str(architecture)]
    row["url"] = f"{nvidia_repos.BASE_URL}{repo.name}/{row['arch_dir']}/"
    row["problem"] = None
    return row


def nvidia_driver_packages(row: Any, branch: Any, flavor: Any, compute_capabilities: Any = ()) -> dict[str, Any]:
    """The branch (the one asked for, or the table's default for these GPUs) and its package names."""
    try:
        repo = _repo(row)
        default = nvidia_repos.default_branch(repo, [str(c) for c in compute_capabilities or []])
        chosen = str(branch) if branch else default["branch"]
        if not chosen:
            return {"problem": default["problem"], "default": default}
        out = nvidia_repos.driver_packages(repo, chosen, str(flavor))
    except nvidia_repos.RepoError as exc:
        return {"problem": str(exc)}
    out.update({"default": default, "chosen_by": "nvidia_driver_branch" if branch else "table",
                "probe_names": nvidia_repos.probe_names(repo, str(flavor)), "problem": None})
    return out


def nvidia_apt_offer(madison: Any, packages: Any, branch: Any, version: Any = "", probe_names: Any = ()) -> dict:
    """What ``apt-cache madison`` says the host's repository offers: per package its versions, the branches of the
    kernel module, and the planned packages it lacks at the branch (or exact version)."""
    versions = nvidia_repos.madison_versions(str(madison or ""))
    return {
        "versions": versions,
        "branches": nvidia_repos.branches_offered(versions, [str(n) for n in probe_names or []]),
        "missing": nvidia_repos.check_offered(versions, [str(p) for p in packages or []], str(branch),
                                              str(version or "")),
    }


def cuda_glibc_clash(cuda_releases: Any, glibc: Any) -> str | None:
    """Why these CUDA releases cannot compile on this glibc (``getconf GNU_LIBC_VERSION``'s number), or None."""
    releases = [str(r) for r in cuda_releases] if isinstance(cuda_releases, (list, tuple)) else [str(cuda_releases)]
    return nvidia_repos.glibc_clash(releases, str(glibc) if glibc else None)


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "nvidia_repo": nvidia_repo,
            "nvidia_driver_packages": nvidia_driver_packages,
            "nvidia_apt_offer": nvidia_apt_offer,
            "cuda_glibc_clash": cuda_glibc_clash,
        }
