"""Which way imports may point inside plugins/module_utils, and how long its files may grow.

Every import statement of every file under plugins/module_utils is read with ``ast`` (``import x``
and ``from x import y``, at the top, inside functions or under ``if TYPE_CHECKING``), nothing is
imported. ``from package import name`` counts as importing the module ``package.name`` when there
is such a file, else the package. The rules:

- **Layers**: the sub-packages and the modules at the root are stacked in ``LAYERS``, bottom to
  top; a module imports only from its own layer and the layers below it, so that code two layers
  need lives in the lower one (the findings catalog sits just above parsers/ because every other
  layer makes findings). The module-level import graph has no cycle, inside a layer either, and
  every package and root module is in ``LAYERS``.
- **parsers/** turn a tool's output into data: they import the standard library and other
  parsers/ modules only (shared helpers such as parsers/_common, or another parser's types).
- **Pure code** never touches the system, so that it runs anywhere and is tested without a
  host: parsers/, findings/, model/, rules/, gate/, report/, the pure bench files (``PURE_BENCH``: the
  judges, the host's communication ceiling, the units), every package ``__init__`` (it
  runs whenever any module of its package is imported), and the modules of other packages or of
  the root listed in ``PURE_ELSEWHERE`` with the reason they are pure. Pure code imports only pure gpuhost modules
  (so nothing of audit/, the Source seam and the gatherers; not bench/harness_runner, the
  *_runner files or the harness scripts; not serving/), no standard library module that runs
  processes, sockets, signals, threads or touches files (``IO_STDLIB``), and nothing outside the
  standard library. Because pure code may only import pure code, and each pure module is checked
  itself, nothing pure reaches I/O through a chain of imports either.
- parsers/, findings/, model/, rules/, gate/ and report/ do not import ``os`` at all (``os.path`` alone is
  hard to tell apart from ``os``'s I/O); ``OS_ALLOWED`` lists exceptions with their reason (none
  today).
- Nothing under module_utils imports ``ansible.module_utils.basic``: the modules in library/ are
  thin, own the AnsibleModule and hand plain data to module_utils.
- No file under plugins/module_utils is longer than 500 lines unless its opening docstring (or the
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

GPUHOST = ROOT / "plugins" / "module_utils"
MODULE_UTILS = ROOT / "plugins" / "module_utils"
PREFIX = "ansible_collections.gpuhost.gpu.plugins.module_utils"

# The layers of gpuhost, bottom to top: each sub-package, and each module at the root by its name
# ("__init__" is the root package's own file). A module of a sub-package may be placed on its own
# ("files.writer", say), below its package, where a lower layer needs it. A module imports only from its
# own layer and below.
LAYERS = (
    "__init__",  # the package's docstring; imports nothing
    "values",  # plain values read from data of any shape, for every layer above
    "gpu_pairs",  # how GPU pairs are counted in every text
    "parsers",  # tool output to typed data
    "findings",  # the findings catalog, the Finding type, the remedy texts and limits the catalog quotes
    "model",  # a model's shape, its collectives per token and its communication ceiling; bench and gate read it
    "rules",  # gpu_host facts to findings
    "process",  # a command under a deadline, for the audit's commands and the benchmark's runs
    "audit",  # reading a host (the Source seam and the gatherers), and the facts built from it
    "bench",  # the benchmarks, their judges and the host's communication ceiling
    "gate",  # the deployment verdict, over the audit's facts and the benchmark's results
    "report",  # Markdown, JSON, metrics and charts of all of the above
    "files",  # report files on the controller: their names, what is there, atomic writes
    # saved material of a host read on the controller and turned into a capture the audit replays, and its report
    # names: it reads the capture format of audit/ and names its reports by files/' rules, so it sits above both
    "material",
    "serving",  # provisioning and serving helpers
)
# Packages whose every module is pure; parsers/ is the strictest of them.
PURE_PACKAGES = ("parsers", "findings", "model", "rules", "gate", "report")
# The pure files of bench/ (the rest of bench/ runs processes: the harnesses and their runners).
PURE_BENCH = {
    "bench.nccl_judge": "the NCCL benchmark's result rows and its harness output read back",
    "bench.nccl_thresholds": "the NCCL benchmark's thresholds and their violations",
    "bench.nccl_tuning": "the NCCL environments tried and the one recommended",
    "bench.nccl_findings": "what an NCCL benchmark sweep and its tuning say about the host",
    "bench.p2p_judge": "what the P2P probe's measurements mean",
    "bench.p2p_proof": "what the P2P probe proved per GPU pair, read back from its result",
    "bench.host_ceiling": "the one communication ceiling of a host for a model, from results already read",
    "bench.units": "byte units and their display",
    "bench.arguments": "the benchmark modules' options, checked before anything runs",
    "bench.nccl_known_issues": "NCCL versions with known bugs per GPU, data, and the finding they make",
    "bench.nccl_diagnostics": "what NCCL's own diagnostics said, read back into findings",
    "bench.serving_env": "the environment SGLang gives NCCL when it serves, data, and its description",
}
# Modules outside the pure packages that pure code may import, each with why it is pure
# (for example a derivation of audit/ that works on data already gathered and never sees a Source).
PURE_ELSEWHERE: dict[str, str] = {
    "audit.proxmox_vm": "joins a parsed VM config to host facts already gathered; never sees a Source",
    "values": "reads values out of data already in hand",
    "gpu_pairs": "counts GPU pairs in directions already read",
    "material.kinds": "tells a piece of material's kind from its text already read",
    "material.split": "cuts a paste of several outputs, already read, into one piece per output",
    "material.gunzip": "undoes gzip of bytes already read, in memory (zlib)",
    "material.section": "copies a capture's account of its material into facts already gathered",
    "material.printable_names": "escapes the bytes of a file name already listed",
}
# Standard library modules that run processes, open sockets, handle signals, start threads or
# create and remove files: none of them in pure code.
IO_STDLIB = {
    "subprocess", "socket", "signal", "threading", "shutil", "tempfile",
    "multiprocessing", "concurrent", "asyncio", "select", "selectors", "pty",
}
# Packages where even ``import os`` is refused.
NO_OS_PACKAGES = ("parsers", "findings", "model", "rules", "gate", "report")
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
    """Whether ``ansible_collections.gpuhost.gpu.plugins.module_utils...`` names a file (module or package) here."""
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


def layer_of(module: str) -> str:
    """The entry of LAYERS a module belongs to: the longest entry naming it or a package above it, else its
    sub-package (or its own name at the root)."""
    if not module:
        return "__init__"
    placed = [entry for entry in LAYERS if module == entry or module.startswith(entry + ".")]
    return max(placed, key=len) if placed else module.split(".")[0]


def import_graph() -> dict[str, list[tuple[str, Path, Import]]]:
    """Module -> the gpuhost modules it imports, each with the file and the statement."""
    graph: dict[str, list[tuple[str, Path, Import]]] = {}
    for path in source_files():
        graph[module_of(path)] = [(imp.gpuhost, path, imp) for imp in imports_of(path) if imp.gpuhost is not None]
    return graph


def cycles(graph: dict[str, list[tuple[str, Path, Import]]]) -> list[list[str]]:
    """The strongly connected components with more than one module, or a module importing itself (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target, _, _ in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or any(target == node for target, _, _ in graph.get(node, ())):
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def cycle_path(graph: dict[str, list[tuple[str, Path, Import]]], component: list[str]) -> list[str]:
    """One cycle through the component's first module, as the import statements that close it."""
    start, members = component[0], set(component)
    came_from: dict[str, tuple[str, Path, Import]] = {}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for target, path, imp in graph.get(node, ()):
            if target == start:
                steps = [(node, path, imp)]
                while node != start:
                    steps.append(came_from[node])
                    node = came_from[node][0]
                return [f"{where(p, i)} ({m} -> {i.gpuhost})" for m, p, i in reversed(steps)]
            if target in members and target not in came_from and target != start:
                came_from[target] = (node, path, imp)
                queue.append(target)
    return []


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
    report([f"test_architecture.py lists {name}, but there is no such module under plugins/module_utils; rule: the "
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
                    "harnesses, serving/); rule: pure code imports only parsers/, findings/, rules/, gate/, "
                    "report/, the pure bench files and the modules in PURE_ELSEWHERE (add one there only with the "
                    "reason it is pure)")
        elif imp.stdlib:
            if imp.top in IO_STDLIB:
                problems.append(f"{where(path, imp)} imports {imp.top}; rule: pure code runs no process, socket, "
                                "signal or thread and creates no file (no " + ", ".join(sorted(IO_STDLIB)) + ")")
            elif imp.top == "os" and module.split(".")[0] in NO_OS_PACKAGES and module not in OS_ALLOWED:
                problems.append(f"{where(path, imp)} imports os; rule: parsers/, findings/, rules/, gate/ and "
                                "report/ do not import os (list an exception in OS_ALLOWED with its reason)")
        else:
            problems.append(f"{where(path, imp)} imports {imp.target}, outside the standard library; rule: pure code "
                            "imports only the standard library and pure gpuhost modules")
    report(problems)


def test_the_layers_name_packages_that_exist():
    """So that a renamed package does not leave a layer checking nothing, and a new one gets its place."""
    problems = [f"test_architecture.py's LAYERS names {name} twice; rule: each package or root module has one layer"
                for name in sorted({n for n in LAYERS if LAYERS.count(n) > 1})]
    for name in LAYERS:
        place = GPUHOST / Path(*name.split("."))
        if name != "__init__" and not (place / "__init__.py").is_file() and not place.with_suffix(".py").is_file():
            problems.append(f"test_architecture.py's LAYERS names {name}, but {rel(GPUHOST)} has no package "
                            f"{rel(place)}/ and no module {rel(place)}.py; rule: the layers name existing packages")
    for path in FILES:
        if layer_of(module_of(path)) not in LAYERS:
            problems.append(f"{rel(path)} belongs to {layer_of(module_of(path))!r}, which LAYERS does not place; rule: "
                            "every package and root module has a layer (add it to LAYERS where its imports put it)")
    report(problems)


def test_the_import_graph_has_no_cycle():
    """Modules of gpuhost, each import an edge (function-level and TYPE_CHECKING imports included)."""
    graph = import_graph()
    report([f"import cycle among {', '.join(component)}:\n  " + "\n  ".join(cycle_path(graph, component))
            + "\n  rule: imports form no cycle; move what both sides need down into a module they both import"
            for component in cycles(graph)])


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_imports_point_down_the_layers(path):
    own = layer_of(module_of(path))
    if own not in LAYERS:
        return  # test_the_layers_name_packages_that_exist says so
    problems = []
    for imp in imports_of(path):
        if imp.gpuhost is None:
            continue
        theirs = layer_of(imp.gpuhost)
        if theirs in LAYERS and LAYERS.index(theirs) > LAYERS.index(own):
            problems.append(f"{where(path, imp)}: layer {own!r} imports gpuhost.{imp.gpuhost} of layer {theirs!r}, "
                            f"which is above it; rule: a module imports only its own layer and those below "
                            f"({' < '.join(LAYERS)}); move what both need down to a layer below both")
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
