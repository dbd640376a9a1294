"""The SGLang stand-in behaves as the role's tests assume: SGLang's flags and key rule, and each test behaviour."""

from __future__ import annotations

import json
import random
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.unit.standin import KEY, STANDIN, free_port, health, running_standin, start

sys.path.insert(0, str(STANDIN))
# The stand-in's package lives outside the project's import paths.
from sglang import standin


def request(url: str, path: str, body: dict[str, Any] | None = None, key: str | None = KEY) -> tuple[int, Any]:
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    data = json.dumps(body).encode() if body is not None else None
    try:
        with urllib.request.urlopen(urllib.request.Request(url + path, data=data, headers=headers), timeout=5) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"null")


COMPLETION = {"model": "GLM-5-NVFP4", "prompt": "The capital of France is", "max_tokens": 8, "temperature": 0,
              "logprobs": 1}


# --------------------------------------------------------------------------------------------------
# Command line and --config, as SGLang reads them


def test_flags_as_the_role_passes_them() -> None:
    settings = standin.parse_args(["--model-path", "/models/m", "--served-model-name", "M", "--host", "127.0.0.1",
                                   "--port", "30000", "--tp", "8", "--nsa-decode-backend", "trtllm",
                                   "--disable-custom-all-reduce"])
    assert (settings.model_path, settings.model_name, settings.port, settings.tp_size) == ("/models/m", "M", 30000, 8)
    assert settings.ignored == ["--nsa-decode-backend", "trtllm", "--disable-custom-all-reduce"]
    assert settings.api_key is None and settings.behaviour == "good"


def test_config_file_values_lose_to_the_command_line(tmp_path: Path) -> None:
    config = tmp_path / "sglang.yaml"
    config.write_text('# comment\napi-key: "k\\"ey"\nport: 31000\ntp_size: 2\nenable-foo: true\ndisable-bar: false\n')
    settings = standin.parse_args(["--config", str(config), "--model-path", "/m", "--port", "32000"])
    assert settings.api_key == 'k"ey'
    assert settings.port == 32000
    assert settings.tp_size == 2
    assert settings.ignored == ["--enable-foo"]


def test_the_role_s_config_template_reads_back(tmp_path: Path) -> None:
    # What roles/sglang_serve/templates/sglang-secret.yaml.j2 writes for an awkward key.
    key = 'a "quoted" \\ key: with # and ünïcode'
    config = tmp_path / "sglang.yaml"
    config.write_text(f"# Ansible managed\napi-key: {json.dumps(key)}\n")
    assert standin.parse_args(["--config", str(config), "--model-path", "/m"]).api_key == key


@pytest.mark.parametrize(("name", "content", "says"), [
    ("c.json", "{}", "must be YAML format"),
    ("c.yaml", None, "not found or unreadable"),
    ("c.yaml", "no colon here", "line 1: expected 'key: value'"),
    ("c.yaml", 'api-key: "unterminated', "line 1: unreadable quoted value"),
])
def test_bad_config_files(tmp_path: Path, name: str, content: str | None, says: str) -> None:
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    with pytest.raises(standin.ConfigError, match=says):
        standin.parse_args(["--config", str(path), "--model-path", "/m"])


@given(key=st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=60))
def test_any_key_survives_the_config_file(key: str) -> None:
    assert standin.parse_config(f"api-key: {json.dumps(key)}") == ["--api-key", key]


# --------------------------------------------------------------------------------------------------
# Completions


def settings(behaviour: str = "good") -> standin.Settings:
    return standin.Settings(model_path="/m", served_model_name="GLM-5-NVFP4", behaviour=behaviour)


def test_greedy_output_is_deterministic_and_sane() -> None:
    first = standin.completion(settings(), COMPLETION, random.Random(1))
    second = standin.completion(settings(), COMPLETION, random.Random(2))
    assert first["choices"][0]["text"] == second["choices"][0]["text"]
    assert first["usage"]["completion_tokens"] == 8
    assert all(-3 < value < 0 for value in first["choices"][0]["logprobs"]["token_logprobs"])


def test_sampling_output_varies() -> None:
    body = {**COMPLETION, "temperature": 0.8}
    texts = {standin.completion(settings(), body, random.Random(seed))["choices"][0]["text"] for seed in range(5)}
    assert len(texts) > 1


def test_nan_behaviour_is_what_nan_logits_decode_to() -> None:
    choice = standin.completion(settings("nan"), COMPLETION, random.Random(1))["choices"][0]
    assert choice["text"] == "!" * 8
    assert choice["logprobs"]["token_logprobs"] == [None] * 8


def test_garbage_and_nondeterministic_differ_between_calls() -> None:
    for behaviour in ("garbage", "nondeterministic"):
        rng = random.Random(3)
        texts = {standin.completion(settings(behaviour), COMPLETION, rng)["choices"][0]["text"] for _ in range(3)}
        assert len(texts) == 3, behaviour


# --------------------------------------------------------------------------------------------------
# The server, run as its own process


def test_server_enforces_the_key_but_not_on_health() -> None:
    with running_standin("good") as url:
        assert request(url, "/v1/models", key=None) == (401, {"error": "Unauthorized"})
        assert request(url, "/v1/models", key="wrong")[0] == 401
        assert request(url, "/v1/completions", COMPLETION, key=None)[0] == 401
        assert request(url, "/health", key=None) == (200, None)
        status, models = request(url, "/v1/models")
        assert status == 200 and [m["id"] for m in models["data"]] == ["GLM-5-NVFP4"]
        status, body = request(url, "/v1/completions", COMPLETION)
        assert status == 200 and body["object"] == "text_completion"
        assert request(url, "/nope")[0] == 404


def test_never_healthy_answers_503() -> None:
    with running_standin("never-healthy", ready=503) as url:
        assert health(url) == 503


def test_port_opens_only_after_loading(tmp_path: Path) -> None:
    port = free_port()
    process = start(["--model-path", str(tmp_path), "--port", str(port), "--standin-health-delay", "30"])
    assert process.stdout is not None
    try:
        lines = [process.stdout.readline() for _ in range(2)]
        assert lines[0].startswith("server_args=ServerArgs(")
        assert lines[1] == "Load weight begin.\n"
        assert health(f"http://127.0.0.1:{port}") == 0  # loading: nothing listens yet
    finally:
        process.terminate()
        process.wait(timeout=10)
        process.stdout.close()


@pytest.mark.parametrize(("args", "env", "says"), [
    (["--standin-behaviour", "exit"], {}, "RuntimeError: CUDA error: device-side assert triggered"),
    (["--tp", "4"], {"CUDA_VISIBLE_DEVICES": "0,1"}, "tp_size 4 needs 4 GPUs"),
    (["--config", "/nonexistent.yaml"], {}, "Config file not found"),
])
def test_fatal_starts_exit_at_once(tmp_path: Path, args: list[str], env: dict[str, str], says: str) -> None:
    process = start(["--model-path", str(tmp_path), "--port", str(free_port()), "--api-key", KEY, *args], env)
    output, _ = process.communicate(timeout=15)
    assert process.returncode == 1
    assert says in output


def test_missing_model_directory_exits(tmp_path: Path) -> None:
    process = start(["--model-path", str(tmp_path / "absent"), "--port", str(free_port())])
    output, _ = process.communicate(timeout=15)
    assert process.returncode == 1 and "is not a directory" in output


def test_startup_log_prints_the_key_as_sglang_does(tmp_path: Path) -> None:
    process = start(["--model-path", str(tmp_path), "--port", str(free_port()), "--api-key", KEY,
                     "--standin-behaviour", "exit"])
    output, _ = process.communicate(timeout=15)
    assert f"api_key='{KEY}'" in output
