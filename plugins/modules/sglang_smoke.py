#!/usr/bin/python
"""Ansible module: smoke-test a running SGLang server through its OpenAI-compatible API."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_smoke
short_description: Ask a running SGLang server the same prompt twice at temperature 0 and judge the answers
description:
  - Lists the served models (C(GET /v1/models)) and checks that O(model) is among them, then sends O(prompt) to
    C(POST /v1/completions) O(runs) times, greedily (temperature 0), asking for the sampled tokens'
    log-probabilities.
  - "Each answer must be sane: non-empty, no C(nan)/C(inf) words, no undecodable bytes or control characters,
    no single character repeated (NaN logits decode to token 0, usually C(!), over and over), finite
    log-probabilities (NaN comes back as null), a finish reason of C(stop) or C(length). All runs must give the
    same text: greedy decoding on a healthy server is deterministic."
  - The OpenAI-compatible endpoint rather than SGLang's native C(/generate) because it is what clients call, so
    the test covers the API key, the served model name and the chat-less completion path they use; its request
    and answer shapes are stable across SGLang releases.
  - "The key never appears in what the module returns: every form of it (as sent, and as Python, JSON and URLs
    escape it) is masked as C(<api key>) in every message, whatever failed. A key that an HTTP header cannot
    carry (whitespace around it, a character outside printable ASCII) is refused before anything is sent."
  - Reads only; supports check mode.
version_added: "1.0.0"
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuhost.gpu.attributes.diff_none
options:
  url:
    description: The server's base URL, C(http) or C(https), without a path or a user (C(http://127.0.0.1:30000)).
    type: str
    required: true
  api_key:
    description: The server's API key, sent as C(Authorization Bearer). Never returned or logged.
    type: str
    default: ""
  model:
    description: The served model name (SGLang's C(--served-model-name)), sent as the request's C(model).
    type: str
    required: true
  prompt:
    description: The prompt. One whose continuation is plain language makes the judgement meaningful.
    type: str
    default: The capital of France is
  max_tokens:
    description: Tokens to generate per run.
    type: int
    default: 32
  runs:
    description: How many times to ask (1 to 100); every answer must be the same.
    type: int
    default: 2
  timeout:
    description: Seconds to wait for each answer (1 to 86400).
    type: int
    default: 300
  logprobs:
    description: Ask for the sampled tokens' log-probabilities and check that they are finite.
    type: bool
    default: true
  max_run:
    description: A non-space character repeated this many times in a row fails the answer.
    type: int
    default: 16
  validate_certs:
    description: Check the server's certificate when O(url) is https.
    type: bool
    default: true
  fail_on_problem:
    description: Fail when a problem is found. With C(false) the problems are returned and the task passes.
    type: bool
    default: true
author:
  - GPU host audit maintainers (@gpuhost)
"""

EXAMPLES = r"""
- name: Smoke-test the server
  gpuhost.gpu.sglang_smoke:
    url: http://127.0.0.1:30000
    api_key: "{{ vault_sglang_api_key }}"
    model: GLM-5-NVFP4
"""

RETURN = r"""
ok:
  description: Whether every run was sane and all runs gave the same text; null in check mode, which sends nothing.
  returned: always
  type: bool
problems:
  description: Everything wrong, each prefixed with its run number where it belongs to one.
  returned: always
  type: list
  elements: str
  sample: ["run 1: '!' repeated 32 times, what NaN logits decode to: '!!!!!!!!...'"]
identical:
  description: Whether all runs gave the same text; null with a single run or none.
  returned: always
  type: bool
runs:
  description: Each run's C(text) (cut at 500 characters), C(finish_reason), C(completion_tokens), C(problems).
  returned: always
  type: list
  elements: dict
models:
  description: The model ids the server lists.
  returned: always
  type: list
  elements: str
"""

import json
from typing import Any
from urllib.error import HTTPError, URLError

from ansible_collections.gpuhost.gpu.plugins.module_utils.serving.secret_mask import api_key_problems, mask, mask_all
from ansible_collections.gpuhost.gpu.plugins.module_utils.serving.sglang_smoke import (
    Sample,
    completion_request,
    excerpt,
    judge_runs,
    read_completion,
    served_models,
    setting_problems,
)

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url


def get_argument_spec() -> dict:
    return {
        "url": {"type": "str", "required": True},
        "api_key": {"type": "str", "default": "", "no_log": True},
        "model": {"type": "str", "required": True},
        "prompt": {"type": "str", "default": "The capital of France is"},
        # A count of tokens, not a credential: validate-modules' no-log-needed reads "token" in the name.
        "max_tokens": {"type": "int", "default": 32, "no_log": False},
        "runs": {"type": "int", "default": 2},
        "timeout": {"type": "int", "default": 300},
        "logprobs": {"type": "bool", "default": True},
        "max_run": {"type": "int", "default": 16},
        "validate_certs": {"type": "bool", "default": True},
        "fail_on_problem": {"type": "bool", "default": True},
    }


class CallError(Exception):
    """The server could not be asked, or refused; the message says which."""


def call(params: dict[str, Any], method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    """The decoded JSON answer to one request; CallError, its message masked, for anything that goes wrong."""
    key = params["api_key"]
    headers = {"Accept": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    data = None
    if body is not None:
        headers["Content-Type"] = "application/json"
        data = json.dumps(body)
    url = params["url"].rstrip("/") + path
    try:
        response = open_url(url, data=data, headers=headers, method=method, timeout=params["timeout"],
                            validate_certs=params["validate_certs"], follow_redirects="none")
        raw = response.read()
    except HTTPError as err:
        try:
            detail = err.read().decode("utf-8", "replace") if err.fp else ""
        except Exception:  # a body cut short says nothing more than the status
            detail = ""
        if err.code == 401:
            raise CallError(f"{method} {path}: 401, the server refused the API key; expected the key it was "
                            "started with (its --config file)") from None
        raise CallError(f"{method} {path}: HTTP {err.code} {excerpt(mask(detail, key))}") from None
    except (URLError, OSError) as err:
        reason = mask(str(getattr(err, "reason", err)), key)
        raise CallError(f"{method} {path}: cannot reach {params['url']} ({reason})") from None
    except Exception as err:  # whatever the HTTP stack raises, the message says so without the key
        raise CallError(mask(f"{method} {path}: the request failed ({type(err).__name__}: {err})", key)) from None
    # Masked before anything is read from it or cut to an excerpt: a server that echoes the request
    # would echo the key, and an excerpt could end inside it.
    text = mask(raw.decode("utf-8", "replace"), key)
    try:
        return json.loads(text)
    except ValueError:
        raise CallError(f"{method} {path}: the answer is not JSON: {excerpt(text)}") from None


def smoke(params: dict[str, Any]) -> dict[str, Any]:
    """The smoke test's result; problems for a server that failed it."""
    problems: list[str] = []
    models: list[str] = []
    samples: list[Sample] = []
    try:
        models = served_models(call(params, "GET", "/v1/models"))
        if params["model"] not in models:
            problems.append(f"the server serves {models}, not {params['model']!r}; expected the served model name "
                            "the client will ask for (--served-model-name)")
        request = completion_request(params["model"], params["prompt"], params["max_tokens"], params["logprobs"])
        for _unused in range(params["runs"]):
            samples.append(read_completion(call(params, "POST", "/v1/completions", request), params["max_run"]))
    except CallError as err:
        problems.append(str(err))
    verdict = judge_runs(samples)
    problems += [p for p in verdict.problems if not (p == "no run was made" and problems)]
    result = {
        "changed": False,
        "ok": not problems,
        "problems": problems,
        "identical": verdict.identical,
        "runs": [sample.as_dict() for sample in samples],
        "models": models,
    }
    if problems:
        result["msg"] = (f"sglang_smoke: the server at {params['url']} failed the smoke test "
                         f"({params['runs']} runs of {params['prompt']!r} at temperature 0): " + "; ".join(problems))
    else:
        result["msg"] = (f"sglang_smoke: {params['runs']} identical, sane answers from {params['model']}: "
                         f"{excerpt(samples[0].text)}")
    return result


def main() -> None:
    module = AnsibleModule(argument_spec=get_argument_spec(), supports_check_mode=True)
    params = module.params
    key = params["api_key"]
    refused = setting_problems(params["url"], params["timeout"], params["runs"], params["max_tokens"],
                               params["max_run"])
    refused += [f"api_key: {problem}" for problem in api_key_problems(key)]
    if refused:
        module.fail_json(msg=mask("sglang_smoke: " + "; ".join(refused) + ". Nothing was sent.", key),
                         problems=mask_all(refused, key))
    if module.check_mode:
        # A smoke test makes the server generate: check mode sends nothing, whoever calls the module. Whether the
        # server answers is then not known (ok null), not a problem.
        module.exit_json(changed=False, skipped=True, ok=None, problems=[],
                         msg=mask(f"check mode: no request sent to {params['url']}; the server was not tested", key))
    try:
        result = smoke(params)
    except Exception as err:  # a failure of the module itself: said plainly, never with the key or a traceback
        module.fail_json(msg=mask(f"sglang_smoke: the smoke test could not run ({type(err).__name__}: {err}).", key),
                         ok=False, problems=[])
    # The server's answers too: a server that echoes the request would echo the key.
    result = mask_all(result, key)
    if not result["ok"] and params["fail_on_problem"]:
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
