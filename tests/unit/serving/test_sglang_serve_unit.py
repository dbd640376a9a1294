"""The sglang_serve role's unit: values checked before they are written, ExecStart quoted by systemd's rules,
the API key's rules, and the rendered unit read back as systemd reads it."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import unicodedata
import urllib.parse
from pathlib import Path
from typing import Any

import jinja2
import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.serving import secret_mask
from hypothesis import given
from hypothesis import strategies as st

from tests.paths import ROOT
from tests.source_files import load_source

ROLE = ROOT / "roles" / "sglang_serve"


FILTERS = load_source(ROOT / "plugins" / "filter" / "sglang_serve.py", "sglang_serve_filters")
LAUNCHER = load_source(ROLE / "files" / "sglang_launch.py", "sglang_launch")
KEY = "unit-test-key-0123456789"


# --------------------------------------------------------------------------------------------------
# systemd's reading of an ExecStart= line, as src/basic/extract-word.c (EXTRACT_UNQUOTE|EXTRACT_CUNESCAPE),
# src/basic/escape.c (cunescape_one), specifier expansion (only %% here: the role writes no other) and
# the exec-time variable expansion (only $$ here) do it.

WHITESPACE = " \t\n\r"
SIMPLE_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\",
                  '"': '"', "'": "'", "s": " "}


class Unreadable(ValueError):
    """systemd would refuse the line (or read it as something else than its author meant)."""


def _unescape(line: str, at: int) -> tuple[str, int]:
    """The character the escape at line[at] (just after the backslash) stands for, and the index after it."""
    char = line[at] if at < len(line) else ""
    if char in SIMPLE_ESCAPES:
        return SIMPLE_ESCAPES[char], at + 1
    for letter, digits in (("x", 2), ("u", 4), ("U", 8)):
        if char == letter:
            code = line[at + 1:at + 1 + digits]
            if len(code) != digits or not re.fullmatch(r"[0-9a-fA-F]+", code) or int(code, 16) == 0:
                raise Unreadable(f"bad \\{letter} escape at {at}")
            value = int(code, 16)
            if letter == "x" and value >= 0x80:
                raise Unreadable("a raw byte above 0x7F would not be UTF-8")
            if 0xD800 <= value <= 0xDFFF or value > 0x10FFFF:
                raise Unreadable("not a code point")
            return chr(value), at + 1 + digits
    raise Unreadable(f"unknown escape \\{char!r} at {at}")


def split_exec_line(line: str) -> list[str]:
    """The argv systemd runs for ExecStart=<line>, or Unreadable."""
    if "\n" in line or "\r" in line:
        raise Unreadable("a line break ends the setting")
    words: list[str] = []
    at = 0
    while True:
        while at < len(line) and line[at] in WHITESPACE:
            at += 1
        if at >= len(line):
            break
        if line[at] == ";" and (at + 1 == len(line) or line[at + 1] in WHITESPACE):
            raise Unreadable("an unquoted ; starts another command")
        word, quote = [], ""
        while at < len(line):
            char = line[at]
            if char == "\\":
                decoded, at = _unescape(line, at + 1)
                word.append(decoded)
                continue
            if quote:
                if char == quote:
                    quote = ""
                else:
                    word.append(char)
            elif char in "'\"":
                quote = char
            elif char in WHITESPACE:
                break
            else:
                word.append(char)
            at += 1
        if quote:
            raise Unreadable("unbalanced quotes")
        words.append(_expand("".join(word)))
    return words


# The specifiers the role writes on purpose, as systemd resolves them for the unit.
SPECIFIERS = {"%": "%", "d": "/run/credentials/sglang-glm-5-nvfp4.service", "C": "/var/cache"}


def _expand(word: str) -> str:
    """Specifiers, then variables (at exec time): %% and $$ are literal; no other variable may be left."""

    def specifier(match: re.Match[str]) -> str:
        if match.group(1) not in SPECIFIERS:
            raise Unreadable(f"an unexpected specifier in {word!r}")
        return SPECIFIERS[match.group(1)]

    word = re.sub(r"%(.|$)", specifier, word, flags=re.DOTALL)

    def variable(match: re.Match[str]) -> str:
        if match.group(1) != "$":
            raise Unreadable(f"a variable in {word!r}")
        return "$"

    return re.sub(r"\$(.|$)", variable, word, flags=re.DOTALL)


ARGUMENT = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), max_size=40)


@given(args=st.lists(ARGUMENT, min_size=1, max_size=6))
def test_any_argument_reaches_the_process_as_it_was(args: list[str]) -> None:
    line = " ".join(FILTERS.exec_arg(arg) for arg in args)
    assert split_exec_line(line) == args


@given(arg=ARGUMENT)
def test_no_line_break_ever_reaches_the_unit(arg: str) -> None:
    written = FILTERS.exec_arg(arg)
    assert not any(char in written for char in "\n\r\v\f\x85\u2028\u2029")
    assert written.isprintable()


@pytest.mark.parametrize(("arg", "written"), [
    ("--tp", "--tp"),
    ("/models/GLM-5-NVFP4", "/models/GLM-5-NVFP4"),
    ("--enable-metrics\n", '"--enable-metrics\\x0a"'),
    ("a b", '"a b"'),
    ('say "hi"', '"say \\"hi\\""'),
    ("100%", '"100%%"'),
    ("$HOME", '"$$HOME"'),
    (";", '";"'),
    ("", '""'),
    ("C:\\path", '"C:\\\\path"'),
    ("caf\u00e9\u2028", '"caf\u00e9\\u2028"'),
])
def test_arguments_as_written(arg: str, written: str) -> None:
    assert FILTERS.exec_arg(arg) == written


@pytest.mark.parametrize("arg", ["nul\0byte", "lone\ud800surrogate"])
def test_what_systemd_cannot_carry_is_refused(arg: str) -> None:
    with pytest.raises(ValueError, match="cannot hold U\\+"):
        FILTERS.exec_arg(arg)


# --------------------------------------------------------------------------------------------------
# The values checked before anything is written

GOOD = {
    "sglang_serve_model_path": "/models/GLM-5-NVFP4",
    "sglang_serve_served_model_name": "GLM-5 NVFP4 (100% open)",
    "sglang_serve_venv": "/opt/sglang/venv",
    "sglang_serve_user": "sglang",
    "sglang_serve_group": "sglang",
    "sglang_serve_service_name": "sglang-glm-5-nvfp4",
    "sglang_serve_host": "::",
    "sglang_serve_env_file": "/etc/sglang/glm-5-nvfp4.env",
    "sglang_serve_nvidia_modprobe": "",
    "sglang_serve_ip_address_allow": ["10.0.0.0/8", "::1", "localhost"],
    "sglang_serve_unit_extra": ["SupplementaryGroups=video"],
    "the server arguments": ["--tp", "8", "--chat-template", "a b"],
    FILTERS.ENVIRONMENT: {"NCCL_P2P_DISABLE": "1", "CUDA_VISIBLE_DEVICES": "0,1", "_X1": 3},
}


def test_good_values_pass() -> None:
    assert FILTERS.value_problems(GOOD) == []


@pytest.mark.parametrize(("name", "value", "says"), [
    # The extra argument that used to render a root ExecStartPre= line.
    ("the server arguments", ["--enable-metrics\n", "ExecStartPre=+/usr/bin/touch", "/tmp/PWNED"],
     "the server arguments[0] holds control or line-break characters (U+000A): '--enable-metrics\\n'"),
    ("sglang_serve_served_model_name", "GLM\nExecStartPre=+/bin/sh", "holds control or line-break characters (U+000A)"),
    ("the gate summary", "pass for GLM\r\n[Service]", "U+000D, U+000A"),
    (FILTERS.ENVIRONMENT, {"HF_HUB_OFFLINE=1\nLD_PRELOAD": "/tmp/x.so"}, "key 'HF_HUB_OFFLINE=1\\nLD_PRELOAD' holds"),
    (FILTERS.ENVIRONMENT, {"LD PRELOAD": "x"}, "name 'LD PRELOAD': expected an environment variable name"),
    (FILTERS.ENVIRONMENT, {"OK": "a\u2028b"}, "U+2028"),
    ("sglang_serve_user", "sglang\nGroup=root", "U+000A"),
    ("sglang_serve_user", "root sglang", "expected a user or group name"),
    ("sglang_serve_env_file", "/etc/sglang/%n.env", "expected an absolute path"),
    ("sglang_serve_venv", "opt/venv", "expected an absolute path"),
    ("sglang_serve_nvidia_modprobe", "/usr/bin/nvidia-modprobe -u; /bin/sh", "expected an absolute path"),
    ("sglang_serve_ip_address_allow", ["10.0.0.0/8 any"], "sglang_serve_ip_address_allow[0] is '10.0.0.0/8 any'"),
    ("sglang_serve_service_name", "sglang-x service", "expected a unit name"),
    ("sglang_serve_host", "127.0.0.1 --api-key x", "expected a host name"),
    ("sglang_serve_unit_extra", ["PrivateUsers=no\n[Install]"], "sglang_serve_unit_extra[0] holds"),
])
def test_bad_values_are_named(name: str, value: Any, says: str) -> None:
    problems = FILTERS.value_problems({**GOOD, name: value})
    assert len(problems) == 1, problems
    assert says in problems[0]


@given(text=st.text(min_size=1))
def test_a_value_passes_only_when_it_stays_on_its_line(text: str) -> None:
    problems = FILTERS.value_problems({"sglang_serve_served_model_name": text})
    if any(unicodedata.category(char) == "Cc" for char in text):
        assert problems
    if not problems:
        assert len(f"x{text}x".splitlines()) == 1


# --------------------------------------------------------------------------------------------------
# The API key


@pytest.mark.parametrize(("key", "says"), [
    (KEY + "\n", "whitespace at its start or end"),
    (" " + KEY, "whitespace at its start or end"),
    ("schl\u00fcssel-0123456789", "outside printable ASCII (U+00FC)"),
    ("\u043a\u043b\u044e\u0447-0123456789-abc", "outside printable ASCII"),
    ("short", "5 characters long; expected 16 to 1024"),
    (None, "expected sglang_serve_api_key"),
    (12345678901234567, "expected the API key as a string, found int"),
])
def test_keys_refused_without_being_quoted(key: Any, says: str) -> None:
    problems = FILTERS.api_key_problems(key)
    assert any(says in problem for problem in problems), problems
    if isinstance(key, str):
        assert not any(form in problem for problem in problems for form in LAUNCHER.secret_forms(key.strip()))


def test_a_good_key_passes() -> None:
    assert FILTERS.api_key_problems(KEY) == []
    assert FILTERS.api_key_problems("a'b\"c\\d e-0123456789") == []


@given(key=st.text(max_size=40))
def test_role_and_module_judge_keys_alike(key: str) -> None:
    assert FILTERS.api_key_problems(key) == secret_mask.api_key_problems(key, min_length=16)


@given(key=st.text(min_size=1, max_size=30))
def test_role_launcher_and_module_mask_the_same_forms(key: str) -> None:
    assert LAUNCHER.secret_forms(key) == secret_mask.secret_forms(key)
    text = f"ServerArgs(api_key={key!r}) {key} {{\"api_key\": {json.dumps(key)}}}"
    assert FILTERS.mask(text, key) == secret_mask.mask(text, key)


def test_mask_covers_every_form() -> None:
    key = "k\\ey'with\"quotes-0123"
    text = "\n".join([key, repr(key), repr(key.encode()), json.dumps(key), f"b'Bearer {key}\\n'",
                      "api_key=" + urllib.parse.quote(key, safe="")])
    masked = FILTERS.mask(text, key)
    assert masked.count("<api key>") == 6, masked
    for form in LAUNCHER.secret_forms(key):
        assert form not in masked


# --------------------------------------------------------------------------------------------------
# The rendered unit, read back

TRICKY_ARGS = ["--enable-metrics\n", "ExecStartPre=+/usr/bin/touch", "/tmp/PWNED", 'it\'s "quoted" 100% $HOME \\ ;',
               ""]


def render(name: str, **overrides: Any) -> str:
    environment = jinja2.Environment(loader=jinja2.FileSystemLoader(str(ROLE / "templates")), trim_blocks=True,
                                     undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    # Ansible names a collection's filters by FQCN (gpuhost.gpu.<name>), as the templates call them.
    environment.filters.update({f"gpuhost.gpu.{name}": f for name, f in FILTERS.FilterModule().filters().items()})
    environment.filters["bool"] = bool
    context = {
        "ansible_managed": "Ansible managed",
        "sglang_serve_served_model_name": "GLM-5-NVFP4 (100%)",
        "sglang_serve_model_path": "/models/GLM-5-NVFP4",
        "__sglang_serve_gate_summary": "pass: 8x RTX PRO 6000",
        "sglang_serve_user": "sglang",
        "sglang_serve_group": "sglang",
        "sglang_serve_env_file": "/etc/sglang/glm-5-nvfp4.env",
        "sglang_serve_secret_file": "/etc/sglang/glm-5-nvfp4.yaml",
        "__sglang_serve_cache_name": "sglang-glm-5-nvfp4",
        "sglang_serve_nvidia_modprobe": "/usr/bin/nvidia-modprobe",
        "__sglang_serve_device_unit": "nvidia-device-nodes.service",
        "__sglang_serve_venv_python": "/opt/sglang/venv/bin/python",
        "__sglang_serve_launcher": "/usr/local/lib/sglang-serve/sglang_launch.py",
        "__sglang_serve_args": ["--model-path", "/models/GLM-5-NVFP4", "--port", "30000", *TRICKY_ARGS],
        "sglang_serve_stop_timeout": 120,
        "sglang_serve_service_name": "sglang-glm-5-nvfp4",
        "__sglang_serve_protect_home": "yes",
        "sglang_serve_infiniband": False,
        "sglang_serve_ip_address_allow": [],
        "sglang_serve_unit_extra": [],
        "__sglang_serve_env": {"NCCL_P2P_DISABLE": "1", "X": 'a "b" $c `d` \\e'},
    }
    return environment.get_template(name).render({**context, **overrides})


def settings(unit: str) -> list[tuple[str, str]]:
    return [tuple(line.split("=", 1)) for line in unit.splitlines()
            if line and not line.startswith(("#", ";", "[")) and "=" in line]


def test_the_unit_runs_the_launcher_with_every_argument_intact() -> None:
    unit = render("sglang.service.j2")
    execs = [value for name, value in settings(unit) if name.startswith("Exec")]
    assert len(execs) == 1  # no ExecStartPre= smuggled in
    argv = split_exec_line(execs[0])
    credential = SPECIFIERS["d"] + "/sglang.yaml"
    assert argv[:6] == ["/opt/sglang/venv/bin/python", "-I", "/usr/local/lib/sglang-serve/sglang_launch.py",
                        "--secret-file", credential, "--"]
    assert argv[6:11] == ["/opt/sglang/venv/bin/python", "-m", "sglang.launch_server", "--config", credential]
    assert argv[-len(TRICKY_ARGS):] == TRICKY_ARGS
    assert ("KillMode", "mixed") in settings(unit)


def test_the_unit_waits_for_the_device_nodes_and_allows_pidfd_getfd() -> None:
    unit = dict(settings(render("sglang.service.j2")))
    assert "nvidia-device-nodes.service" in unit["After"].split()
    assert ("Wants", "nvidia-device-nodes.service") in settings(render("sglang.service.j2"))
    assert unit["SystemCallFilter"].split() == ["@system-service", "pidfd_getfd"]
    assert unit["Description"] == "SGLang server for GLM-5-NVFP4 (100%%)"
    without = render("sglang.service.j2", sglang_serve_nvidia_modprobe="")
    assert "nvidia-device-nodes" not in without
    nodes = dict(settings(render("nvidia-device-nodes.service.j2")))
    assert nodes["Type"] == "oneshot" and nodes["RemainAfterExit"] == "yes"
    assert split_exec_line(nodes["ExecStart"]) == ["-/usr/bin/nvidia-modprobe", "-u", "-c=0"]


def test_the_environment_file_keeps_each_value_on_its_line() -> None:
    lines = [line for line in render("sglang.env.j2").splitlines() if not line.startswith("#")]
    assert lines == ['NCCL_P2P_DISABLE="1"', 'X="a \\"b\\" \\$c \\`d\\` \\\\e"']


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze")
def test_exposure_of_the_rendered_unit(tmp_path: Path) -> None:
    unit = tmp_path / "sglang-glm-5-nvfp4.service"
    unit.write_text(render("sglang.service.j2"))
    done = subprocess.run(["systemd-analyze", "security", "--offline=true", "--no-pager", str(unit)],
                          capture_output=True, text=True, timeout=60, check=False)
    match = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", done.stdout)
    assert match, done.stdout[-500:] + done.stderr[-500:]
    assert float(match.group(1)) <= 3.0
