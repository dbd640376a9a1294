"""The benchmark modules' options, checked before anything runs.

Pure functions over the parameters Ansible hands the modules (already converted to their types):
every value that would make a run meaningless (a negative size, a step factor that never grows,
a timeout that is not a positive finite number of seconds, an environment variable that cannot
exist) is refused with ``ArgumentError``, which says which option, what was expected and what
was given. Nothing is started, no finding is made from such a value, and a long sweep does not
fail at its end on an option that was wrong from the start.
"""

from __future__ import annotations

import math
import re
from typing import Any

# POSIX environment variable names, as NCCL and the shell read them.
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ArgumentError(ValueError):
    """An option the benchmark cannot use; the message names it, what was expected and what was given."""


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def whole(name: str, value: Any, minimum: int, optional: bool = False) -> int | None:
    """An integer option of at least ``minimum``."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ArgumentError(f"{name}: expected a whole number of {minimum} or more; got {_shown(value)}")
    return value


def seconds(name: str, value: Any) -> float:
    """A positive, finite number of seconds (NaN, infinity, zero and below mean no deadline at all)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ArgumentError(f"{name}: expected a positive, finite number of seconds; got {_shown(value)}")
    return float(value)


def positive_number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ArgumentError(f"{name}: expected a positive, finite number; got {_shown(value)}")
    return float(value)


def environment(name: str, env: Any) -> dict[str, str]:
    """A mapping of variable names to values, as a process environment can hold it."""
    if env is None:
        return {}
    if not isinstance(env, dict):
        raise ArgumentError(f"{name}: expected a mapping of variable names to values; got {_shown(env)}")
    out: dict[str, str] = {}
    for key, value in env.items():
        if not isinstance(key, str) or not ENV_NAME_RE.match(key):
            raise ArgumentError(f"{name}: expected variable names of letters, digits and _ (not starting with a "
                                f"digit), such as NCCL_P2P_DISABLE; got {_shown(key)}")
        if isinstance(value, bool):
            # YAML's true/yes would reach NCCL as "True", which it reads as 0.
            raise ArgumentError(f"{name}.{key}: expected a string or a number; got the boolean {value!r}. "
                                "Quote the value NCCL expects, for example '1'")
        if not isinstance(value, (str, int, float)):
            raise ArgumentError(f"{name}.{key}: expected a string or a number; got {_shown(value)}")
        text = str(value)
        if "\x00" in text:
            raise ArgumentError(f"{name}.{key}: expected a value without NUL characters; got {_shown(text)}")
        out[key] = text
    return out


def _given(params: dict[str, Any], name: str, default: Any) -> Any:
    """The option's value; its default when absent or null (the modules' defaults, for direct callers)."""
    value = params.get(name)
    return default if value is None else value


def nccl_bench_options(params: dict[str, Any]) -> None:
    """Check nccl_bench's options; raises ArgumentError on the first that cannot be used."""
    min_bytes = whole("min_bytes", _given(params, "min_bytes", 8), 1)
    max_bytes = whole("max_bytes", params.get("max_bytes"), 1, optional=True)
    if max_bytes is not None and min_bytes is not None and max_bytes < min_bytes:
        raise ArgumentError(f"max_bytes: expected at least min_bytes ({min_bytes}); got {max_bytes}")
    whole("step_factor", _given(params, "step_factor", 2), 2)
    whole("nranks", params.get("nranks"), 1, optional=True)
    whole("iters", _given(params, "iters", 20), 1)
    whole("warmup", _given(params, "warmup", 5), 0)
    whole("concurrency", _given(params, "concurrency", 64), 1)
    for name in ("timeout", "startup_timeout"):
        if params.get(name) is not None:
            seconds(name, params[name])
    environment("env", params.get("env"))
    for index, candidate in enumerate(params.get("candidates") or []):
        if isinstance(candidate, dict):
            environment(f"candidates[{index}].env", candidate.get("env"))
    names = params.get("gpu_names")
    if names is not None and (not isinstance(names, list) or not all(isinstance(v, str) for v in names)):
        raise ArgumentError(f"gpu_names: expected a list of GPU names; got {_shown(names)}")


def probe_options(params: dict[str, Any]) -> None:
    """Check gpu_p2p_probe's options; raises ArgumentError on the first that cannot be used."""
    seconds("timeout", _given(params, "timeout", 300.0))
    positive_number("max_small_latency_us", _given(params, "max_small_latency_us", 5.0))
    # The pattern is 32-bit words: fewer than 4 bytes would prove nothing.
    whole("proof_bytes", _given(params, "proof_bytes", 4 << 20), 4)
    devices = params.get("devices") or []
    for index, device in enumerate(devices):
        whole(f"devices[{index}]", device, 0)
    if len(set(devices)) != len(devices):
        raise ArgumentError(f"devices: expected each GPU index once; got {_shown(devices)}")
    for index, size in enumerate(params.get("sizes") or []):
        whole(f"sizes[{index}]", size, 1)
