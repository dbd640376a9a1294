"""Serving stack profiles: every shipped one passes the validation the serving_stack role runs."""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible_collections.gpuhost.gpu.plugins.module_utils.serving import stack_profile
from ansible_collections.gpuhost.gpu.plugins.module_utils.serving.stack_profile import (
    ProfileError,
    validate,
    validate_file,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.paths import ROOT
from tests.unit.modules import run_module

SHIPPED = sorted((ROOT / "roles/serving_stack/vars/stacks").glob("*.yml"))
# Profiles of the test scenarios go through the same validation as the shipped ones.
SCENARIO = sorted((ROOT / "molecule").glob("*/vars/stack-*.yml"))
MODULE = ROOT / "plugins/modules/serving_stack_profile.py"


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def shipped(name: str) -> dict[str, Any]:
    return copy.deepcopy(load(ROOT / f"roles/serving_stack/vars/stacks/{name}.yml")["serving_stack"])


def problems(profile: Any) -> list[str]:
    with pytest.raises(ProfileError) as error:
        validate(profile, "custom.yml")
    assert str(error.value).startswith("custom.yml: ")
    return error.value.problems


def test_the_default_and_the_h100_profiles_are_shipped() -> None:
    assert {path.stem for path in SHIPPED} >= {"sm120-cu128", "sm90-cu128"}


@pytest.mark.parametrize("path", SHIPPED, ids=lambda path: path.stem)
def test_every_shipped_profile_validates_under_its_file_name(path: Path) -> None:
    profile = validate_file(load(path), str(path), expected_name=path.stem)
    assert profile["name"] == path.stem
    assert profile["torch"]["index_url"].startswith("https://")
    # The extensions are built for the profile's CUDA: the torch index must be that CUDA's build.
    assert profile["torch"]["index_url"].endswith("/cu" + profile["cuda"].replace(".", ""))


@pytest.mark.parametrize("path", SCENARIO, ids=lambda path: path.parent.parent.name)
def test_every_scenario_profile_validates(path: Path) -> None:
    validate_file(load(path), str(path))


def test_the_two_shipped_stacks_differ_only_in_name_and_architecture() -> None:
    blackwell, hopper = shipped("sm120-cu128"), shipped("sm90-cu128")
    assert (blackwell["archs"], hopper["archs"]) == (["12.0"], ["9.0"])
    for profile in (blackwell, hopper):
        for key in ("name", "description", "archs"):
            profile.pop(key)
    assert blackwell == hopper


def test_fields_other_roles_read_are_kept() -> None:
    profile = validate_file(load(ROOT / "roles/serving_stack/vars/stacks/sm120-cu128.yml"), "sm120-cu128.yml")
    assert profile["cuda"] == "12.8" and profile["archs"] == ["12.0"] and profile["python"] == "3.12"
    assert profile["torch"]["version"] == "2.9.1"
    flash, kernel = profile["extensions"]
    assert (flash["name"], flash["version"], flash["import_name"]) == ("flash-attn", "2.8.3", "flash_attn")
    assert flash["source"] == {"type": "pypi", "subdir": "", "name": ""}
    assert flash["mem_per_thread_gib"] == 5 and flash["env"]["FLASH_ATTENTION_FORCE_BUILD"] == "TRUE"
    assert kernel["source"]["subdir"] == "sgl-kernel" and kernel["env"] == {}
    assert profile["sglang"]["source"]["ref"] == "v0.5.10.post1"


def test_optional_keys_are_filled_in() -> None:
    profile = shipped("sm90-cu128")
    for key in ("packages", "extensions", "description"):
        profile.pop(key)
    profile["torch"].pop("index_url")
    for key in ("extras", "constraints"):
        profile["sglang"].pop(key)
    result = validate(profile, "custom.yml")
    assert (result["packages"], result["extensions"], result["description"]) == ([], [], "")
    assert result["torch"]["index_url"] == ""
    assert (result["sglang"]["extras"], result["sglang"]["constraints"]) == ([], [])


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (["python"], 'serving_stack.python: missing, expected a string such as "3.12"'),
        (["torch", "version"], "serving_stack.torch.version: missing"),
        (["sglang", "source"], "serving_stack.sglang.source: missing, expected a mapping"),
        (["extensions", 0, "mem_per_thread_gib"], "serving_stack.extensions[0].mem_per_thread_gib: missing"),
        (["extensions", 1, "source", "ref"], "serving_stack.extensions[1].source.ref: missing"),
        (["sglang", "source", "type"], "serving_stack.sglang.source.type: missing, expected one of pypi, git"),
    ],
)
def test_a_missing_key_is_named(path: list[Any], expected: str) -> None:
    profile = shipped("sm120-cu128")
    parent = profile
    for key in path[:-1]:
        parent = parent[key]
    del parent[path[-1]]
    found = problems(profile)
    assert len(found) == 1 and found[0].startswith(expected), found


@pytest.mark.parametrize("key", ["torch", "sglang"])
def test_an_empty_mapping_still_needs_its_keys(key: str) -> None:
    # Found by the property test below: {} once passed for a torch without a version.
    profile = shipped("sm120-cu128")
    profile[key] = {}
    assert problems(profile)[0].startswith(f"serving_stack.{key}.version: missing")


def test_an_unquoted_version_is_told_to_be_quoted() -> None:
    profile = shipped("sm120-cu128")
    profile["python"] = 3.1  # what YAML makes of python: 3.10
    assert problems(profile) == ["serving_stack.python: expected a string such as \"3.12\", found the number 3.1; "
                                 "quote it in the YAML"]


def test_every_problem_is_reported_at_once() -> None:
    profile = shipped("sm120-cu128")
    profile["archs"] = []
    profile["cuda"] = "twelve"
    profile["sglang"]["source"] = {"type": "svn"}
    profile["extensions"][0]["env"] = {"MAX_JOBS": 4}
    found = problems(profile)
    assert [problem.split(":")[0] for problem in found] == [
        "serving_stack.cuda",
        "serving_stack.archs",
        "serving_stack.extensions[0].env",
        "serving_stack.sglang.source.type",
    ]


def test_a_file_without_the_top_level_key_is_refused() -> None:
    with pytest.raises(ProfileError, match=r"^stack.yml: serving_stack: missing.*found \['python'\]"):
        validate_file({"python": "3.12"}, "stack.yml")


def test_a_shipped_profile_must_carry_its_file_name() -> None:
    data = {"serving_stack": shipped("sm90-cu128")}
    with pytest.raises(ProfileError, match="expected 'sm120-cu128' \\(the file's name\\), found 'sm90-cu128'"):
        validate_file(data, "sm120-cu128.yml", expected_name="sm120-cu128")


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ({"type": "archive"}, ["serving_stack.sglang.source.path: missing"]),
        ({"type": "archive", "path": "sglang.tar.gz", "sha256": "abc"}, ["serving_stack.sglang.source.sha256"]),
        ({"type": "git", "url": "https://example.org/sglang.git"}, ["serving_stack.sglang.source.ref: missing"]),
        ({"type": "pypi", "subdir": 3}, ["serving_stack.sglang.source.subdir"]),
    ],
)
def test_sources_need_what_their_type_needs(source: dict[str, Any], expected: list[str]) -> None:
    profile = shipped("sm120-cu128")
    profile["sglang"]["source"] = source
    found = problems(profile)
    assert [problem[: len(prefix)] for problem, prefix in zip(found, expected, strict=True)] == expected


def test_summary_names_the_stack() -> None:
    profile = validate(shipped("sm90-cu128"), "sm90-cu128.yml")
    assert stack_profile.summary(profile) == (
        "sm90-cu128: SGLang 0.5.10.post1 on torch 2.9.1 (CUDA 12.8), Python 3.12, archs 9.0; "
        "extensions flash-attn 2.8.3, sglang-kernel 0.4.1"
    )


# What YAML can produce: scalars, lists and mappings, nested.
YAML_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(data=YAML_VALUES)
def test_any_file_content_is_accepted_or_refused_with_the_profile_error(data: Any) -> None:
    try:
        validate_file(data, "random.yml")
    except ProfileError as error:
        assert error.problems and all(isinstance(problem, str) for problem in error.problems)


KEYS = ["name", "python", "cuda", "archs", "torch", "packages", "extensions", "sglang", "description"]


@settings(max_examples=300, deadline=None)
@given(changes=st.dictionaries(st.sampled_from(KEYS), YAML_VALUES, max_size=4))
def test_a_damaged_shipped_profile_is_refused_with_the_profile_error(changes: dict[str, Any]) -> None:
    profile = shipped("sm120-cu128")
    profile.update(changes)
    try:
        result = validate(profile, "damaged.yml")
    except ProfileError as error:
        assert all(problem.startswith("serving_stack") for problem in error.problems), error.problems
    else:
        assert result["archs"] and result["python"] and result["torch"]["version"]


@pytest.fixture(scope="module")
def module() -> Any:
    spec = importlib.util.spec_from_file_location("serving_stack_profile", MODULE)
    assert spec is not None and spec.loader is not None
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


def test_module_returns_the_filled_in_profile(module: Any, capsys: pytest.CaptureFixture[str]) -> None:
    path = ROOT / "roles/serving_stack/vars/stacks/sm90-cu128.yml"
    result = run_module(module.main, {"data": load(path), "source": str(path), "expected_name": "sm90-cu128"},
                        capsys, check_mode=True)
    assert not result.get("failed") and result["changed"] is False
    assert result["profile"]["archs"] == ["9.0"]
    assert result["summary"].startswith("sm90-cu128: SGLang 0.5.10.post1")


def test_module_failure_names_the_key_and_the_file(module: Any, capsys: pytest.CaptureFixture[str]) -> None:
    data = {"serving_stack": shipped("sm120-cu128")}
    del data["serving_stack"]["torch"]["version"]
    result = run_module(module.main, {"data": data, "source": "/stacks/mine.yml"}, capsys)
    assert result["failed"] is True
    assert result["msg"].startswith("serving_stack: the profile /stacks/mine.yml is not usable: "
                                    "serving_stack.torch.version: missing")
    assert result["problems"] == ['serving_stack.torch.version: missing, expected a string such as "2.9.1"']
