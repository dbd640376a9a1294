"""How many compile jobs a CUDA extension build may run without running the host out of memory.

flash-attention and sgl-kernel compile with ``MAX_JOBS`` parallel compiler jobs, each an nvcc that
itself runs ``NVCC_THREADS`` threads (``nvcc --threads``), and one nvcc thread on their kernels
peaks at several GiB. Their own guesses look only at the CPU count, which on a 128-core host asks
for hundreds of GiB and ends with the OOM killer. The rule here:

- ``nvcc_threads = max(1, min(nvcc_threads_cap, targets))``, where ``targets`` is the number of
  architectures (an arch with ``+PTX`` counts twice: it adds a PTX target): ``nvcc --threads``
  compiles the gencode targets of one file in parallel, so more threads than targets are idle.
- ``headroom = max(headroom_min_gib, headroom_fraction x total memory)``: what the rest of the host
  keeps.
- ``mem_jobs = floor((available - headroom) / (mem_per_thread_gib x nvcc_threads))``.
- ``cpu_jobs = max(1, cpus // nvcc_threads)``.
- ``max_jobs = min(cpu_jobs, mem_jobs, max_jobs_cap)``.
- ``mem_jobs < 1`` means that even one job would not fit: ``JobsError`` says how many GiB one job
  needs and how many were found, unless ``allow_low_memory`` forces one job.

The numbers come from the host through a small reading layer: ``/proc/meminfo`` (MemTotal,
MemAvailable), the CPUs this process may run on (``os.sched_getaffinity``), and the cgroup limits
that containers and systemd slices put below what ``/proc`` shows (cgroup v2 ``memory.max``,
``memory.current``, ``cpu.max``; cgroup v1 ``memory.limit_in_bytes``, ``memory.usage_in_bytes``,
``cpu.cfs_quota_us``). The reading functions take the root of the tree to read, so tests point them
at fake files.

The planning is pure: no Ansible, no I/O. Errors are ``JobsError`` (a ``ValueError``) saying what
was expected, what was found and what to do.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

GIB = 1024 ** 3
# cgroup v1 writes "no limit" as the largest page-aligned 64-bit value; anything this large is none.
UNLIMITED_BYTES = 1 << 60

DEFAULT_HEADROOM_MIN_GIB = 4.0
DEFAULT_HEADROOM_FRACTION = 0.15
DEFAULT_NVCC_THREADS_CAP = 4
DEFAULT_MAX_JOBS_CAP = 32


class JobsError(ValueError):
    """Inputs that cannot be planned with, or a host too small to build on, with what to do."""


@dataclass(frozen=True)
class Resources:
    """What a build may use on this host: the smaller of what /proc says and what cgroups allow."""

    cpus: int
    mem_total_gib: float
    mem_available_gib: float
    # One line per source that bounded a number, e.g. "cgroup v2 memory.max at /sys/fs/cgroup/x: 16.0 GiB".
    limits: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["limits"] = list(self.limits)
        data["mem_total_gib"] = round(self.mem_total_gib, 2)
        data["mem_available_gib"] = round(self.mem_available_gib, 2)
        return data


@dataclass(frozen=True)
class JobPlan:
    max_jobs: int
    nvcc_threads: int
    cpu_jobs: int
    mem_jobs: int
    headroom_gib: float
    usable_gib: float  # available minus headroom
    gib_per_job: float  # mem_per_thread_gib x nvcc_threads
    forced: bool  # allow_low_memory made a job the rule would not allow
    explanation: str = field(default="")

    @property
    def planned_gib(self) -> float:
        return self.max_jobs * self.gib_per_job

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["planned_gib"] = round(self.planned_gib, 2)
        for key in ("headroom_gib", "usable_gib", "gib_per_job"):
            data[key] = round(data[key], 2)
        return data


def count_targets(archs: Sequence[str]) -> int:
    """Gencode targets of a TORCH_CUDA_ARCH_LIST: one per arch, one more for each ``+PTX``."""
    return sum(2 if arch.strip().upper().endswith("+PTX") else 1 for arch in archs if arch.strip())


def _number(name: str, value: Any, minimum: float, *, integer: bool = False, below: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or (integer and not isinstance(value, int)):
        kind = "a whole number" if integer else "a number"
        raise JobsError(f"{name}: expected {kind}; found {value!r} ({type(value).__name__}). Give it as {kind}")
    if math.isnan(value) or math.isinf(value) or value < minimum or (below is not None and value >= below):
        bound = f" and below {below}" if below is not None else ""
        raise JobsError(f"{name}: expected a finite value of at least {minimum}{bound}; found {value!r}. "
                        "Correct the value")
    return value


def plan_jobs(*, cpus: int, mem_total_gib: float, mem_available_gib: float, targets: int,
              mem_per_thread_gib: float, headroom_min_gib: float = DEFAULT_HEADROOM_MIN_GIB,
              headroom_fraction: float = DEFAULT_HEADROOM_FRACTION,
              nvcc_threads_cap: int = DEFAULT_NVCC_THREADS_CAP, max_jobs_cap: int = DEFAULT_MAX_JOBS_CAP,
              allow_low_memory: bool = False) -> JobPlan:
    """MAX_JOBS and NVCC_THREADS for a build, by the rule in this module's docstring."""
    _number("cpus", cpus, 1, integer=True)
    _number("mem_total_gib", mem_total_gib, 0)
    _number("mem_available_gib", mem_available_gib, 0)
    _number("targets", targets, 0, integer=True)
    _number("mem_per_thread_gib", mem_per_thread_gib, 0.001)
    _number("headroom_min_gib", headroom_min_gib, 0)
    _number("headroom_fraction", headroom_fraction, 0, below=1)
    _number("nvcc_threads_cap", nvcc_threads_cap, 1, integer=True)
    _number("max_jobs_cap", max_jobs_cap, 1, integer=True)

    threads = max(1, min(nvcc_threads_cap, targets))
    headroom = max(headroom_min_gib, headroom_fraction * mem_total_gib)
    usable = mem_available_gib - headroom
    per_job = mem_per_thread_gib * threads
    mem_jobs = math.floor(usable / per_job) if usable > 0 else 0
    # Division rounds: make sure the plan never adds up to more than what is usable.
    while mem_jobs > 0 and mem_jobs * per_job > usable:
        mem_jobs -= 1
    cpu_jobs = max(1, cpus // threads)

    thread_why = (f"{targets} target{'s' if targets != 1 else ''} -> {threads} nvcc thread"
                  f"{'s' if threads != 1 else ''} per job (cap {nvcc_threads_cap})")
    mem_why = (f"({mem_available_gib:.1f} GiB available - {headroom:.1f} GiB headroom) / "
               f"({mem_per_thread_gib:g} GiB x {threads} thread{'s' if threads != 1 else ''}) = {mem_jobs} jobs")
    cpu_why = f"{cpus} CPUs // {threads} = {cpu_jobs} jobs"

    if mem_jobs < 1:
        needed = per_job + headroom
        if not allow_low_memory:
            raise JobsError(
                f"not enough memory to build: one job needs {needed:.1f} GiB available ({threads} nvcc thread"
                f"{'s' if threads != 1 else ''} x {mem_per_thread_gib:g} GiB, plus {headroom:.1f} GiB headroom), "
                f"found {mem_available_gib:.1f} GiB available of {mem_total_gib:.1f} GiB. Free memory, build on a "
                "larger host and install the wheel here from the wheelhouse, or allow low memory to force "
                "MAX_JOBS=1 at the risk of the OOM killer")
        explanation = (f"MAX_JOBS=1, NVCC_THREADS={threads}: forced (low memory allowed): {mem_why}, one job needs "
                       f"{needed:.1f} GiB; {thread_why}")
        return JobPlan(1, threads, cpu_jobs, mem_jobs, headroom, usable, per_job, True, explanation)

    max_jobs = min(cpu_jobs, mem_jobs, max_jobs_cap)
    bounds = [name for name, value in (("CPUs", cpu_jobs), ("memory", mem_jobs), ("the cap", max_jobs_cap))
              if value == max_jobs]
    explanation = (f"MAX_JOBS={max_jobs}, NVCC_THREADS={threads}: {thread_why}; {cpu_why}; {mem_why}; "
                   f"cap {max_jobs_cap}; limited by {' and '.join(bounds)}")
    return JobPlan(max_jobs, threads, cpu_jobs, mem_jobs, headroom, usable, per_job, False, explanation)


# --------------------------------------------------------------------------------------------------
# Parsers: text to numbers, with an error naming the file when the text is not what the kernel writes.


def parse_meminfo(text: str, where: str = "/proc/meminfo") -> tuple[int, int]:
    """(MemTotal, MemAvailable) in bytes."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        match = re.fullmatch(r"(MemTotal|MemAvailable):[ \t]*([0-9]+)[ \t]*kB[ \t]*", line)
        if match:
            values[match.group(1)] = int(match.group(2)) * 1024
    missing = [key for key in ("MemTotal", "MemAvailable") if key not in values]
    if missing:
        raise JobsError(f"{where}: expected lines 'MemTotal: <n> kB' and 'MemAvailable: <n> kB'; found no "
                        f"{' or '.join(missing)} in {text[:200]!r}. The kernel (3.14 or later) writes both; "
                        "check that this is a Linux /proc")
    return values["MemTotal"], values["MemAvailable"]


def parse_limit_bytes(text: str, where: str) -> int | None:
    """A memory limit: bytes, or None for "max" (v2) and the huge values v1 writes for no limit."""
    value = text.strip()
    if value == "max":
        return None
    if not re.fullmatch(r"[0-9]+", value):
        raise JobsError(f"{where}: expected a number of bytes or 'max'; found {value[:100]!r}. "
                        "The file is not what the kernel writes; check the cgroup mount")
    number = int(value)
    return None if number >= UNLIMITED_BYTES else number


def parse_bytes(text: str, where: str) -> int:
    value = text.strip()
    if not re.fullmatch(r"[0-9]+", value):
        raise JobsError(f"{where}: expected a number of bytes; found {value[:100]!r}. "
                        "The file is not what the kernel writes; check the cgroup mount")
    return int(value)


def parse_memory_stat(text: str, where: str) -> dict[str, int]:
    stats: dict[str, int] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2 or not re.fullmatch(r"[0-9]+", parts[1]):
            raise JobsError(f"{where}: expected lines '<name> <number>'; found {line[:100]!r}. "
                            "The file is not what the kernel writes; check the cgroup mount")
        stats[parts[0]] = int(parts[1])
    return stats


def parse_cpu_max(text: str, where: str) -> float | None:
    """CPUs a cgroup v2 ``cpu.max`` ("quota period" or "max period") allows; None when unlimited."""
    parts = text.split()
    if len(parts) not in (1, 2) or not all(re.fullmatch(r"[0-9]+", part) for part in parts[1:]) or \
            (parts[0] != "max" and not re.fullmatch(r"[0-9]+", parts[0])):
        raise JobsError(f"{where}: expected '<quota> <period>' or 'max <period>'; found {text.strip()[:100]!r}. "
                        "The file is not what the kernel writes; check the cgroup mount")
    if parts[0] == "max":
        return None
    period = int(parts[1]) if len(parts) == 2 else 100000
    if period == 0:
        raise JobsError(f"{where}: expected a period above 0; found {text.strip()!r}")
    return int(parts[0]) / period


def parse_cfs(quota_text: str, period_text: str, where: str) -> float | None:
    """CPUs a cgroup v1 CFS quota allows; None for -1 (no quota)."""
    quota, period = quota_text.strip(), period_text.strip()
    if not re.fullmatch(r"-?[0-9]+", quota) or not re.fullmatch(r"[0-9]+", period) or int(period) == 0:
        raise JobsError(f"{where}: expected cpu.cfs_quota_us as a number (-1 for none) and cpu.cfs_period_us "
                        f"above 0; found {quota[:50]!r} and {period[:50]!r}. Check the cgroup mount")
    if int(quota) < 0:
        return None
    return int(quota) / int(period)


def parse_proc_cgroup(text: str) -> tuple[str | None, dict[str, str]]:
    """From /proc/self/cgroup: the v2 path ("0::/path") and the v1 path of each controller."""
    v2: str | None = None
    v1: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hierarchy, controllers, path = parts
        if hierarchy == "0" and controllers == "":
            v2 = path
        else:
            for controller in controllers.split(","):
                if controller:
                    v1[controller] = path
    return v2, v1


# --------------------------------------------------------------------------------------------------
# Reading the host. Every function takes the root of the tree, "/" on a live host.


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return None


def _levels(mount: Path, path: str) -> list[Path]:
    """The cgroup directories from this process's own up to the mount's root, where limits also apply.

    In a container the mount is often the container's own cgroup while /proc/self/cgroup still names
    the host's path, which is then not found under the mount: the mount itself is the cgroup.
    """
    leaf = mount / path.lstrip("/")
    if not leaf.is_dir():
        leaf = mount
    levels = [leaf]
    while levels[-1] != mount and mount in levels[-1].parents:
        levels.append(levels[-1].parent)
    return levels


@dataclass
class _Limits:
    memory_bytes: int | None = None
    memory_free_bytes: int | None = None
    cpus: float | None = None
    notes: list[str] = field(default_factory=list)

    def memory(self, limit: int, used: int, where: str) -> None:
        free = max(0, limit - used)
        if self.memory_bytes is None or limit < self.memory_bytes:
            self.memory_bytes = limit
        if self.memory_free_bytes is None or free < self.memory_free_bytes:
            self.memory_free_bytes = free
        self.notes.append(f"{where}: limit {limit / GIB:.1f} GiB, {free / GIB:.1f} GiB free")

    def cpu(self, cpus: float, where: str) -> None:
        if self.cpus is None or cpus < self.cpus:
            self.cpus = cpus
        self.notes.append(f"{where}: {cpus:g} CPUs")


def _in_use(current: int, stat_text: str | None, key: str, where: str) -> int:
    """Memory charged to a cgroup less its inactive page cache, which the kernel reclaims before any OOM."""
    if stat_text is None:
        return current
    inactive = parse_memory_stat(stat_text, where).get(key, 0)
    return max(0, current - inactive)


def _memory_level(limits, level, shown: str, limit_file: str, usage_file: str, inactive_key: str,
                  version: str) -> None:
    """One cgroup level's memory limit and what is in use under it (v1 and v2 differ only in file names)."""
    maximum = _read(level / limit_file)
    usage = _read(level / usage_file)
    if maximum is None or usage is None:
        return
    limit = parse_limit_bytes(maximum, f"{shown}/{limit_file}")
    if limit is not None:
        used = _in_use(parse_bytes(usage, f"{shown}/{usage_file}"), _read(level / "memory.stat"), inactive_key,
                       f"{shown}/memory.stat")
        limits.memory(limit, used, f"{version} {limit_file} at {shown}")


def read_cgroup_limits(root: str | os.PathLike[str] = "/") -> _Limits:
    base = Path(root)
    limits = _Limits()
    text = _read(base / "proc/self/cgroup")
    if text is None:
        return limits
    v2_path, v1_paths = parse_proc_cgroup(text)
    cgroup = base / "sys/fs/cgroup"

    if v2_path is not None:
        # Unified hierarchy at /sys/fs/cgroup, or at /sys/fs/cgroup/unified on hybrid hosts.
        mount = cgroup if (cgroup / "cgroup.controllers").exists() else cgroup / "unified"
        if (mount / "cgroup.controllers").exists():
            for level in _levels(mount, v2_path):
                shown = "/" + str(level.relative_to(base))
                _memory_level(limits, level, shown, "memory.max", "memory.current", "inactive_file", "cgroup v2")
                cpu_max = _read(level / "cpu.max")
                if cpu_max is not None:
                    cpus = parse_cpu_max(cpu_max, f"{shown}/cpu.max")
                    if cpus is not None:
                        limits.cpu(cpus, f"cgroup v2 cpu.max at {shown}")

    if "memory" in v1_paths:
        mount = cgroup / "memory"
        if mount.is_dir():
            for level in _levels(mount, v1_paths["memory"]):
                shown = "/" + str(level.relative_to(base))
                _memory_level(limits, level, shown, "memory.limit_in_bytes", "memory.usage_in_bytes",
                              "total_inactive_file", "cgroup v1")
    cpu_key = "cpu" if "cpu" in v1_paths else None
    if cpu_key is not None:
        mount = next((cgroup / name for name in ("cpu", "cpu,cpuacct") if (cgroup / name).is_dir()), None)
        if mount is not None:
            for level in _levels(mount, v1_paths[cpu_key]):
                shown = "/" + str(level.relative_to(base))
                quota = _read(level / "cpu.cfs_quota_us")
                period = _read(level / "cpu.cfs_period_us")
                if quota is not None and period is not None:
                    cpus = parse_cfs(quota, period, f"{shown}/cpu.cfs_quota_us")
                    if cpus is not None:
                        limits.cpu(cpus, f"cgroup v1 cpu.cfs_quota_us at {shown}")
    return limits


def read_resources(root: str | os.PathLike[str] = "/",
                   affinity: Callable[[], int] | None = None) -> Resources:
    """CPUs and memory a build may use here. ``affinity`` counts the CPUs this process may run on."""
    text = _read(Path(root) / "proc/meminfo")
    if text is None:
        raise JobsError("expected /proc/meminfo to read the host's memory; found no such file. "
                        "This works on Linux hosts only")
    total, available = parse_meminfo(text)
    cpus = affinity() if affinity is not None else len(os.sched_getaffinity(0))
    notes = [f"/proc/meminfo: {total / GIB:.1f} GiB total, {available / GIB:.1f} GiB available",
             f"CPU affinity: {cpus} CPUs"]

    limits = read_cgroup_limits(root)
    notes.extend(limits.notes)
    if limits.memory_bytes is not None:
        total = min(total, limits.memory_bytes)
    if limits.memory_free_bytes is not None:
        available = min(available, limits.memory_free_bytes)
    if limits.cpus is not None:
        # A quota of 1.5 CPUs sustains one compiler, not two.
        cpus = min(cpus, max(1, math.floor(limits.cpus)))
    return Resources(cpus=max(1, cpus), mem_total_gib=total / GIB, mem_available_gib=available / GIB,
                     limits=tuple(notes))


# flash-attention 2.8.3's setup.py builds a gencode only for these FLASH_ATTN_CUDA_ARCHS values, each from a CUDA
# release on (its if-ladder: "80", "90" from 11.8, "100" and "120" from 12.8); any other value matches no branch and
# is dropped without a word, so a build for "89" alone compiles nothing. A TORCH_CUDA_ARCH_LIST arch maps to the
# family whose SASS runs on it (8.6 and 8.9 run sm_80 code, 12.1 runs sm_120's); FA2 has no kernels below Ampere.
FLASH_ATTN_FAMILIES = {"8": ("80", (11, 0)), "9": ("90", (11, 8)), "10": ("100", (12, 8)), "12": ("120", (12, 8))}


def flash_attn_archs(archs: Sequence[str], cuda_release: str | None = None) -> dict[str, Any]:
    """FLASH_ATTN_CUDA_ARCHS for TORCH_CUDA_ARCH_LIST archs the way flash-attention's setup.py reads it, and the
    archs it would not build (with the reason): ``{"value": "80;120", "unbuilt": [...]}``."""
    values: list[str] = []
    unbuilt: list[str] = []
    release = None
    if cuda_release and re.match(r"^[0-9]+\.[0-9]+", str(cuda_release)):
        release = tuple(int(p) for p in re.match(r"^([0-9]+)\.([0-9]+)", str(cuda_release)).groups())
    for arch in archs:
        match = re.match(r"^([0-9]+)\.[0-9]+[af]?(\+PTX)?$", str(arch))
        family = FLASH_ATTN_FAMILIES.get(match.group(1)) if match else None
        if family is None:
            unbuilt.append(f"{arch} (flash-attention builds only 8.x, 9.x, 10.x and 12.x: 80, 90, 100, 120)")
            continue
        value, since = family
        if release is not None and release < since:
            unbuilt.append(f"{arch} (flash-attention builds {value} only with CUDA {since[0]}.{since[1]} or newer, "
                           f"not {cuda_release})")
            continue
        if value not in values:
            values.append(value)
    return {"value": ";".join(values), "unbuilt": unbuilt}
