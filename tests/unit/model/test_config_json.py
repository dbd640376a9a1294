"""Collectives per decode step from config.json: real configs of the known models' families
(tests/fixtures/model_configs, sources in its SOURCES.md)."""

from __future__ import annotations

import json

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.model.config_json import (
    collectives_per_step,
    disagreements,
    model_fields,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.model.errors import ModelError
from ansible_collections.gpuhost.gpu.plugins.module_utils.model.known import (
    KNOWN_MODELS,
    check_against_config,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.model.shape import load_model

from tests import paths

CONFIGS = paths.FIXTURES / "model_configs"


def config(name: str) -> dict:
    return json.loads((CONFIGS / name).read_text(encoding="utf-8"))


# (file, architecture, kind, layers, dense layers, hidden, MTP layers): read off each file by hand.
CASES = [
    ("GLM-5.1_config.json", "GlmMoeDsaForCausalLM", "moe", 78, 3, 6144, 1),
    ("DeepSeek-R1_config.json", "DeepseekV3ForCausalLM", "moe", 61, 3, 7168, 1),
    ("Qwen3-235B-A22B-Instruct-2507_config.json", "Qwen3MoeForCausalLM", "moe", 94, 0, 4096, 0),
    ("Mixtral-8x7B-v0.1_config.json", "MixtralForCausalLM", "moe", 32, 0, 4096, 0),
    ("GLM-4.5-Air_config_transformers-repr.json", "Glm4MoeForCausalLM", "moe", 46, 1, 4096, 1),
    ("Llama-3.1-70B_config_excerpt.json", "LlamaForCausalLM", "dense", 80, 80, 8192, 0),
]


@pytest.mark.parametrize(("name", "architecture", "kind", "layers", "dense", "hidden", "mtp"), CASES)
def test_real_configs_at_tp8(name: str, architecture: str, kind: str, layers: int, dense: int, hidden: int,
                             mtp: int) -> None:
    counted = collectives_per_step(config(name), 8)
    assert counted["status"] == "modelled"
    assert (counted["architecture"], counted["kind"], counted["layers"], counted["dense_layers"],
            counted["hidden_size"], counted["mtp_layers"]) == (architecture, kind, layers, dense, hidden, mtp)
    # Two all-reduces per layer (attention o_proj, MLP/MoE output) plus the embedding's, of the hidden state
    # in 16 bits: the FP8 DeepSeek checkpoint too.
    assert counted["allreduces_per_step"] == 2 * layers + 1
    assert counted["allreduce_bytes"] == hidden * 2
    assert counted["draft_allreduces_per_step"] == 0


def test_glm5_config_gives_the_incident_count() -> None:
    counted = collectives_per_step(config("GLM-5.1_config.json"), 8)
    assert counted["allreduces_per_step"] == 157 and counted["allreduce_bytes"] == 12288


def test_mtp_layers_count_only_with_speculative_decoding() -> None:
    counted = collectives_per_step(config("GLM-5.1_config.json"), 8, speculative_steps=3)
    assert counted["draft_allreduces_per_step"] == 3 * (1 * 2 + 1)
    assert counted["allreduces_per_step"] == 157 + 9
    assert any("acceptance" in n for n in counted["notes"])
    # Without MTP layers the draft model is another model: not counted, and said.
    llama = collectives_per_step(config("Llama-3.1-70B_config_excerpt.json"), 8, speculative_steps=3)
    assert llama["draft_allreduces_per_step"] == 0 and any("separate draft model" in n for n in llama["notes"])


def test_tp1_has_no_all_reduce() -> None:
    assert collectives_per_step(config("DeepSeek-R1_config.json"), 1)["allreduces_per_step"] == 0


@pytest.mark.parametrize(("kwargs", "reason"), [
    ({"dp_attention": True}, "DP attention"),
    ({"expert_parallel_size": 8}, "all-to-all"),
])
def test_serving_settings_that_change_the_collectives_are_not_modelled(kwargs: dict, reason: str) -> None:
    counted = collectives_per_step(config("DeepSeek-R1_config.json"), 8, **kwargs)
    assert counted["status"] == "not_modelled" and reason in counted["reason"]
    assert counted["allreduces_per_step"] is None and counted["layers"] == 61


def test_expert_parallelism_does_not_change_a_dense_model() -> None:
    counted = collectives_per_step(config("Llama-3.1-70B_config_excerpt.json"), 8, expert_parallel_size=8)
    assert counted["status"] == "modelled"


def test_unknown_architecture_is_not_modelled() -> None:
    counted = collectives_per_step({"architectures": ["MambaForCausalLM"], "num_hidden_layers": 64,
                                    "hidden_size": 4096}, 8)
    assert counted["status"] == "not_modelled"
    assert "'MambaForCausalLM' is not modelled" in counted["reason"]
    assert collectives_per_step({}, 8)["reason"].startswith("architecture None is not modelled")


def test_multimodal_config_reads_the_text_config() -> None:
    data = {"architectures": ["Qwen3ForCausalLM"], "text_config": {"num_hidden_layers": 36, "hidden_size": 4096,
                                                                   "torch_dtype": "bfloat16"}}
    assert collectives_per_step(data, 4)["allreduces_per_step"] == 73


def test_unnamed_dtype_is_taken_as_sixteen_bits_and_said() -> None:
    data = {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 2, "hidden_size": 64, "torch_dtype": "float32"}
    counted = collectives_per_step(data, 2)
    assert counted["dtype_bytes"] == 2 and "--dtype auto" in counted["notes"][0]


@pytest.mark.parametrize(("data", "tp", "message"), [
    ([], 8, "expected a JSON object; found list"),
    ({"architectures": ["LlamaForCausalLM"], "num_hidden_layers": "80", "hidden_size": 8192}, 8,
     "'num_hidden_layers' as a whole number"),
    ({"architectures": ["LlamaForCausalLM"], "hidden_size": 8192}, 8, "expected num_hidden_layers and hidden_size"),
    ({"architectures": ["LlamaForCausalLM"]}, 0, "tensor parallel size: expected a whole number of 1 or more"),
])
def test_bad_configs_say_what_to_do(data: object, tp: int, message: str) -> None:
    with pytest.raises(ModelError, match=message):
        collectives_per_step(data, tp)


@pytest.mark.parametrize(("key", "name"), [("glm-5", "GLM-5.1_config.json"),
                                           ("llama-3-70b", "Llama-3.1-70B_config_excerpt.json")])
def test_known_models_agree_with_the_configs(key: str, name: str) -> None:
    assert check_against_config(key, config(name)) == []


def test_a_known_model_that_disagrees_is_named_field_by_field() -> None:
    counted = collectives_per_step(config("DeepSeek-R1_config.json"), 8)
    found = disagreements(KNOWN_MODELS["glm-5"], counted)
    assert "layers: model 78, config.json 61" in found and "hidden_size: model 6144, config.json 7168" in found
    assert disagreements(KNOWN_MODELS["glm-5"], {"status": "not_modelled"}) == []


def test_a_config_makes_a_model_the_ceiling_reads() -> None:
    counted = collectives_per_step(config("Qwen3-235B-A22B-Instruct-2507_config.json"), 8)
    model = load_model(model_fields("Qwen3-235B-A22B", counted, 8))
    assert model.allreduces_per_step == 189
    with pytest.raises(ModelError, match="not modelled"):
        model_fields("x", collectives_per_step({}, 8), 8)
