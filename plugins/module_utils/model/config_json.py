"""Collectives per decode step, read from the model's own config.json and the serving settings.

What SGLang does under tensor parallelism (``python/sglang/srt/models/llama.py``, ``qwen2.py``,
``qwen3.py``, ``qwen3_moe.py``, ``mixtral.py``, ``deepseek_v2.py``, ``glm4_moe.py``; layers in
``srt/layers/linear.py`` and ``vocab_parallel_embedding.py``):

- every decoder layer ends its attention with the row-parallel ``o_proj`` and its MLP with the
  row-parallel ``down_proj``; each sums the GPUs' partial results with one all-reduce of the hidden
  state (``hidden_size`` values per token). An MoE block under TP (no expert parallelism) computes its
  routed and shared experts without reducing and ends in one all-reduce of their sum, so MoE layers
  count the same two as dense ones.
- the vocab-parallel embedding all-reduces its output once per forward pass (one more of the same size).
- the LM head gathers logits (an all-gather of the vocabulary, not an all-reduce): not counted.
- DP attention (``--attn-dp-size N``; ``--dp-size N --enable-dp-attention`` before SGLang deprecated that
  switch, 0.5.23 server_args.py) replaces the attention all-reduce with gathers and scatters,
  expert parallelism (``--ep-size`` > 1, DeepEP) the MoE all-reduce with all-to-all: neither is
  modelled here, and the result says so rather than guess.
- multi-token prediction layers (``num_nextn_predict_layers``) only run with speculative decoding;
  each draft step runs them like a decoder layer (two all-reduces each, plus the embedding's).

The activations that are all-reduced have the model's dtype (``torch_dtype``/``dtype``): 2 bytes for
bf16/fp16, also for fp8/fp4 checkpoints, whose weights only are quantized.

Pure functions: no Ansible, no I/O (the caller reads the file).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.model.errors import ModelError
from ansible_collections.gpuhost.gpu.plugins.module_utils.model.shape import Model, load_model

# Architecture names (config.json ``architectures``) whose collectives are modelled, and their kind.
DENSE = ("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM")
MOE = ("Qwen2MoeForCausalLM", "Qwen3MoeForCausalLM", "MixtralForCausalLM", "DeepseekV2ForCausalLM",
       "DeepseekV3ForCausalLM", "Glm4MoeForCausalLM", "GlmMoeDsaForCausalLM")
ALLREDUCES_PER_LAYER = 2  # attention o_proj + MLP/MoE output
EMBEDDING_ALLREDUCES = 1  # vocab-parallel embedding, once per forward pass
_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "half": 2, "fp16": 2, "bf16": 2}
SOURCE = ("SGLang's model code under tensor parallelism: one all-reduce after attention (o_proj), one after "
          "the MLP or MoE block (down_proj / experts' sum) per layer, one after the vocab-parallel embedding")


def _text_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    # Multimodal configs keep the language model's fields under text_config.
    inner = config.get("text_config")
    return inner if isinstance(inner, Mapping) and "num_hidden_layers" in inner else config


def _whole(config: Mapping[str, Any], key: str, default: int | None = None) -> int | None:
    value = config.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ModelError(f"config.json: expected {key!r} as a whole number of 0 or more; found {value!r}. "
                         "Check that the file is the model's own config.json")
    return value


def _dtype_bytes(config: Mapping[str, Any], notes: list[str]) -> int:
    dtype = config.get("torch_dtype", config.get("dtype"))
    if isinstance(dtype, str) and dtype.lower() in _DTYPE_BYTES:
        return _DTYPE_BYTES[dtype.lower()]
    # SGLang's --dtype auto serves float32 and unnamed checkpoints in 16 bits (its model_config), so the
    # all-reduced activations are 2 bytes unless --dtype float32 is passed.
    notes.append(f"config.json names the dtype {dtype!r}: the all-reduced activations are taken as 16-bit, "
                 "SGLang's --dtype auto; pass --dtype float32 and the message doubles")
    return 2


def _not_modelled(architecture: str | None, reason: str, **known: Any) -> dict[str, Any]:
    return {"status": "not_modelled", "architecture": architecture, "reason": reason,
            "allreduces_per_step": None, **known}


def collectives_per_step(config: Any, tensor_parallel_size: int | None = None, dp_attention: bool = False,
                         expert_parallel_size: int = 1, speculative_steps: int = 0) -> dict[str, Any]:
    """The all-reduces one decode step runs, from config.json's contents and the serving settings.

    ``tensor_parallel_size`` None counts them for any size above 1 (the counts per layer do not depend on
    it): what the deployment gate reads before it chooses the size.

    Returns ``{status: modelled|not_modelled, architecture, kind, layers, dense_layers, moe_layers,
    hidden_size, dtype_bytes, allreduce_bytes (batch 1), allreduces_per_layer, extra_allreduces,
    mtp_layers, draft_allreduces_per_step, allreduces_per_step, source, notes}``; ``not_modelled`` carries
    ``reason`` and a null ``allreduces_per_step``.
    """
    if not isinstance(config, Mapping):
        raise ModelError(f"config.json: expected a JSON object; found {type(config).__name__}. "
                         "Read the model directory's config.json")
    architectures = config.get("architectures")
    architecture = architectures[0] if isinstance(architectures, list) and architectures \
        and isinstance(architectures[0], str) else None
    if tensor_parallel_size is not None and (isinstance(tensor_parallel_size, bool)
                                             or not isinstance(tensor_parallel_size, int) or tensor_parallel_size < 1):
        raise ModelError(f"tensor parallel size: expected a whole number of 1 or more; found "
                         f"{tensor_parallel_size!r}. Pass the --tp the server runs with")
    if architecture not in DENSE + MOE:
        return _not_modelled(architecture, f"architecture {architecture!r} is not modelled (known: "
                             f"{', '.join(DENSE + MOE)}): its collectives per step are not guessed; give the model's "
                             "layers and hidden_size to price its communication ceiling")
    text = _text_config(config)
    layers = _whole(text, "num_hidden_layers")
    hidden = _whole(text, "hidden_size")
    if not layers or not hidden:
        raise ModelError(f"config.json of {architecture}: expected num_hidden_layers and hidden_size above 0; "
                         f"found {layers!r} and {hidden!r}. Check the file is complete")
    kind = "moe" if architecture in MOE else "dense"
    dense_layers = min(_whole(text, "first_k_dense_replace", 0) or 0, layers) if kind == "moe" else layers
    mtp_layers = _whole(text, "num_nextn_predict_layers", 0) or 0
    known = {"kind": kind, "layers": layers, "hidden_size": hidden, "mtp_layers": mtp_layers}
    parallel = tensor_parallel_size is None or tensor_parallel_size > 1
    if parallel and dp_attention:
        return _not_modelled(architecture, "DP attention replaces the attention all-reduce with gathers and "
                             "scatters of the data-parallel groups: not modelled", **known)
    if parallel and kind == "moe" and expert_parallel_size > 1:
        return _not_modelled(architecture, f"expert parallelism ({expert_parallel_size}) moves MoE tokens by "
                             "all-to-all instead of an all-reduce: not modelled", **known)
    notes: list[str] = []
    dtype_bytes = _dtype_bytes(text, notes)
    draft = 0
    if speculative_steps:
        if not mtp_layers:
            notes.append("speculative decoding with a separate draft model: its collectives are not counted")
        else:
            # Each draft step runs the MTP layer(s) like decoder layers, plus the embedding.
            draft = speculative_steps * (mtp_layers * ALLREDUCES_PER_LAYER + EMBEDDING_ALLREDUCES)
            notes.append(f"speculative decoding: {speculative_steps} draft step(s) over {mtp_layers} MTP layer(s) "
                         "per verify step; tokens per step depend on acceptance, which only a measurement gives")
    per_step = 0 if not parallel else layers * ALLREDUCES_PER_LAYER + EMBEDDING_ALLREDUCES + draft
    return {
        "status": "modelled",
        "architecture": architecture,
        **known,
        "dense_layers": dense_layers,
        "moe_layers": layers - dense_layers,
        "dtype_bytes": dtype_bytes,
        "allreduce_bytes": hidden * dtype_bytes,
        "allreduces_per_layer": ALLREDUCES_PER_LAYER,
        "extra_allreduces": EMBEDDING_ALLREDUCES,
        "draft_allreduces_per_step": draft,
        "allreduces_per_step": per_step,
        "source": SOURCE,
        "notes": notes,
    }


def model_fields(name: str, counted: Mapping[str, Any], tensor_parallel_size: int) -> dict[str, Any]:
    """A model's fields (shape.load_model's mapping) from a modelled ``collectives_per_step`` result."""
    if counted.get("status") != "modelled":
        raise ModelError(f"model {name!r}: {counted.get('reason') or 'not modelled'}")
    return {"name": name, "layers": counted["layers"], "allreduces_per_layer": counted["allreduces_per_layer"],
            "hidden_size": counted["hidden_size"], "dtype_bytes": counted["dtype_bytes"],
            "tensor_parallel_size": tensor_parallel_size,
            "extra_allreduces": counted["extra_allreduces"] + counted["draft_allreduces_per_step"],
            "notes": f"from config.json ({counted['architecture']})"}


def disagreements(known: Mapping[str, Any], counted: Mapping[str, Any]) -> list[str]:
    """Where a known model (or a model's own fields) and a config.json disagree: each
    '<field>: model X, config.json Y'."""
    if counted.get("status") != "modelled":
        return []
    found = []
    for field in ("layers", "hidden_size", "allreduces_per_layer", "dtype_bytes", "extra_allreduces"):
        if field in known and known[field] != counted.get(field):
            found.append(f"{field}: model {known[field]}, config.json {counted.get(field)}")
    return found


def model_from_config(config: Any, name: str, tensor_parallel_size: int) -> Model:
    """The Model a config.json (already read) describes, served over ``tensor_parallel_size`` GPUs; ModelError
    saying what was expected and what to do when the file is not a model's config.json or its architecture's
    collectives are not modelled."""
    return load_model(model_fields(name, collectives_per_step(config, tensor_parallel_size), tensor_parallel_size))
