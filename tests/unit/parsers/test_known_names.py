"""Names a user wrote that nothing reads: the closest valid name, or the list of valid ones."""

from __future__ import annotations

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.known_names import (
    closest,
    names_in_text,
    owner,
    unknown_keys,
    unknown_variables,
)
from hypothesis import given
from hypothesis import strategies as st

MODEL_KEYS = ("name", "weights_gib", "params_b", "tensor_parallel_size", "min_driver")


def test_a_misspelled_key_names_the_closest_valid_one():
    assert unknown_keys({"name": "x", "weight_gib": 140}, MODEL_KEYS, "model") == [
        "model.weight_gib: unknown key; did you mean weights_gib?"]


def test_a_key_like_none_lists_the_valid_ones():
    assert unknown_keys({"colour": "red"}, ("id", "flags"), "known_good_overrides[0]") == [
        "known_good_overrides[0].colour: unknown key; expected one of flags, id"]


def test_every_unknown_key_is_reported_in_the_mappings_order_and_non_string_keys_too():
    problems = unknown_keys({"tensor_paralel_size": 8, 1: "x", "name": "ok"}, MODEL_KEYS, "deploy_model")
    assert problems[0] == "deploy_model.tensor_paralel_size: unknown key; did you mean tensor_parallel_size?"
    assert problems[1].startswith("deploy_model.1: unknown key; ")
    assert len(problems) == 2


def test_two_letter_slips_in_short_names_are_still_suggested():
    assert closest("min_drv", MODEL_KEYS) == "min_driver"
    assert closest("zzz", MODEL_KEYS) is None


def test_a_variable_belongs_to_the_longest_prefix():
    prefixes = ("sglang_", "sglang_serve_", "deploy_")
    assert owner("sglang_serve_port", prefixes) == "sglang_serve_"
    assert owner("sglang_version", prefixes) == "sglang_"
    assert owner("deploy_", prefixes) is None  # the prefix alone names nothing
    assert owner("inventory_hostname", prefixes) is None


def test_names_in_text_finds_every_use_with_a_prefix():
    text = ("capture: \"{{ gpu_audit_capture | default('') }}\"\n"
            "dest: \"{{ gpu_audit_capture_dir }}/x\"\nother: my_gpu_audit_thing\n")
    assert names_in_text(text, ["gpu_audit_"]) == {"gpu_audit_capture", "gpu_audit_capture_dir"}
    assert names_in_text(text, []) == set()


OWNERS = {"gpu_audit_": "a variable of role gpu_audit", "deploy_": "one of the shared deploy_* variables"}
KNOWN = {"gpu_audit_capture", "gpu_audit_capture_dir", "gpu_audit_hosts", "deploy_model", "deploy_accept_findings"}
DOCS = {"gpu_audit_": {"gpu_audit_capture", "gpu_audit_capture_dir"}, "deploy_": {"deploy_model"}}


def test_a_misspelled_role_variable_names_the_role_and_the_closest_option():
    found = unknown_variables(["gpu_audit_captur", "gpu_audit_capture", "ansible_host"], OWNERS, KNOWN, DOCS)
    assert [f["message"] for f in found] == [
        "gpu_audit_captur is not a variable of role gpu_audit; did you mean gpu_audit_capture?"]
    assert found[0]["suggestion"] == "gpu_audit_capture"


def test_suggestions_fall_back_to_names_the_code_uses_and_then_to_the_list():
    found = unknown_variables(["deploy_accept_finding", "gpu_audit_hots", "deploy_zzzzzzzz"], OWNERS, KNOWN, DOCS)
    assert [f["message"] for f in found] == [
        "deploy_accept_finding is not one of the shared deploy_* variables; did you mean deploy_accept_findings?",
        "deploy_zzzzzzzz is not one of the shared deploy_* variables; expected one of deploy_model",
        "gpu_audit_hots is not a variable of role gpu_audit; did you mean gpu_audit_hosts?",
    ]


@given(st.dictionaries(st.one_of(st.text(max_size=20), st.integers()), st.none(), max_size=6),
       st.lists(st.text(max_size=20), max_size=6))
def test_no_mapping_makes_unknown_keys_raise(mapping, valid):
    problems = unknown_keys(mapping, valid, "x")
    assert len(problems) == sum(1 for key in mapping if not (isinstance(key, str) and key in valid))
