#!/usr/bin/env python3
"""Build a signed apt repository of stand-in packages, laid out like NVIDIA's CUDA repository.

NVIDIA's repository cannot be reached from our test machines, so the molecule scenarios install
from this one instead. It keeps what the roles depend on: the real package names and versions,
the files they lay out, their maintainer scripts, and the repository itself as NVIDIA publishes
it (https://developer.download.nvidia.com/compute/cuda/repos/<distro>/<arch>/): one flat
directory per distribution and architecture holding the .deb files, ``Packages``,
``Packages.gz``, ``Release`` (Origin ``NVIDIA``, Label ``NVIDIA CUDA``), ``Release.gpg`` and
``InRelease``; its sources line is ``deb [signed-by=KEY] <url>/<distro>/<arch>/ /``. The field
order and the Release layout follow NVIDIA's own metadata script (NVIDIA/cuda-repo-management,
repo-debian.sh).

Every ``*.yml``, ``*.yaml`` or ``*.json`` file in the packages directory is built. The driver packages are not
written there: for each repository built, the branches NVIDIA publishes in it and their package names come from
NVIDIA's repository table (plugins/module_utils/serving/nvidia_repos.py), with the real relations between them
(one branch's parts require each other at that version; the open and the proprietary kernel modules, and two
branches' kernel modules and libraries, conflict), and their contents from drivers/roles.yml. A file holds
one package (a mapping) or several (a list of mappings); see tests/aptrepo/README.md for the
fields. The signing key is new on every build: a throwaway key made in a temporary GNUPGHOME,
whose public half is written next to the repository as ``<key-name>.asc`` (armored) and
``<key-name>.gpg`` (binary keyring) for the roles' signed-by.

Needs dpkg-deb (dpkg) and gpg with gpg-agent (gnupg); root is not needed. YAML spec files need
PyYAML (in the project venv); JSON ones need nothing beyond the standard library.

    tests/aptrepo/build.py --out DIR [--distro debian12 ...] [--arch-dir x86_64]
"""

from __future__ import annotations

import argparse
import email.utils
import gzip
import hashlib
import importlib.util
import json
import os
import posixpath
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DEFAULT_SPECS = HERE / "packages"
DEFAULT_TEMPLATES = HERE / "templates"
DEFAULT_DRIVERS = HERE / "drivers" / "roles.yml"
TABLE = HERE.parents[1] / "plugins/module_utils/serving/nvidia_repos.py"
# The stand-in version of each branch the table names (real released versions of those branches).
STANDIN_VERSIONS = {"580": "580.126.20", "590": "590.48.01"}

ORIGIN = "NVIDIA"
LABEL = "NVIDIA CUDA"
DEFAULT_MAINTAINER = "Stand-in packages for tests <stand-ins@example.invalid>"
KEY_UID = "Throwaway test signing key for stand-in CUDA packages <stand-ins@example.invalid>"

# Control fields in the order NVIDIA's script writes them into Packages; the spec's relation
# keys map onto the relation fields.
FIELD_ORDER = (
    "Package", "Version", "Architecture", "Multi-Arch", "Priority", "Section", "Source", "Origin",
    "Maintainer", "Original-Maintainer", "Bugs", "Installed-Size", "Provides", "Depends",
    "Recommends", "Suggests", "Conflicts", "Breaks", "Replaces",
)
RELATIONS = {
    "pre_depends": "Pre-Depends",
    "depends": "Depends",
    "recommends": "Recommends",
    "suggests": "Suggests",
    "provides": "Provides",
    "conflicts": "Conflicts",
    "breaks": "Breaks",
    "replaces": "Replaces",
}
SCRIPTS = ("preinst", "postinst", "prerm", "postrm")
SPEC_KEYS = {
    "name", "version", "architecture", "description", "maintainer", "section", "priority",
    "multi_arch", "files", "scripts", "vars", *RELATIONS,
}
FILE_KINDS = ("content", "template", "symlink", "directory")
ARCHITECTURES = ("amd64", "arm64", "all")

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9+.-]+$")
VERSION_RE = re.compile(r"^(?:[0-9]+:)?[0-9][A-Za-z0-9.+~-]*$")
TEMPLATE_VAR_RE = re.compile(r"@@([A-Za-z_][A-Za-z0-9_]*)@@")
MODE_RE = re.compile(r"^0?[0-7]{3,4}$")


class SpecError(ValueError):
    """A spec file that cannot describe a package; the message says where and why."""


class BuildError(RuntimeError):
    """A tool failed while building the repository."""


@dataclass(frozen=True)
class FileEntry:
    path: str  # relative to the package root, e.g. usr/local/cuda-12.8/bin/nvcc
    kind: str  # one of FILE_KINDS
    value: str  # text, template name or link target; "" for directories
    mode: int


@dataclass(frozen=True)
class PackageSpec:
    name: str
    version: str
    architecture: str
    description: str
    source: str
    maintainer: str = DEFAULT_MAINTAINER
    section: str = "devel"
    priority: str = "optional"
    multi_arch: str = ""
    relations: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    files: tuple[FileEntry, ...] = ()
    scripts: Mapping[str, str] = field(default_factory=dict)
    vars: Mapping[str, str] = field(default_factory=dict)

    @property
    def deb_filename(self) -> str:
        upstream = self.version.split(":", 1)[-1]
        return f"{self.name}_{upstream}_{self.architecture}.deb"


# --- parsing: pure ------------------------------------------------------------------------


def _text(value: object, where: str, *, required: bool = True) -> str:
    if value is None and not required:
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise SpecError(f"{where}: expected text, found {type(value).__name__}")
    text = str(value)
    if required and not text.strip():
        raise SpecError(f"{where}: must not be empty")
    return text


def _text_list(value: object, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list):
        raise SpecError(f"{where}: expected a list of text, found {type(value).__name__}")
    return tuple(_text(item, f"{where}[{i}]") for i, item in enumerate(items))


def _mode(value: object, where: str, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 0o7777:
        return value
    if isinstance(value, str) and MODE_RE.match(value):
        return int(value, 8)
    raise SpecError(f"{where}: mode must be octal text such as \"0755\", found {value!r}")


def _package_path(value: object, where: str) -> str:
    text = _text(value, where)
    if text.startswith("/"):
        text = text.lstrip("/")
    norm = posixpath.normpath(text)
    if norm in ("", ".") or norm.startswith("..") or "/../" in f"/{norm}/":
        raise SpecError(f"{where}: {value!r} is not a path inside the package")
    if norm.split("/", 1)[0] == "DEBIAN":
        raise SpecError(f"{where}: {value!r} is dpkg's control area; use scripts: instead")
    return norm


def parse_file_entry(raw: object, where: str) -> FileEntry:
    if not isinstance(raw, Mapping):
        raise SpecError(f"{where}: expected a mapping with path and one of {', '.join(FILE_KINDS)}")
    unknown = set(raw) - {"path", "mode", *FILE_KINDS}
    if unknown:
        raise SpecError(f"{where}: unknown keys {sorted(unknown)}")
    kinds = [k for k in FILE_KINDS if k in raw]
    if len(kinds) != 1:
        raise SpecError(f"{where}: give exactly one of {', '.join(FILE_KINDS)} (found {kinds or 'none'})")
    kind = kinds[0]
    path = _package_path(raw.get("path"), f"{where}.path")
    if kind == "directory":
        if raw["directory"] is not True:
            raise SpecError(f"{where}.directory: must be true")
        return FileEntry(path, kind, "", _mode(raw.get("mode"), f"{where}.mode", 0o755))
    if kind == "symlink":
        if "mode" in raw:
            raise SpecError(f"{where}: a symlink has no mode")
        return FileEntry(path, kind, _text(raw["symlink"], f"{where}.symlink"), 0o777)
    value = _text(raw[kind], f"{where}.{kind}", required=kind == "template")
    return FileEntry(path, kind, value, _mode(raw.get("mode"), f"{where}.mode", 0o644))


def parse_package(raw: object, source: str) -> PackageSpec:
    if not isinstance(raw, Mapping):
        raise SpecError(f"{source}: a package is a mapping, found {type(raw).__name__}")
    label = f"{source}:{raw.get('name', '?')}"
    unknown = set(raw) - SPEC_KEYS
    if unknown:
        raise SpecError(f"{label}: unknown keys {sorted(unknown)} (known: {sorted(SPEC_KEYS)})")
    name = _text(raw.get("name"), f"{label}.name")
    if not NAME_RE.match(name):
        raise SpecError(f"{label}.name: {name!r} is not a Debian package name")
    version = _text(raw.get("version"), f"{label}.version")
    if not VERSION_RE.match(version):
        raise SpecError(f"{label}.version: {version!r} is not a Debian version")
    arch = _text(raw.get("architecture", "amd64"), f"{label}.architecture")
    if arch not in ARCHITECTURES:
        raise SpecError(f"{label}.architecture: {arch!r} is not one of {', '.join(ARCHITECTURES)}")
    description = _text(raw.get("description"), f"{label}.description").strip()

    files_raw = raw.get("files") or []
    if not isinstance(files_raw, list):
        raise SpecError(f"{label}.files: expected a list")
    files = tuple(parse_file_entry(f, f"{label}.files[{i}]") for i, f in enumerate(files_raw))
    seen: set[str] = set()
    for entry in files:
        if entry.path in seen:
            raise SpecError(f"{label}.files: {entry.path} is listed twice")
        seen.add(entry.path)

    scripts_raw = raw.get("scripts") or {}
    if not isinstance(scripts_raw, Mapping):
        raise SpecError(f"{label}.scripts: expected a mapping of {', '.join(SCRIPTS)}")
    bad = set(scripts_raw) - set(SCRIPTS)
    if bad:
        raise SpecError(f"{label}.scripts: unknown scripts {sorted(bad)} (known: {', '.join(SCRIPTS)})")
    scripts = {k: _text(v, f"{label}.scripts.{k}") for k, v in scripts_raw.items()}

    vars_raw = raw.get("vars") or {}
    if not isinstance(vars_raw, Mapping):
        raise SpecError(f"{label}.vars: expected a mapping")
    variables = {str(k): _text(v, f"{label}.vars.{k}", required=False) for k, v in vars_raw.items()}

    return PackageSpec(
        name=name,
        version=version,
        architecture=arch,
        description=description,
        source=source,
        maintainer=_text(raw.get("maintainer", DEFAULT_MAINTAINER), f"{label}.maintainer"),
        section=_text(raw.get("section", "devel"), f"{label}.section"),
        priority=_text(raw.get("priority", "optional"), f"{label}.priority"),
        multi_arch=_text(raw.get("multi_arch"), f"{label}.multi_arch", required=False),
        relations={k: _text_list(raw.get(k), f"{label}.{k}") for k in RELATIONS if raw.get(k)},
        files=files,
        scripts=scripts,
        vars=variables,
    )


def parse_document(data: object, source: str) -> list[PackageSpec]:
    """One spec file's content: a package mapping or a list of them."""
    if isinstance(data, list):
        if not data:
            raise SpecError(f"{source}: the list of packages is empty")
        return [parse_package(item, f"{source}[{i}]") for i, item in enumerate(data)]
    return [parse_package(data, source)]


def render_template(text: str, variables: Mapping[str, str], where: str) -> str:
    """Replace @@name@@ with the package's vars; a name without a value is an error."""

    def repl(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in variables:
            raise SpecError(f"{where}: template variable @@{key}@@ is not in the package's vars")
        return variables[key]

    return TEMPLATE_VAR_RE.sub(repl, text)


def maintainer_script(text: str) -> str:
    """A maintainer script with a shell and `set -e` unless it names its own interpreter."""
    body = text if text.endswith("\n") else text + "\n"
    if body.startswith("#!"):
        return body
    return "#!/bin/sh\nset -e\n" + body


def control_text(spec: PackageSpec, installed_size_kib: int) -> str:
    fields: dict[str, str] = {
        "Package": spec.name,
        "Version": spec.version,
        "Architecture": spec.architecture,
        "Priority": spec.priority,
        "Section": spec.section,
        "Maintainer": spec.maintainer,
        "Installed-Size": str(installed_size_kib),
    }
    if spec.multi_arch:
        fields["Multi-Arch"] = spec.multi_arch
    for key, values in spec.relations.items():
        fields[RELATIONS[key]] = ", ".join(values)
    lines = [f"{name}: {fields[name]}" for name in FIELD_ORDER if name in fields]
    lines.append("Description: " + description_field(spec.description))
    return "\n".join(lines) + "\n"


def description_field(text: str) -> str:
    """Synopsis on the first line; further lines indented, blank ones as ' .'."""
    first, *rest = text.strip().splitlines()
    out = [first.strip()]
    out.extend(f" {line.rstrip()}" if line.strip() else " ." for line in rest)
    return "\n".join(out)


def packages_stanza(control: str, filename: str, data: bytes) -> str:
    """The Packages entry for one .deb: its control fields, then where it is and its hashes,
    then the description, as NVIDIA's script orders them."""
    paragraphs = parse_control(control)
    description = paragraphs.pop("Description", "")
    homepage = paragraphs.pop("Homepage", None)
    ordered = [name for name in FIELD_ORDER if name in paragraphs]
    ordered += [name for name in paragraphs if name not in FIELD_ORDER]
    lines = [f"{name}: {paragraphs[name]}" for name in ordered]
    lines += [
        f"Filename: ./{filename}",
        f"Size: {len(data)}",
        f"MD5sum: {hashlib.md5(data).hexdigest()}",
        f"SHA1: {hashlib.sha1(data).hexdigest()}",
        f"SHA256: {hashlib.sha256(data).hexdigest()}",
        f"SHA512: {hashlib.sha512(data).hexdigest()}",
    ]
    if homepage is not None:
        lines.append(f"Homepage: {homepage}")
    if description:
        lines.append(f"Description: {description}")
    return "\n".join(lines) + "\n"


def parse_control(text: str) -> dict[str, str]:
    """One deb822 paragraph as an ordered mapping; continuation lines stay in their field."""
    fields: dict[str, str] = {}
    current = None
    for line in text.splitlines():
        if not line.strip():
            continue
        if line[0] in " \t":
            if current is None:
                raise SpecError(f"control text starts with a continuation line: {line!r}")
            fields[current] += "\n" + line
            continue
        name, sep, value = line.partition(":")
        if not sep:
            raise SpecError(f"control line without a field name: {line!r}")
        current = name.strip()
        fields[current] = value.strip()
    return fields


def release_text(indexes: Mapping[str, bytes], arch_dir: str, date: str) -> str:
    """Release for a flat repository: no Suite or Components, as NVIDIA publishes it."""
    lines = [f"Origin: {ORIGIN}", f"Label: {LABEL}", f"Architecture: {arch_dir}", f"Date: {date}"]
    for title, algo in (("MD5Sum", "md5"), ("SHA1", "sha1"), ("SHA256", "sha256"), ("SHA512", "sha512")):
        lines.append(f"{title}:")
        for name, data in indexes.items():
            lines.append(f" {hashlib.new(algo, data).hexdigest()} {len(data):>16} {name}")
    lines.append("Acquire-By-Hash: no")
    return "\n".join(lines) + "\n"



# --- driver packages from NVIDIA's repository table: pure --------------------------------------


def load_table() -> Any:
    """plugins/module_utils/serving/nvidia_repos.py, loaded by path: it imports nothing of the collection."""
    spec = importlib.util.spec_from_file_location("nvidia_repos", TABLE)
    if spec is None or spec.loader is None:
        raise SpecError(f"cannot load NVIDIA's repository table from {TABLE}")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("nvidia_repos", module)
    spec.loader.exec_module(module)
    return module


def _role(roles: Mapping[str, Any], role: str, values: Mapping[str, str]) -> dict[str, Any]:
    if role not in roles:
        raise SpecError(f"drivers/roles.yml has no {role!r} entry")
    text = json.dumps(roles[role])
    for key, value in values.items():
        text = text.replace(f"@@{key}@@", value)
    return json.loads(text)


def driver_documents(table: Any, distro: str, roles: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Spec documents of every driver package of every branch the table says this repository publishes."""
    repo = next((r for r in table.REPOSITORIES if r.name == distro), None)
    if repo is None:
        return []
    docs: dict[tuple[str, str], dict[str, Any]] = {}
    for branch in repo.branches:
        if branch not in STANDIN_VERSIONS:
            raise SpecError(f"the table lists branch {branch} for {distro}; give it a stand-in version in "
                            "STANDIN_VERSIONS")
        version = STANDIN_VERSIONS[branch]
        deb_version = f"{version}-1"
        values = {"version": version, "branch": branch, "repository": distro}
        open_, prop = (table.driver_packages(repo, branch, f) for f in ("open", "proprietary"))
        # One branch's parts require each other at exactly that release (Ubuntu's packaging writes the pair
        # (>= v) and (<= v-1)); Debian's metapackage asks for its parts with >= (cuda-drivers-580 says
        # nvidia-driver (>= 580.65.06)), so only an apt pin keeps it off a newer branch.
        same = [f"(>= {version})", f"(<= {deb_version})"]

        def add(role: str, name: str, values: Mapping[str, str] = values, deb_version: str = deb_version,
                **relations: list[str]) -> None:
            doc = _role(roles, role, values)
            doc.update({"name": name, "version": deb_version, "architecture": "amd64"})
            doc.update({k: v for k, v in relations.items() if v})
            docs[(name, deb_version)] = doc

        def exact(name: str, same: list[str] = same) -> list[str]:
            return [f"{name} {same[0]}", f"{name} {same[1]}"]

        kernel = f"nvidia-kernel-{version}"
        for flavor, names, other in (("open", open_, prop), ("proprietary", prop, open_)):
            kmod = names["kmod_package"]
            # Both flavors install nvidia.ko: each conflicts with the other, and with any other branch's modules
            # through the virtual name they all provide.
            add(f"kmod_{flavor}", kmod, provides=[kernel, "nvidia-dkms-kernel"],
                conflicts=[other["kmod_package"], "nvidia-dkms-kernel"])
        if repo.packaging == "debian":
            add("metapackage", "nvidia-driver-cuda",
                depends=[f"{open_['smi_package']} (>= {version})", f"{open_['persistenced_package']} (>= {version})",
                         f"{open_['kmod_package']} (>= {version}) | {prop['kmod_package']} (>= {version}) | {kernel}"])
            add("smi", open_["smi_package"])
            add("persistenced", open_["persistenced_package"])
        else:
            library = open_["packages"][1]
            carries = open_["names_carry_branch"]
            # A branch's library and tools exclude every other branch's: the branch-named ones provide and
            # conflict with the plain name, which is the real name of the branches without one.
            add("compute_library", library,
                provides=["libnvidia-compute"] if carries else [], conflicts=["libnvidia-compute"] if carries else [])
            add("smi", open_["smi_package"], depends=exact(library),
                conflicts=["nvidia-utils"] if carries else [], provides=["nvidia-utils"] if carries else [])
            add("persistenced", open_["persistenced_package"], depends=exact(library),
                conflicts=["nvidia-compute-utils"] if carries else [],
                provides=["nvidia-compute-utils"] if carries else [])
        fabricmanager = open_["fabricmanager_package"]
        add("fabricmanager", fabricmanager, depends=[kernel],
            provides=[f"nvidia-fabricmanager-{branch}"] if fabricmanager == "nvidia-fabricmanager" else [])
    return list(docs.values())


def driver_specs(distro: str, drivers: Path) -> list[PackageSpec]:
    roles = _load_yaml(drivers.read_text(encoding="utf-8"), drivers.name)
    if not isinstance(roles, Mapping):
        raise SpecError(f"{drivers.name}: expected a mapping of package parts")
    return [parse_package(doc, f"{drivers.name}@{distro}") for doc in driver_documents(load_table(), distro, roles)]


# --- system: files, dpkg-deb, gpg -----------------------------------------------------------


def load_specs(directory: Path) -> list[PackageSpec]:
    files = sorted(p for p in directory.iterdir() if p.suffix in (".yml", ".yaml", ".json") and p.is_file())
    if not files:
        raise SpecError(f"no *.yml, *.yaml or *.json spec files in {directory}")
    specs: list[PackageSpec] = []
    for path in files:
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".json":
            try:
                data = json.loads(text)
            except json.JSONDecodeError as exc:
                raise SpecError(f"{path.name}: not valid JSON: {exc}") from exc
        else:
            data = _load_yaml(text, path.name)
        specs.extend(parse_document(data, path.name))
    names: dict[tuple[str, str], str] = {}
    for spec in specs:
        key = (spec.name, spec.version)
        if key in names:
            raise SpecError(f"{spec.name} {spec.version} is defined in {names[key]} and in {spec.source}")
        names[key] = spec.source
    return specs


def _load_yaml(text: str, name: str) -> object:
    try:
        import yaml  # only YAML spec files need it
    except ImportError as exc:
        raise SpecError(
            f"{name}: reading YAML needs PyYAML; run this script with the project venv's python "
            "(.venv/bin/python) or write the spec as JSON"
        ) from exc
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SpecError(f"{name}: not valid YAML: {exc}") from exc


def run(argv: Sequence[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LC_ALL": "C"}
    result = subprocess.run(list(argv), capture_output=True, text=True, env=env, check=False, **kwargs)
    if result.returncode != 0:
        raise BuildError(f"{' '.join(argv)} failed ({result.returncode}):\n{result.stderr or result.stdout}")
    return result


def lay_out(spec: PackageSpec, root: Path, templates: Path) -> None:
    for entry in spec.files:
        target = root / entry.path
        target.parent.mkdir(parents=True, exist_ok=True)
        if entry.kind == "directory":
            target.mkdir(exist_ok=True)
        elif entry.kind == "symlink":
            target.symlink_to(entry.value)
            continue
        else:
            if entry.kind == "template":
                source = templates / entry.value
                if not source.is_file():
                    raise SpecError(f"{spec.source}:{spec.name}: template {entry.value} not found in {templates}")
                text = render_template(source.read_text(encoding="utf-8"), spec.vars, f"{spec.name}:{entry.path}")
            else:
                text = entry.value
            target.write_text(text, encoding="utf-8")
        target.chmod(entry.mode)


def installed_size_kib(root: Path) -> int:
    total = 0
    for path in root.rglob("*"):
        if path.is_symlink() or path.is_dir():
            total += 1024  # dpkg counts a link or directory as one block, as dpkg-gencontrol does
        elif path.is_file():
            total += (path.stat().st_size + 1023) // 1024 * 1024
    return max(total // 1024, 1)


def build_deb(spec: PackageSpec, templates: Path, work: Path, out_dir: Path) -> Path:
    # One package name may come in several versions (a repository keeps older releases).
    root = work / spec.deb_filename.removesuffix(".deb")
    root.mkdir(parents=True)
    lay_out(spec, root, templates)
    size = installed_size_kib(root)
    debian = root / "DEBIAN"
    debian.mkdir()
    (debian / "control").write_text(control_text(spec, size), encoding="utf-8")
    conffiles = sorted(
        "/" + e.path for e in spec.files if e.kind in ("content", "template") and e.path.startswith("etc/")
    )
    if conffiles:
        (debian / "conffiles").write_text("\n".join(conffiles) + "\n", encoding="utf-8")
    for name, text in spec.scripts.items():
        script = debian / name
        script.write_text(maintainer_script(text), encoding="utf-8")
        script.chmod(0o755)
    deb = out_dir / spec.deb_filename
    # --root-owner-group: files belong to root in the package whoever builds it.
    run(["dpkg-deb", "--root-owner-group", "-Zxz", "--build", str(root), str(deb)])
    return deb


def make_key(gnupghome: Path) -> str:
    run([
        "gpg", "--homedir", str(gnupghome), "--batch", "--pinentry-mode", "loopback", "--passphrase", "",
        "--quick-generate-key", KEY_UID, "ed25519", "sign", "never",
    ])
    listing = run(["gpg", "--homedir", str(gnupghome), "--batch", "--with-colons", "--list-secret-keys"]).stdout
    fingerprints = [line.split(":")[9] for line in listing.splitlines() if line.startswith("fpr:")]
    if not fingerprints:
        raise BuildError("gpg made no key")
    return fingerprints[0]


def sign_release(gnupghome: Path, fingerprint: str, directory: Path) -> None:
    base = ["gpg", "--homedir", str(gnupghome), "--batch", "--yes", "--local-user", fingerprint]
    release = str(directory / "Release")
    run([*base, "--armor", "--detach-sign", "--digest-algo", "SHA512", "--output",
         str(directory / "Release.gpg"), release])
    run([*base, "--clearsign", "--digest-algo", "SHA256", "--output", str(directory / "InRelease"), release])


def write_repository(
    debs: Iterable[Path], directory: Path, arch_dir: str, date: str, controls: Mapping[str, str],
) -> None:
    stanzas = []
    for deb in sorted(debs, key=lambda p: p.name):
        shutil.copy2(deb, directory / deb.name)
        stanzas.append(packages_stanza(controls[deb.name], deb.name, deb.read_bytes()))
    packages = "\n".join(stanzas).encode()
    packages_gz = gzip.compress(packages, compresslevel=9, mtime=0)
    (directory / "Packages").write_bytes(packages)
    (directory / "Packages.gz").write_bytes(packages_gz)
    release = release_text({"Packages": packages, "Packages.gz": packages_gz}, arch_dir, date)
    (directory / "Release").write_text(release, encoding="utf-8")


def build(
    out: Path, distros: Sequence[str], arch_dir: str, specs_dir: Path, templates: Path, key_name: str,
    drivers: Path | None = None,
) -> dict[str, object]:
    specs = load_specs(specs_dir)
    per_distro = {d: driver_specs(d, drivers) if drivers is not None else [] for d in distros}
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="aptrepo-") as tmp:
        work = Path(tmp)
        controls: dict[str, str] = {}

        def build_all(group: Sequence[PackageSpec], name: str) -> list[Path]:
            debs_dir = work / "debs" / name
            debs_dir.mkdir(parents=True)
            debs = []
            for spec in group:
                deb = build_deb(spec, templates, work / "roots" / name, debs_dir)
                controls[f"{name}/{deb.name}"] = run(["dpkg-deb", "--field", str(deb)]).stdout
                debs.append(deb)
            return debs

        common = build_all(specs, "common")
        drivers_debs = {d: build_all(group, d) for d, group in per_distro.items()}

        # A short home: gpg-agent's socket path must fit in a sockaddr_un.
        gnupghome = Path(tempfile.mkdtemp(prefix="gpg-", dir="/tmp"))
        try:
            gnupghome.chmod(0o700)
            fingerprint = make_key(gnupghome)
            armored = run(["gpg", "--homedir", str(gnupghome), "--batch", "--armor", "--export", fingerprint]).stdout
            keyring = out / f"{key_name}.gpg"
            with keyring.open("wb") as fh:
                subprocess.run(
                    ["gpg", "--homedir", str(gnupghome), "--batch", "--export", fingerprint],
                    stdout=fh, check=True, env={**os.environ, "LC_ALL": "C"},
                )
            (out / f"{key_name}.asc").write_text(armored, encoding="utf-8")
            date = email.utils.formatdate(usegmt=True)
            for distro in distros:
                directory = out / distro / arch_dir
                if directory.exists():
                    shutil.rmtree(directory)
                directory.mkdir(parents=True)
                own = {deb.name: controls[f"common/{deb.name}"] for deb in common}
                own.update({deb.name: controls[f"{distro}/{deb.name}"] for deb in drivers_debs[distro]})
                write_repository([*common, *drivers_debs[distro]], directory, arch_dir, date, own)
                sign_release(gnupghome, fingerprint, directory)
                # Check the result the way apt will: against the exported key only.
                for args in (["InRelease"], ["Release.gpg", "Release"]):
                    run(["gpgv", "--keyring", str(keyring.resolve()), *args], cwd=directory)
        finally:
            subprocess.run(["gpgconf", "--homedir", str(gnupghome), "--kill", "gpg-agent"],
                           capture_output=True, check=False)
            shutil.rmtree(gnupghome, ignore_errors=True)
    return {
        "out": str(out),
        "repositories": [str(out / d / arch_dir) for d in distros],
        "key": {"fingerprint": fingerprint, "asc": str(out / f"{key_name}.asc"), "gpg": str(keyring)},
        "packages": sorted(f"{s.name}={s.version}" for s in specs),
        "drivers": {d: sorted(f"{s.name}={s.version}" for s in group) for d, group in per_distro.items()},
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--out", required=True, type=Path,
                        help="output directory (created; its repositories are replaced)")
    parser.add_argument("--distro", action="append", dest="distros",
                        help="repository directory name, as NVIDIA names them (debian12, ubuntu2404...); "
                             "repeat for several; default debian12")
    parser.add_argument("--arch-dir", default="x86_64", help="architecture directory (default x86_64)")
    parser.add_argument("--specs", type=Path, default=DEFAULT_SPECS, help="directory of package spec files")
    parser.add_argument("--templates", type=Path, default=DEFAULT_TEMPLATES, help="directory of file templates")
    parser.add_argument("--drivers", type=Path, default=DEFAULT_DRIVERS,
                        help="contents of the driver packages, whose names and branches come from NVIDIA's "
                             "repository table (default drivers/roles.yml)")
    parser.add_argument("--key-name", default="nvidia-test", help="file name (no extension) of the exported public key")
    args = parser.parse_args(argv)
    for tool in ("dpkg-deb", "gpg", "gpgv", "gpgconf"):
        if shutil.which(tool) is None:
            print(f"build.py: {tool} not found; install dpkg and gnupg (make system-deps)", file=sys.stderr)
            return 2
    try:
        summary = build(args.out, args.distros or ["debian12"], args.arch_dir, args.specs, args.templates,
                        args.key_name, args.drivers)
    except (SpecError, BuildError) as exc:
        print(f"build.py: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
