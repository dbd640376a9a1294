"""Keeps the bytecode Python compiles for modules it imports from zip archives, so that the next import of the
same source loads it instead of compiling it again. Test environments only.

Why: every Ansible module run imports ansible.module_utils and the module's own module_utils from the AnsiballZ
payload, a zip in a new temporary directory each time, from which Python can neither read nor write bytecode: it
compiles them all again, about 0.1 s of CPU a run, thousands of runs in the molecule scenarios and the fleet
tests. The cache is keyed by the interpreter's bytecode magic number, the member's path inside the archive and its
source, so it only ever returns what compiling that source would; the returned code carries this archive's path, as
freshly compiled code would. Nothing else of the import changes.

Loaded by this directory's sitecustomize.py at every interpreter start that has the directory on PYTHONPATH: the
molecule containers (each scenario's platforms mount it at /opt/gpuhost-zipcache and set PYTHONPATH) and the fleet
tests' ansible-playbook runs (tests/fleet/conftest.py). The cache is a directory per user under $TMPDIR (default
/var/tmp), which only that user may write; a cache that cannot be read or written is compiled around, never an
error. What compiling needs is imported only when a member of a zip is compiled, not at every start.
"""

from __future__ import annotations

import os
import types
import zipimport


def _with_filename(code: types.CodeType, filename: str) -> types.CodeType:
    consts = tuple(_with_filename(c, filename) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)


def _cache_dir() -> str | None:
    directory = os.path.join(os.environ.get("TMPDIR") or "/var/tmp", f"gpuhost-zipcache-{os.geteuid()}")
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        info = os.stat(directory)
    except OSError:
        return None
    # Only a directory this user owns and nobody else may write: its bytecode is run as this user.
    return directory if info.st_uid == os.geteuid() and not info.st_mode & 0o022 else None


def install() -> None:
    compile_source = getattr(zipimport, "_compile_source", None)  # CPython's: compiles a .py member of the archive
    if compile_source is None or getattr(compile_source, "gpuhost_zipcache", False):
        return

    directories: list[str | None] = []  # the cache directory, looked up at the first compile of this process

    def cached(pathname: str, source: bytes) -> types.CodeType:
        import hashlib
        import importlib.util
        import marshal

        if not directories:
            directories.append(_cache_dir())
        directory = directories[0]
        if directory is None:
            return compile_source(pathname, source)
        member = pathname.rpartition(".zip")[2]  # the same in every payload; the archive's path is not
        key = hashlib.sha256(importlib.util.MAGIC_NUMBER + member.encode() + b"\0" + source).hexdigest()
        path = os.path.join(directory, key)
        try:
            with open(path, "rb") as kept:
                return _with_filename(marshal.load(kept), pathname)
        except (OSError, EOFError, ValueError, TypeError):
            pass
        code = compile_source(pathname, source)
        try:
            partial = f"{path}.{os.getpid()}"
            with open(partial, "wb") as kept:
                marshal.dump(code, kept)
            os.replace(partial, path)
        except OSError:
            pass
        return code

    cached.gpuhost_zipcache = True  # type: ignore[attr-defined]
    zipimport._compile_source = cached  # type: ignore[attr-defined]


# Loaded at every interpreter start: never break one (and import nothing more, contextlib included).
try:  # noqa: SIM105
    install()
except Exception:
    pass
