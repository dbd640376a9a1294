"""The communication ceiling priced on the collectives the model's own config.json gives (as deploy_gate reads
it, from tests/fixtures/model_configs), before the known model's; an architecture that is not modelled, or a
config.json that cannot be read, leaves the known model's counts or no ceiling, never a guess. The incident's
guest and probe price it."""

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
HOP_US = 13.9 * 14  # the probe's slowest pair times the ring's 14 steps at TP 8 (test_ceiling.py)


def counted(name: str) -> dict:
    return json.loads((paths.FIXTURES / "model_configs" / name).read_text(encoding="utf-8"))


def decide(model: dict, config: object, problem: str | None = None) -> dict:
    return gate.decide(audited(INCIDENT), model, probe=probe_from_log(str(PROBE)), accept=["p2p_not_supported"],
                       model_config=config, model_config_problem=problem)


def test_without_the_config_the_ceiling_names_the_known_model() -> None:
    floor = decide(GLM5, None)["launch"]["communication_ceiling"]
    assert floor["source"].endswith("; collectives per step from the known model glm-5")


def test_the_config_prices_the_floor_and_says_so() -> None:
    result = decide(GLM5, counted("GLM-5.1_config.json"))
    floor = result["launch"]["communication_ceiling"]
    assert floor["source"].endswith("; collectives per step from the model's config.json (GlmMoeDsaForCausalLM)")
    assert floor["comm_us_per_token"] == pytest.approx((78 * 2 + 1) * HOP_US)
    assert not any("disagree" in n for n in result["notes"])  # the known model matches GLM-5.1's file


def test_a_config_that_disagrees_with_the_known_model_wins_with_a_note() -> None:
    result = decide(GLM5, counted("DeepSeek-R1_config.json"))
    floor = result["launch"]["communication_ceiling"]
    assert floor["comm_us_per_token"] == pytest.approx((61 * 2 + 1) * HOP_US)
    assert "config.json (DeepseekV3ForCausalLM)" in floor["source"]
    note = next(n for n in result["notes"] if "disagree" in n)
    assert "the known model glm-5 disagree" in note and "layers: model 78, config.json 61" in note


def test_a_config_counts_a_model_without_any_known_shape() -> None:
    model = {"name": "Llama-3.1-70B", "weights_gib": 132, "tensor_parallel_size": 8}
    floor = decide(model, counted("Llama-3.1-70B_config_excerpt.json"))["launch"]["communication_ceiling"]
    assert floor["comm_us_per_token"] == pytest.approx((80 * 2 + 1) * HOP_US)
    assert "config.json (LlamaForCausalLM)" in floor["source"]


UNKNOWN = {"architectures": ["Gemma3ForCausalLM"]}


def test_not_modelled_keeps_the_known_model_with_a_note() -> None:
    assert collectives_per_step(UNKNOWN, 8)["status"] == "not_modelled"
    result = decide(GLM5, UNKNOWN)
    assert result["launch"]["communication_ceiling"]["source"].endswith("from the known model glm-5")
    assert any("'Gemma3ForCausalLM' is not modelled" in n and "uses the known model glm-5" in n
               for n in result["notes"])


def test_not_modelled_without_a_known_shape_is_no_ceiling_not_a_guess() -> None:
    result = decide({"name": "Gemma-3", "weights_gib": 50, "tensor_parallel_size": 8}, UNKNOWN)
    assert result["launch"]["communication_ceiling"] is None and result["launch"]["communication_ceiling_tok_s"] is None
    assert any(n.startswith("No communication ceiling: the model's collectives per step are not modelled")
               and "none is guessed" in n for n in result["notes"])


@pytest.mark.parametrize(("bad", "said"), [
    ("78 layers", "config.json: expected a JSON object; found str"),
    ({"status": "modelled", "layers": "many", "hidden_size": 6144}, "architecture None is not modelled"),
    ({"architectures": ["LlamaForCausalLM"], "num_hidden_layers": "many", "hidden_size": 8192},
     "expected 'num_hidden_layers' as a whole number of 0 or more; found 'many'"),
])
def test_an_unreadable_value_is_a_note_and_the_known_model_stays(bad: object, said: str) -> None:
    result = decide(GLM5, bad)
    assert result["launch"]["communication_ceiling"]["source"].endswith("from the known model glm-5")
    assert any(n.startswith("The model's config.json gives no collectives per step (") and said in n
               and "uses the known model glm-5" in n for n in result["notes"])


def test_a_config_that_was_not_read_says_why_and_the_known_model_stays() -> None:
    result = decide(GLM5, None, "/models/x/config.json cannot be read (No such file or directory)")
    assert result["launch"]["communication_ceiling"]["source"].endswith("from the known model glm-5")
    assert any("(config.json was not read: /models/x/config.json cannot be read (No such file or directory))" in n
               for n in result["notes"])


# deploy_gate reads the model directory's config.json itself: model_dir, else the model's path.
def gate_module(capsys: pytest.CaptureFixture[str], **args: object) -> dict:
    import deploy_gate

    from tests.unit.modules import run_module

    return run_module(deploy_gate.main, {"audit": audited(INCIDENT), "probe": probe_from_log(str(PROBE)),
                                         "accept": ["p2p_not_supported"], **args}, capsys, check_mode=True)


def test_the_module_reads_the_models_config_from_its_path(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "config.json").write_text(json.dumps(counted("DeepSeek-R1_config.json")), encoding="utf-8")
    result = gate_module(capsys, model={**GLM5, "path": str(tmp_path)})
    assert "config.json (DeepseekV3ForCausalLM)" in result["launch"]["communication_ceiling"]["source"]
    assert result["launch"]["communication_ceiling"]["comm_us_per_token"] == pytest.approx((61 * 2 + 1) * HOP_US)


def test_model_dir_wins_over_the_models_path(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "config.json").write_text(json.dumps(counted("GLM-5.1_config.json")), encoding="utf-8")
    result = gate_module(capsys, model={**GLM5, "path": str(tmp_path / "absent")}, model_dir=str(tmp_path))
    assert "config.json (GlmMoeDsaForCausalLM)" in result["launch"]["communication_ceiling"]["source"]


@pytest.mark.parametrize(("content", "said"), [
    (None, "config.json cannot be read"),
    ("{not json", "is not valid JSON"),
    ("[1, 2]", "holds a JSON list; expected an object"),
    (json.dumps({"architectures": ["Gemma3ForCausalLM"]}), "'Gemma3ForCausalLM' is not modelled"),
])
def test_a_bad_config_is_a_note_never_a_failure(tmp_path, capsys: pytest.CaptureFixture[str], content: str | None,
                                                said: str) -> None:
    if content is not None:
        (tmp_path / "config.json").write_text(content, encoding="utf-8")
    result = gate_module(capsys, model={**GLM5, "path": str(tmp_path)})
    assert not result.get("failed") and result["verdict"] == "pass"
    assert result["launch"]["communication_ceiling"]["source"].endswith("from the known model glm-5")
    assert any(said in n and "Traceback" not in n for n in result["notes"])


def test_without_a_path_no_config_is_read(capsys: pytest.CaptureFixture[str]) -> None:
    result = gate_module(capsys, model=GLM5)
    assert not any("config.json" in n for n in result["notes"])


def test_a_model_directory_that_is_not_there_says_what_to_do(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    # As sglang_model_check says it for the same directory: what was expected there and what to do.
    result = gate_module(capsys, model={**GLM5, "path": str(tmp_path / "GLM-5-NVFP4")})
    assert f"(config.json was not read: {tmp_path / 'GLM-5-NVFP4'} does not exist; expected the model's directory " \
           "there. Download or copy the model first, or correct the model path.)" in " ".join(result["notes"])
    (tmp_path / "file").write_text("x", encoding="utf-8")
    result = gate_module(capsys, model={**GLM5, "path": str(tmp_path / "file")})
    assert any("is a file, not a directory" in n for n in result["notes"])
