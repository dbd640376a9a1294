"""The declared schemas (docs/*.schema.json) against what the code writes: the facts of every capture,
the reports built from them with benchmarks read from the fixtures, and the gate's results.

The schemas close every object whose keys are fixed, so a key added to the code without being declared
(and schema_version bumped for the facts) fails here.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import deploy_gate
import gpu_audit_report
import gpu_p2p_probe
import jsonschema
import nccl_bench
import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit import facts as audit_facts
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench import nccl_tuning
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nccl_debug import parse_nccl_debug

from ansible.module_utils.testing import patch_module_args
from tests import paths
from tests.unit import schemas
from tests.unit.captures import (
    ALL,
    CAPTURES,
    H100,
    HYPERVISOR,
    I440FX,
    INCIDENT,
    MICROVM,
    PRO6000,
    RTX4090,
    audited,
)

NAMES = sorted(set(ALL) | {path.stem for path in CAPTURES.glob("*.json")})
CLIQUE_OK = "proxmox-host-8xRTXPRO6000-vm-clique-ok"
NO_CLIQUE = "proxmox-host-8xRTXPRO6000-vm-no-clique"
NCCL = paths.FIXTURES / "nccl"
P2P = paths.FIXTURES / "p2p"


def errors(kind: str, document: Any) -> list[str]:
    """Where and why the document breaks the schema (for anyOf/oneOf, the alternative that came closest)."""
    found = [jsonschema.exceptions.best_match([e]) for e in schemas.validator(kind).iter_errors(document)]
    return [f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message[:300]}" for e in found]


def module_result(main: Any, args: dict[str, Any]) -> dict[str, Any]:
    """A module's main() run in-process, as Ansible would; its JSON result."""
    out = io.StringIO()
    with patch_module_args(args), contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        main()
    return json.loads(out.getvalue())


def registered(result: dict[str, Any]) -> dict[str, Any]:
    """What roles/gpu_bench registers: the result with Ansible's keys, failed_when: false applied."""
    out = dict(result)
    if out.get("failed"):
        out["failed_when_suppressed_exception"] = out["msg"]
    out.update(changed=out.get("changed", False), failed=False, failed_when_result=False)
    return out


def probe(log: Path | None) -> dict[str, Any] | None:
    if log is None:
        return None  # the probe task was skipped (one GPU)
    return registered(module_result(gpu_p2p_probe.main, {"log": str(log)}))


def nccl(**args: Any) -> dict[str, Any]:
    return registered(module_result(nccl_bench.main, {k: str(v) if isinstance(v, Path) else v
                                                      for k, v in args.items()}))


@cache
def _benches() -> str:
    """A benchmark per host, covering every shape the two modules return from the committed logs."""
    empty = tempfile.mkdtemp()
    no_engine = {"engine": "auto", "nccl_tests_dir": empty, "python": sys.executable}
    benches = {
        INCIDENT: {"probe": probe(P2P / "p2p-probe_8xRTXPRO6000-vm-no-p2p_constructed.jsonl"),
                   "nccl": nccl(log=NCCL / ("transfer-test-in-all_reduce_perf-layout_incident-reconstructed_"
                                            "8xRTXPRO6000-vm-no-p2p.txt"),
                                model="glm-5")},
        PRO6000: {"probe": probe(P2P / "p2p-probe_8xRTXPRO6000-baremetal-p2p_constructed.jsonl"),
                  "nccl": nccl(**no_engine)},  # no nccl-tests, no torch: it says why, with the torch probe
        H100: {"probe": probe(P2P / "p2p-probe_8xH100-SXM-nvlink_constructed.jsonl"),
               "nccl": nccl(log=NCCL / "all_reduce_perf_json-v3_constructed-from-writer.json",
                            model="llama-3-70b")},
        RTX4090: {"probe": probe(P2P / "p2pBandwidthLatencyTest_2xRTX4090-no-p2p.txt"),
                  "nccl": nccl(log=NCCL / "all_reduce_perf_2.15-2.16_2x2080Ti-no-p2p.txt", model="glm-5",
                               concurrency=1)},
        I440FX: {"probe": probe(P2P / "nvbandwidth_v0.8_6xA6000-read-ce.txt"),
                 "nccl": nccl(log=NCCL / "all_reduce_perf_2.13-2.14_nccl2.20.5_debug-info-interleaved_2xA100.txt")},
        HYPERVISOR: {"probe": probe(P2P / "nvbandwidth-j_v0.8_6xA6000-read-ce_constructed.json"),
                     "nccl": nccl(log=NCCL / "all_reduce_perf_2.13-2.14_crash-unhandled-cuda-error_2x3090.txt")},
        CLIQUE_OK: {"probe": probe(None),
                    "nccl": nccl(log=NCCL / "all_gather_perf_json-v1_constructed-from-writer.json")},
        NO_CLIQUE: {"probe": probe(Path(empty) / "no-such-log.txt"),
                    "nccl": nccl(log=NCCL / "all_gather_perf_2.18.0_nccl2.29.7_mpirun-tagged.txt")},
    }
    os.rmdir(empty)
    return json.dumps(benches)


def benches() -> dict[str, Any]:
    return json.loads(_benches())


@cache
def _reports() -> str:
    """Every reports/<host>.json gpu_audit_report writes for the fleet of captures and their benchmarks."""
    with tempfile.TemporaryDirectory() as dest:
        result = module_result(gpu_audit_report.main, {"dest": dest, "hosts": {n: audited(n) for n in NAMES},
                                                       "bench": benches()})
        assert result["changed"], result
        return json.dumps({path.stem: json.loads(path.read_text(encoding="utf-8"))
                           for path in Path(dest).glob("*.json")})


def reports() -> dict[str, Any]:
    return json.loads(_reports())


# ---------------------------------------------------------------------------
# (d) the schema files themselves


@pytest.mark.parametrize("path", [schemas.GPU_HOST, schemas.GATE_RESULT], ids=lambda p: p.name)
def test_schema_is_a_valid_draft_2020_12_schema(path: Path) -> None:
    document = schemas.load(path)
    assert document["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(document)


def test_schema_states_the_schema_version_of_the_code() -> None:
    assert schemas.documented_schema_version() == audit_facts.SCHEMA_VERSION
    assert str(audit_facts.SCHEMA_VERSION) in schemas.load(schemas.GPU_HOST)["title"]


def test_both_files_describe_the_communication_ceiling_alike() -> None:
    # One figure, one shape: the host report's bench and the gate's launch hold the same object.
    assert schemas.load(schemas.GATE_RESULT)["$defs"]["communication_ceiling_result"] == \
        schemas.load(schemas.GPU_HOST)["$defs"]["communication_ceiling_result"]


# The objects left open on purpose: their keys differ per finding id (each rule, benchmark check and gate
# reason writes its own evidence), or belong to Ansible (module_args). ansible_task_result is a mixin that
# the closed bench schemas evaluate through allOf + unevaluatedProperties.
OPEN = {
    ("gpu_host", "/$defs/finding/properties/evidence"),
    ("gpu_host", "/$defs/ansible_task_result"),
    ("gpu_host", "/$defs/ansible_task_result/properties/invocation"),
    ("gate_result", "/$defs/reason/properties/evidence"),
    ("gate_result", "/$defs/accepted/properties/evidence"),
    ("gate_result", "/$defs/resolved/properties/evidence"),
}


def _objects(node: Any, pointer: str = "") -> list[tuple[str, dict[str, Any]]]:
    found = []
    if isinstance(node, dict):
        if node.get("type") == "object" or "properties" in node:
            found.append((pointer, node))
        for key, value in node.items():
            if key in ("enum", "const", "required", "dependentRequired"):
                continue
            found += _objects(value, f"{pointer}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _objects(value, f"{pointer}/{index}")
    return found


@pytest.mark.parametrize("path", [schemas.GPU_HOST, schemas.GATE_RESULT], ids=lambda p: p.name)
def test_every_object_is_closed_or_a_declared_map(path: Path) -> None:
    name = path.name.removesuffix(".schema.json")
    loose = []
    for pointer, node in _objects(schemas.load(path)):
        closed = node.get("additionalProperties") is False or node.get("unevaluatedProperties") is False
        map_of = "properties" not in node and isinstance(node.get("additionalProperties"), dict)
        if not (closed or map_of) and (name, pointer) not in OPEN:
            loose.append(pointer)
    assert loose == []


@pytest.mark.parametrize("path", [schemas.GPU_HOST, schemas.GATE_RESULT], ids=lambda p: p.name)
def test_every_definition_is_used(path: Path) -> None:
    document = schemas.load(path)
    text = json.dumps(document)
    unused = [name for name in document["$defs"] if f'"#/$defs/{name}"' not in text and name != "report"]
    assert unused == []


@pytest.mark.parametrize("path", [schemas.GPU_HOST, schemas.GATE_RESULT], ids=lambda p: p.name)
def test_every_top_level_property_is_described(path: Path) -> None:
    document = schemas.load(path)
    top = {**document["properties"], **document["$defs"].get("report", {}).get("properties", {})}
    undescribed = [key for key, value in top.items()
                   if not value.get("description") and not value.get("$ref", "").startswith("#/properties/")]
    assert undescribed == []


# ---------------------------------------------------------------------------
# (a) the facts of every capture


@pytest.mark.capture
@pytest.mark.parametrize("name", NAMES)
def test_every_capture_audit_validates(name: str) -> None:
    assert errors("facts", audited(name)) == []


@pytest.mark.capture
def test_the_captures_cover_every_top_level_key() -> None:
    declared = set(schemas.load(schemas.GPU_HOST)["properties"])
    seen = {key for name in NAMES for key in audited(name)}
    # not_seen, material and nccl_transports belong to material only (material/capture.py);
    # tests/unit/material/test_capture.py, tests/unit/material/test_reader.py and
    # tests/unit/material/test_nccl_transports.py validate them. manifest_class needs a manifest, which no capture
    # audit is given: tests/unit/rules/test_fleet_class.py validates it.
    assert seen | {"not_seen", "material", "nccl_transports", "manifest_class"} == declared


# ---------------------------------------------------------------------------
# (b) the reports and the gate's results


@pytest.mark.capture
@pytest.mark.parametrize("name", NAMES)
def test_every_report_validates(name: str) -> None:
    report = reports()[name]
    assert report["host"] == name
    assert errors("report", report) == []


@pytest.mark.capture
def test_the_reports_cover_the_benchmark_shapes() -> None:
    """The reports above hold each kind of result the benchmark modules return (so that the test means it)."""
    all_reports = reports()
    bench = {name: r["bench"] for name, r in all_reports.items() if "bench" in r}
    assert set(bench) == set(benches()) and MICROVM not in bench
    probes = [b["probe"] for b in bench.values() if b["probe"]]  # null: the probe was skipped
    # None: the probe could not run (msg and why, no tool)
    assert {p.get("tool") for p in probes} == {"torch", "p2pBandwidthLatencyTest", "nvbandwidth", None}
    runs = [b["nccl"] for b in bench.values()]
    assert {"communication_ceiling" in r for r in runs} == {True, False}
    assert any(r.get("transports") for r in runs) and any(r.get("probe") for r in runs)
    assert any(not r.get("engine") for r in runs) and any(r.get("collective") == "all_gather" for r in runs)
    guest = all_reports[INCIDENT]
    assert any("proxmox_host" in f["evidence"] for f in guest["findings"])  # linked to its Proxmox host
    assert "communication_ceiling" in guest["summary"]


def test_the_tuning_and_the_transports_have_their_declared_shape() -> None:
    """nccl_bench's tuning needs torch to run; its pieces come from the same code (nccl_judge, nccl_debug)."""

    def row(size: int, time_us: float) -> dict[str, Any]:
        return {"size_bytes": size, "count": size // 2, "type": "bfloat16", "redop": "sum", "out_of_place": None,
                "in_place": {"time_us": time_us, "algbw_gbps": 1.0, "busbw_gbps": 1.0, "wrong": 0}}

    runs = [("as-is", {}, "ok", [row(16384, 14.9), row(1 << 26, 3600.0)]),
            ("p2p-disabled", {"NCCL_P2P_DISABLE": "1"}, "ok", [row(16384, 13.7), row(1 << 26, 3500.0)]),
            ("proto-ll", {"NCCL_PROTO": "LL"}, "timeout", [])]
    summaries = [nccl_tuning.summarize_candidate(name, env, status, {"all_reduce": rows}, "all_reduce",
                                                 hung_at={"collective": "all_reduce", "size_bytes": 8}
                                                 if status == "timeout" else None)
                 for name, env, status, rows in runs]
    tuning = nccl_tuning.choose_best(summaries, {})
    for summary, (*_, rows) in zip(summaries, runs, strict=True):
        summary["results"] = rows
    assert tuning["recommended"] is not None
    assert errors("gpu_host#/$defs/nccl_tuning", tuning) == []
    assert errors("gpu_host#/$defs/nccl_tuning", nccl_tuning.choose_best(summaries[2:], {})) == []
    for log in sorted(NCCL.glob("nccl-debug_*.log")):
        transports = parse_nccl_debug(log.read_text(encoding="utf-8", errors="replace")).as_dict()
        assert errors("gpu_host#/$defs/nccl_transports", transports) == [], log.name


GLM5 = {"name": "GLM-5-NVFP4", "family": "glm-5", "path": "/models/GLM-5-NVFP4", "weights_gib": 403,
        "tensor_parallel_size": "auto", "attention_heads": 64, "min_compute_capability": "12.0",
        "min_driver": "575", "min_cuda": "12.8"}
LLAMA70 = {"name": "Llama-3-70B-Instruct", "family": "llama-3-70b", "weights_gib": 131.5, "attention_heads": 64,
           "min_compute_capability": "8.0", "min_driver": "550.54", "min_cuda": "12.2"}
LLAMA8 = {"name": "Llama-3.1-8B-Instruct", "family": "llama-3-8b", "weights_gib": 15, "tensor_parallel_size": 1}
BROKEN = {"name": "x", "weights_gib": "a lot"}


def gate_report(name: str, model: dict[str, Any], bench: dict[str, Any] | None, **options: Any) -> dict[str, Any]:
    """reports/<host>-gate.json as roles/deployment_gate writes it from deploy_gate's registered result."""
    args: dict[str, Any] = {"audit": audited(name), "model": model, **options}
    for key in ("nccl", "probe"):
        if isinstance((bench or {}).get(key), dict):
            args["bench" if key == "nccl" else "probe"] = bench[key]
    result = module_result(deploy_gate.main, args)
    kept = {k: v for k, v in result.items() if k not in ("invocation", "changed")}
    return {"failed": False, **kept, "proxmox_link": json.loads(_guest_links()).get(name, {})}


@cache
def _guest_links() -> str:
    """roles/gpu_audit's gpu_audit_guest_link per host: gpu_audit_report's guest_links for the fleet."""
    return json.dumps(gpu_audit_report.guest_links(gpu_audit_report.link_guests({n: audited(n) for n in NAMES})))


@pytest.mark.capture
@pytest.mark.parametrize("name", NAMES)
def test_every_gate_result_validates(name: str) -> None:
    bench = benches().get(name)
    results = [
        gate_report(name, GLM5, bench, sglang_version="0.5.10.post1"),
        gate_report(name, GLM5, bench, accept=["p2p_not_supported", "driver_version_unknown"]),
        gate_report(name, LLAMA70, None, known_good_overrides=[{"id": "sm90-llama", "arch": "sm_90",
                                                                 "models": "llama-*", "flags": ["--x", "1"]}]),
        gate_report(name, LLAMA8, bench),
        gate_report(name, BROKEN, None, known_good_overrides=[{"id": ""}]),
    ]
    for result in results:
        assert errors("gate", result) == [], result["summary"]


@pytest.mark.capture
def test_the_gate_results_cover_their_shapes() -> None:
    incident = gate_report(INCIDENT, GLM5, benches()[INCIDENT], accept=["p2p_not_supported"])
    assert incident["proxmox_link"] and incident["accepted"] and incident["other_findings"]
    assert incident["launch"]["communication_ceiling"] and incident["launch"]["known_good_source"]
    h100 = gate_report(H100, LLAMA70, {"probe": benches()[H100]["probe"]})
    assert h100["verdict"] == "pass" and h100["launch"]["memory"]["fits"] and h100["launch"]["custom_all_reduce"]
    single = gate_report(INCIDENT, LLAMA8, benches()[INCIDENT])
    assert single["resolved"] and single["launch"]["p2p"] == {"state": "n/a (one GPU)", "pairs": {}}
    for result in (incident, h100, single):
        assert errors("gate", result) == []


# ---------------------------------------------------------------------------
# (c) what the schema does not declare fails


@pytest.mark.capture
@pytest.mark.parametrize("where", ["top", "gpu", "pci_device", "bridge", "virtualization", "summary", "finding"])
def test_an_undeclared_fact_key_fails(where: str) -> None:
    facts = audited(INCIDENT if where == "finding" else H100)
    target = {"top": lambda: facts, "gpu": lambda: facts["gpus"]["devices"][0],
              "pci_device": lambda: facts["pci"]["nvidia_devices"][0],
              "bridge": lambda: facts["pci"]["nvidia_devices"][0]["upstream"][0],
              "virtualization": lambda: facts["virtualization"], "summary": lambda: facts["summary"],
              "finding": lambda: facts["findings"][0]}[where]()
    target["not_declared"] = 1
    with pytest.raises(jsonschema.ValidationError, match="not_declared"):
        schemas.validator("facts").validate(facts)


@pytest.mark.capture
def test_an_undeclared_key_fails_in_a_proxmox_vm() -> None:
    facts = audited(NO_CLIQUE)
    facts["proxmox"]["vms"][0]["hostpci"][0]["host_device"]["not_declared"] = 1
    with pytest.raises(jsonschema.ValidationError, match="not_declared"):
        schemas.validator("facts").validate(facts)


@pytest.mark.capture
@pytest.mark.parametrize("path", [("bench", "nccl"), ("bench", "probe"), ("bench", "nccl", "results", 0, "in_place"),
                                  ("bench", "nccl", "communication_ceiling", "batch_1"), ("summary",), ()])
def test_an_undeclared_report_key_fails(path: tuple[Any, ...]) -> None:
    report = reports()[INCIDENT]
    target = report
    for key in path:
        target = target[key]
    target["not_declared"] = 1
    with pytest.raises(jsonschema.ValidationError, match="not_declared"):
        schemas.validator("report").validate(report)


@pytest.mark.capture
@pytest.mark.parametrize("path", [(), ("launch",), ("launch", "p2p"), ("launch", "memory"), ("reasons", 0),
                                  ("launch", "all_reduce"), ("launch", "flag_check")])
def test_an_undeclared_gate_key_fails(path: tuple[Any, ...]) -> None:
    result = gate_report(INCIDENT, GLM5, benches()[INCIDENT])
    target = result
    for key in path:
        target = target[key]
    target["not_declared"] = 1
    with pytest.raises(jsonschema.ValidationError, match="not_declared"):
        schemas.validator("gate").validate(result)


@pytest.mark.capture
@pytest.mark.parametrize(("name", "change", "value"), [
    (H100, ("schema_version",), 1),  # an older version: its shape is not this one
    (H100, ("summary", "verdict"), "fine"),
    (INCIDENT, ("findings", 0, "severity"), "fatal"),
    (H100, ("virtualization", "type"), "VM"),
    (H100, ("p2p", "read", 0, 1), "YES"),
    (H100, ("gpus", "devices", 0, "memory_total_mib"), "80 GiB"),
    (H100, ("pci", "nvidia_devices", 0, "kind"), "graphics"),
    (INCIDENT, ("topology",), None),
])
def test_a_value_outside_the_declared_set_fails(name: str, change: tuple[Any, ...], value: Any) -> None:
    facts = audited(name)
    target = facts
    for key in change[:-1]:
        target = target[key]
    target[change[-1]] = value
    with pytest.raises(jsonschema.ValidationError):
        schemas.validator("facts").validate(facts)
