"""SGLang's own benchmark client, ``python -m sglang.benchmark.serving`` (``sglang.bench_serving`` before
0.5.19): its command line and its result read back.

Two runs through the OpenAI-compatible API (``--backend sglang-oai``: ``POST /v1/completions``, the path
clients use, with the API key from ``OPENAI_API_KEY``, never on the command line):

- one stream (``--max-concurrency 1``): ``median_tpot_ms`` (time per output token after the first) gives
  the decode rate, ``median_ttft_ms`` the time to first token;
- ``concurrency`` streams: ``output_throughput`` (output tokens per second over the run) is the aggregate.

``--dataset-name random-ids`` draws prompt token ids from the tokenizer (the model directory) and needs
no dataset download (``random`` samples ShareGPT texts, which an offline host does not have);
``--random-range-ratio 1`` makes every request exactly ``--random-input-len``/``--random-output-len`` long.
Each run appends one JSON line to ``--output-file``; the last line is the run's.
"""

from __future__ import annotations

import json
import math
from typing import Any

# The client's module, newest first. From 0.5.19 the client lives in sglang/benchmark/serving.py and
# sglang/bench_serving.py is a shim that warns it is deprecated and will be removed (0.5.19 and 0.5.23 wheels);
# up to 0.5.13 only sglang.bench_serving exists. The first one the serving venv can import is run.
MODULES = ("sglang.benchmark.serving", "sglang.bench_serving")
MODULE = MODULES[-1]


class BenchServingError(ValueError):
    """The benchmark's output cannot be read as a result; the message says what was found."""


def probe_code() -> str:
    """Python that prints the first of MODULES the interpreter can import, and exits 1 when it has none."""
    return ("import importlib.util, sys\n"
            f"for name in {MODULES!r}:\n"
            "    try:\n"
            "        found = importlib.util.find_spec(name)\n"
            "    except ImportError:\n"
            "        found = None\n"
            "    if found:\n"
            "        print(name)\n"
            "        sys.exit(0)\n"
            "sys.exit(1)\n")


def argv(python: str, url: str, model: str, tokenizer: str, input_len: int, output_len: int, prompts: int,
         concurrency: int, output_file: str, module: str = MODULE) -> list[str]:
    if module not in MODULES:
        raise BenchServingError(f"expected the benchmark client as one of {', '.join(MODULES)}; found {module!r}")
    return [python, "-m", module, "--backend", "sglang-oai", "--base-url", url, "--model", model,
            "--tokenizer", tokenizer, "--dataset-name", "random-ids", "--random-input-len", str(input_len),
            "--random-output-len", str(output_len), "--random-range-ratio", "1", "--num-prompts", str(prompts),
            "--max-concurrency", str(concurrency), "--request-rate", "inf", "--output-file", output_file,
            "--disable-tqdm"]


def _number(result: dict[str, Any], key: str) -> float | None:
    value = result.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return None
    return float(value)


def last_result(text: str) -> dict[str, Any]:
    """The last JSON line of an output file: the run just made (the file may hold earlier ones)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        raise BenchServingError("bench_serving wrote no result line; expected one JSON object per run")
    try:
        result = json.loads(lines[-1])
    except ValueError:
        raise BenchServingError(f"bench_serving's last result line is not JSON: {lines[-1][:120]!r}") from None
    if not isinstance(result, dict):
        raise BenchServingError(f"bench_serving's result is a {type(result).__name__}, expected a JSON object")
    return result


def single_stream(result: dict[str, Any]) -> dict[str, Any]:
    """The one-stream run's figures; null where the tool did not give them."""
    tpot = _number(result, "median_tpot_ms")
    completed = _number(result, "completed")
    if not completed:
        raise BenchServingError("bench_serving completed no request in the single-stream run (completed: "
                                f"{result.get('completed')!r}); its log says why")
    return {
        "requests": int(completed),
        "decode_tok_s": 1000 / tpot if tpot else None,
        "ttft_ms": _number(result, "median_ttft_ms"),
        "output_tokens": _int(result.get("total_output_tokens")),
    }


def aggregate(result: dict[str, Any], concurrency: int) -> dict[str, Any]:
    completed = _number(result, "completed")
    if not completed:
        raise BenchServingError(f"bench_serving completed no request at concurrency {concurrency} (completed: "
                                f"{result.get('completed')!r}); its log says why")
    return {
        "concurrency": concurrency,
        "requests": int(completed),
        "output_tokens": _int(result.get("total_output_tokens")),
        "duration_s": _number(result, "duration"),
        "tok_s": _number(result, "output_throughput"),
    }


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
