"""The smoke test's judgement of SGLang's answers, and the sglang_smoke module against the stand-in server."""

from __future__ import annotations

import io
import json
import math
from typing import Any

import pytest
import sglang_smoke
from ansible_collections.gpuhost.gpu.plugins.module_utils.serving.secret_mask import mask, secret_forms
from ansible_collections.gpuhost.gpu.plugins.module_utils.serving.sglang_smoke import (
    DEFAULT_MAX_RUN,
    Sample,
    completion_request,
    judge_logprobs,
    judge_runs,
    judge_text,
    read_completion,
    served_models,
    setting_problems,
)
from hypothesis import given
from hypothesis import strategies as st

from tests.unit.modules import run_module
from tests.unit.standin import KEY, listening, running_standin


def answer(text: Any, finish: Any = "length", logprobs: Any = None, tokens: Any = 8) -> dict[str, Any]:
    """A /v1/completions answer as SGLang 0.5 shapes it."""
    choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish, "matched_stop": None}
    if logprobs is not None:
        choice["logprobs"] = {"text_offset": list(range(len(logprobs))), "token_logprobs": logprobs,
                              "tokens": ["x"] * len(logprobs), "top_logprobs": [None] * len(logprobs)}
    return {"id": "c1", "object": "text_completion", "created": 0, "model": "GLM-5-NVFP4", "choices": [choice],
            "usage": {"prompt_tokens": 5, "completion_tokens": tokens, "total_tokens": 5 + (tokens or 0)}}


# --------------------------------------------------------------------------------------------------
# Text


@pytest.mark.parametrize("text", [
    " Paris. It is known for the Eiffel Tower, the Louvre and its cafes.",
    " 1,000,000,000 people, roughly.",
    "\n\nParis\tis the capital.\r\n",
    " naan, financial, banana, infinite, Inference",  # words that merely contain nan/inf
    " 巴黎是法国的首都。",
    " ...!!! Wow!!!",  # a few repeats are language
    " " + "1" * (DEFAULT_MAX_RUN - 1),
])
def test_language_passes(text: str) -> None:
    assert judge_text(text) == []


@pytest.mark.parametrize(("text", "says"), [
    ("", "empty output"),
    ("   \n\t", "empty output"),
    ("!" * 32, "'!' repeated 32 times, what NaN logits decode to"),
    (" ! ! ! ! ! ! ! ! ! ! ! ! ! ! ! ! !", "'!' repeated 17 times"),
    ("The value is NaN.", "contains 'NaN', a non-finite number"),
    ("loss: -nan", "contains '-nan'"),
    ("x = inf", "contains 'inf'"),
    ("Par\ufffd\ufffdis", "undecodable bytes (U+FFFD)"),
    ("Paris\x00\x07", "control characters U+0000, U+0007"),
    ("ababababababababab", "18 characters made of only 'ab'"),
])
def test_garbage_is_named(text: str, says: str) -> None:
    problems = judge_text(text)
    assert any(says in problem for problem in problems), problems


def test_max_run_is_a_setting() -> None:
    assert judge_text("!" * 5, max_run=5)
    assert not judge_text("!" * 4 + " ok", max_run=5)


# --------------------------------------------------------------------------------------------------
# Log-probabilities and whole answers


def test_finite_logprobs_pass() -> None:
    assert judge_logprobs([-0.1, -2, 0.0, -13.25, 1e-9]) == []


@pytest.mark.parametrize(("values", "says"), [
    ([None, None], "2 of 2 token log-probabilities are not finite numbers"),
    ([-0.5, float("nan")], "1 of 2"),
    ([float("-inf")], "1 of 1"),
    (["-0.5"], "1 of 1"),
    ([True], "1 of 1"),
    ([-0.5, 0.7], "1 token log-probabilities are above 0"),
])
def test_bad_logprobs_are_named(values: list[Any], says: str) -> None:
    problems = judge_logprobs(values)
    assert any(says in problem for problem in problems), problems


def test_a_sane_answer_reads_clean() -> None:
    sample = read_completion(answer(" Paris, of course.", logprobs=[-0.2, -0.1, -1.5]))
    assert sample == Sample(text=" Paris, of course.", finish_reason="length", completion_tokens=8,
                            token_logprobs=(-0.2, -0.1, -1.5), problems=())


def test_the_incident_answer_fails_twice_over() -> None:
    # What SGLang returned on SM120 with NaN decode: token 0 over and over, NaN log-probabilities (null in JSON).
    sample = read_completion(answer("!" * 32, logprobs=[None] * 32, tokens=32))
    assert len(sample.problems) == 2
    assert "repeated 32 times" in sample.problems[0]
    assert "32 of 32 token log-probabilities are not finite" in sample.problems[1]


@pytest.mark.parametrize(("body", "says"), [
    ([], "not a JSON object but list"),
    ({"object": "error", "message": "The model does not exist."}, "no choices: 'The model does not exist.'"),
    ({"choices": []}, "no choices"),
    ({"choices": [{"text": None}]}, "the choice has no text"),
    (answer(" fine", finish="abort"), "finished with 'abort'"),
    (answer("", tokens=0), "empty output"),
    (answer(" fine", tokens=0), "no completion tokens"),
])
def test_broken_answers_are_named(body: Any, says: str) -> None:
    sample = read_completion(body)
    assert any(says in problem for problem in sample.problems), sample.problems


def test_runs_must_agree() -> None:
    same = [read_completion(answer(" Paris.")), read_completion(answer(" Paris."))]
    assert judge_runs(same).ok and judge_runs(same).identical is True
    differ = judge_runs([read_completion(answer(" Paris.")), read_completion(answer(" Lyon."))])
    assert not differ.ok and differ.identical is False
    assert differ.problems == ["the runs at temperature 0 differ: ' Paris.' then ' Lyon.'"]


def test_problems_carry_their_run_number() -> None:
    verdict = judge_runs([read_completion(answer(" Paris.")), read_completion(answer("!" * 20))])
    assert verdict.problems[0].startswith("run 2: '!' repeated 20 times")
    assert judge_runs([]).problems == ["no run was made"]
    assert judge_runs([read_completion(answer(" Paris."))]).identical is None


def test_request_is_greedy() -> None:
    body = completion_request("GLM-5-NVFP4", "The capital of France is", 32, logprobs=True)
    assert body == {"model": "GLM-5-NVFP4", "prompt": "The capital of France is", "max_tokens": 32, "temperature": 0,
                    "n": 1, "stream": False, "logprobs": 1}
    assert "logprobs" not in completion_request("m", "p", 1, logprobs=False)


def test_served_models() -> None:
    listed = {"object": "list", "data": [{"id": "GLM-5-NVFP4"}, {"id": 7}, {"x": 1}]}
    assert served_models(listed) == ["GLM-5-NVFP4", "7"]
    assert served_models({"data": "nope"}) == served_models(None) == []


# --------------------------------------------------------------------------------------------------
# Properties: any JSON at all yields a verdict, never an exception.

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=5),
    max_leaves=25,
)
CHOICE = st.fixed_dictionaries({}, optional={
    "text": st.text() | JSON, "finish_reason": JSON, "logprobs": JSON | st.fixed_dictionaries(
        {"token_logprobs": st.lists(st.floats() | st.none() | st.integers(), max_size=8)})})
ANSWER = JSON | st.fixed_dictionaries({"choices": st.lists(CHOICE | JSON, max_size=2)},
                                      optional={"usage": JSON | st.fixed_dictionaries({"completion_tokens": JSON})})


@given(body=ANSWER)
def test_any_answer_reads_without_raising(body: Any) -> None:
    sample = read_completion(body)
    assert isinstance(sample.text, str)
    assert all(isinstance(problem, str) and problem for problem in sample.problems)
    json.dumps(sample.as_dict())


@given(text=st.text())
def test_any_text_is_judged(text: str) -> None:
    problems = judge_text(text)
    assert (not text.strip()) == (problems == ["empty output"])


@given(char=st.characters(blacklist_categories=("Zs", "Cc", "Zl", "Zp")), count=st.integers(DEFAULT_MAX_RUN, 300))
def test_any_repeated_character_fails(char: str, count: int) -> None:
    assert judge_text(char * count)


@given(values=st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=20))
def test_logprobs_fail_exactly_when_not_finite_or_positive(values: list[float]) -> None:
    assert (judge_logprobs(values) == []) == all(math.isfinite(v) and v <= 1e-3 for v in values)


@given(texts=st.lists(st.text(min_size=1), min_size=1, max_size=4))
def test_verdict_identical_iff_all_texts_equal(texts: list[str]) -> None:
    verdict = judge_runs([read_completion(answer(text)) for text in texts])
    if len(texts) > 1:
        assert verdict.identical == (len(set(texts)) == 1)


# --------------------------------------------------------------------------------------------------
# The module, over HTTP, against the stand-in server


def smoke(capsys: pytest.CaptureFixture[str], url: str, **args: Any) -> dict[str, Any]:
    return run_module(sglang_smoke.main, {"url": url, "api_key": KEY, "model": "GLM-5-NVFP4", "timeout": 5, **args},
                      capsys)


def test_module_passes_a_good_server(capsys: pytest.CaptureFixture[str]) -> None:
    with running_standin("good") as url:
        result = smoke(capsys, url)
    assert result["ok"] is True and result["identical"] is True, result
    assert result["models"] == ["GLM-5-NVFP4"]
    assert len(result["runs"]) == 2 and result["runs"][0]["completion_tokens"] == 32
    assert result["msg"].startswith("sglang_smoke: 2 identical, sane answers from GLM-5-NVFP4: ")
    assert KEY not in json.dumps(result)


@pytest.mark.parametrize(("behaviour", "says"), [
    ("nan", "run 1: '!' repeated 32 times"),
    ("garbage", "undecodable bytes"),
    ("nondeterministic", "the runs at temperature 0 differ"),
])
def test_module_fails_a_bad_server(capsys: pytest.CaptureFixture[str], behaviour: str, says: str) -> None:
    with running_standin(behaviour) as url:
        result = smoke(capsys, url)
    assert result["failed"] is True and result["ok"] is False
    assert any(says in problem for problem in result["problems"]), result["problems"]
    assert says in result["msg"]


def test_module_names_a_refused_key(capsys: pytest.CaptureFixture[str]) -> None:
    with running_standin("good") as url:
        result = smoke(capsys, url, api_key="not-the-key-at-all")
    assert result["problems"] == ["GET /v1/models: 401, the server refused the API key; expected the key it was "
                                  "started with (its --config file)"]
    assert "not-the-key-at-all" not in json.dumps(result)


def test_module_names_the_wrong_model(capsys: pytest.CaptureFixture[str]) -> None:
    with running_standin("good") as url:
        result = smoke(capsys, url, model="Other-Model")
    assert result["problems"][0].startswith("the server serves ['GLM-5-NVFP4'], not 'Other-Model'")


def test_module_names_an_unreachable_server(capsys: pytest.CaptureFixture[str]) -> None:
    result = smoke(capsys, "http://127.0.0.1:9")
    assert len(result["problems"]) == 1
    assert result["problems"][0].startswith("GET /v1/models: cannot reach http://127.0.0.1:9")


def test_module_can_report_without_failing(capsys: pytest.CaptureFixture[str]) -> None:
    with running_standin("nan") as url:
        result = smoke(capsys, url, fail_on_problem=False, runs=1, max_tokens=4, max_run=4)
    assert "failed" not in result and result["ok"] is False
    assert result["identical"] is None


# --------------------------------------------------------------------------------------------------
# The key never leaves the module, in any form; absurd settings are refused before anything is sent


@pytest.mark.parametrize(("key", "says"), [
    # What `echo KEY | ansible-vault encrypt_string` and a YAML `|` block give: http.client used to raise
    # "Invalid header value b'Bearer <key>\n'", the key in a repr that no_log does not hide.
    (KEY + "\n", "api_key: the key has whitespace at its start or end"),
    ("schl\u00fcssel-" + KEY, "api_key: the key holds characters outside printable ASCII (U+00FC)"),
    ("\u043a\u043b\u044e\u0447-" + KEY, "outside printable ASCII"),
])
def test_module_refuses_a_key_a_header_cannot_carry(capsys: pytest.CaptureFixture[str], key: str, says: str) -> None:
    with running_standin("good") as url:
        result = smoke(capsys, url, api_key=key)
    assert result["failed"] is True
    assert says in result["msg"] and result["msg"].endswith("Nothing was sent.")
    dumped = json.dumps(result, ensure_ascii=False)
    assert not [form for form in secret_forms(key) if form in dumped]


@pytest.mark.parametrize(("args", "says"), [
    ({"url": "127.0.0.1:30000"}, "url is '127.0.0.1:30000'; expected the server's base URL"),
    ({"url": "http://127.0.0.1:30000/v1"}, "expected the server's base URL"),
    ({"url": "http://127.0.0.1:99999"}, "expected the server's base URL"),
    ({"url": "http://[::1"}, "expected the server's base URL"),
    ({"url": "http://u:p@127.0.0.1:30000"}, "no user"),
    ({"url": "http://127.0.0.1:30000\nX"}, "expected the server's base URL"),
    ({"timeout": 0}, "timeout is 0; expected a number from 1 to 86400"),
    ({"timeout": -5}, "timeout is -5"),
    ({"timeout": 10**30}, "timeout is 1000000000000000000000000000000"),
    ({"runs": 0}, "runs is 0; expected a number from 1 to 100"),
    ({"runs": 10**6}, "runs is 1000000"),
    ({"max_tokens": 0}, "max_tokens is 0"),
    ({"max_run": 0}, "max_run is 0; expected a number from 2"),
])
def test_module_refuses_absurd_settings(capsys: pytest.CaptureFixture[str], args: dict[str, Any], says: str) -> None:
    result = smoke(capsys, args.pop("url", "http://127.0.0.1:9"), **args)
    assert result["failed"] is True
    assert says in result["msg"], result["msg"]
    assert "Traceback" not in json.dumps(result)


def test_setting_problems_take_any_value() -> None:
    assert setting_problems("http://127.0.0.1:30000", 300, 2, 32, 16) == []
    assert setting_problems("https://sglang.example:443/", 1, 1, 1, 2) == []
    nan = float("nan")
    problems = setting_problems(None, nan, float("inf"), True, "16")
    assert [p.split(" is ")[0] for p in problems] == ["url", "timeout", "runs", "max_tokens", "max_run"]


def test_module_masks_whatever_the_http_stack_raises(capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    def explode(url: str, headers: dict[str, str], **kwargs: Any) -> Any:
        raise ValueError(f"Invalid header value {headers['Authorization'].encode()!r} for {url}")

    monkeypatch.setattr(sglang_smoke, "open_url", explode)
    result = smoke(capsys, "http://127.0.0.1:9")
    assert result["failed"] is True
    assert result["problems"] == ["GET /v1/models: the request failed (ValueError: Invalid header value "
                                  "b'Bearer <api key>' for http://127.0.0.1:9/v1/models)"]
    assert KEY not in json.dumps(result)


def test_module_masks_a_key_the_server_echoes(capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    key = "echo'd\\key-0123456789"

    def refuse(url: str, headers: dict[str, str], **kwargs: Any) -> Any:
        body = json.dumps({"detail": headers["Authorization"]}).encode()
        raise sglang_smoke.HTTPError(url, 400, "bad", {}, io.BytesIO(body))

    def answer_with_it(url: str, headers: dict[str, str], **kwargs: Any) -> Any:
        body = {"data": [{"id": "GLM-5-NVFP4"}]} if url.endswith("/models") else answer(f" {key} " * 20)
        return io.BytesIO(json.dumps(body).encode())

    for fake in (refuse, answer_with_it):
        monkeypatch.setattr(sglang_smoke, "open_url", fake)
        result = smoke(capsys, "http://127.0.0.1:9", api_key=key)
        dumped = json.dumps(result, ensure_ascii=False)
        assert "<api key>" in dumped, dumped
        assert not [form for form in secret_forms(key) if form in dumped]
        # Nor a piece of it where an excerpt was cut.
        assert key[:8] not in dumped


def test_module_says_why_it_could_not_run(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(params: dict[str, Any]) -> Any:
        raise RuntimeError(f"unexpected {params['api_key']!r}")

    monkeypatch.setattr(sglang_smoke, "smoke", broken)
    result = smoke(capsys, "http://127.0.0.1:9")
    assert result["failed"] is True
    assert result["msg"] == "sglang_smoke: the smoke test could not run (RuntimeError: unexpected '<api key>')."


@given(key=st.text(min_size=1, max_size=30), noise=st.text(max_size=20))
def test_mask_leaves_no_form(key: str, noise: str) -> None:
    text = f"{noise}{key!r}{noise}{json.dumps(key)}{key}{key.encode('utf-8', 'surrogatepass')!r}"
    # A placeholder that shares no character with the key's forms: with "<api key>", a key such as '>"' would
    # seem to reappear where the placeholder's '>' meets a '"' of the text, which reveals nothing of the key.
    forms = secret_forms(key)
    placeholder = next(c for c in "\x00\x01\x02\x03" if not any(c in form for form in forms))
    masked = mask(text, key, placeholder)
    around = mask(noise, key, placeholder) * 2 + placeholder
    assert not [form for form in forms if form in masked and form not in around]


@pytest.mark.parametrize("key", ['>"', "y>", "<a"])
def test_mask_with_a_key_that_meets_the_placeholder(key: str) -> None:
    """The example that showed it: the key's forms are all gone, and what looks like the key is the placeholder's
    edge beside the text around it."""
    masked = mask(f'"{key}"{key!r}', key)
    assert masked.replace("<api key>", "") in ('""', '""' + "''")


def test_check_mode_sends_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    with listening() as (url, connected):
        result = run_module(sglang_smoke.main, {"url": url, "api_key": KEY, "model": "GLM-5-NVFP4", "timeout": 2},
                            capsys, check_mode=True)
        assert not connected(), "check mode connected to the server"
    assert result["skipped"] is True and result["changed"] is False and result["ok"] is None
    assert result["msg"] == f"check mode: no request sent to {url}; the server was not tested"


def test_check_mode_still_refuses_bad_settings(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_module(sglang_smoke.main, {"url": "http://localhost:1", "api_key": KEY, "model": "m", "runs": 0},
                        capsys, check_mode=True)
    assert result["failed"] is True and "Nothing was sent" in result["msg"]
