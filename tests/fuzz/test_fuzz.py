"""Seeded mutation fuzzing: every real sample (tests/fuzz/corpus.py) mutated (tests/fuzz/mutate.py) through
every parser and analysis entry point (tests/fuzz/entry_points.py); only the declared error may escape, and
no case may use more than CASE_SECONDS of CPU time (tests/cpu_limit.py: CPU, not wall-clock, time, so that a
loaded machine slows a case without failing it).

``make test`` runs a fixed slice (FUZZ_CASES cases per entry point, seed FUZZ_SEED); ``make fuzz`` a longer
one. A crash names its entry point, seed and case, which rebuild its input exactly:
``FUZZ_SEED=<seed> FUZZ_CASES=<case + 1> pytest tests/fuzz -k '<entry point>'``. FUZZ_REPORT=<file> appends
one JSON line per entry point (cases, crashes) for the record."""

from __future__ import annotations

import json
import os
import random
import traceback

import pytest

from tests.cpu_limit import CpuTimeout, cpu_limit
from tests.fuzz.corpus import samples
from tests.fuzz.entry_points import EntryPoint, entry_points
from tests.fuzz.mutate import as_text, mutate


def _cases(given: str) -> int:
    if not given.isdigit():
        raise pytest.UsageError(f"FUZZ_CASES: expected a whole number of cases per entry point, such as 5000; found "
                                f"{given!r}")
    return int(given)


CASES = _cases(os.environ.get("FUZZ_CASES", "200"))
SEED = os.environ.get("FUZZ_SEED", "27")
# A parser of a few hundred KiB of text takes milliseconds of CPU; seconds mean a runaway regex or loop.
CASE_SECONDS = 10.0
SHOWN = 5


def case_input(entry: EntryPoint, case: int) -> tuple[str, bytes | str]:
    """(the sample's origin, the mutated input) of one case: the same for the same seed, entry and case."""
    rng = random.Random(f"{SEED}:{entry.name}:{case}")
    corpus = samples()
    origin, data = rng.choice(corpus)
    data = mutate(rng, data, rng.choice(corpus)[1])
    return origin, (data if entry.takes == "bytes" else as_text(rng, data))


def test_every_parse_function_is_fuzzed() -> None:
    import importlib
    import inspect

    from tests.fuzz.entry_points import PACKAGE, PARSERS

    fuzzed = {entry.name for entry in entry_points()}
    for path in PARSERS.glob("*.py"):
        module = importlib.import_module(f"{PACKAGE}.{path.stem}")
        for name, function in vars(module).items():
            if name.startswith("parse_") and inspect.isfunction(function) and function.__module__ == module.__name__:
                assert f"parsers.{path.stem}.{name}" in fuzzed, (
                    f"{path.stem}.{name} is not fuzzed: give it a call in tests/fuzz/entry_points.py CALLS")


@pytest.mark.parametrize("entry", entry_points(), ids=lambda entry: entry.name)
def test_only_the_declared_error_escapes(entry: EntryPoint) -> None:
    crashes = []
    for case in range(CASES):
        origin, data = case_input(entry, case)
        try:
            with cpu_limit(CASE_SECONDS):
                entry.call(data)
        except entry.declared:
            pass
        except (Exception, CpuTimeout) as exc:  # what the fuzzer is for: anything else is a crash
            crashes.append(f"case {case} (from {origin}): {type(exc).__name__}: {str(exc)[:200]}\n"
                           + "".join(traceback.format_tb(exc.__traceback__)[-2:]))
    report = os.environ.get("FUZZ_REPORT")
    if report:
        with open(report, "a", encoding="utf-8") as handle:
            record = {"entry": entry.name, "seed": SEED, "cases": CASES, "crashes": len(crashes)}
            handle.write(json.dumps(record) + "\n")
    assert not crashes, (f"{len(crashes)} of {CASES} cases of {entry.name} (seed {SEED}) raised an undeclared error "
                         f"or hung; the first {SHOWN}:\n" + "\n".join(crashes[:SHOWN]))
