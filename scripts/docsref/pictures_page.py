"""docs/reference/pictures/: the incident guest's pictures (its P2P heatmap and NCCL chart), drawn by the report's
own code from its record in the fleet of captures (tests/fleet/hosts.yml: the capture replayed, its nccl-tests
and P2P probe logs judged as the gpu_bench role judges them, folded in as gpu_audit_report folds them), so that
the pages that show them (docs/reports.md) show what a report draws today.

``fleet_records`` is that recipe for every host of the fleet; tests/unit/report/test_pictures_browser.py opens
their pictures in a browser."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from docsref.sources import use_collection

OUT = Path("docs/reference/pictures")
FLEET = Path("tests/fleet/hosts.yml")
SHOWN = "incident-guest"
_TEMPLATE = re.compile(r"\{\{ *(\w+) *\}\}")
# gpu_bench's defaults (roles/gpu_bench/defaults/main.yml), which the fleet's hosts keep unless they set them.
MODEL, CONCURRENCY = "glm-5", 64


def _hosts(group: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found = dict((group or {}).get("hosts") or {})
    for child in ((group or {}).get("children") or {}).values():
        found.update(_hosts(child))
    return found


def fleet_hosts(root: Path) -> dict[str, dict[str, Any]]:
    """Host -> its capture, logs and model, the paths as the inventory's templates resolve them."""
    inventory = yaml.safe_load((root / FLEET).read_text(encoding="utf-8"))["all"]
    names = {"inventory_dir": str((root / FLEET).parent)}

    def resolve(text: str) -> str:
        for _round in range(3):  # templates naming templates
            text = _TEMPLATE.sub(lambda m: names.get(m.group(1), m.group(0)), text)
        return text

    for key, value in (inventory.get("vars") or {}).items():
        if isinstance(value, str):
            names[key] = value
    out = {}
    for host, given in _hosts(inventory).items():
        if not (given or {}).get("fleet_capture"):
            continue
        names["fleet_capture"] = given["fleet_capture"]
        out[host] = {"capture": resolve(names["gpu_audit_capture"]),
                     "nccl_log": resolve(given["gpu_bench_nccl_log"]) if given.get("gpu_bench_nccl_log") else None,
                     "probe_log": resolve(given["gpu_bench_probe_log"]) if given.get("gpu_bench_probe_log") else None,
                     "model": given.get("gpu_bench_model", MODEL)}
    return out


def record(capture: str, nccl_log: str | None = None, probe_log: str | None = None, model: Any = MODEL) -> dict:
    """A host's judged record: the capture audited, the logs judged and folded in."""
    from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.facts import audit, resolve_subsets
    from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.source import ReplaySource
    from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.from_logs import nccl_from_log, probe_from_log
    from ansible_collections.gpuhost.gpu.plugins.module_utils.report.render import merge_bench
    from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.views import RuleOptions

    facts = audit(ReplaySource(json.loads(Path(capture).read_text(encoding="utf-8"))), resolve_subsets(["all"]),
                  RuleOptions())
    if not (nccl_log or probe_log):
        return facts
    names = [d.get("name") for d in (facts.get("gpus") or {}).get("devices") or [] if d.get("name")]
    probe = probe_from_log(probe_log) if probe_log else None
    nccl = nccl_from_log(nccl_log, names, model, CONCURRENCY, probe=probe) if nccl_log else None
    return merge_bench(facts, {"probe": probe, "nccl": nccl})


def fleet_records(root: Path) -> dict[str, dict[str, Any]]:
    use_collection(root)
    return {host: record(**given) for host, given in fleet_hosts(root).items()}


def pages(root: Path) -> dict[Path, str]:
    use_collection(root)
    from ansible_collections.gpuhost.gpu.plugins.module_utils.report.pictures import picture_files

    given = fleet_hosts(root)[SHOWN]
    # An XML comment may not hold two dashes in a row: the option is not named.
    header = (f"<!-- Generated from {FLEET}'s {SHOWN} by the report's own code (plugins/module_utils/report/) by "
              "`make docs` (scripts/docs_reference.py). Do not edit by hand: change the source and run it "
              "again. -->\n")
    return {OUT / name: header + svg for name, svg in picture_files(SHOWN, record(**given)).items()}
