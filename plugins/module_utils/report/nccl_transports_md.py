"""The Markdown section of a pasted NCCL INFO log's P2P evidence (the facts' ``nccl_transports``,
material/nccl_transports.py): what NCCL used between each pair, and what could not be matched."""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.report.markdown import matrix_table


def nccl_transports_section(transports: Any) -> list[str]:
    """"## P2P from the NCCL INFO log", or nothing when the facts hold no log."""
    if not isinstance(transports, dict):
        return []
    version = transports.get("nccl_version")
    out = [f"## P2P from the NCCL INFO log{f' (NCCL {version})' if version else ''}", ""]
    matrix = transports.get("matrix") or []
    if matrix:
        out += matrix_table([f"GPU{i}" for i in range(len(matrix))], matrix)
        out += ["P2P: a P2P transport connected the pair (P2P works); refused: NCCL was told P2P cannot be enabled; "
                "SHM/NET: connected without P2P and without a refusal, which proves nothing by itself (NCCL avoids "
                "P2P across PCIe host bridges by default); -: no connection between them in the log.", ""]
    else:
        out += [f"Not matched to this host's GPUs: {transports.get('not_mapped') or 'no pair shown'}.", ""]
    if transports.get("p2p_off_by_environment"):
        out += [f"P2P switched off by the run's environment: {transports['p2p_off_by_environment']}.", ""]
    return out
