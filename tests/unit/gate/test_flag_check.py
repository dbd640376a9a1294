"""The launch flags checked against the installed SGLang's --help: known renames translated, unknown options
and values outside the shown choices refused (a blocking reason), no --help noted as not checked."""

from __future__ import annotations

import argparse

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate import decide as gate
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate.flag_check import RENAMES, check_flags
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.sglang_help import parse_help
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.paths import FIXTURES
from tests.unit.captures import INCIDENT, PRO6000, audited
from tests.unit.gate.test_all_reduce import LLAMA70_TP2
from tests.unit.gate.test_gate import GLM5, INCIDENT_FLAGS, check_verdict

NSA_HELP = (FIXTURES / "sglang" / "launch_server-help_nsa-options_py3.11-layout_constructed.txt").read_text()
DSA_HELP = (FIXTURES / "sglang" / "launch_server-help_dsa-options-nsa-deprecated_py3.13-layout_constructed.txt"
            ).read_text()
ACCEPT = ["p2p_not_supported"]


def help_without(*dropped: str, nsa_choices: list[str] | None = None) -> str:
    """An SGLang --help as argparse prints it, without some options (or with other NSA choices)."""
    parser = argparse.ArgumentParser(prog="launch_server.py")
    for name in ("--model-path", "--tp-size", "--disable-custom-all-reduce", "--enable-p2p-check",
                 "--nsa-decode-backend"):
        if name in dropped:
            continue
        if name == "--nsa-decode-backend":
            parser.add_argument(name, choices=nsa_choices or ["flashmla_kv", "trtllm"])
        elif name.startswith(("--disable", "--enable")):
            parser.add_argument(name, action="store_true")
        else:
            parser.add_argument(name)
    return parser.format_help()


def test_the_renames_are_the_known_ones():
    assert RENAMES == {"--nsa-prefill-backend": "--dsa-prefill-backend",
                       "--nsa-decode-backend": "--dsa-decode-backend"}


def test_an_sglang_that_knows_every_flag_leaves_them_unchanged():
    result = gate.decide(audited(INCIDENT), GLM5, accept=ACCEPT, sglang_version="0.5.9", sglang_help=NSA_HELP)
    assert result["verdict"] == "pass"
    assert result["launch"]["args"] == INCIDENT_FLAGS
    assert result["launch"]["flag_check"] == {"checked": True, "translated": [], "refused": []}


def test_a_renamed_option_is_translated_with_a_note():
    result = gate.decide(audited(INCIDENT), GLM5, accept=ACCEPT, sglang_version="0.5.9", sglang_help=DSA_HELP)
    assert result["verdict"] == "pass"
    assert result["launch"]["args"] == ["--tp", "8", "--dsa-decode-backend", "trtllm", "--disable-custom-all-reduce"]
    assert result["launch"]["flag_check"]["translated"] == [
        {"from": "--nsa-decode-backend", "to": "--dsa-decode-backend", "values": ["trtllm"],
         "why": "deprecated"}]
    assert any(note.startswith("--nsa-decode-backend trtllm (known-good entry sm120-glm5-nsa-decode-trtllm) is "
                               "--dsa-decode-backend trtllm in the installed SGLang 0.5.9") for note in result["notes"])


def test_an_unknown_option_is_refused_and_blocks():
    override = {"id": "site-glm5-extra", "arch": "sm_120", "models": "glm-5*", "flags": ["--frobnicate", "1"]}
    result = gate.decide(audited(INCIDENT), GLM5, accept=ACCEPT, sglang_version="0.5.9", sglang_help=NSA_HELP,
                         known_good_overrides=[override])
    assert result["verdict"] == "block"
    reason = next(r for r in result["reasons"] if r["id"] == "sglang_flag_unsupported")
    assert reason["summary"].startswith("SGLang 0.5.9 (its --help) has no option --frobnicate")
    assert "known-good entry site-glm5-extra" in reason["summary"]
    assert reason["evidence"]["option"] == "--frobnicate" and reason["evidence"]["entry"] == "site-glm5-extra"
    assert "known_good_overrides" in reason["remedy"]
    assert "--frobnicate" not in result["launch"]["args"]
    assert result["launch"]["flag_check"]["refused"][0]["option"] == "--frobnicate"


def test_a_value_outside_the_shown_choices_is_refused():
    older = help_without(nsa_choices=["flashmla_sparse", "flashmla_kv", "fa3", "tilelang"])
    result = gate.decide(audited(INCIDENT), GLM5, accept=ACCEPT, sglang_version="0.5.5", sglang_help=older)
    assert result["verdict"] == "block"
    reason = next(r for r in result["reasons"] if r["id"] == "sglang_flag_unsupported")
    assert "--nsa-decode-backend takes one of flashmla_sparse, flashmla_kv, fa3, tilelang; not trtllm" in \
        reason["summary"]
    assert reason["evidence"]["choices"] == ["flashmla_sparse", "flashmla_kv", "fa3", "tilelang"]


def test_without_help_the_flags_pass_unchanged_with_a_note():
    result = gate.decide(audited(INCIDENT), GLM5, accept=ACCEPT)
    assert result["launch"]["args"] == INCIDENT_FLAGS
    assert result["launch"]["flag_check"] == {"checked": False, "translated": [], "refused": []}
    assert any(note.startswith("SGLang's --help was not given: the launch flags were not checked") for note in
               result["notes"])


def test_an_unreadable_help_is_noted_not_fatal():
    result = gate.decide(audited(INCIDENT), GLM5, accept=ACCEPT, sglang_help="ImportError: No module named triton")
    assert result["verdict"] == "pass"
    assert result["launch"]["flag_check"]["checked"] is False
    assert any(note.startswith("SGLang's --help could not be read (--help output: expected argparse's layout")
               for note in result["notes"])


def test_an_sglang_without_the_p2p_check_gets_custom_all_reduce_off_instead():
    result = gate.decide(audited(PRO6000), LLAMA70_TP2, sglang_help=help_without("--enable-p2p-check"))
    assert result["verdict"] == "pass"
    assert result["launch"]["args"] == ["--tp", "2", "--disable-custom-all-reduce"]
    assert result["launch"]["all_reduce"]["off_by"] == "flag"
    assert any("--enable-p2p-check" in note and "--disable-custom-all-reduce" in note for note in result["notes"])


@pytest.mark.parametrize(("args", "expected_args", "refused"), [
    (["--tp", "2"], ["--tp", "2"], []),  # argparse's abbreviation of --tp-size
    (["--tp-size", "2"], ["--tp-size", "2"], []),
    (["--tp", "2", "--disable-custom-all-reduce"], ["--tp", "2", "--disable-custom-all-reduce"], []),
    (["--tp", "2", "--bogus"], ["--tp", "2"], ["--bogus"]),
])
def test_check_flags_directly(args, expected_args, refused):
    checked = check_flags(args, parse_help(help_without()), {}, "0.5.9")
    assert checked.args == expected_args
    assert [r["option"] for r in checked.refused] == refused


def test_an_ambiguous_abbreviation_is_refused():
    parser = argparse.ArgumentParser(prog="p")
    parser.add_argument("--tp-size")
    parser.add_argument("--tp-rank")
    checked = check_flags(["--tp", "2"], parse_help(parser.format_help()), {}, None)
    assert checked.args == []
    assert "could be --tp-rank or --tp-size" in checked.refused[0]["reason"]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(help_text=st.one_of(st.text(max_size=300), st.sampled_from([NSA_HELP, DSA_HELP]).flatmap(
    lambda text: st.integers(min_value=0, max_value=len(text)).map(lambda cut: text[:cut]))),
    flags=st.lists(st.sampled_from(["--nsa-decode-backend", "--dsa-decode-backend", "--tp", "--x", "trtllm", "fa3",
                                    "--attention-backend", "nsa"]), max_size=6))
def test_any_help_and_any_flags_get_a_verdict(help_text, flags):
    override = {"id": "site", "arch": "sm_120", "models": "glm-5*", "flags": ["--attention-backend", *flags]}
    result = gate.decide(audited(INCIDENT), GLM5, accept=ACCEPT, sglang_help=help_text, known_good_overrides=[override])
    check_verdict(result)
    assert (result["verdict"] == "pass") == (not result["launch"]["flag_check"]["refused"])
