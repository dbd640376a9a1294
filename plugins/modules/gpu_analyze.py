#!/usr/bin/python
"""Ansible module: audit many hosts' material in one process, on the controller."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_analyze
short_description: Audit material (captures, bug reports, directories of pasted outputs) and write reports
description:
  - Takes a list of inputs, each one host's material, and audits each in this one process (no process per input),
    as M(gpuhost.gpu.gpu_host_facts) audits a capture. An input is a capture file (JSON, format C(gpuhost-capture/1), as
    C(playbooks/capture.yml) saves it), an C(nvidia-bug-report.log) or C(.log.gz), a single pasted output, or a
    directory of pasted outputs (C(nvidia-smi topo -m), C(topo -p2p r), C(-q), C(lspci -vvv), nccl-tests and
    C(NCCL_DEBUG=INFO) logs, C(qm config) ...). A directory is read flat, every regular file directly in it and
    never its subdirectories (each is listed as not read; give another host's material as an input of its own).
  - Each file's kind is told from its content, not its name. A pasted C(topo -p2p) matrix, whose output does not
    say its capability, takes it from a shell line above it in the paste (C($ nvidia-smi topo -p2p r)), else from
    its file name (C(p2p_read.txt), C(p2p-w.txt), C(nvlink.txt), C(topo_p2p_rw.txt)); else it is judged as a
    matrix of a capability not stated, and a finding says what its cells can and cannot tell.
  - Benchmark logs in a directory (nccl-tests output, p2pBandwidthLatencyTest, nvbandwidth, the probe's own
    saved output) are read as the C(gpu_bench) role reads C(gpu_bench_nccl_log) and C(gpu_bench_probe_log),
    the same readers and judges as M(gpuhost.gpu.nccl_bench) and M(gpuhost.gpu.gpu_p2p_probe) with
    O(gpuhost.gpu.nccl_bench#module:log), one log of each per host (the first by name), and folded into the host's
    report as the C(gpu_bench) role folds them.
  - Each input becomes one host, named after its file or directory (storage suffixes such as C(.json),
    C(.log.gz) dropped, characters other than letters, digits, C(.), C(-) and C(_) made C(-)); inputs of the same
    name get C(-2), C(-3) in the order given; every name ends in C(.analysis) (C(ticket-4711/) reports as
    C(ticket-4711.analysis)), so that an input named after an audited host never replaces that host's audit report
    in the same directory, nor is read back by the audit as that host's last report. The host's facts carry the
    material's C(material) section, saying what each input was read as, what the audit saw, did not see
    (C(not_seen)), what was not used and why (C(unmapped)).
  - Writes C(<dest>/<name>.analysis.json), C(<dest>/<name>.analysis.md) (and the pictures,
    C(<name>.analysis-p2p.svg) with a P2P matrix, C(<name>.analysis-nccl.svg) with an nccl-tests log) per input,
    and its own index C(<dest>/analysis.md), with the code
    M(gpuhost.gpu.gpu_audit_report) writes them with, in this same process (handing a fleet's facts to another task
    would cost more than the analysis). Unlike M(gpuhost.gpu.gpu_audit_report), a report never keeps the benchmark of
    an earlier report (the material is the whole truth about the host), and analysis.md lists this run's inputs
    only. C(<dest>/fleet.md), the table of an audited
    fleet, is never written, so an analysis into the reports of an audit leaves its table as it was. A file is
    rewritten only when its content differs; check mode writes nothing and says what it would write.
  - An input that cannot be read (missing, unreadable, an empty directory, a capture of another format) is a row
    with its error in RV(inputs) and in analysis.md, and the module does not fail for it; the others are audited and
    written all the same. One bad file of a directory costs only itself (it is listed as not used, with the reason,
    in its host's report).
version_added: "1.0.0"
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuhost.gpu.attributes.diff_none
options:
  inputs:
    description:
      - Paths of the inputs, each one host's material. Relative paths are resolved against O(base_dir).
    type: list
    elements: path
    required: true
  base_dir:
    description:
      - The directory relative O(inputs) and O(dest) are resolved against, normally the one the user ran from.
        Empty is the directory the module runs in, which in a play is the playbook's directory (Ansible runs a
        local module there), so a play passes the user's (C(playbooks/analyze.yml) passes C(PWD)).
      - Taken literally, as a string and not as a path with C($VARIABLES) expanded, since it is a directory's real
        name, which may hold any character.
    type: str
  dest:
    description: Directory for the reports, created when missing; a relative path is resolved against O(base_dir).
    type: path
    default: reports
  fleet:
    description: Also write the index C(analysis.md), one row per input (never C(fleet.md), the audit's).
    type: bool
    default: true
  bench_logs:
    description: Read the benchmark logs found in the material. False leaves them listed as unmapped.
    type: bool
    default: true
  model:
    description:
      - Model to price the all-reduce curve of an nccl-tests log for, as M(gpuhost.gpu.nccl_bench)'s
        O(gpuhost.gpu.nccl_bench#module:model) (a known model's name such as C(glm-5), or a mapping of its shape).
        Empty for none.
      - C(model_profile), the option's former name, is a deprecated alias, to be removed after 2027-06-01.
    aliases: [model_profile]
    type: raw
  concurrency:
    description: Concurrent requests the communication ceiling is computed for, as M(gpuhost.gpu.nccl_bench)'s.
    type: int
    default: 64
  tensor_parallel_gpus:
    description: GPU indexes of one tensor-parallel group, as M(gpuhost.gpu.gpu_host_facts)'s, for every input.
    type: list
    elements: int
    default: []
  min_bar1_mib:
    description: A BAR1 below this size (MiB) is reported as small, as M(gpuhost.gpu.gpu_host_facts)'s.
    type: int
    default: 1024
  max_file_mib:
    description:
      - The most bytes (MiB) read from one file of the material; a larger file is not read, and said so with this
        limit's name. Material may be hostile; raise it only for material you trust.
    type: int
    default: 256
  max_input_mib:
    description: The most bytes (MiB) read from one input, a directory's files together.
    type: int
    default: 1024
  max_decompressed_mib:
    description:
      - The most bytes (MiB) one gzip file may decompress to; past it the file is not read (a small gzip can hold
        gigabytes of zeros). Each file is decompressed once.
    type: int
    default: 256
  read_timeout:
    description:
      - Seconds reading one input may take; past them the rest of it is not read. Symbolic links inside a directory
        are never followed and only regular files are read, whatever the limits.
    type: int
    default: 120
  parse_timeout:
    description:
      - Seconds of CPU time parsing one file of the material may take (a 200 MB bug report takes about 30); a file
        past them is not used, listed with this limit's name, and the others are analysed.
      - A file that cannot be parsed at all (nested thousands of levels deep, or one that makes a reader fail) is
        not used either, with the reason; the rest of its input is analysed all the same.
    type: int
    default: 60
author:
  - GPU host audit maintainers (@gpuhost)
notes:
  - Supports check mode.
  - Runs where the inputs are, normally the controller (C(delegate_to) C(localhost)).
"""

EXAMPLES = r"""
- name: Audit what support engineers exchanged
  gpuhost.gpu.gpu_analyze:
    inputs:
      - captures/gpu-node-1.json
      - tickets/4711/nvidia-bug-report.log.gz
      - tickets/4711/pastes
    base_dir: /home/support
    model: glm-5
  register: analysed

- name: Print one line per input
  ansible.builtin.debug:
    msg: "{{ analysed.lines }}"
"""

RETURN = r"""
dest:
  description: O(dest), absolute.
  returned: always
  type: str
  sample: /home/support/reports
written:
  description: Paths written (in check mode, that would be written) because their content changed.
  returned: always
  type: list
  elements: str
lines:
  description: >-
    One line per input, in order: the input, its host name, verdict, virtualization, GPU count, P2P and worst finding
    (the benchmark's findings included), and its Markdown report (C(Would write:) in check mode); or why it was not
    read.
  returned: always
  type: list
  elements: str
  sample:
    - "pastes -> pastes.analysis: unfit (...) - critical: p2p_not_supported. Report:
      /home/support/reports/pastes.analysis.md"
inputs:
  description: >-
    One row per input, in order: C(input) as given, C(path) (absolute), C(host), C(form) (capture, file, directory;
    null on error), C(verdict) (the benchmark's findings included), C(bench_logs) (step to the path of the log
    read), C(not_seen) and C(unmapped) counts (null for a capture not built from material), C(report) (the
    Markdown report's path), C(error) (null unless it could not be read).
  returned: always
  type: list
  elements: dict
"""

import os

from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.facts import SubsetError, audit, resolve_subsets
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.source import CaptureError
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.from_logs import nccl_from_log, probe_from_log
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.host_ceiling import relate_observed
from ansible_collections.gpuhost.gpu.plugins.module_utils.files.report_files import REPORT_MODE, check_host_names
from ansible_collections.gpuhost.gpu.plugins.module_utils.files.writer import ReportFileError, plan_files
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.gunzip import MIB
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.limits import MaterialLimits
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.names import report_names
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.nccl_readers import replay
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.reader import (
    Material,
    MaterialError,
    audit_material,
    bench_log_text,
    judged,
    observed_decode,
    read_material,
    resolve,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.section import with_material
from ansible_collections.gpuhost.gpu.plugins.module_utils.model.ceiling import check_model
from ansible_collections.gpuhost.gpu.plugins.module_utils.model.errors import ModelError
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.files_plan import (
    ANALYSIS_INDEX,
    ANALYSIS_RESERVED,
    ANALYSIS_SUFFIX,
    ANALYSIS_TITLE,
    merged_facts,
    planned_files,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.render import verdict_line
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.views import DEFAULT_MIN_BAR1_MIB, RuleOptions

from ansible.module_utils.basic import AnsibleModule


def get_argument_spec() -> dict:
    return {
        "inputs": {"type": "list", "elements": "path", "required": True},
        "base_dir": {"type": "str"},
        "dest": {"type": "path", "default": "reports"},
        "fleet": {"type": "bool", "default": True},
        "bench_logs": {"type": "bool", "default": True},
        "model": {"type": "raw", "aliases": ["model_profile"], "deprecated_aliases": [
            {"name": "model_profile", "date": "2027-06-01", "collection_name": "gpuhost.gpu"}]},
        "concurrency": {"type": "int", "default": 64},
        "tensor_parallel_gpus": {"type": "list", "elements": "int", "default": []},
        "min_bar1_mib": {"type": "int", "default": DEFAULT_MIN_BAR1_MIB},
        "max_file_mib": {"type": "int", "default": MaterialLimits.file_bytes // MIB},
        "max_input_mib": {"type": "int", "default": MaterialLimits.input_bytes // MIB},
        "max_decompressed_mib": {"type": "int", "default": MaterialLimits.decompressed_bytes // MIB},
        "read_timeout": {"type": "int", "default": int(MaterialLimits.seconds)},
        "parse_timeout": {"type": "int", "default": int(MaterialLimits.parse_seconds)},
    }


def bench_of(material: Material, facts: dict, params: dict, warn) -> dict | None:
    """The benchmark results of the material's logs, as the gpu_bench role would register them."""
    if not params["bench_logs"] or not material.bench_logs:
        return None
    gpu_names = [d.get("name") for d in (facts.get("gpus") or {}).get("devices") or [] if d.get("name")]
    probe = material.bench_logs.get("probe")
    nccl = material.bench_logs.get("nccl")
    judged(material)
    probed = probe_from_log(probe[1], warn, bench_log_text(material, "probe")) if probe else None
    priced = nccl_from_log(nccl[1], gpu_names, params["model"] or None, params["concurrency"], warn, probed,
                           bench_log_text(material, "nccl")) if nccl else None
    observed = observed_decode(material)
    if priced and observed:
        relate_observed(priced, *observed)
    return {"probe": probed, "nccl": priced}


def analyse(given: str, params: dict, subsets: list[str], options: RuleOptions,
            warn) -> tuple[Material, dict, dict | None]:
    """(material, facts, bench) of one input; MaterialError or CaptureError when it cannot be read."""
    limits = MaterialLimits.from_options(params["max_file_mib"], params["max_input_mib"],
                                         params["max_decompressed_mib"], params["read_timeout"],
                                         params["parse_timeout"])
    # A file the audit cannot read (nested thousands deep, out of parse time) is refused alone, with the reason.
    material, facts = audit_material(read_material(given, params["base_dir"], limits),
                                     lambda capture: audit(replay(capture), subsets, options))
    bench = bench_of(material, facts, params, warn)
    return material, with_material(facts, material.capture, material), bench


def analyse_all(params: dict, dest: str, warn) -> tuple[list[dict], dict, dict, dict]:
    """(rows, facts per host, bench per host, error per host not read), every input tried."""
    subsets = resolve_subsets(["all"])
    options = RuleOptions(tensor_parallel_gpus=params["tensor_parallel_gpus"] or None,
                          min_bar1_mib=params["min_bar1_mib"])
    hosts, benches, not_read, rows = {}, {}, {}, []
    names = report_names(params["inputs"], ANALYSIS_RESERVED, ANALYSIS_SUFFIX)
    for given, host in zip(params["inputs"], names, strict=True):
        path = resolve(given, params["base_dir"])
        row = {"input": given, "path": path, "host": host, "form": None, "verdict": None, "bench_logs": {},
               "not_seen": None, "unmapped": None, "report": os.path.join(dest, f"{host}.md"), "error": None}
        rows.append(row)
        try:
            material, facts, bench = analyse(given, params, subsets, options, warn)
        except (MaterialError, CaptureError) as exc:
            row["error"] = not_read[host] = str(exc)
            continue
        except Exception as exc:  # one input's defect must not cost the others their reports
            row["error"] = not_read[host] = (
                f"the audit of {path} stopped on {type(exc).__name__}: {exc}. This is a defect of the audit: report "
                "it with the input attached; the other inputs were audited")
            continue
        held = facts.get("material")
        row.update(form=material.form, not_seen=len(held["not_seen"]) if held else None,
                   unmapped=len(held["unmapped"]) if held else None,
                   bench_logs={step: log for step, (_unused, log) in material.bench_logs.items()} if bench else {})
        hosts[host] = facts
        if bench:
            benches[host] = bench
    return rows, hosts, benches, not_read


def main() -> None:
    module = AnsibleModule(argument_spec=get_argument_spec(), supports_check_mode=True)
    params = module.params
    if not params["inputs"]:
        module.fail_json(msg="inputs: expected at least one capture file, bug report or directory of pasted "
                             "outputs; found none. Give INPUT=\"path ...\" (make analyze) or gpu_analyze_inputs")
    for limit in ("max_file_mib", "max_input_mib", "max_decompressed_mib", "read_timeout", "parse_timeout"):
        if params[limit] < 1:
            module.fail_json(msg=f"{limit}: expected a whole number of at least 1; found {params[limit]}. Leave it out "
                                 "for the default")
    try:
        if params["model"]:
            check_model(params["model"])
        dest = resolve(params["dest"], params["base_dir"])
        rows, facts, bench, not_read = analyse_all(params, dest, module.warn)
    except (ModelError, SubsetError) as exc:
        module.fail_json(msg=str(exc))
    hosts = merged_facts(facts, bench)
    absent = {host: {"status": "failed", "msg": msg, "report": None, "report_date": None}
              for host, msg in not_read.items()}
    try:
        check_host_names([*hosts, *not_read], ANALYSIS_RESERVED)
        files = planned_files(dest, hosts, ANALYSIS_INDEX if params["fleet"] else None, absent=absent,
                              title=ANALYSIS_TITLE)
        written = plan_files(files, warn=module.warn, at_most=REPORT_MODE).commit(module.check_mode, create_dirs=True)
    except ReportFileError as exc:
        module.fail_json(msg=f"cannot write the reports under {dest}: {exc}; set dest (REPORTS=... for make "
                             "analyze) to a writable directory", changed=bool(exc.written),
                         written=sorted(exc.written), inputs=rows)
    lines = []
    for row in rows:
        if row["error"]:
            lines.append(f"{row['input']}: NOT READ: {row['error']}")
            continue
        row["verdict"] = (hosts[row["host"]].get("summary") or {}).get("verdict")
        line = verdict_line(row["host"], hosts[row["host"]], None, row["report"])
        if module.check_mode:
            line = line.rsplit(" Report: ", 1)[0] + f" Would write: {row['report']}"
        lines.append(f"{row['input']} -> {line}")
    module.exit_json(changed=bool(written), dest=dest, written=sorted(written), lines=lines, inputs=rows)


if __name__ == "__main__":
    main()
