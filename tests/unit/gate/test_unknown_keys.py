"""A model or known-good override the gate cannot read blocks, naming the key and the variable.

A misspelled key read as absent left its default in place: ``weight_gib: 140`` skipped the memory check and
passed at TP8 with only a note. The messages name the variable the user wrote (``labels``), not the role's.
"""

from __future__ import annotations

from typing import Any

import deploy_gate
import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.from_logs import probe_from_log
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate import decide as gate
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate.inputs import read_deploy_model

from tests.paths import FIXTURES
from tests.unit.captures import H100, audited
from tests.unit.modules import run_module

LLAMA70_TP8 = {"name": "Llama-3-70B-Instruct", "family": "llama-3-70b", "weights_gib": 140,
               "tensor_parallel_size": 8, "attention_heads": 64}


def invalid(result: dict[str, Any]) -> list[str]:
    return [r["summary"] for r in result["reasons"] if r["id"] == "model_invalid"]


def test_the_model_as_meant_passes_at_tp8():
    assert gate.decide(audited(H100), LLAMA70_TP8)["verdict"] == "pass"


def test_a_misspelled_weights_gib_blocks_naming_the_valid_key():
    model = {**{k: v for k, v in LLAMA70_TP8.items() if k != "weights_gib"}, "weight_gib": 140}
    result = gate.decide(audited(H100), model)
    assert result["verdict"] == "block"
    assert invalid(result) == ["model.weight_gib: unknown key; did you mean weights_gib?"]


def test_labels_name_the_variable_the_user_wrote():
    model = {**LLAMA70_TP8, "min_drivr": "550"}
    result = gate.decide(audited(H100), model, labels={"model": "deploy_model"})
    assert invalid(result) == ["deploy_model.min_drivr: unknown key; did you mean min_driver?"]
    result = gate.decide(audited(H100), "Llama-3-70B", labels={"model": "deploy_model"})
    assert invalid(result) == ["deploy_model: expected a mapping (name, weights_gib, tensor_parallel_size, ...); "
                               "found str"]


def test_notes_are_free_text_and_every_documented_key_is_read():
    model, problems = read_deploy_model({**LLAMA70_TP8, "notes": "bf16", "num_attention_heads": 64, "params_b": 70,
                                         "bytes_per_param": 2, "kv_cache_gib_per_gpu": 4,
                                         "memory_headroom_fraction": 0.1, "min_gpus": 2,
                                         "min_compute_capability": "9.0", "min_driver": "550", "min_cuda": "12.2",
                                         "path": "/m", "shape": "llama-3-70b"})
    assert problems == []
    assert model.weights_gib == 140


def test_a_shape_that_cannot_be_read_blocks_instead_of_dropping_the_ceiling():
    _, problems = read_deploy_model({**LLAMA70_TP8, "shape": "llama3-70b"}, "deploy_model")
    assert problems == ["deploy_model.shape: expected a known model (glm-5, llama-3-70b) or a mapping of the model's "
                        "shape (name, layers, hidden_size, allreduces_per_layer, dtype_bytes); found 'llama3-70b'; "
                        "did you mean llama-3-70b?"]
    _, problems = read_deploy_model({**LLAMA70_TP8, "shape": {"layers": 80, "hiden_size": 8192}})
    assert problems == ["model.shape.hiden_size: unknown key; did you mean hidden_size?"]
    # Under its former name, the key is named as the user wrote it.
    _, problems = read_deploy_model({**LLAMA70_TP8, "comm_profile": {"layers": 80, "hiden_size": 8192}})
    assert problems == ["model.comm_profile.hiden_size: unknown key; did you mean hidden_size?"]


SHAPE_80 = {"name": "Llama-3-70B", "layers": 80, "hidden_size": 8192}


@pytest.mark.parametrize("shape", ["glm-5", SHAPE_80], ids=["known", "mapping"])
def test_comm_profile_is_read_as_shape_with_a_note(shape: Any) -> None:
    model = {**LLAMA70_TP8, "family": "other"}
    notes: list[str] = []
    as_shape, problems = read_deploy_model({**model, "shape": shape}, "deploy_model", notes)
    assert problems == [] and notes == []
    former, problems = read_deploy_model({**model, "comm_profile": shape}, "deploy_model", notes)
    assert problems == []
    assert former.shape == as_shape.shape and former.shape
    assert notes == ["deploy_model.comm_profile is the former name of deploy_model.shape: it is read as shape; "
                     "write shape instead"]


@pytest.mark.parametrize("shape", ["llama-3-70b", SHAPE_80], ids=["known", "mapping"])
def test_the_gate_reads_comm_profile_as_shape_and_notes_it(shape: Any) -> None:
    model = {**LLAMA70_TP8, "family": "other"}
    probe = probe_from_log(str(FIXTURES / "p2p" / "p2p-probe_8xH100-SXM-nvlink_constructed.jsonl"))
    as_shape = gate.decide(audited(H100), {**model, "shape": shape}, probe=probe, labels={"model": "deploy_model"})
    former = gate.decide(audited(H100), {**model, "comm_profile": shape}, probe=probe,
                         labels={"model": "deploy_model"})
    note = ("deploy_model.comm_profile is the former name of deploy_model.shape: it is read as shape; write shape "
            "instead")
    assert note in former["notes"] and note not in as_shape["notes"]
    assert [n for n in former["notes"] if n != note] == as_shape["notes"]
    assert {k: v for k, v in former.items() if k != "notes"} == {k: v for k, v in as_shape.items() if k != "notes"}
    source = former["launch"]["communication_ceiling"]["source"]
    assert source.endswith("collectives per step from " + ("the known model llama-3-70b" if isinstance(shape, str)
                                                           else "the model's shape"))


def test_shape_and_comm_profile_that_differ_block():
    _, problems = read_deploy_model({**LLAMA70_TP8, "shape": "llama-3-70b", "comm_profile": "glm-5"},
                                    "deploy_model", [])
    assert problems == ["deploy_model: shape and comm_profile (its former name) differ ('llama-3-70b' and "
                        "'glm-5'); keep shape only"]
    result = gate.decide(audited(H100), {**LLAMA70_TP8, "shape": "llama-3-70b", "comm_profile": "glm-5"})
    assert result["verdict"] == "block" and invalid(result) == [
        "model: shape and comm_profile (its former name) differ ('llama-3-70b' and 'glm-5'); keep shape only"]
    # The same model under both names is no conflict: only the note asks for shape.
    notes: list[str] = []
    _, problems = read_deploy_model({**LLAMA70_TP8, "shape": "llama-3-70b", "comm_profile": " Llama-3-70B"},
                                    "deploy_model", notes)
    assert problems == [] and len(notes) == 1


def test_a_misspelled_override_field_blocks_with_the_variable_name():
    override = {"id": "site-x", "arch": "sm_90", "models": ["llama-*"], "flags": ["--x"], "sglang_version": "0.5.9"}
    result = gate.decide(audited(H100), LLAMA70_TP8, known_good_overrides=[override],
                         labels={"known_good_overrides": "deploy_known_good_overrides"})
    assert [r["summary"] for r in result["reasons"] if r["id"] == "known_good_override_invalid"] == [
        "deploy_known_good_overrides[0].sglang_version: unknown key; did you mean sglang_versions?"]
    result = gate.decide(audited(H100), LLAMA70_TP8, known_good_overrides={"id": "x"},
                         labels={"known_good_overrides": "deploy_known_good_overrides"})
    assert "deploy_known_good_overrides: expected a list of entries; found dict" in [
        r["summary"] for r in result["reasons"]]


def test_the_module_takes_any_model_and_blocks_on_a_string_with_its_label(capsys):
    result = run_module(deploy_gate.main, {"audit": audited(H100), "model": "GLM-5",
                                           "labels": {"model": "deploy_model"}}, capsys)
    assert result["verdict"] == "block"
    assert invalid(result) == ["deploy_model: expected a mapping (name, weights_gib, tensor_parallel_size, ...); "
                               "found str"]
