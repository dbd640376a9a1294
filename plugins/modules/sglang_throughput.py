#!/usr/bin/python
"""Ansible module: measure a running SGLang server's throughput and say where each token's time goes."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_throughput
short_description: Measure a deployed SGLang server's decode rate, time to first token and aggregate rate
description:
  - Measures through the OpenAI-compatible API (C(POST /v1/completions)) the single-stream decode rate (tokens
    per second after the first, the median of O(single_requests) requests), the time to first token (their
    median), and the aggregate output rate of O(concurrency) requests at once.
  - With SGLang's own benchmark client (C(python -m sglang.benchmark.serving), or C(sglang.bench_serving) where the
    venv has only that (SGLang before 0.5.19; a deprecated shim after) C(--backend sglang-oai --dataset-name
    random-ids)) when O(python) can import it and O(tokenizer) is given; otherwise with a small client of its own
    (standard library, streaming, so that the first token is timed). RV(tool) says which ran, RV(tool_reason)
    why. The API key goes to bench_serving in its environment (C(OPENAI_API_KEY)), never on its command line.
  - Sets the measured time per token against the communication ceiling the deployment gate priced, as
    all-reduce time per token (O(gate), C(launch.communication_ceiling) or C(launch.communication_ceiling_tok_s)),
    with the ceiling's source where the gate states it and the share of the time it explains; "communication
    ceiling unknown" when the gate priced none. A reference
    rate comes from the gate's matching known-good entries when one carries C(reference_decode_tok_s).
  - With O(min_decode_tok_s), a single-stream rate below it (or none measured) is the finding
    C(serving_decode_slow) and RV(slow) is true; the module itself does not fail for it.
  - A measurement that cannot be made (the server refuses, a request fails) returns RV(ok) false with the reason;
    the module fails only for bad options. The key is masked in everything returned.
  - Sends load to the server, but changes nothing; runs in check mode too.
version_added: "1.0.0"
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuhost.gpu.attributes.diff_none
options:
  url:
    description: The server's base URL (C(http://127.0.0.1:30000)), without a path.
    type: str
    required: true
  api_key:
    description: The server's API key, sent as C(Authorization Bearer). Never returned or logged.
    type: str
    default: ""
  model:
    description: The served model name (C(--served-model-name)).
    type: str
    required: true
  python:
    description: >-
      The serving venv's Python; when it can import C(sglang.benchmark.serving) (else C(sglang.bench_serving)),
      that client is used.
    type: path
  tokenizer:
    description: The model directory, for bench_serving's tokenizer (C(--tokenizer)); without it the own client runs.
    type: path
  tool:
    description: C(auto) (bench_serving when available, else the own client), C(bench_serving) or C(client).
    type: str
    choices: [auto, bench_serving, client]
    default: auto
  prompt:
    description: The own client's prompt.
    type: str
    default: Write a long story about a city by a river, its bridges and its markets.
  input_len:
    description: Prompt tokens per request for bench_serving (C(--random-input-len)).
    type: int
    default: 128
  max_tokens:
    description: Output tokens per request (1 to 4096); every request decodes exactly this many (C(ignore_eos)).
    type: int
    default: 64
  single_requests:
    description: Requests of the single-stream measurement, one after the other (1 to 100).
    type: int
    default: 3
  concurrency:
    description: Requests at once for the aggregate rate (1 to 1024).
    type: int
    default: 16
  timeout:
    description:
      - Seconds for each request and for the concurrent wave as a whole (own client), or each bench_serving run
        (1 to 3600).
    type: int
    default: 120
  gate:
    description: The registered C(deploy_gate) result of the deployment, for the communication ceiling.
    type: dict
  min_decode_tok_s:
    description: The slowest single-stream decode rate, tokens per second, that is not a finding.
    type: float
author:
  - GPU host audit maintainers (@gpuhost)
"""

EXAMPLES = r"""
- name: Measure the server's throughput
  gpuhost.gpu.sglang_throughput:
    url: http://127.0.0.1:30000
    api_key: "{{ vault_sglang_api_key }}"
    model: GLM-5-NVFP4
    python: /opt/sglang/venv/bin/python
    tokenizer: /models/GLM-5-NVFP4
    gate: "{{ deployment_gate_result }}"
    min_decode_tok_s: 30
"""

RETURN = r"""
ok:
  description: Whether the measurement was made.
  returned: always
  type: bool
tool:
  description: C(bench_serving) or C(client); null when nothing ran.
  returned: always
  type: str
tool_reason:
  description: Why that tool ran.
  returned: always
  type: str
single_stream:
  description: C(decode_tok_s), C(ttft_ms) (medians), C(requests), C(output_tokens); null before a measurement.
  returned: always
  type: dict
aggregate:
  description: C(concurrency), C(tok_s), C(requests), C(output_tokens), C(duration_s); null before a measurement.
  returned: always
  type: dict
breakdown:
  description:
    - C(measured_ms_per_token), C(communication_ceiling_ms_per_token) (all-reduce time per token),
      C(communication_ceiling_kind) (the gate's ceiling C(basis), C(measured_all_reduce) or
      C(estimated_from_pair_latency)), C(communication_ceiling_source), C(communication_ceiling_assumptions),
      C(communication_ceiling_from), C(communication_ceiling_basis), C(comm_share), C(other_ms_per_token),
      C(reference_decode_tok_s), C(reference_source), C(reference_entry), C(measured_vs_reference); null where
      unknown.
  returned: always
  type: dict
findings:
  description: C(serving_decode_slow) when the rate is below O(min_decode_tok_s), as the catalog makes it.
  returned: always
  type: list
  elements: dict
slow:
  description: Whether there is such a finding.
  returned: always
  type: bool
min_decode_tok_s:
  description: The threshold applied; null for none.
  returned: always
  type: float
summary:
  description: One line with the figures and the breakdown.
  returned: always
  type: str
  sample: "50.1 tok/s single stream, time to first token 21 ms, 199.0 tok/s at 8 concurrent streams (client): ..."
"""

import os
import subprocess
import tempfile
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.serving import bench_serving
from ansible_collections.gpuhost.gpu.plugins.module_utils.serving.secret_mask import mask, mask_all
from ansible_collections.gpuhost.gpu.plugins.module_utils.serving.throughput_breakdown import breakdown, judge, summary
from ansible_collections.gpuhost.gpu.plugins.module_utils.serving.throughput_client import ClientError, measure

from ansible.module_utils.basic import AnsibleModule

PROMPT = "Write a long story about a city by a river, its bridges and its markets."
LIMITS = {"max_tokens": (1, 4096), "single_requests": (1, 100), "concurrency": (1, 1024), "timeout": (1, 3600),
          "input_len": (1, 1_000_000)}


def get_argument_spec() -> dict:
    return {
        "url": {"type": "str", "required": True},
        "api_key": {"type": "str", "default": "", "no_log": True},
        "model": {"type": "str", "required": True},
        "python": {"type": "path"},
        "tokenizer": {"type": "path"},
        "tool": {"type": "str", "choices": ["auto", "bench_serving", "client"], "default": "auto"},
        "prompt": {"type": "str", "default": PROMPT},
        "input_len": {"type": "int", "default": 128},
        # A count of tokens, not a credential: validate-modules' no-log-needed reads "token" in the name.
        "max_tokens": {"type": "int", "default": 64, "no_log": False},
        "single_requests": {"type": "int", "default": 3},
        "concurrency": {"type": "int", "default": 16},
        "timeout": {"type": "int", "default": 120},
        "gate": {"type": "dict"},
        "min_decode_tok_s": {"type": "float"},
    }


def option_problems(params: dict[str, Any]) -> list[str]:
    problems = [f"{name}: expected {low} to {high}, found {params[name]}" for name, (low, high) in LIMITS.items()
                if not low <= params[name] <= high]
    if not params["url"].startswith(("http://", "https://")):
        problems.append(f"url: expected http:// or https://, found {params['url']!r}")
    threshold = params["min_decode_tok_s"]
    if threshold is not None and not threshold > 0:
        problems.append(f"min_decode_tok_s: expected a rate above 0 or none, found {threshold}")
    if params["tool"] == "bench_serving" and not (params["python"] and params["tokenizer"]):
        problems.append("tool bench_serving: expected python (the serving venv's) and tokenizer (the model directory)")
    return problems


def bench_serving_available(python: str | None) -> str | None:
    """The benchmark client's module the serving venv has (bench_serving.MODULES, newest first), or None."""
    if not python or not os.access(python, os.X_OK):
        return None
    try:
        done = subprocess.run([python, "-c", bench_serving.probe_code()], capture_output=True, text=True,
                              timeout=120, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    name = done.stdout.strip()
    return name if done.returncode == 0 and name in bench_serving.MODULES else None


def run_bench_serving(params: dict[str, Any], module: str = bench_serving.MODULE) -> dict[str, Any]:
    """Two bench_serving runs, one stream then ``concurrency``; BenchServingError with its log when one fails."""
    env = {**os.environ, "OPENAI_API_KEY": params["api_key"], "HF_HUB_OFFLINE": "1", "LC_ALL": "C"}
    results = []
    with tempfile.TemporaryDirectory(prefix="sglang-throughput-") as tmp:
        for prompts, concurrency in ((params["single_requests"], 1), (params["concurrency"], params["concurrency"])):
            out = os.path.join(tmp, f"c{concurrency}.jsonl")
            argv = bench_serving.argv(params["python"], params["url"], params["model"], params["tokenizer"],
                                      params["input_len"], params["max_tokens"], prompts, concurrency, out, module)
            try:
                done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=params["timeout"],
                                      check=False)
            except subprocess.TimeoutExpired:
                raise bench_serving.BenchServingError(f"bench_serving at concurrency {concurrency} ran past "
                                                      f"{params['timeout']} s; raise timeout") from None
            text = ""
            if os.path.exists(out):
                with open(out, encoding="utf-8") as handle:
                    text = handle.read()
            if done.returncode != 0 or not text:
                tail = (done.stderr or done.stdout or "")[-600:]
                raise bench_serving.BenchServingError(f"bench_serving at concurrency {concurrency} exited "
                                                      f"{done.returncode}: {tail}")
            results.append(bench_serving.last_result(text))
    return {"tool": "bench_serving", "single_stream": bench_serving.single_stream(results[0]),
            "aggregate": bench_serving.aggregate(results[1], params["concurrency"])}


def throughput(params: dict[str, Any]) -> dict[str, Any]:
    use_bench = params["tool"] == "bench_serving"
    reason = "asked for"
    module = bench_serving_available(params["python"]) if use_bench or params["tool"] == "auto" else None
    if params["tool"] == "auto":
        use_bench = bool(params["tokenizer"]) and module is not None
        reason = (f"{module} is in the serving venv" if use_bench
                  else f"neither {' nor '.join(bench_serving.MODULES)} in the serving venv" if params["tokenizer"]
                  else "no model directory for bench_serving's tokenizer")
    result: dict[str, Any] = {"changed": False, "ok": True, "tool": "bench_serving" if use_bench else "client",
                              "tool_reason": reason, "single_stream": None, "aggregate": None}
    try:
        if use_bench:
            measurement = run_bench_serving(params, module or bench_serving.MODULES[0])
        else:
            measurement = measure(params["url"], params["api_key"], params["model"], params["prompt"],
                                  params["max_tokens"], params["single_requests"], params["concurrency"],
                                  params["timeout"])
    except (ClientError, bench_serving.BenchServingError, OSError) as err:
        measurement = {"tool": result["tool"]}
        result.update(ok=False, msg=f"sglang_throughput: the measurement with {result['tool']} failed: {err}")
    result.update(single_stream=measurement.get("single_stream"), aggregate=measurement.get("aggregate"))
    parts = breakdown(measurement, params["gate"])
    findings = judge(measurement, params["min_decode_tok_s"])
    result.update(breakdown=parts, findings=findings, slow=bool(findings),
                  min_decode_tok_s=params["min_decode_tok_s"])
    result["summary"] = summary(measurement, parts) if result["ok"] else result["msg"]
    result.setdefault("msg", "sglang_throughput: " + result["summary"]
                      + "".join(f". {f['id']}: {f['summary']}" for f in findings))
    return result


def main() -> None:
    module = AnsibleModule(argument_spec=get_argument_spec(), supports_check_mode=True)
    params = module.params
    key = params["api_key"]
    problems = option_problems(params)
    if problems:
        module.fail_json(msg=mask("sglang_throughput: " + "; ".join(problems) + ". Nothing was sent.", key))
    if module.check_mode:
        # A measurement loads the server for minutes: check mode sends nothing, whoever calls the module.
        module.exit_json(changed=False, skipped=True,
                         msg=mask(f"check mode: no request sent to {params['url']}; nothing was measured", key))
    try:
        result = throughput(params)
    except Exception as err:  # a failure of the module itself: said plainly, never with the key or a traceback
        module.fail_json(msg=mask(f"sglang_throughput: could not measure ({type(err).__name__}: {err}).", key))
    module.exit_json(**mask_all(result, key))


if __name__ == "__main__":
    main()
