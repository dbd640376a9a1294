"""Whether an nccl-tests log ran on the GPUs of the host it is judged for.

Material mixes files: an nccl-tests log pasted into a ticket may come from another machine. Its rank lines
name each rank's GPU (parsers/nccl_tests_text.py); when none of those names is a GPU the host's audit lists, the log's
figures describe another machine, and the reader must be told. Older nccl-tests print names without the "NVIDIA "
prefix ("A100-SXM4-40GB" for "NVIDIA A100-SXM4-40GB"), so names are compared without it, either containing the other.
"""

from __future__ import annotations

import re


def _plain(name: str) -> str:
    return re.sub(r"^nvidia\s+", "", " ".join(name.split()).lower())


def _same_gpu(log_name: str, host_name: str) -> bool:
    log, host = _plain(log_name), _plain(host_name)
    return bool(log and host) and (log in host or host in log)


def gpu_name_mismatch(log_names: list[str], host_names: list[str], log: str) -> str | None:
    """A warning when a GPU the log ran on is none of the host's; None when they agree or either side names none."""
    log_names = [n for n in log_names if isinstance(n, str) and n.strip()]
    host_names = [n for n in host_names if isinstance(n, str) and n.strip()]
    if not log_names or not host_names:
        return None
    foreign = sorted({n for n in log_names if not any(_same_gpu(n, h) for h in host_names)})
    if not foreign:
        return None
    return (f"{log}: the nccl-tests log ran on {', '.join(foreign)}, which this host's GPUs "
            f"({', '.join(sorted(set(host_names)))}) are not: the log may come from another machine. Its figures "
            "are judged as this host's all the same; check where it was run")
