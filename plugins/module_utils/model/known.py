"""The known models: the models whose shape ships with the collection, for their communication ceiling.

Each entry is plain data in the shape ``shape.load_model`` reads, so users can give their own models as
variables in the same shape (nccl_bench's and gpu_analyze's ``model`` option, deploy_model's ``shape``). Where
a figure comes from is said next to it; what could not be checked against the model's own files is said too.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.model.config_json import collectives_per_step, disagreements
from ansible_collections.gpuhost.gpu.plugins.module_utils.model.errors import ModelError
from ansible_collections.gpuhost.gpu.plugins.module_utils.model.shape import Model, load_model
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.known_names import closest

KNOWN_MODELS: dict[str, dict[str, Any]] = {
    # GLM-5 (zai-org/GLM-5; GLM-5-NVFP4 is the same architecture with 4-bit weights), the model of the
    # incident. Layers and hidden size: NVIDIA's Megatron Bridge notes for GLM-5 ("GlmMoeDsaForCausalLM
    # architecture with 78 transformer layers", docs.nvidia.com/nemo/megatron-bridge/.../models/glm/glm5.html)
    # and NeMo AutoModel's GlmMoeDsaConfig defaults (hidden_size 6144, num_hidden_layers 78), which match
    # the values quoted from the model's config.json (model_type glm_moe_dsa, torch_dtype bfloat16) in
    # public serving projects. The Hugging Face file itself was not read. The multi-token-prediction layer
    # (num_nextn_predict_layers 1) only runs with speculative decoding and is not counted. Two all-reduces
    # per layer plus one for the vocab-parallel embedding is what SGLang runs under TP (config_json.py
    # says where in its code); the entry agrees with tests/fixtures/model_configs (a test checks it).
    # Collectives around the sparse-attention indexer, if any, would lower the ceiling, not raise it. The
    # all-reduced activations stay bf16 (2 bytes) in the NVFP4 checkpoint too: only the weights are 4-bit.
    "glm-5": {
        "name": "GLM-5",
        "layers": 78,
        "allreduces_per_layer": 2,
        "hidden_size": 6144,
        "dtype_bytes": 2,
        "tensor_parallel_size": 8,
        "extra_allreduces": 1,
        "notes": "744B MoE, 40B active; 78 layers, hidden 6144, bf16 activations; TP 8 as in the incident "
                 "(8x RTX PRO 6000 Blackwell).",
    },
    # A generic dense reference: Llama 3 70B (meta-llama/Meta-Llama-3-70B config.json, as republished in
    # derived repositories on Hugging Face, the original being gated: num_hidden_layers 80, hidden_size 8192,
    # bf16/fp16), attention and MLP each ending in one all-reduce under tensor parallelism, plus the
    # vocab-parallel embedding's.
    "llama-3-70b": {
        "name": "Llama-3-70B",
        "layers": 80,
        "allreduces_per_layer": 2,
        "hidden_size": 8192,
        "dtype_bytes": 2,
        "tensor_parallel_size": 8,
        "extra_allreduces": 1,
        "notes": "Dense 70B reference; 80 layers, hidden 8192, bf16.",
    },
}


def check_against_config(key: str, config: Any) -> list[str]:
    """Where the known model ``key`` and the model's config.json disagree (empty when they agree, or
    when the config's architecture is not modelled)."""
    known = known_model(key)
    counted = collectives_per_step(config, known.tensor_parallel_size)
    return disagreements(KNOWN_MODELS[key.strip().lower()], counted)


def known_model(name: str) -> Model:
    """A known model by its key (``glm-5``, ``llama-3-70b``), checked like a user's one."""
    key = name.strip().lower() if isinstance(name, str) else name
    if key not in KNOWN_MODELS:
        suggestion = closest(key, KNOWN_MODELS) if isinstance(key, str) else None
        hint = f"; did you mean {suggestion}?" if suggestion else "."
        raise ModelError(f"model: expected a known model ({', '.join(sorted(KNOWN_MODELS))}); found {name!r}"
                         f"{hint} Pick a known model or pass your own mapping (name, layers, allreduces_per_layer, "
                         "hidden_size, dtype_bytes, tensor_parallel_size)")
    return load_model(KNOWN_MODELS[key])
