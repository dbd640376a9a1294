"""Judge an SGLang server's answers to the deployment smoke test: the same prompt, twice, at temperature 0.

Pure functions over the decoded JSON bodies of ``/v1/completions`` and ``/v1/models``; the module
sglang_smoke does the HTTP. Whatever a body holds, these functions answer with problems, never an
exception.

Why these checks: a backend that computes NaN logits (the incident's NSA decode backends on SM120)
still answers 200 with text, because greedy decoding takes the argmax of NaNs, which is token 0 every
time, in most vocabularies ``!``. So the text is judged, not the status:

- empty text, or no completion tokens;
- the text ``nan``/``inf`` as a word, undecodable bytes (U+FFFD), control characters;
- one character repeated ``max_run`` times or more, or a long text of at most 2 distinct characters
  (token 0 over and over);
- log-probabilities, when the server returned them, that are missing (NaN serializes as null) or not
  finite, or above 0;
- a finish reason other than ``stop`` or ``length`` (``abort`` is how SGLang reports an internal error);
- two runs at temperature 0 that differ: greedy decoding is deterministic on a healthy server; a
  difference points at a race or corrupted all-reduce (a P2P window that mirrors instead of peering).
"""

from __future__ import annotations

import math
import re
import unicodedata
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

FINISH_REASONS_OK = frozenset({"stop", "length"})
# Long enough that no real word or number has it ("1000000000000000" has 15 zeros), short enough that
# a default smoke answer of 32 tokens of "!" trips it.
DEFAULT_MAX_RUN = 16
# Below this many non-space characters the distinct-character rule says nothing.
MIN_DIVERSITY_SPAN = 16
_NAN_WORD = re.compile(r"(?<![A-Za-z])[-+]?(nan|inf|infinity)(?![A-Za-z])", re.IGNORECASE)
_EXCERPT = 60
# Bounds of the smoke test's settings: beyond them a setting is a mistake, not a choice.
MAX_TIMEOUT = 86400
MAX_RUNS = 100
MAX_TOKENS = 1_000_000


def excerpt(text: str, limit: int = _EXCERPT) -> str:
    """The text as a Python literal, cut to about limit characters: safe to put in one line of a message."""
    shown = text if len(text) <= limit else text[:limit] + "..."
    return repr(shown)


@dataclass(frozen=True)
class Sample:
    """One completion as read from the server's answer."""

    text: str = ""
    finish_reason: str | None = None
    completion_tokens: int | None = None
    token_logprobs: tuple[Any, ...] | None = None
    problems: tuple[str, ...] = ()

    def as_dict(self, limit: int = 500) -> dict[str, Any]:
        return {
            "text": self.text if len(self.text) <= limit else self.text[:limit] + "...",
            "finish_reason": self.finish_reason,
            "completion_tokens": self.completion_tokens,
            "problems": list(self.problems),
        }


@dataclass(frozen=True)
class Verdict:
    ok: bool
    problems: list[str] = field(default_factory=list)
    identical: bool | None = None
    samples: list[Sample] = field(default_factory=list)


def completion_request(model: str, prompt: str, max_tokens: int, logprobs: bool) -> dict[str, Any]:
    """The body of the smoke test's POST /v1/completions: greedy, one choice, no streaming."""
    body: dict[str, Any] = {
        "model": model,
        "prompt": prompt,
        "max_tokens": max_tokens,
        "temperature": 0,
        "n": 1,
        "stream": False,
    }
    if logprobs:
        body["logprobs"] = 1
    return body


def setting_problems(url: Any, timeout: Any, runs: Any, max_tokens: Any, max_run: Any) -> list[str]:
    """What is wrong with the smoke test's settings, each with what was expected; empty when they can be used."""
    problems = []
    text = url if isinstance(url, str) else ""
    try:
        parts = urllib.parse.urlsplit(text)
        port_ok = parts.port is None or 0 < parts.port < 65536
    except ValueError:
        parts, port_ok = None, False
    if (parts is None or not port_ok or parts.scheme not in ("http", "https") or not parts.hostname
            or parts.username is not None or parts.path not in ("", "/") or parts.query or parts.fragment
            or any(char.isspace() or unicodedata.category(char) == "Cc" for char in text)):
        problems.append(f"url is {excerpt(str(url))}; expected the server's base URL, http:// or https://, a host and "
                        "an optional port, no path, no user (e.g. http://127.0.0.1:30000)")
    for name, value, low, high in (("timeout", timeout, 1, MAX_TIMEOUT), ("runs", runs, 1, MAX_RUNS),
                                   ("max_tokens", max_tokens, 1, MAX_TOKENS), ("max_run", max_run, 2, MAX_TOKENS)):
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
                or not low <= value <= high:
            problems.append(f"{name} is {value!r}; expected a number from {low} to {high}")
    return problems


def judge_text(text: str, max_run: int = DEFAULT_MAX_RUN) -> list[str]:
    """What is wrong with one completion's text; empty when it looks like language."""
    if not text.strip():
        return ["empty output"]
    problems: list[str] = []
    match = _NAN_WORD.search(text)
    if match:
        problems.append(f"the output contains {match.group(0)!r}, a non-finite number")
    if "\ufffd" in text:
        problems.append(f"undecodable bytes (U+FFFD) in the output: {excerpt(text)}")
    controls = sorted({f"U+{ord(c):04X}" for c in text if unicodedata.category(c) == "Cc" and c not in "\t\n\r"})
    if controls:
        problems.append(f"control characters {', '.join(controls[:5])} in the output: {excerpt(text)}")
    run_char, run = _longest_run(text)
    if run >= max_run:
        problems.append(f"{run_char!r} repeated {run} times, what NaN logits decode to: {excerpt(text)}")
    else:
        visible = [c for c in text if not c.isspace()]
        distinct = set(visible)
        if len(visible) >= MIN_DIVERSITY_SPAN and len(distinct) <= 2:
            problems.append(f"{len(visible)} characters made of only {''.join(sorted(distinct))!r}: {excerpt(text)}")
    return problems


def _longest_run(text: str) -> tuple[str, int]:
    """The non-space character with the longest run of repeats, spaces between repeats not counted."""
    best_char, best, current_char, current = "", 0, "", 0
    for char in text:
        if char.isspace():
            continue
        if char == current_char:
            current += 1
        else:
            current_char, current = char, 1
        if current > best:
            best_char, best = current_char, current
    return best_char, best


def judge_logprobs(values: Sequence[Any]) -> list[str]:
    """Problems with the sampled tokens' log-probabilities: each must be a finite number, at most 0."""
    good = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)]
    bad = [v for v in values if not (isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v))]
    problems = []
    if bad:
        problems.append(f"{len(bad)} of {len(values)} token log-probabilities are not finite numbers "
                        f"(NaN logits; first: {bad[0]!r})")
    # A probability above 1, beyond float rounding, is arithmetic gone wrong.
    above = [v for v in good if v > 1e-3]
    if above:
        problems.append(f"{len(above)} token log-probabilities are above 0 (first: {above[0]!r})")
    return problems


def read_completion(body: Any, max_run: int = DEFAULT_MAX_RUN) -> Sample:
    """One /v1/completions answer as a Sample with everything wrong with it."""
    if not isinstance(body, dict):
        return Sample(problems=(f"the answer is not a JSON object but {type(body).__name__}",))
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        detail = body.get("message") or body.get("error") or body.get("detail")
        found = f": {excerpt(str(detail))}" if detail else ""
        return Sample(problems=(f"the answer has no choices{found}",))
    choice = choices[0]
    text = choice.get("text")
    problems: list[str] = []
    if isinstance(text, str):
        problems += judge_text(text, max_run)
    else:
        problems.append(f"the choice has no text (found {type(text).__name__})")
        text = ""
    finish = choice.get("finish_reason")
    finish = finish if isinstance(finish, str) or finish is None else str(finish)
    if finish is not None and finish not in FINISH_REASONS_OK:
        problems.append(f"finished with {finish!r}, not stop or length")
    usage = body.get("usage")
    tokens = usage.get("completion_tokens") if isinstance(usage, dict) else None
    tokens = tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else None
    if tokens == 0 and "empty output" not in problems:
        problems.append("no completion tokens")
    logprobs = choice.get("logprobs")
    values = logprobs.get("token_logprobs") if isinstance(logprobs, dict) else None
    token_logprobs = tuple(values) if isinstance(values, list) else None
    if token_logprobs is not None:
        problems += judge_logprobs(token_logprobs)
    return Sample(text=text, finish_reason=finish, completion_tokens=tokens, token_logprobs=token_logprobs,
                  problems=tuple(problems))


def served_models(body: Any) -> list[str]:
    """The model ids a /v1/models answer lists; empty for anything else."""
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        return []
    return [str(item["id"]) for item in data if isinstance(item, dict) and "id" in item]


def judge_runs(samples: Sequence[Sample]) -> Verdict:
    """The verdict over every run: each sane, and all the same text."""
    problems = [f"run {number}: {problem}" for number, sample in enumerate(samples, start=1)
                for problem in sample.problems]
    if not samples:
        problems.append("no run was made")
    identical = None
    if len(samples) > 1:
        identical = all(sample.text == samples[0].text for sample in samples[1:])
        if not identical:
            first = samples[0].text
            other = next(sample.text for sample in samples[1:] if sample.text != first)
            problems.append(f"the runs at temperature 0 differ: {excerpt(first)} then {excerpt(other)}")
    return Verdict(ok=not problems, problems=problems, identical=identical, samples=list(samples))
