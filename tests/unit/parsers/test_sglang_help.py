"""The argparse --help reader: SGLang's launch_server help of two namings and two Python layouts, pastes a
terminal or an e-mail made of it, and properties over parsers built with argparse itself (whatever argparse
prints comes back with its names, choices and deprecation marks; no text raises anything but the reader's
own error)."""

from __future__ import annotations

import argparse
import re
import string

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers._common import ParseError
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.sglang_help import ArgparseHelpError, parse_help
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.cpu_limit import within
from tests.paths import FIXTURES

NSA = (FIXTURES / "sglang" / "launch_server-help_nsa-options_py3.11-layout_constructed.txt").read_text()
DSA = (FIXTURES / "sglang" / "launch_server-help_dsa-options-nsa-deprecated_py3.13-layout_constructed.txt").read_text()
NSA_CHOICES = ("flashmla_sparse", "flashmla_kv", "flashmla_auto", "fa3", "tilelang", "aiter", "trtllm")


def test_older_sglang_with_nsa_options_in_the_python_3_11_layout():
    help_ = parse_help(NSA)
    assert help_.prog == "launch_server.py"
    tp = help_.exact("--tensor-parallel-size")
    assert tp is not None and tp.names == ("--tp-size", "--tensor-parallel-size") and tp.metavar == "TP_SIZE"
    decode = help_.exact("--nsa-decode-backend")
    assert decode is not None and decode.choices == NSA_CHOICES and not decode.deprecated
    assert help_.exact("--dsa-decode-backend") is None
    flag = help_.exact("--enable-p2p-check")
    assert flag is not None and flag.takes_value is False and flag.choices is None
    assert flag.help == "Enable P2P check for GPU access, otherwise the p2p access is allowed by default."
    assert help_.exact("-h").names == ("-h", "--help")
    assert len(help_.options) == 15


def test_newer_sglang_with_dsa_options_and_the_old_names_deprecated_in_the_python_3_13_layout():
    help_ = parse_help(DSA)
    tp = help_.exact("--tp-size")
    assert tp is not None and tp.names == ("--tp-size", "--tensor-parallel-size") and tp.metavar == "TP_SIZE"
    decode = help_.exact("--dsa-decode-backend")
    assert decode is not None and "flashinfer_sparse_mla" in decode.choices and not decode.deprecated
    old = help_.exact("--nsa-decode-backend")
    assert old is not None and old.deprecated and old.choices is None and old.metavar == "NSA_DECODE_BACKEND"
    # argparse wrapped "--dsa-decode-backend" after its hyphen; the word is whole again.
    assert old.help == "(deprecated) Alias of --dsa-decode-backend; use --dsa-decode-backend instead."
    assert old.replaced_by == "--dsa-decode-backend"
    assert help_.exact("--nsa-prefill-backend").replaced_by == "--dsa-prefill-backend"


def test_abbreviations_resolve_as_argparse_resolves_them():
    help_ = parse_help(NSA)
    assert help_.resolve("--tp")[0].names[0] == "--tp-size"
    assert help_.resolve("--model")[1] == ("--model",)  # an exact alias, not a prefix of --model-path
    option, matches = help_.resolve("--nsa")
    assert option is None and matches == ("--nsa-decode-backend", "--nsa-prefill-backend")
    assert help_.resolve("--no-such-option") == (None, ())
    assert help_.resolve("-t") == (None, ())


def _terminal_wrapped(text: str, width: int) -> str:
    """What a narrow terminal's copy makes of it: every line cut at ``width`` characters."""
    out = []
    for line in text.split("\n"):
        while len(line) > width:
            out.append(line[:width])
            line = line[width:]
        out.append(line)
    return "\n".join(out)


@pytest.mark.parametrize("paste", [
    pytest.param(lambda t: t.replace("\n", "\r\n"), id="crlf"),
    pytest.param(lambda t: re.sub(r"(--[\w-]+)", "\x1b[1;36m\\1\x1b[0m", t), id="ansi-colours"),
    pytest.param(lambda t: "\n".join(f"{i:6}\t{line}" for i, line in enumerate(t.split("\n"), 1)), id="cat-n"),
    pytest.param(lambda t: _terminal_wrapped(t, 80), id="terminal-wrapped-choices"),
])
def test_pastes_read_as_the_printed_output(paste):
    help_ = parse_help(paste(NSA))
    assert help_.exact("--nsa-decode-backend").choices == NSA_CHOICES
    assert help_.exact("--attention-backend").choices[-1] == "ascend"
    assert help_.exact("--tp-size").names == ("--tp-size", "--tensor-parallel-size")


def test_a_paste_cut_after_the_usage_still_names_its_options():
    usage = NSA.split("\n\n")[0]
    help_ = parse_help(usage)
    assert help_.exact("--nsa-decode-backend").choices == NSA_CHOICES
    assert help_.exact("--enable-p2p-check").takes_value is False
    # The usage names an action by its first option string only.
    assert help_.exact("--tensor-parallel-size") is None and help_.exact("--tp-size") is not None


@pytest.mark.parametrize(("help_text", "deprecated", "replaced_by"), [
    ("(deprecated) Use --new-x instead.", True, "--new-x"),
    ("[DEPRECATED] please use `--new-x`.", True, "--new-x"),
    ("Deprecated: has no effect.", True, None),
    ("This option is deprecated and will be removed.", True, None),
    ("Deprecated alias for --new-x.", True, "--new-x"),
    ("Enable the fast path (replaces the deprecated --old-x).", False, None),
    ("The number of GPUs.", False, None),
])
def test_deprecation_marks_in_the_help_text(help_text, deprecated, replaced_by):
    parser = argparse.ArgumentParser(prog="p")
    parser.add_argument("--x", help=help_text)
    option = parse_help(parser.format_help()).exact("--x")
    assert (option.deprecated, option.replaced_by) == (deprecated, replaced_by)


@pytest.mark.parametrize("text", ["", "   \n", "Traceback (most recent call last):\n  File \"x\"\nImportError: triton",
                                  "usage: launch_server.py\n\nNothing here."])
def test_text_without_options_is_refused_with_what_to_do(text):
    with pytest.raises(ArgparseHelpError, match=r"expected argparse's layout.*sglang\.launch_server --help"):
        parse_help(text)


def test_non_text_is_refused_and_bytes_are_read():
    with pytest.raises(ArgparseHelpError, match="expected text; found int"):
        parse_help(3)  # type: ignore[arg-type]
    assert parse_help(NSA.encode()).exact("--tp-size") is not None
    assert issubclass(ArgparseHelpError, ParseError)


# ---------------------------------------------------------------------------
# Properties

WORD = st.text(string.ascii_lowercase + string.digits, min_size=1, max_size=10)
NAME = st.builds(lambda parts: "--" + "-".join(parts), st.lists(WORD, min_size=1, max_size=3))
CHOICE = st.text(string.ascii_lowercase + string.digits + "_.", min_size=1, max_size=12)
HELP = st.text(string.ascii_letters + string.digits + " .,;:'()-", max_size=120)
ACTION = st.fixed_dictionaries({
    "names": st.lists(NAME, min_size=1, max_size=3, unique=True),
    "kind": st.sampled_from(["value", "flag", "choices", "nargs*", "nargs+"]),
    "choices": st.lists(CHOICE, min_size=1, max_size=8, unique=True),
    "help": HELP,
    "deprecated": st.booleans(),
    "group": st.booleans(),
})


@settings(max_examples=150, deadline=None)
@given(actions=st.lists(ACTION, min_size=1, max_size=8), width=st.integers(min_value=40, max_value=200))
def test_whatever_argparse_prints_comes_back(actions, width):
    parser = argparse.ArgumentParser(prog="launch_server.py",
                                     formatter_class=lambda prog: argparse.HelpFormatter(prog, width=width))
    group = parser.add_argument_group("more options")
    declared = []
    taken: set[str] = {"-h", "--help"}
    for action in actions:
        names = [n for n in action["names"] if n not in taken and not any(n.startswith(t + " ") for t in taken)]
        if not names:
            continue
        taken.update(names)
        help_text = ("(deprecated) " if action["deprecated"] else "") + action["help"]
        kwargs: dict = {"help": help_text.replace("%", "")}
        if action["kind"] == "flag":
            kwargs["action"] = "store_true"
        elif action["kind"] == "choices":
            kwargs["choices"] = action["choices"]
        elif action["kind"].startswith("nargs"):
            kwargs["nargs"] = action["kind"][-1]
        (group if action["group"] else parser).add_argument(*names, **kwargs)
        declared.append((names, action))
    help_ = parse_help(parser.format_help())
    for names, action in declared:
        option = help_.exact(names[0])
        assert option is not None, names
        assert option.names == tuple(names)
        assert option.takes_value is (action["kind"] != "flag")
        if action["kind"] == "choices":
            assert option.choices == tuple(action["choices"])
        else:
            assert option.choices is None
        if action["deprecated"]:
            assert option.deprecated


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=400) | st.lists(st.sampled_from([
    "usage: launch_server.py [-h] [--x {a,b", "  --x {a,b,", "c}", "  --tp-size TP_SIZE, --tp TP", "options:",
    "                        help text", "  -", "  --", "  --x, ", "  --y [Y ...]  (deprecated) use --", "{", "}", "",
    "\x1b[1m", "\r", "  --z {}", "   1\t  --a A"]), max_size=30).map("\n".join))
def test_no_text_raises_anything_but_the_readers_own_error(text):
    try:
        result = parse_help(text)
    except ArgparseHelpError:
        return
    for option in result.options:
        assert option.names and all(name.startswith("-") for name in option.names)
        result.resolve(option.names[0])


@pytest.mark.parametrize("text", [
    # The braces still open were counted over the whole joined text again at each line.
    "usage: launch_server [-h]\n\noptions:\n  --x {\n" + "  {a,\n" * 40000,
    # A help text's end was searched for a hyphen over the whole text joined so far, at each line.
    "usage: launch_server [-h]\n\noptions:\n  --x X\n" + "      word-\n" * 20000,
])
def test_long_options_and_help_texts_are_read_in_linear_time(text: str) -> None:
    assert within(1.0, lambda: parse_help(text)).options
