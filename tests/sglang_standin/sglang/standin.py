"""The stand-in server: SGLang's command line, its API key rule, /health, /v1/models and /v1/completions.

What it copies from SGLang (0.5.10), because the role or its tests depend on it:

- the flags the role passes (``--model-path``, ``--host``, ``--port``, ``--api-key``, ``--tp``/``--tp-size``,
  ``--served-model-name``) and ``--config FILE.yaml``, whose values come first and lose to the command
  line; unknown flags are ignored (the gate's backend flags);
- the API key: every path but ``/health*`` and ``/metrics*`` needs ``Authorization: Bearer <key>``, else
  401 ``{"error": "Unauthorized"}``;
- the port opens only once the "model" is loaded, as uvicorn starts after loading;
- the startup log line ``server_args=ServerArgs(...)`` that prints every argument, the API key included;
- a tensor-parallel size larger than the GPUs in ``CUDA_VISIBLE_DEVICES`` stops the server.

Behaviours for tests, from ``--standin-behaviour`` or ``SGLANG_STANDIN_BEHAVIOUR``:

``good``              deterministic text at temperature 0, finite log-probabilities
``nan``               what NaN logits decode to: token 0 (``!``) repeated, log-probabilities null
``garbage``           undecodable bytes and control characters, different on every call
``nondeterministic``  plausible text that differs on every call, even at temperature 0
``never-healthy``     the port opens, /health answers 503 for ever
``exit``              a device-side assert in the log, exit status 1, at once

``--standin-health-delay`` / ``SGLANG_STANDIN_HEALTH_DELAY`` (seconds, default 2): the "loading" time.

Pacing, so that throughput measurements have a known answer:

``--standin-token-delay`` / ``SGLANG_STANDIN_TOKEN_DELAY`` (seconds, default 0): one decode step. Every
running request gets one token per step, the first after one step (the prefill), as a batched decode
does: one stream makes 1/delay tokens per second, N streams N/delay in total.
``--standin-max-running`` / ``SGLANG_STANDIN_MAX_RUNNING`` (default 0, no limit): requests decoded at
once, like SGLang's ``--max-running-requests``; the others wait in the queue. So N streams make at
most max_running/delay tokens per second in total.
``"stream": true`` on /v1/completions answers as SGLang does: server-sent events, one chunk per token,
a usage chunk when ``stream_options.include_usage`` is set, then ``data: [DONE]``.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import os
import random
import socket
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

BEHAVIOURS = ("good", "nan", "garbage", "nondeterministic", "never-healthy", "exit")
VOCABULARY = (
    "the", "river", "city", "of", "light", "stands", "on", "an", "old", "stone", "bridge", "and", "its",
    "people", "speak", "softly", "about", "trains", "rain", "markets", "north", "south", "bread", "music",
    "harbour", "morning", "Paris", "is", "capital", "France", "a", "with", "many", "museums", "streets",
)
NAN_TOKEN = "!"


class ConfigError(ValueError):
    """The --config file cannot be read as SGLang would read it."""


@dataclass
class Settings:
    model_path: str
    host: str = "127.0.0.1"
    port: int = 30000
    api_key: str | None = None
    tp_size: int = 1
    served_model_name: str | None = None
    behaviour: str = "good"
    health_delay: float = 2.0
    token_delay: float = 0.0
    max_running: int = 0
    ignored: list[str] = field(default_factory=list)

    @property
    def model_name(self) -> str:
        return self.served_model_name or self.model_path


def parse_config(text: str) -> list[str]:
    """A flat YAML mapping (``key: value`` lines) as the argv SGLang's config merger builds from it.

    Only the subset the role writes: scalars, double-quoted strings in JSON form, ``true``/``false``.
    """
    argv: list[str] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition(":")
        if not sep or not key.strip():
            raise ConfigError(f"line {number}: expected 'key: value', found {raw!r}")
        value = value.strip()
        flag = "--" + key.strip().replace("_", "-")
        if value.startswith('"'):
            # A quoted value is a string, even "true": YAML only reads bare true/false as booleans.
            try:
                argv += [flag, str(json.loads(value))]
            except json.JSONDecodeError as err:
                raise ConfigError(f"line {number}: unreadable quoted value ({err})") from err
        elif value == "true":
            argv.append(flag)
        elif value != "false":
            argv += [flag, value]
    return argv


def read_config(path: str) -> list[str]:
    if not path.lower().endswith((".yaml", ".yml")):
        raise ConfigError(f"Config file must be YAML format, got: {os.path.splitext(path)[1]}")
    try:
        with open(path, encoding="utf-8") as handle:
            return parse_config(handle.read())
    except OSError as err:
        raise ConfigError(f"Config file not found or unreadable: {path} ({err.strerror})") from err


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sglang serve (stand-in)", allow_abbrev=False)
    p.add_argument("--model-path", "--model", dest="model_path", required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--api-key")
    p.add_argument("--tp-size", "--tp", "--tensor-parallel-size", dest="tp_size", type=int, default=1)
    p.add_argument("--served-model-name")
    p.add_argument("--config")
    p.add_argument("--standin-behaviour", choices=BEHAVIOURS,
                   default=os.environ.get("SGLANG_STANDIN_BEHAVIOUR", "good"))
    p.add_argument("--standin-health-delay", type=float,
                   default=float(os.environ.get("SGLANG_STANDIN_HEALTH_DELAY", "2")))
    p.add_argument("--standin-token-delay", type=float,
                   default=float(os.environ.get("SGLANG_STANDIN_TOKEN_DELAY", "0")))
    p.add_argument("--standin-max-running", type=int,
                   default=int(os.environ.get("SGLANG_STANDIN_MAX_RUNNING", "0")))
    return p


def parse_args(argv: Sequence[str]) -> Settings:
    argv = list(argv)
    if "--config" in argv:
        at = argv.index("--config")
        if at + 1 >= len(argv):
            raise ConfigError("No config file specified after --config flag!")
        # SGLang puts the file's arguments first, so the command line wins.
        argv = read_config(argv[at + 1]) + argv[:at] + argv[at + 2:]
    args, ignored = parser().parse_known_args(argv)
    return Settings(model_path=args.model_path, host=args.host, port=args.port, api_key=args.api_key,
                    tp_size=args.tp_size, served_model_name=args.served_model_name,
                    behaviour=args.standin_behaviour, health_delay=args.standin_health_delay,
                    token_delay=_seconds(args.standin_token_delay), max_running=max(0, args.standin_max_running),
                    ignored=ignored)


def _seconds(value: float) -> float:
    return max(0.0, value) if math.isfinite(value) else 0.0


@dataclass
class ServerArgs:
    """The arguments SGLang logs, a few of its ServerArgs dataclass's fields, the API key among them."""

    model_path: str
    host: str
    port: int
    tp_size: int
    served_model_name: str
    api_key: str | None


def server_args_line(settings: Settings) -> str:
    # SGLang logs its ServerArgs object at startup (logger.info(f"{server_args=}")), the dataclass's
    # repr with the API key in it; so does the stand-in, so that tests see whether the key reaches
    # the journal and what the role prints.
    server_args = ServerArgs(model_path=settings.model_path, host=settings.host, port=settings.port,
                             tp_size=settings.tp_size, served_model_name=settings.model_name,
                             api_key=settings.api_key)
    return f"{server_args=}"


def visible_gpus(environ: dict[str, str]) -> int | None:
    value = environ.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return None
    return len([item for item in value.split(",") if item.strip()])


# ------------------------------------------------------------------------------------------------
# Completions


def _words(seed: bytes, count: int) -> list[str]:
    words: list[str] = []
    state = seed
    while len(words) < count:
        state = hashlib.sha256(state).digest()
        words.extend(VOCABULARY[b % len(VOCABULARY)] for b in state[:8])
    return words[:count]


def generate(settings: Settings, prompt: str, max_tokens: int, temperature: float,
             rng: random.Random) -> tuple[list[str], list[float | None]]:
    """Tokens (as text pieces) and their log-probabilities for one completion."""
    count = max(0, min(max_tokens, 4096))
    behaviour = settings.behaviour
    if behaviour == "nan":
        return [NAN_TOKEN] * count, [None] * count
    if behaviour == "garbage":
        pieces = [bytes(rng.randrange(256) for _ in range(3)).decode("utf-8", "replace") for _ in range(count)]
        return pieces, [rng.uniform(-9.0, -0.1) for _ in range(count)]
    seed = f"{settings.model_name}\0{prompt}".encode()
    if behaviour == "nondeterministic" or temperature > 0:
        seed += rng.randbytes(16)
    words = _words(seed, count)
    logprobs = [-(1 + (hashlib.sha256(f"{i}{w}".encode()).digest()[0] % 50)) / 25 for i, w in enumerate(words)]
    return [" " + word for word in words], logprobs


def completion(settings: Settings, request: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    return completion_and_pieces(settings, request, rng)[0]


def completion_and_pieces(settings: Settings, request: dict[str, Any],
                          rng: random.Random) -> tuple[dict[str, Any], list[str]]:
    """The answer's body, and its text in the pieces (tokens) a stream sends one by one."""
    prompt = request.get("prompt", "")
    if isinstance(prompt, list):
        prompt = prompt[0] if prompt else ""
    max_tokens = int(request.get("max_tokens") or 16)
    temperature = float(request.get("temperature", 1.0))
    pieces, logprobs = generate(settings, str(prompt), max_tokens, temperature, rng)
    text = "".join(pieces)
    choice: dict[str, Any] = {"index": 0, "text": text, "logprobs": None, "finish_reason": "length",
                              "matched_stop": None}
    if request.get("logprobs") is not None:
        offsets, at = [], 0
        for piece in pieces:
            offsets.append(at)
            at += len(piece)
        choice["logprobs"] = {"text_offset": offsets, "token_logprobs": logprobs, "tokens": pieces,
                              "top_logprobs": [None] * len(pieces)}
    prompt_tokens = len(str(prompt).split())
    body = {
        "id": hashlib.sha256(rng.randbytes(8)).hexdigest()[:32],
        "object": "text_completion",
        "created": int(time.time()),
        "model": settings.model_name,
        "choices": [choice],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": len(pieces),
                  "total_tokens": prompt_tokens + len(pieces)},
    }
    return body, pieces


# ------------------------------------------------------------------------------------------------
# HTTP


def authorized(settings: Settings, path: str, header: str | None) -> bool:
    if not settings.api_key or path.startswith(("/health", "/metrics")):
        return True
    scheme, _, token = (header or "").partition(" ")
    return scheme.lower() == "bearer" and token == settings.api_key


class Handler(BaseHTTPRequestHandler):
    server_version = "sglang-standin"
    settings: Settings
    rng: random.Random
    lock: threading.Lock
    # The decode slots (--standin-max-running); None: no limit.
    slots: threading.Semaphore | None

    def log_message(self, fmt: str, *args: Any) -> None:
        sys.stderr.write(f"INFO: {self.address_string()} - {fmt % args}\n")

    def _send(self, status: int, body: Any = None) -> None:
        data = b"" if body is None else json.dumps(body, allow_nan=False).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _route(self, method: str) -> None:
        path = self.path.split("?", 1)[0]
        if not authorized(self.settings, path, self.headers.get("Authorization")):
            self._send(HTTPStatus.UNAUTHORIZED, {"error": "Unauthorized"})
            return
        if method == "GET" and path in ("/health", "/health_generate"):
            healthy = self.settings.behaviour != "never-healthy"
            self._send(HTTPStatus.OK if healthy else HTTPStatus.SERVICE_UNAVAILABLE)
        elif method == "GET" and path == "/v1/models":
            self._send(HTTPStatus.OK, {"object": "list", "data": [
                {"id": self.settings.model_name, "object": "model", "owned_by": "sglang",
                 "root": self.settings.model_path, "max_model_len": 4096}]})
        elif method == "POST" and path == "/v1/completions":
            try:
                length = int(self.headers.get("Content-Length") or 0)
                request = json.loads(self.rfile.read(length) or b"{}")
                if not isinstance(request, dict):
                    raise ValueError("the body is not a JSON object")
            except ValueError as err:
                self._send(HTTPStatus.BAD_REQUEST, {"object": "error", "message": str(err), "code": 400})
                return
            with self.lock:
                body, pieces = completion_and_pieces(self.settings, request, self.rng)
            with self.slots or contextlib.nullcontext():
                if request.get("stream") is True:
                    self._stream(body, pieces, request)
                else:
                    time.sleep(self.settings.token_delay * body["usage"]["completion_tokens"])
                    self._send(HTTPStatus.OK, body)
        else:
            self._send(HTTPStatus.NOT_FOUND, {"detail": "Not Found"})

    def _stream(self, body: dict[str, Any], pieces: list[str], request: dict[str, Any]) -> None:
        """The completion as SGLang streams it: one event per token, each after one decode step."""
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        choice = body["choices"][0]
        head = {key: body[key] for key in ("id", "object", "created", "model")}
        for number, piece in enumerate(pieces, start=1):
            time.sleep(self.settings.token_delay)
            last = number == len(pieces)
            self._event({**head, "choices": [{"index": 0, "text": piece, "logprobs": None,
                                              "finish_reason": choice["finish_reason"] if last else None}]})
        if (request.get("stream_options") or {}).get("include_usage") is True:
            self._event({**head, "choices": [], "usage": body["usage"]})
        self.wfile.write(b"data: [DONE]\n\n")

    def _event(self, data: dict[str, Any]) -> None:
        self.wfile.write(b"data: " + json.dumps(data, allow_nan=False).encode() + b"\n\n")

    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        self._route("POST")


def make_server(settings: Settings) -> ThreadingHTTPServer:
    handler = type("BoundHandler", (Handler,), {
        "settings": settings, "rng": random.Random(), "lock": threading.Lock(),
        "slots": threading.Semaphore(settings.max_running) if settings.max_running > 0 else None})
    server_class = ThreadingHTTPServer
    if ":" in settings.host:
        server_class = type("ThreadingHTTPServer6", (ThreadingHTTPServer,), {"address_family": socket.AF_INET6})
    server = server_class((settings.host, settings.port), handler)
    server.daemon_threads = True
    return server


def log(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def main(argv: Sequence[str], environ: dict[str, str] | None = None) -> int:
    environ = dict(os.environ if environ is None else environ)
    try:
        settings = parse_args(argv)
    except ConfigError as err:
        log(f"ValueError: {err}")
        return 1
    log(server_args_line(settings))
    if settings.ignored:
        log(f"stand-in: ignoring arguments it does not model: {' '.join(settings.ignored)}")
    if not os.path.isdir(settings.model_path):
        log(f"OSError: model path {settings.model_path} is not a directory")
        return 1
    gpus = visible_gpus(environ)
    if gpus is not None and settings.tp_size > gpus:
        log(f"RuntimeError: tp_size {settings.tp_size} needs {settings.tp_size} GPUs, "
            f"CUDA_VISIBLE_DEVICES={environ['CUDA_VISIBLE_DEVICES']} gives {gpus}")
        return 1
    log("Load weight begin.")
    if settings.behaviour == "exit":
        log("RuntimeError: CUDA error: device-side assert triggered")
        return 1
    time.sleep(max(0.0, settings.health_delay) if math.isfinite(settings.health_delay) else 0.0)
    log(f"Load weight end. behaviour={settings.behaviour} token_delay={settings.token_delay} "
        f"max_running={settings.max_running or 'unlimited'}")
    server = make_server(settings)
    log(f"Uvicorn running on http://{settings.host}:{settings.port} (Press CTRL+C to quit)")
    log("The server is fired up and ready to roll!")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
