"""Every module's DOCUMENTATION, EXAMPLES and RETURN against its argument spec, as
`ansible-test sanity --test validate-modules` checks them in a collection, and `ansible-doc`
rendering each one.

`make sanity` runs ansible-test itself on the built collection; this test runs in the unit suite, in
seconds, the checks that matter most: the documented options and the argument spec agree on names,
aliases, types, defaults (compared after the spec's type conversion, so a documented 4 is the
float 4.0), choices, required, elements and nested suboptions; option and return documentation
have the keys the schema requires and no others; O(), RV() and M() name things that exist.
M(), O() and RV() name this project's modules by FQCN (gpuhost.gpu.<name>), as EXAMPLES call them.
It adds what validate-modules leaves out: EXAMPLES are tasks whose arguments the module accepts,
and main() hands AnsibleModule exactly get_argument_spec(), so that the spec compared is the real one.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from ansible.module_utils.common.parameters import DEFAULT_TYPE_VALIDATORS
from tests.paths import ROOT

MODULE_FILES = sorted(ROOT.glob("plugins/modules/*.py"))
MODULE_IDS = [path.stem for path in MODULE_FILES]
FQCN = "gpuhost.gpu."


def _short(name: str) -> str | None:
    """gpuhost.gpu.<name> -> <name>; None for any other name (a short name is no reference in a collection)."""
    return name.removeprefix(FQCN) if name.startswith(FQCN) else None

DOC_KEYS = {"module", "short_description", "description", "notes", "seealso", "requirements", "todo", "options",
            "extends_documentation_fragment", "version_added", "version_added_collection", "author", "deprecated",
            "attributes"}
DOC_REQUIRED = {"module", "short_description", "description", "author", "version_added"}
OPTION_KEYS = {"description", "required", "choices", "aliases", "version_added", "version_added_collection", "default",
               "type", "elements", "suboptions"}
OPTION_TYPES = {"bits", "bool", "bytes", "dict", "float", "int", "json", "jsonarg", "list", "path", "raw", "sid", "str"}
RETURN_KEYS = {"description", "returned", "type", "elements", "contains", "sample", "example", "choices",
               "version_added", "version_added_collection"}
RETURN_TYPES = {"bool", "complex", "dict", "float", "int", "list", "raw", "str"}
# Spec keys that name other options (AnsibleModule's keyword arguments and an option's own).
OPTION_LISTS = ("mutually_exclusive", "required_together", "required_one_of")
# validate-modules' no-log-needed: a name like these holds a secret unless it is a path, a flag or a choice.
SECRET_NAME = re.compile(r"(^|_)(pass(word|phrase)?|secret|token|api_?key|private_?key|key|credentials?)($|_)")
MARKUP = re.compile(r"\b(O|RV|M)\(([^)]*)\)")


class _Constructed(Exception):
    """Raised by the stand-in AnsibleModule once main() has handed it its arguments."""

    def __init__(self, kwargs: dict[str, Any]) -> None:
        super().__init__("AnsibleModule constructed")
        self.kwargs = kwargs


def load_module(path: Path) -> ModuleType:
    # A name of its own, so that the import does not replace the library module other tests import.
    spec = importlib.util.spec_from_file_location(f"_module_docs_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def constructor_kwargs(module: ModuleType) -> dict[str, Any]:
    """What main() passes to AnsibleModule, caught before anything runs."""

    def stand_in(**kwargs: Any) -> None:
        raise _Constructed(kwargs)

    real = module.AnsibleModule
    module.AnsibleModule = stand_in
    try:
        module.main()
    except _Constructed as constructed:
        return constructed.kwargs
    finally:
        module.AnsibleModule = real
    raise AssertionError(f"{module.__file__}: main() returned without constructing AnsibleModule")


def load_docs(module: ModuleType) -> tuple[dict, Any, Any]:
    return (yaml.safe_load(module.DOCUMENTATION), yaml.safe_load(module.EXAMPLES), yaml.safe_load(module.RETURN))


@pytest.fixture(scope="module", params=MODULE_FILES, ids=MODULE_IDS)
def module(request: pytest.FixtureRequest) -> ModuleType:
    return load_module(request.param)


def _siblings() -> dict[str, ModuleType | None]:
    """Every module by name; None for one that does not load, which its own tests report."""
    loaded: dict[str, ModuleType | None] = {}
    for path in MODULE_FILES:
        try:
            loaded[path.stem] = load_module(path)
        except Exception:  # any import error: the module's own tests show it
            loaded[path.stem] = None
    return loaded


@pytest.fixture(scope="module")
def all_specs() -> dict[str, dict]:
    """Every module's argument spec by name, to check EXAMPLES tasks that call a sibling module."""
    return {name: module.get_argument_spec() for name, module in _siblings().items() if module is not None}


@pytest.fixture(scope="module")
def all_docs() -> dict[str, tuple[dict, Any]]:
    """Every module's DOCUMENTATION and RETURN by name, for O(other#module:option) and M(other)."""
    docs: dict[str, tuple[dict, Any]] = {}
    for name, module in _siblings().items():
        try:
            doc, _, returns = load_docs(module) if module is not None else ({}, None, {})
        except yaml.YAMLError:
            doc, returns = {}, {}  # test_documentation_schema reports it
        docs[name] = (doc, returns)
    return docs


# ---------------------------------------------------------------------------
# The comparison, in validate-modules' terms (its error codes in the messages)


def _convert(value: Any, type_name: str) -> Any:
    return DEFAULT_TYPE_VALIDATORS[type_name](value)


def _is_text(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, list) and all(isinstance(line, str) for line in value))


def _names(option: dict, name: str) -> set[str]:
    return {name, *(option.get("aliases") or [])}


def compare_spec(doc_options: dict | None, spec: dict, kwargs: dict | None = None, context: str = "") -> list[str]:
    """Problems between documented options and an argument spec (recursing into suboptions)."""
    problems: list[str] = []
    doc_options = doc_options or {}
    where = f" in {context}" if context else ""
    spec_names: set[str] = set()
    for name, data in spec.items():
        label = f"{context}.{name}" if context else name
        if not isinstance(data, dict):
            problems.append(f"invalid-argument-spec: {label} is not a mapping")
            continue
        aliases = list(data.get("aliases") or [])
        spec_names |= {name, *aliases}
        if name in aliases or len(aliases) != len(set(aliases)):
            problems.append(f"parameter-alias-self/repeated: {label} aliases {aliases}")
        spec_type = data.get("type", "str")
        if spec_type not in DEFAULT_TYPE_VALIDATORS:
            problems.append(f"invalid-argument-spec: {label} has type {spec_type!r}")
            continue
        if data.get("required") and "default" in data:
            problems.append(f"required-default: {label} is required and has a default")
        if spec_type == "list" and not data.get("elements"):
            problems.append(f"parameter-list-no-elements: {label}")
        if data.get("elements") and spec_type != "list":
            problems.append(f"parameter-invalid-elements: {label} has elements but type {spec_type}")
        if (data.get("no_log") is None and SECRET_NAME.search(name) and spec_type not in ("path", "bool")
                and data.get("choices") is None):
            problems.append(f"no-log-needed: {label} could be a secret and has no no_log")

        documented = [n for n in sorted({name, *aliases}) if n in doc_options]
        if not documented:
            continue  # reported below as undocumented-parameter
        if len(documented) > 1:
            problems.append(f"parameter-documented-multiple-times: {label} as {documented}")
        doc = doc_options[documented[0]]
        if not isinstance(doc, dict):
            continue  # reported by check_doc_options
        if _names(doc, documented[0]) != {name, *aliases}:
            problems.append(f"parameter-documented-aliases-differ: {label} has names {sorted({name, *aliases})}, "
                            f"documented {sorted(_names(doc, documented[0]))}")
        doc_type = doc.get("type")
        if doc_type is None:
            problems.append(f"parameter-type-not-in-doc: {label} is {spec_type} in the spec, untyped in the docs")
        elif doc_type != spec_type:
            problems.append(f"doc-type-does-not-match-spec: {label} is {spec_type} in the spec, {doc_type} in the docs")
            continue

        try:
            spec_default = None if data.get("default") is None else _convert(data["default"], spec_type)
        except (TypeError, ValueError):
            problems.append(f"incompatible-default-type: {label} default {data['default']!r} is not a {spec_type}")
            continue
        try:
            doc_default = None if doc.get("default") is None else _convert(doc["default"], spec_type)
        except (TypeError, ValueError):
            problems.append(f"doc-default-incompatible-type: {label} documents default {doc['default']!r}, "
                            f"not a {spec_type}")
            continue
        if spec_default != doc_default:
            problems.append(f"doc-default-does-not-match-spec: {label} default is {spec_default!r} in the spec, "
                            f"{doc_default!r} in the docs")

        choice_type = (data.get("elements") or "raw") if spec_type == "list" else spec_type
        try:
            spec_choices = [_convert(choice, choice_type) for choice in data.get("choices") or []]
            doc_choices = [_convert(choice, choice_type) for choice in doc.get("choices") or []]
        except (TypeError, ValueError) as error:
            problems.append(f"incompatible-choices: {label}: {error}")
        else:
            if sorted(map(repr, spec_choices)) != sorted(map(repr, doc_choices)):
                problems.append(f"doc-choices-do-not-match-spec: {label} choices are {spec_choices} in the spec, "
                                f"{doc_choices} in the docs")

        if bool(data.get("required", False)) != bool(doc.get("required", False)):
            problems.append(f"doc-required-mismatch: {label} required is {bool(data.get('required'))} in the spec, "
                            f"{bool(doc.get('required'))} in the docs")
        if data.get("elements") != doc.get("elements"):
            problems.append(f"doc-elements-mismatch: {label} elements are {data.get('elements')!r} in the spec, "
                            f"{doc.get('elements')!r} in the docs")

        if data.get("options") and not doc.get("suboptions"):
            problems.append(f"missing-suboption-docs: {label} has options in the spec, no suboptions in the docs")
        if data.get("options") or doc.get("suboptions"):
            problems += compare_spec(doc.get("suboptions"), data.get("options") or {}, data, label)

    for key in OPTION_LISTS:
        for group in (kwargs or {}).get(key) or []:
            problems += [f"{key}: {option!r}{where} is not an option" for option in group if option not in spec_names]
    for rule in (kwargs or {}).get("required_if") or []:
        problems += [f"required_if: {option!r}{where} is not an option"
                     for option in [rule[0], *rule[2]] if option not in spec_names]

    documented_names: set[str] = set()
    for name, doc in doc_options.items():
        documented_names |= _names(doc, name) if isinstance(doc, dict) else {name}
    problems += [f"undocumented-parameter: {name!r}{where} is in the spec, not documented"
                 for name in sorted(spec_names - documented_names)]
    problems += [f"nonexistent-parameter-documented: {name!r}{where} is documented, not in the spec"
                 for name in sorted(documented_names - spec_names)]
    return problems


def check_doc_options(options: dict | None, context: str = "") -> list[str]:
    """The option schema: keys, description, types, and defaults, choices and elements that make sense."""
    problems = []
    for name, doc in (options or {}).items():
        label = f"{context}.{name}" if context else name
        if not isinstance(doc, dict):
            problems.append(f"invalid-documentation: option {label} is not a mapping")
            continue
        if set(doc) - OPTION_KEYS:
            problems.append(f"invalid-documentation: option {label} has unknown keys {sorted(set(doc) - OPTION_KEYS)}")
        if not _is_text(doc.get("description")):
            problems.append(f"invalid-documentation: option {label} needs a description (text or list of text)")
        for key in ("type", "elements"):
            if doc.get(key) is not None and doc[key] not in OPTION_TYPES:
                problems.append(f"invalid-documentation: option {label} {key} {doc[key]!r}")
        if doc.get("elements") and doc.get("type") != "list":
            problems.append(f"doc-elements-invalid: option {label} documents elements without type list")
        if doc.get("required") and "default" in doc:
            problems.append(f"doc-required-default: option {label} is documented required with a default")
        problems += check_doc_options(doc.get("suboptions"), label)
    return problems


def check_return(returns: dict | None, top: bool = True, context: str = "") -> list[str]:
    """RETURN's schema: description, returned (top level) and type on every key, contains for complex."""
    problems = []
    if not isinstance(returns, dict):
        return [f"RETURN{' ' + context if context else ''} is not a mapping of return values"]
    for name, value in returns.items():
        label = f"{context}.{name}" if context else name
        if not isinstance(value, dict):
            problems.append(f"return {label} is not a mapping")
            continue
        if set(value) - RETURN_KEYS:
            problems.append(f"return {label} has unknown keys {sorted(set(value) - RETURN_KEYS)}")
        if not _is_text(value.get("description")):
            problems.append(f"return {label} needs a description")
        if top and not isinstance(value.get("returned"), str):
            problems.append(f"return {label} needs returned (when it is returned)")
        if value.get("type") not in RETURN_TYPES:
            problems.append(f"return {label} type {value.get('type')!r} is not one of {sorted(RETURN_TYPES)}")
        if value.get("elements") is not None and (value.get("type") != "list" or value["elements"] not in OPTION_TYPES):
            problems.append(f"return {label} elements {value['elements']!r} (type {value.get('type')!r})")
        if value.get("type") == "complex" and not value.get("contains"):
            problems.append(f"return {label} is complex without contains")
        if value.get("contains") is not None:
            problems += check_return(value["contains"], top=False, context=label)
    return problems


def _paths(tree: dict | None, child: str, prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    paths: set[tuple[str, ...]] = set()
    for name, value in (tree or {}).items():
        value = value if isinstance(value, dict) else {}
        for key in {name, *(value.get("aliases") or [])}:
            paths.add((*prefix, key))
            paths |= _paths(value.get(child), child, (*prefix, key))
    return paths


def _strings(node: Any) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [text for value in node.values() for text in _strings(value)]
    if isinstance(node, list):
        return [text for value in node for text in _strings(value)]
    return []


def _reference(target: str) -> tuple[str | None, tuple[str, ...]]:
    """O(other#module:a.b[].c=value) -> ('other', ('a', 'b', 'c'))."""
    plugin = None
    if "#" in target:
        plugin, target = target.split("#", 1)
        target = target.split(":", 1)[1] if ":" in target else target
    target = target.split("=", 1)[0]
    return plugin, tuple(part.replace("[]", "") for part in target.split("."))


def check_markup(name: str, doc: dict, returns: dict | None, all_docs: dict[str, tuple[dict, Any]]) -> list[str]:
    """O() and RV() name an option or return value that exists, here or in the module named; M() a module."""
    problems = []
    texts = _strings({key: doc.get(key) for key in ("short_description", "description", "notes", "requirements")})
    texts += _strings({key: value.get("description") for key, value in (doc.get("options") or {}).items()})
    texts += _strings(returns or {})
    for text in texts:
        for kind, target in MARKUP.findall(text):
            if kind == "M":
                if _short(target) not in all_docs and not target.startswith("ansible.builtin."):
                    problems.append(f"invalid-documentation-markup: M({target}) is no module of this project "
                                    "nor ansible.builtin")
                continue
            plugin, path = _reference(target)
            plugin = name if plugin is None else _short(plugin)
            if plugin not in all_docs:
                problems.append(f"invalid-documentation-markup: {kind}({target}) names an unknown module")
                continue
            other_doc, other_returns = all_docs[plugin]
            known = (_paths(other_doc.get("options"), "suboptions") if kind == "O"
                     else _paths(other_returns if isinstance(other_returns, dict) else {}, "contains"))
            if path not in known:
                what = "option" if kind == "O" else "return value"
                problems.append(f"invalid-documentation-markup: {kind}({target}) names a {what} {plugin} lacks")
    return problems


def check_examples(name: str, examples: Any, all_specs: dict[str, dict]) -> list[str]:
    """EXAMPLES is a list of named tasks; those calling a module of ours pass only options it has."""
    if not isinstance(examples, list) or not examples:
        return ["EXAMPLES is not a non-empty YAML list of tasks"]
    problems = []
    calls_itself = False
    for index, task in enumerate(examples):
        if not isinstance(task, dict):
            problems.append(f"EXAMPLES task {index} is not a mapping")
            continue
        label = f"EXAMPLES task {task.get('name') or index!r}"
        if not isinstance(task.get("name"), str):
            problems.append(f"{label} has no name")
        called = [_short(key) for key in task if _short(key) in all_specs]
        problems += [f"{label} calls {key} by its short name; use {FQCN}{key}" for key in task if key in all_specs]
        if len(called) > 1:
            problems.append(f"{label} calls several modules: {called}")
        for module_name in called:
            calls_itself |= module_name == name
            args = task[FQCN + module_name]
            if args is None:
                args = {}
            if not isinstance(args, dict):
                problems.append(f"{label}: {module_name}'s arguments are not a mapping")
                continue
            spec = all_specs[module_name]
            accepted = {alias for option, data in spec.items() for alias in _names(data, option)}
            problems += [f"{label}: {module_name} has no option {arg!r}" for arg in sorted(set(args) - accepted)]
            problems += [f"{label}: {module_name} needs {option!r}" for option, data in spec.items()
                         if data.get("required") and not _names(data, option) & set(args)]
    if not calls_itself:
        problems.append(f"no EXAMPLES task calls {name}")
    return problems


# ---------------------------------------------------------------------------
# The checks, per module


def test_main_passes_get_argument_spec_to_ansible_module(module: ModuleType) -> None:
    assert callable(getattr(module, "get_argument_spec", None)), "the module has no get_argument_spec()"
    kwargs = constructor_kwargs(module)
    assert kwargs.get("argument_spec") == module.get_argument_spec()


def test_documentation_schema(module: ModuleType) -> None:
    doc, _, _ = load_docs(module)
    name = Path(module.__file__).stem
    problems = [f"missing {key}" for key in sorted(DOC_REQUIRED - set(doc))]
    problems += [f"unknown top-level key {key}" for key in sorted(set(doc) - DOC_KEYS)]
    if doc.get("module") != name:
        problems.append(f"module is {doc.get('module')!r}, the file is {name}.py")
    problems += [f"{key} is not text" for key in ("short_description", "description") if not _is_text(doc.get(key))]
    problems += check_doc_options(doc.get("options"))
    assert not problems, "\n".join(problems)


def test_documentation_matches_argument_spec(module: ModuleType) -> None:
    doc, _, _ = load_docs(module)
    problems = compare_spec(doc.get("options"), module.get_argument_spec(), constructor_kwargs(module))
    assert not problems, "\n".join(problems)


def test_examples_are_tasks_with_known_options(module: ModuleType, all_specs: dict[str, dict]) -> None:
    _, examples, _ = load_docs(module)
    problems = check_examples(Path(module.__file__).stem, examples, all_specs)
    assert not problems, "\n".join(problems)


def test_return_schema(module: ModuleType) -> None:
    _, _, returns = load_docs(module)
    problems = check_return(returns)
    assert not problems, "\n".join(problems)


def test_markup_references_exist(module: ModuleType, all_docs: dict[str, tuple[dict, Any]]) -> None:
    name = Path(module.__file__).stem
    doc, returns = all_docs[name]
    problems = check_markup(name, doc, returns, all_docs)
    assert not problems, "\n".join(problems)


ANSIBLE_DOC = shutil.which("ansible-doc", path=str(Path(sys.executable).parent)) or shutil.which("ansible-doc")


@pytest.mark.skipif(ANSIBLE_DOC is None, reason="ansible-doc is not installed")
@pytest.mark.parametrize("path", MODULE_FILES, ids=MODULE_IDS)
def test_ansible_doc_renders(path: Path, tmp_path: Path) -> None:
    """What `ansible-doc -M <dir> <name>` shows a reader: no error, no warning, every option."""
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_HOME": str(tmp_path),
           "ANSIBLE_NOCOLOR": "1", "PAGER": "cat"}
    result = subprocess.run([ANSIBLE_DOC, "-M", str(path.parent), path.stem], capture_output=True, text=True,
                            env=env, cwd=ROOT, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert "[WARNING]" not in result.stderr and "[ERROR]" not in result.stderr, result.stderr
    missing = [option for option in load_module(path).get_argument_spec() if option not in result.stdout]
    assert not missing, f"options missing from ansible-doc's page: {missing}"


# ---------------------------------------------------------------------------
# The checker itself must be able to fail


SPEC = {
    "size": {"type": "float", "default": 4.0},
    "mode": {"type": "str", "choices": ["a", "b"], "default": "a"},
    "names": {"type": "list", "elements": "str", "required": True, "aliases": ["name"]},
    "nested": {"type": "dict", "options": {"depth": {"type": "int", "default": 1}}},
}
GOOD_DOC = yaml.safe_load("""
size: {description: d, type: float, default: 4}
mode: {description: d, type: str, choices: [b, a], default: a}
names: {description: d, type: list, elements: str, required: true, aliases: [name]}
nested:
  description: d
  type: dict
  suboptions:
    depth: {description: d, type: int, default: 1}
""")


def test_checker_passes_a_matching_spec() -> None:
    assert compare_spec(GOOD_DOC, SPEC) == []
    assert check_doc_options(GOOD_DOC) == []


@pytest.mark.parametrize(("path", "value", "code"), [
    (("size", "default"), 5, "doc-default-does-not-match-spec"),
    (("size", "type"), "int", "doc-type-does-not-match-spec"),
    (("mode", "choices"), ["a", "c"], "doc-choices-do-not-match-spec"),
    (("names", "required"), False, "doc-required-mismatch"),
    (("names", "elements"), "int", "doc-elements-mismatch"),
    (("names", "aliases"), ["the_names"], "parameter-documented-aliases-differ"),
    (("nested", "suboptions", "depth", "default"), 2, "doc-default-does-not-match-spec"),
    (("nested", "suboptions", "extra"), {"description": "d", "type": "str"}, "nonexistent-parameter-documented"),
    (("unknown",), {"description": "d", "type": "str"}, "nonexistent-parameter-documented"),
])
def test_checker_catches(path: tuple[str, ...], value: Any, code: str) -> None:
    doc = yaml.safe_load(yaml.safe_dump(GOOD_DOC))
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    assert any(problem.startswith(code) for problem in compare_spec(doc, SPEC)), code


def test_checker_catches_an_undocumented_option() -> None:
    doc = {key: value for key, value in GOOD_DOC.items() if key != "mode"}
    assert compare_spec(doc, SPEC) == ["undocumented-parameter: 'mode' is in the spec, not documented"]


def test_checker_catches_bad_return_and_examples() -> None:
    assert check_return({"x": {"description": "d", "type": "str"}}) == ["return x needs returned (when it is returned)"]
    assert check_return({"x": {"description": "d", "returned": "always", "type": "complex"}}) == [
        "return x is complex without contains"]
    specs = {"mod": SPEC}
    assert check_examples("mod", [{"name": "t", "gpuhost.gpu.mod": {"names": ["a"], "colour": 1}}], specs) == [
        "EXAMPLES task 't': mod has no option 'colour'"]
    assert check_examples("mod", [{"name": "t", "gpuhost.gpu.mod": {"size": 1}}], specs) == [
        "EXAMPLES task 't': mod needs 'names'"]
    assert check_examples("mod", [{"name": "t", "mod": {"names": ["a"]}}], specs) == [
        "EXAMPLES task 't' calls mod by its short name; use gpuhost.gpu.mod", "no EXAMPLES task calls mod"]
    assert check_examples("mod", {"name": "t"}, specs) == ["EXAMPLES is not a non-empty YAML list of tasks"]
