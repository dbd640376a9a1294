"""Loading a Python file that is no importable module (a script, a filter plugin, a role's file) under a name."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType


def load_source(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
