"""Serving stack profiles: the one place the versions of a serving venv come from.

A profile file holds one mapping, ``serving_stack``: the Python, torch and CUDA versions, the GPU
architectures, the packages installed with torch, the CUDA extensions built from source and SGLang's
version and source. The serving_stack role validates a profile with ``validate_file`` before any
other role reads it; the unit tests run every shipped profile through the same function.

Pure functions over already-parsed data (YAML is read by Ansible or by the tests). Every problem is
collected, so one run names them all; ``ProfileError`` carries them.
"""

from __future__ import annotations

import re
from typing import Any

SOURCE_TYPES = ("pypi", "git", "archive")

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_MAJOR_MINOR = re.compile(r"^[0-9]+\.[0-9]+$")
_ARCH = re.compile(r"^[0-9]+\.[0-9]+[af]?$")
_VERSION = re.compile(r"^[0-9]+(\.[0-9]+)*([-_.]?(a|b|rc|post|dev)[0-9]*)*$")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class ProfileError(ValueError):
    """A profile that cannot be used; ``problems`` lists every reason, each naming its key."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        super().__init__(f"{source}: " + "; ".join(problems))


class _Checker:
    def __init__(self) -> None:
        self.problems: list[str] = []

    def problem(self, key: str, expected: str, value: Any = None, missing: bool = False) -> None:
        if missing:
            self.problems.append(f"{key}: missing, expected {expected}")
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and "string" in expected:
            # YAML reads 3.10 as the number 3.1: the fix is quoting, not another number.
            self.problems.append(f"{key}: expected {expected}, found the number {value!r}; quote it in the YAML")
        else:
            self.problems.append(f"{key}: expected {expected}, found {value!r}")

    def string(self, data: dict[str, Any], key: str, path: str, pattern: re.Pattern[str] | None = None,
               expected: str = "a string", required: bool = True, default: str = "") -> str:
        if key not in data or data[key] is None:
            if required:
                self.problem(f"{path}.{key}", expected, missing=True)
            return default
        value = data[key]
        if not isinstance(value, str) or (pattern is not None and not pattern.match(value)):
            self.problem(f"{path}.{key}", expected, value)
            return default
        return value

    def mapping(self, data: dict[str, Any], key: str, path: str) -> dict[str, Any] | None:
        """The mapping under key, or None (and a problem) when it is missing or not a mapping."""
        if key not in data or data[key] is None:
            self.problem(f"{path}.{key}", "a mapping", missing=True)
            return None
        value = data[key]
        if not isinstance(value, dict):
            self.problem(f"{path}.{key}", "a mapping", value)
            return None
        return value

    def strings(self, data: dict[str, Any], key: str, path: str, pattern: re.Pattern[str] | None = None,
                expected: str = "a list of strings", required: bool = False, non_empty: bool = False) -> list[str]:
        if key not in data or data[key] is None:
            if required:
                self.problem(f"{path}.{key}", expected, missing=True)
            return []
        value = data[key]
        if not isinstance(value, list) or not all(
            isinstance(item, str) and item.strip() and (pattern is None or pattern.match(item)) for item in value
        ):
            self.problem(f"{path}.{key}", expected, value)
            return []
        if non_empty and not value:
            self.problem(f"{path}.{key}", expected + ", at least one", value)
        return list(value)

    def source(self, data: dict[str, Any], path: str) -> dict[str, Any]:
        source = self.mapping(data, "source", path)
        if source is None:
            return {}
        where = f"{path}.source"
        kind = source.get("type")
        if kind not in SOURCE_TYPES:
            self.problem(f"{where}.type", "one of " + ", ".join(SOURCE_TYPES), kind, missing="type" not in source)
            return {}
        result: dict[str, Any] = dict(source)
        result["subdir"] = self.string(source, "subdir", where, required=False)
        if kind == "git":
            result["url"] = self.string(source, "url", where, expected="the repository URL")
            result["ref"] = self.string(source, "ref", where, expected="a tag, branch or commit")
        elif kind == "archive":
            result["path"] = self.string(source, "path", where, expected="the archive's path on the controller")
            result["sha256"] = self.string(source, "sha256", where, _SHA256, "64 hex digits", required=False)
        else:
            result["name"] = self.string(source, "name", where, _NAME, "a package name", required=False)
        return result


def validate(profile: Any, source: str, expected_name: str = "") -> dict[str, Any]:
    """The profile with its optional keys filled in, or ProfileError naming every problem and the file."""
    check = _Checker()
    if not isinstance(profile, dict):
        raise ProfileError(source, [f"serving_stack: expected a mapping, found {profile!r}"])
    root = "serving_stack"
    result: dict[str, Any] = dict(profile)
    name = check.string(profile, "name", root, _NAME, "a name of letters, digits, '.', '_' or '-'")
    if expected_name and name and name != expected_name:
        check.problems.append(f"{root}.name: expected {expected_name!r} (the file's name), found {name!r}")
    result["name"] = name
    result["description"] = check.string(profile, "description", root, required=False)
    result["python"] = check.string(profile, "python", root, _MAJOR_MINOR, 'a string such as "3.12"')
    result["cuda"] = check.string(profile, "cuda", root, _MAJOR_MINOR, 'a string such as "12.8"')
    result["archs"] = check.strings(profile, "archs", root, _ARCH, 'a list of strings such as ["12.0", "9.0"]',
                                    required=True, non_empty=True)

    torch = check.mapping(profile, "torch", root)
    result["torch"] = dict(torch or {})
    if torch is not None:
        result["torch"]["version"] = check.string(torch, "version", f"{root}.torch", _VERSION,
                                                  'a string such as "2.9.1"')
        result["torch"]["index_url"] = check.string(torch, "index_url", f"{root}.torch", required=False)

    result["packages"] = check.strings(profile, "packages", root)

    extensions = profile.get("extensions") or []
    result["extensions"] = []
    if not isinstance(extensions, list):
        check.problem(f"{root}.extensions", "a list of mappings", extensions)
        extensions = []
    for index, extension in enumerate(extensions):
        where = f"{root}.extensions[{index}]"
        if not isinstance(extension, dict):
            check.problem(where, "a mapping", extension)
            continue
        item = dict(extension)
        item["name"] = check.string(extension, "name", where, _NAME, "a package name")
        item["version"] = check.string(extension, "version", where, _VERSION, 'a string such as "2.8.3"')
        item["import_name"] = check.string(extension, "import_name", where, _IDENTIFIER, "a Python module name")
        item["source"] = check.source(extension, where)
        memory = extension.get("mem_per_thread_gib")
        if isinstance(memory, bool) or not isinstance(memory, (int, float)) or memory <= 0:
            check.problem(f"{where}.mem_per_thread_gib", "a number of GiB above 0", memory,
                          missing="mem_per_thread_gib" not in extension)
        env = extension.get("env") or {}
        if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
            check.problem(f"{where}.env", "a mapping of strings to strings (quote numbers)", env)
            env = {}
        item["env"] = env
        # Targets an extension compiles whatever the archs say (sgl-kernel hard-codes its own).
        targets = extension.get("gencode_targets") or []
        if not isinstance(targets, list) or not all(isinstance(t, str) and re.fullmatch(r"sm_[0-9]+[af]?", t)
                                                    for t in targets):
            check.problem(f"{where}.gencode_targets", "a list of targets such as sm_90a", targets)
            targets = []
        item["gencode_targets"] = targets
        result["extensions"].append(item)

    sglang = check.mapping(profile, "sglang", root)
    result["sglang"] = dict(sglang or {})
    if sglang is not None:
        where = f"{root}.sglang"
        result["sglang"]["version"] = check.string(sglang, "version", where, _VERSION,
                                                   'a string such as "0.5.10.post1"')
        result["sglang"]["source"] = check.source(sglang, where)
        result["sglang"]["extras"] = check.strings(sglang, "extras", where, _NAME, "a list of extra names")
        result["sglang"]["constraints"] = check.strings(sglang, "constraints", where, None,
                                                        'a list of requirement strings such as "pkg==1.0"')

    if check.problems:
        raise ProfileError(source, check.problems)
    return result


def validate_file(data: Any, source: str, expected_name: str = "") -> dict[str, Any]:
    """Validate a profile file's content: one top-level key, ``serving_stack``."""
    if not isinstance(data, dict) or "serving_stack" not in data:
        found = sorted(data) if isinstance(data, dict) else type(data).__name__
        raise ProfileError(source, [f"serving_stack: missing, expected the profile under this top-level key "
                                    f"(found {found})"])
    return validate(data["serving_stack"], source, expected_name)


def summary(profile: dict[str, Any]) -> str:
    """One line naming what the stack installs."""
    extensions = ", ".join(f"{item['name']} {item['version']}" for item in profile.get("extensions", []))
    return (
        f"{profile['name']}: SGLang {profile['sglang']['version']} on torch {profile['torch']['version']} "
        f"(CUDA {profile['cuda']}), Python {profile['python']}, archs {', '.join(profile['archs'])}"
        + (f"; extensions {extensions}" if extensions else "")
    )
