"""Every finding id of the catalog must fire in at least one unit test.

The catalog's ``make`` is wrapped before any project module imports it, so every finding
made while the unit tests run is recorded by id. When the whole of tests/unit ran (not a
selection), the session fails if a catalog id that is not retired never fired: a rule
without a test that makes it fire is a rule nobody has seen work.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings import catalog

FIRED: set[str] = set()
UNIT = Path(__file__).resolve().parent


def _recording(make: Any) -> Any:
    @functools.wraps(make)
    def wrapper(finding_id: str, *args: Any, **kwargs: Any) -> Any:
        FIRED.add(finding_id)
        return make(finding_id, *args, **kwargs)

    return wrapper


catalog.make = _recording(catalog.make)

_RAN_FILES: set[Path] = set()


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    _RAN_FILES.update(Path(str(item.path)).resolve() for item in items)


def never_fired() -> list[str]:
    return sorted(i for i, entry in catalog.CATALOG.items() if not entry.retired and i not in FIRED)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    every_file = set(UNIT.rglob("test_*.py"))
    if not every_file <= _RAN_FILES or session.config.option.keyword or session.config.option.markexpr:
        return  # a selection: it need not fire every id
    if session.testsfailed or session.shouldstop:
        return  # the failures say more than the missing ids
    missing = never_fired()
    if missing:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        message = (f"findings catalog: {len(missing)} id(s) fired in no unit test: {', '.join(missing)}. "
                   "Add a test that makes each fire (or mark it retired in findings/catalog.py).")
        if reporter is not None:
            reporter.write_line(message, red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
