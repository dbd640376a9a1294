"""The environment SGLang gives NCCL when it serves, so that the benchmark measures the NCCL that serves.

SGLang sets three variables before its ranks start (``_set_envs_and_config`` in
``sglang/srt/entrypoints/engine.py``, the same in 0.5.10.post1 and 0.5.23):

- ``NCCL_CUMEM_ENABLE=0`` and ``NCCL_NVLS_ENABLE=0`` when they are not set already (a value set by the
  user is kept; ``--enable-symm-mem`` / ``--enable-nccl-nvls`` turn them to 1, and 0.5.23 also turns
  ``NCCL_CUMEM_ENABLE`` to 1 for its KV-shard gather on some deployments: not modelled, the report says
  which values the benchmark used);
- ``CUDA_DEVICE_MAX_CONNECTIONS=8`` always, over any value set before.

NCCL's own defaults may differ (where the NCCL in use turns its cuMem allocator or NVLS on by itself), so a
baseline measured with them is not necessarily what the server runs. Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

SOURCE = ("SGLang entrypoints/engine.py _set_envs_and_config (0.5.10.post1, 0.5.23): NCCL_CUMEM_ENABLE=0 and "
          "NCCL_NVLS_ENABLE=0 unless set, CUDA_DEVICE_MAX_CONNECTIONS=8 always")
UNLESS_SET = {"NCCL_CUMEM_ENABLE": "0", "NCCL_NVLS_ENABLE": "0"}
ALWAYS = {"CUDA_DEVICE_MAX_CONNECTIONS": "8"}
MODES = ("sglang", "nccl-defaults")


def as_served(env: dict[str, str], mode: str) -> tuple[dict[str, str], dict[str, Any]]:
    """The environment a run gets under ``mode``, and what was done to it (the result's ``serving_env``).

    ``sglang``: SGLang's variables added as SGLang adds them; ``nccl-defaults``: nothing added.
    """
    if mode not in MODES:
        raise ValueError(f"serving_env: expected one of {', '.join(MODES)}; got {mode!r}")
    if mode == "nccl-defaults":
        return dict(env), {"mode": mode, "added": {}, "replaced": {}, "kept": {}, "source": None}
    run = dict(env)
    added: dict[str, str] = {}
    replaced: dict[str, str] = {}
    kept: dict[str, str] = {}
    for name, value in UNLESS_SET.items():
        if name in run:
            kept[name] = run[name]
        else:
            run[name] = added[name] = value
    for name, value in ALWAYS.items():
        if name in run and run[name] != value:
            replaced[name] = run[name]
        elif name not in run:
            added[name] = value
        run[name] = value
    return run, {"mode": mode, "added": added, "replaced": replaced, "kept": kept, "source": SOURCE}


def describe(served: dict[str, Any] | None) -> str | None:
    """One sentence for the report: which environment the numbers were measured with."""
    if not isinstance(served, dict):
        return None
    if served.get("mode") == "nccl-defaults":
        return ("Measured with NCCL's defaults, not with the environment SGLang sets when it serves "
                "(NCCL_CUMEM_ENABLE=0, NCCL_NVLS_ENABLE=0, CUDA_DEVICE_MAX_CONNECTIONS=8): the serving NCCL may "
                "differ.")
    if served.get("mode") == "log":
        return ("Read from a log: measured with whatever environment that run had, which the log does not fully "
                "tell.")
    if served.get("mode") != "sglang":
        return None
    parts = [f"{k}={v}" for k, v in sorted((served.get("added") or {}).items())]
    parts += [f"{k}={v} (set by you, kept as SGLang keeps it)" for k, v in sorted((served.get("kept") or {}).items())]
    parts += [f"CUDA_DEVICE_MAX_CONNECTIONS=8 (over your {v}, as SGLang overrides it)"
              for k, v in sorted((served.get("replaced") or {}).items()) if k == "CUDA_DEVICE_MAX_CONNECTIONS"]
    return "Measured with the environment SGLang sets when it serves: " + ", ".join(parts) + "."
