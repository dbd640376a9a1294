"""The communication floor priced on the collectives the model's own config.json gives (sglang_model_check's
``collectives``, from tests/fixtures/model_configs), before the shipped profile's; an architecture that is not
modelled leaves the profile's counts or no floor, never a guess. The incident's guest and probe price it."""

from __future__ import annotations

import json

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.from_logs import probe_from_log
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate import decide as gate
from ansible_collections.gpuhost.gpu.plugins.module_utils.model.config_json import collectives_per_step

from tests import paths
from tests.unit.captures import INCIDENT, audited

PROBE = paths.FIXTURES / "p2p" / "p2p-probe_8xRTXPRO6000-vm-no-p2p_constructed.jsonl"
GLM5 = {"name": "GLM-5-NVFP4", "family": "glm-5", "weights_gib": 403, "tensor_parallel_size": "auto",
        "attention_heads": 64}
HOP_US = 13.9 * 14  # the probe's slowest pair times the ring's 14 steps at TP 8 (test_comm_ceiling.py)


def counted(name: str) -> dict:
    config = json.loads((paths.FIXTURES / "model_configs" / name).read_text(encoding="utf-8"))
    return collectives_per_step(config, 8)


def decide(model: dict, collectives: object) -> dict:
    return gate.decide(audited(INCIDENT), model, probe=probe_from_log(str(PROBE)), accept=["p2p_not_supported"],
                       model_collectives=collectives)


def test_without_the_config_the_floor_names_the_shipped_profile() -> None:
    floor = decide(GLM5, None)["launch"]["comm_floor"]
    assert floor["source"].endswith("; collectives per step from the shipped profile glm-5")


def test_the_config_prices_the_floor_and_says_so() -> None:
    result = decide(GLM5, counted("GLM-5.1_config.json"))
    floor = result["launch"]["comm_floor"]
    assert floor["source"].endswith("; collectives per step from the model's config.json (GlmMoeDsaForCausalLM)")
    assert floor["comm_us_per_token"] == pytest.approx((78 * 2 + 1) * HOP_US)
    assert not any("disagree" in n for n in result["notes"])  # the shipped profile matches GLM-5.1's file


def test_a_config_that_disagrees_with_the_profile_wins_with_a_note() -> None:
    result = decide(GLM5, counted("DeepSeek-R1_config.json"))
    floor = result["launch"]["comm_floor"]
    assert floor["comm_us_per_token"] == pytest.approx((61 * 2 + 1) * HOP_US)
    assert "config.json (DeepseekV3ForCausalLM)" in floor["source"]
    note = next(n for n in result["notes"] if "disagree" in n)
    assert "the shipped profile glm-5 disagree" in note and "layers: profile 78, config.json 61" in note


def test_a_config_counts_a_model_without_any_profile() -> None:
    model = {"name": "Llama-3.1-70B", "weights_gib": 132, "tensor_parallel_size": 8}
    floor = decide(model, counted("Llama-3.1-70B_config_excerpt.json"))["launch"]["comm_floor"]
    assert floor["comm_us_per_token"] == pytest.approx((80 * 2 + 1) * HOP_US)
    assert "config.json (LlamaForCausalLM)" in floor["source"]


UNKNOWN = collectives_per_step({"architectures": ["Gemma3ForCausalLM"]}, 8)


def test_not_modelled_keeps_the_shipped_profile_with_a_note() -> None:
    assert UNKNOWN["status"] == "not_modelled"
    result = decide(GLM5, UNKNOWN)
    assert result["launch"]["comm_floor"]["source"].endswith("from the shipped profile glm-5")
    assert any("'Gemma3ForCausalLM' is not modelled" in n and "uses the shipped profile glm-5" in n
               for n in result["notes"])


def test_not_modelled_without_a_profile_is_no_floor_not_a_guess() -> None:
    result = decide({"name": "Gemma-3", "weights_gib": 50, "tensor_parallel_size": 8}, UNKNOWN)
    assert result["launch"]["comm_floor"] is None and result["launch"]["expected_comm_ceiling_tok_s"] is None
    assert any(n.startswith("No communication ceiling: the model's collectives per step are not modelled")
               and "none is guessed" in n for n in result["notes"])


@pytest.mark.parametrize("bad", ["78 layers", {"status": "modelled", "layers": "many", "hidden_size": 6144}])
def test_an_unreadable_value_is_a_note_and_the_profile_stays(bad: object) -> None:
    result = decide(GLM5, bad)
    assert result["launch"]["comm_floor"]["source"].endswith("from the shipped profile glm-5")
    assert any(n.startswith("model_collectives: expected") and "uses the shipped profile glm-5" in n
               for n in result["notes"])
