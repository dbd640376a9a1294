"""A small throughput client for an OpenAI-compatible server: standard library only (urllib and threads).

Used when the serving venv has no SGLang benchmark client (``python -m sglang.bench_serving``). Every
request streams ``POST /v1/completions`` (server-sent events) with a fixed ``max_tokens`` and
``ignore_eos``, so that the clock sees each token arrive:

- time to first token: from sending the request to the first chunk that carries text;
- decode rate of one stream: the tokens after the first over the time between the first and the last
  (the prefill is not decode, so it is left out, as bench_serving's TPOT leaves it out);
- aggregate rate: all tokens of ``concurrency`` streams at once over the wall time of the whole wave.

Tokens are counted from the server's own ``usage.completion_tokens`` when it sends it (``stream_options``
``include_usage``), else one per chunk with text: SGLang sends one chunk per decode step.
"""

from __future__ import annotations

import json
import statistics
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.serving.secret_mask import mask


class ClientError(Exception):
    """A request that failed; the message says which and why, with the key masked."""


@dataclass(frozen=True)
class Stream:
    """One streamed completion as the clock saw it; times in seconds from sending the request."""

    tokens: int
    first_token_s: float
    last_token_s: float

    @property
    def decode_tok_s(self) -> float | None:
        span = self.last_token_s - self.first_token_s
        return (self.tokens - 1) / span if self.tokens > 1 and span > 0 else None


def request_body(model: str, prompt: str, max_tokens: int) -> dict[str, Any]:
    # Greedy and ignore_eos (an SGLang sampling parameter): every request decodes exactly max_tokens,
    # whatever the model would say, so that runs are comparable.
    return {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True,
            "ignore_eos": True, "stream_options": {"include_usage": True}}


def read_events(lines: Any, clock: Any, started: float) -> Stream:
    """Read server-sent events (an iterable of byte lines) up to ``data: [DONE]``; the timed stream."""
    first = last = None
    chunks = 0
    usage_tokens = None
    for raw in lines:
        line = raw.strip()
        if not line.startswith(b"data:"):
            continue
        data = line[5:].strip()
        if data == b"[DONE]":
            break
        try:
            event = json.loads(data)
        except ValueError:
            raise ClientError(f"the stream held an event that is not JSON: {data[:80]!r}") from None
        if not isinstance(event, dict):
            continue
        usage = event.get("usage")
        if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
            usage_tokens = usage["completion_tokens"]
        choices = event.get("choices")
        if isinstance(choices, list) and any(isinstance(c, dict) and c.get("text") for c in choices):
            now = clock() - started
            first = now if first is None else first
            last = now
            chunks += 1
    if first is None or last is None:
        raise ClientError("the stream ended without a token")
    return Stream(tokens=usage_tokens if usage_tokens else chunks, first_token_s=first, last_token_s=last)


def stream_completion(url: str, api_key: str, body: dict[str, Any], timeout: float) -> Stream:
    """Send one streamed completion and time it."""
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    request = urllib.request.Request(url.rstrip("/") + "/v1/completions", data=json.dumps(body).encode(),
                                     headers=headers, method="POST")
    started = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return read_events(response, time.monotonic, started)
    except urllib.error.HTTPError as err:
        hint = "; the server refused the API key" if err.code == 401 else ""
        raise ClientError(f"POST /v1/completions: HTTP {err.code}{hint}") from None
    except ClientError:
        raise
    except Exception as err:  # the message is all a caller needs, never the key or a traceback
        raise ClientError(mask(f"POST /v1/completions: {type(err).__name__}: {err}", api_key)) from None


def concurrent_streams(url: str, api_key: str, body: dict[str, Any], concurrency: int,
                       timeout: float) -> tuple[list[Stream], list[str], float]:
    """``concurrency`` streams started together: the streams, the errors, and the wall time of the wave."""
    streams: list[Stream] = []
    errors: list[str] = []
    lock = threading.Lock()

    def one() -> None:
        try:
            stream = stream_completion(url, api_key, body, timeout)
        except ClientError as err:
            with lock:
                errors.append(str(err))
            return
        with lock:
            streams.append(stream)

    threads = [threading.Thread(target=one, daemon=True) for _unused in range(concurrency)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    # The whole wave within the timeout: its requests run at once, so each has that long.
    for thread in threads:
        thread.join(max(0.0, started + timeout - time.monotonic()))
    return streams, errors, time.monotonic() - started


def measure(url: str, api_key: str, model: str, prompt: str, max_tokens: int, single_requests: int,
            concurrency: int, timeout: float) -> dict[str, Any]:
    """The single-stream and aggregate figures, in the shape bench_serving.py reads its tool's into."""
    body = request_body(model, prompt, max_tokens)
    singles = [stream_completion(url, api_key, body, timeout) for _unused in range(single_requests)]
    rates = [s.decode_tok_s for s in singles if s.decode_tok_s is not None]
    streams, errors, wall = concurrent_streams(url, api_key, body, concurrency, timeout)
    if errors:
        raise ClientError(f"{len(errors)} of {concurrency} concurrent requests failed: {errors[0]}")
    if len(streams) < concurrency:
        raise ClientError(f"{concurrency - len(streams)} of {concurrency} concurrent requests did not finish within "
                          f"{timeout} s; raise the timeout or lower the concurrency")
    tokens = sum(s.tokens for s in streams)
    return {
        "tool": "client",
        "single_stream": {
            "requests": len(singles),
            # The median: one slow request (a first CUDA graph, a page-in) does not speak for the server.
            "decode_tok_s": statistics.median(rates) if rates else None,
            "ttft_ms": statistics.median(s.first_token_s for s in singles) * 1000 if singles else None,
            "output_tokens": sum(s.tokens for s in singles),
        },
        "aggregate": {
            "concurrency": concurrency,
            "requests": len(streams),
            "output_tokens": tokens,
            "duration_s": wall,
            "tok_s": tokens / wall if wall > 0 else None,
        },
    }
