"""The model type: one Model, whichever way it comes in (a mapping, a known model, a config.json)."""

from __future__ import annotations

import json

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.model.config_json import model_from_config
from ansible_collections.gpuhost.gpu.plugins.module_utils.model.errors import ModelError
from ansible_collections.gpuhost.gpu.plugins.module_utils.model.known import known_model
from ansible_collections.gpuhost.gpu.plugins.module_utils.model.shape import Model

from tests import paths

CONFIGS = paths.FIXTURES / "model_configs"


def config(name: str) -> dict:
    return json.loads((CONFIGS / name).read_text(encoding="utf-8"))


def test_a_config_and_the_known_model_give_the_same_model() -> None:
    from_file = model_from_config(config("GLM-5.1_config.json"), "GLM-5", 8)
    known = known_model("glm-5")
    assert isinstance(from_file, Model) and isinstance(known, Model)
    assert from_file.allreduces_per_step == known.allreduces_per_step == 78 * 2 + 1
    assert (from_file.hidden_size, from_file.dtype_bytes) == (known.hidden_size, known.dtype_bytes)


def test_the_tensor_parallel_size_is_a_setting_of_the_same_model() -> None:
    model = known_model("llama-3-70b").at_tensor_parallel_size(4)
    assert model.tensor_parallel_size == 4 and model.allreduces_per_step == 161
    with pytest.raises(ModelError, match="expected a tensor-parallel size as a whole number of 1 or more; found 0"):
        model.at_tensor_parallel_size(0)


@pytest.mark.parametrize(("data", "said"), [
    ("not a mapping", "config.json: expected a JSON object; found str. Read the model directory's config.json"),
    ({"architectures": ["Gemma3ForCausalLM"]}, "'Gemma3ForCausalLM' is not modelled"),
    ({"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 0, "hidden_size": 8192},
     "expected num_hidden_layers and hidden_size above 0"),
])
def test_a_config_that_gives_no_model_says_what_was_expected(data: object, said: str) -> None:
    with pytest.raises(ModelError, match=None) as raised:
        model_from_config(data, "m", 8)
    assert said in str(raised.value)
