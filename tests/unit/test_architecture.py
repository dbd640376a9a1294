"""Which way imports may point inside module_utils/gpuhost, and how long its files may grow.

Every import statement of every file under module_utils/gpuhost is read with ``ast`` (``import x``
and ``from x import y``, at the top, inside functions or under ``if TYPE_CHECKING``), nothing is
imported. ``from package import name`` counts as importing the module ``package.name`` when there
is such a file, else the package. The rules:

- **parsers/** turn a tool's output into data: they import the standard library and other
  parsers/ modules only (shared helpers such as parsers/_common, or another parser's types).
- **Pure code** never touches the system, so that it runs anywhere and is tested without a
  host: parsers/, rules/, gate/, report/, the pure bench files (``PURE_BENCH``: the judges, the
  communication model, the model profiles, the units), every package ``__init__`` (it runs
  whenever any module of its package is imported), and the modules of other packages listed in
  ``PURE_ELSEWHERE`` with the reason they are pure. Pure code imports only pure gpuhost modules
  (so nothing of audit/, the Source seam and the gatherers; not bench/harness_runner, the
  *_runner files or the harness scripts; not serving/), no standard library module that runs
  processes, sockets, signals, threads or touches files (``IO_STDLIB``), and nothing outside the
  standard library. Because pure code may only import pure code, and each pure module is checked
  itself, nothing pure reaches I/O through a chain of imports either.
- parsers/, rules/, gate/ and report/ do not import ``os`` at all (``os.path`` alone is hard to
  tell apart from ``os``'s I/O); ``OS_ALLOWED`` lists exceptions with their reason (none today).
- Nothing under module_utils imports ``ansible.module_utils.basic``: the modules in library/ are
  thin, own the AnsibleModule and hand plain data to module_utils.
- No file under module_utils/gpuhost is longer than 500 lines unless its opening docstring (or the
  comment block at its top) says why, in a sentence containing the marker phrase
  ``Longer than 500 lines because`` (``LENGTH_MARKER``), for example "Longer than 500 lines
  because it is shipped to the target as one self-contained script."

Each failure names the file, the line, the import statement and the rule it breaks.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.paths import ROOT

GPUHOST = ROOT / "module_utils" / "gpuhost"
MODULE_UTILS = ROOT / "module_utils"
PREFIX = "ansible.module_utils.gpuhost"

# Packages whose every module is pure; parsers/ is the strictest of them.
PURE_PACKAGES = ("parsers", "rules", "gate", "report")
# The pure files of bench/ (the rest of bench/ runs processes: the harnesses and their runners).
PURE_BENCH = {
    "bench.nccl_judge": "the NCCL benchmark's result rows and its harness output read back",
    "bench.nccl_thresholds": "the NCCL benchmark's thresholds and their violations",
    "bench.nccl_tuning": "the NCCL environments tried and the one recommended",
    "bench.nccl_findings": "what an NCCL benchmark sweep and its tuning say about the host",
    "bench.p2p_judge": "what the P2P probe's measurements mean",
    "bench.comm_model": "the communication floor computed from a model profile",
    "bench.comm_estimate": "an all-reduce's time estimated from a GPU-to-GPU copy and the algorithm's steps",
    "bench.model_config": "collectives per decode step counted from a config.json already read",
    "bench.model_profiles": "the built-in model profiles, data",
    "bench.units": "byte units and their display",
    "bench.arguments": "the benchmark modules' options, checked before anything runs",
    "bench.nccl_known_issues": "NCCL versions with known bugs per GPU, data, and the finding they make",
    "bench.nccl_diagnostics": "what NCCL's own diagnostics said, read back into findings",
}
# Modules outside the pure packages that pure code may import, each with why it is pure
# (for example a derivation of audit/ that works on data already gathered and never sees a Source).
PURE_ELSEWHERE: dict[str, str] = {
    "audit.proxmox_vm": "joins a parsed VM config to host facts already gathered; never sees a Source",
}
# Standard library modules that run processes, open sockets, handle signals, start threads or
# create and remove files: none of them in pure code.
IO_STDLIB = {
    "subprocess", "socket", "signal", "threading", "shutil", "tempfile",
    "multiprocessing", "concurrent", "asyncio", "select", "selectors", "pty",
}
# Packages where even ``import os`` is refused.
NO_OS_PACKAGES = ("parsers", "rules", "gate", "report")
# Modules of those packages that may import os, each with its reason.
OS_ALLOWED: dict[str, str] = {}
MAX_LINES = 500
LENGTH_MARKER = "Longer than 500 lines because"


@dataclass(frozen=True)
class Import:
    line: int
    statement: str  # as written, for the messages
    target: str  # the dotted module it imports, resolved as described in the docstring

    @property
    def gpuhost(self) -> str | None:
        """The target relative to gpuhost (``bench.units``; ``""`` for the package itself), or None."""
        if self.target == PREFIX:
            return ""
        if self.target.startswith(PREFIX + "."):
            return self.target[len(PREFIX) + 1:]
        return None

    @property
    def top(self) -> str:
        return self.target.split(".")[0]

    @property
    def stdlib(self) -> bool:
        return self.gpuhost is None and self.top in sys.stdlib_module_names


def source_files() -> list[Path]:
    return sorted(GPUHOST.rglob("*.py"))


def module_of(path: Path) -> str:
    """``bench/units.py`` -> ``bench.units``; ``parsers/__init__.py`` -> ``parsers``; the root -> ``""``."""
    parts = list(path.relative_to(GPUHOST).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_gpuhost_module(dotted: str) -> bool:
    """Whether ``ansible.module_utils.gpuhost...`` names a file (module or package) here."""
    if dotted != PREFIX and not dotted.startswith(PREFIX + "."):
        return False
    relative = Path(*dotted.split(".")[3:]) if dotted != PREFIX else Path()
    return (GPUHOST / relative).with_suffix(".py").is_file() or (GPUHOST / relative / "__init__.py").is_file()


def imports_of(path: Path) -> list[Import]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    # Relative imports resolve against the file's package, for files of gpuhost.
    package = ""
    if path.is_relative_to(GPUHOST):
        module = module_of(path)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [Import(node.lineno, f"import {alias.name}", alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = [PREFIX, *filter(None, package.split("."))]
                base = ".".join([*parts[:len(parts) - (node.level - 1)], *filter(None, [node.module])])
            names = ", ".join(alias.name for alias in node.names)
            statement = f"from {'.' * node.level}{node.module or ''} import {names}"
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                is_module = is_gpuhost_module(candidate) or candidate.startswith("ansible.module_utils.basic")
                found.append(Import(node.lineno, statement, candidate if is_module else base))
    # One entry per statement and module it imports (``from m import a, b`` imports m once).
    return sorted(dict.fromkeys(found), key=lambda imp: imp.line)


def is_pure(module: str) -> bool:
    top = module.split(".")[0]
    return (top in PURE_PACKAGES or module in PURE_BENCH or module in PURE_ELSEWHERE
            or (GPUHOST / Path(*module.split(".")) / "__init__.py").is_file())


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


FILES = source_files()
IDS = [str(path.relative_to(GPUHOST)) for path in FILES]


def report(problems: list[str]) -> None:
    """Fail with one line per problem, without pytest's rewriting of the expression."""
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


def where(path: Path, imp: Import) -> str:
    return f"{rel(path)}:{imp.line}: `{imp.statement}`"


# ---------------------------------------------------------------------------


def test_the_lists_name_files_that_exist():
    """So that a renamed or removed file does not leave a rule checking nothing."""
    modules = {module_of(path) for path in FILES}
    assert FILES, f"no Python file under {rel(GPUHOST)}"
    listed = (*PURE_BENCH, *PURE_ELSEWHERE, *OS_ALLOWED)
    report([f"test_architecture.py lists {name}, but there is no such module under module_utils/gpuhost; rule: the "
            "lists name existing modules" for name in listed if name not in modules])


@pytest.mark.parametrize("path", [p for p in FILES if module_of(p).split(".")[0] == "parsers"],
                         ids=[i for p, i in zip(FILES, IDS, strict=True) if module_of(p).split(".")[0] == "parsers"])
def test_parsers_import_only_the_standard_library_and_parsers(path):
    problems = []
    for imp in imports_of(path):
        if imp.stdlib:
            continue
        if imp.gpuhost is not None and imp.gpuhost.split(".")[0] == "parsers":
            continue
        what = f"gpuhost.{imp.gpuhost}" if imp.gpuhost is not None else imp.target
        problems.append(f"{where(path, imp)} imports {what}; rule: a parser imports only the standard library "
                        "and other parsers/ modules")
    report(problems)


PURE_FILES = [(p, i) for p, i in zip(FILES, IDS, strict=True) if is_pure(module_of(p))]


@pytest.mark.parametrize("path", [p for p, _ in PURE_FILES], ids=[i for _, i in PURE_FILES])
def test_pure_code_imports_nothing_that_does_io(path):
    module = module_of(path)
    problems = []
    for imp in imports_of(path):
        if imp.gpuhost is not None:
            if not is_pure(imp.gpuhost):
                problems.append(
                    f"{where(path, imp)} imports gpuhost.{imp.gpuhost}, which is not pure (I/O: audit/, runners, "
                    "harnesses, serving/); rule: pure code imports only parsers/, rules/, gate/, report/, the pure "
                    "bench files and the modules in PURE_ELSEWHERE (add one there only with the reason it is pure)")
        elif imp.stdlib:
            if imp.top in IO_STDLIB:
                problems.append(f"{where(path, imp)} imports {imp.top}; rule: pure code runs no process, socket, "
                                "signal or thread and creates no file (no " + ", ".join(sorted(IO_STDLIB)) + ")")
            elif imp.top == "os" and module.split(".")[0] in NO_OS_PACKAGES and module not in OS_ALLOWED:
                problems.append(f"{where(path, imp)} imports os; rule: parsers/, rules/, gate/ and report/ do not "
                                "import os (list an exception in OS_ALLOWED with its reason)")
        else:
            problems.append(f"{where(path, imp)} imports {imp.target}, outside the standard library; rule: pure code "
                            "imports only the standard library and pure gpuhost modules")
    report(problems)


MODULE_UTILS_FILES = sorted(MODULE_UTILS.rglob("*.py"))


@pytest.mark.parametrize("path", MODULE_UTILS_FILES, ids=[str(p.relative_to(MODULE_UTILS)) for p in MODULE_UTILS_FILES])
def test_module_utils_never_sees_ansible_module(path):
    problems = [f"{where(path, imp)} imports ansible.module_utils.basic; rule: only the modules in library/ build "
                "an AnsibleModule, module_utils takes and returns plain data"
                for imp in imports_of(path)
                if imp.target == "ansible.module_utils.basic" or imp.target.startswith("ansible.module_utils.basic.")]
    report(problems)


def opening_text(text: str) -> str:
    """The comment block at the top of a file and its docstring, whitespace collapsed."""
    comments = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        comments.append(line.lstrip("#"))
    try:
        docstring = ast.get_docstring(ast.parse(text)) or ""
    except SyntaxError:
        docstring = ""
    return " ".join(" ".join([*comments, docstring]).split())


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_files_stay_short_or_say_why(path):
    text = path.read_text(encoding="utf-8")
    lines = len(text.splitlines())
    if lines > MAX_LINES and LENGTH_MARKER.lower() not in opening_text(text).lower():
        report([f"{rel(path)} has {lines} lines; rule: at most {MAX_LINES} lines unless its opening docstring or "
                f"comment says why in a sentence with '{LENGTH_MARKER} ...'. Split it by concern, or add that "
                "sentence."])
