"""`schema_version` moves with the shape of the facts.

A consumer of reports/<host>.json keys its reading on `schema_version`; a shape that changes under the
same number breaks it silently (a matrix cell that became null, a key that appeared or went). The
fingerprint below is the schema with its prose removed; a change of it without a new version fails
here, saying what to do.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.audit import facts as audit_facts

from tests.unit import schemas

# schema_version -> fingerprint of docs/gpu_host.schema.json's shape at that version.
# 1: the first declared schema. 2: GPU health, NVML handle errors, null cells for pairs not read,
#    nvidia-smi -q -x as a source, topology notes, the bench's NCCL version and diagnostics.
# 3: material: its section (since 7 under the key material), not_seen, the "not judged" verdict, a null
#    virtualization type and IOMMU state when nothing showed them, nvidia-smi -q text as a health source; the
#    communication ceiling's basis (measured all-reduce or estimate from the pair copy latency), source,
#    assumptions and estimate.
# 4: the kernel's release and command line, each GPU's VBIOS version; in reports the drift since the previous
#    report (report/drift.py) and the proof: when the benchmark was measured and the facts it was measured on.
# 5: P2P matrices of several capabilities at once (read+write ...) and of a capability not stated (not_stated),
#    from material; a material input's capability (its letters and what told them: command line, heading,
#    file name or not stated); the probe's
#    simpleP2P logs (tool simpleP2P, memcpy_peer, passed) and where a p2pBandwidthLatencyTest paste was cut (cut);
#    the NCCL benchmark's serving_env (the environment it measured with); gpus.source "nccl" (material
#    whose only GPU list is an NCCL topology dump or INFO log); each finding's action and the summary's action
#    (findings/actions.py); the kernel log's NVSwitch SXid events (sxid_events); the fabric manager's
#    version_mismatch.
# 6: DCGM's diagnostic verdicts (health.dcgm_diag: dcgmi run on request, or its JSON in material);
#    manifest_class (the class of the manifest a host was judged against: the fleet compares a class's hosts);
#    the fabric manager's package_version, its log from material (log) and a null nvswitches there.
#    nccl_transports: what a pasted NCCL INFO log proves about P2P per pair of the host's GPUs (P2P, refused,
#    SHM, NET), its NCCL version, transports, the environment that switched P2P off, and why it was not matched.
#    host_settings: the CPU vendor and nvidia_uvm's uvm_disable_hmm (audit/host_settings.py), judged by the PCIe
#    Blackwell rules and the NCCL topology check; packages: the GPU packages, their holds and unattended-upgrades
#    (audit/packages.py).
# 7: the section on material under the key material (the word for saved material everywhere), and the benchmark's
#    communication ceiling under the key communication_ceiling (bench.nccl and the report's summary), no other
#    change.
# 8: proxmox.node_evidence (a Proxmox node only from its own tools: pveversion or its kernel, never a qemu-server
#    directory alone); VM configs given in material without their node, with gpus_assumed or gpus_not_known per VM
#    and null host facts (vfio_modules among them); material.node_outputs (a Proxmox node's own outputs set apart from
#    its guest's material); the communication ceiling's observed rate (an SGLang decode log
#    in material) and the share of each token all-reduce explains; each NCCL threshold's timing rule and
#    calibration (bench/nccl_thresholds.py ENGINES).
SHAPES = {
    2: "5f766fda1a026bc8",
    3: "e02b6d047b125e76",
    4: "0c9feec2a7edddbc",
    5: "a83b48a095fc0e46",
    6: "45df02c55ea5e239",
    7: "719f05ca7ebe1d4e",
    8: "b740f9684d0ac70b",
}
PROSE = {"description", "title", "$comment", "examples"}


def shape(node: Any) -> Any:
    """The schema without its prose: what a consumer's parsing depends on."""
    if isinstance(node, dict):
        return {key: shape(value) for key, value in node.items() if key not in PROSE}
    if isinstance(node, list):
        return [shape(item) for item in node]
    return node


def fingerprint(document: dict[str, Any]) -> str:
    canonical = json.dumps(shape(document), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def test_the_shape_of_the_facts_is_the_one_recorded_for_their_schema_version() -> None:
    found = fingerprint(schemas.load(schemas.GPU_HOST))
    version = audit_facts.SCHEMA_VERSION
    assert SHAPES.get(version) == found, (
        f"docs/gpu_host.schema.json changed shape (fingerprint {found}) under schema_version {version}. "
        f"If the change is not released yet and belongs to version {version}, record {found} for it in SHAPES; "
        f"otherwise bump SCHEMA_VERSION in audit/facts.py and the schema's const to {version + 1}, add "
        f"{version + 1}: {found!r} to SHAPES and say what changed in the comment above it and in docs/reports.md.")


def test_prose_alone_does_not_change_the_fingerprint() -> None:
    document = schemas.load(schemas.GPU_HOST)
    reworded = json.loads(json.dumps(document).replace('"description": "', '"description": "Reworded: '))
    assert fingerprint(reworded) == fingerprint(document)


def test_a_new_key_changes_the_fingerprint() -> None:
    document = schemas.load(schemas.GPU_HOST)
    grown = json.loads(json.dumps(document))
    grown["properties"]["extra"] = {"type": "string"}
    assert fingerprint(grown) != fingerprint(document)
