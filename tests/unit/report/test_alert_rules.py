"""monitoring/gpuhost.rules.yml against what the textfile writer (report/prometheus.py) writes.

The rules and the writer are separate files that name the same series: a name or label renamed on one side
only would leave an alert that never fires, and promtool's own tests (monitoring/tests, `make alerts`) would
not notice, since they feed the series the rules expect. Here every series, label and label value the rules
name is checked against the writer and the catalog, and every alert against its promtool tests.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.catalog import CATALOG
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.finding import SEVERITIES
from ansible_collections.gpuhost.gpu.plugins.module_utils.report import prometheus

from tests.paths import ROOT
from tests.unit.report import exposition

RULES = ROOT / "monitoring" / "gpuhost.rules.yml"
RULE_TESTS = sorted((ROOT / "monitoring" / "tests").glob("*.yml"))
SELECTOR = re.compile(r"\b(gpuhost_[a-z0-9_]+)\s*(?:\{([^}]*)\})?")
MATCHER = re.compile(r'(\w+)\s*(=~|!~|!=|=)\s*"([^"]*)"')
GROUPING = re.compile(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)")


def _rules() -> list[dict[str, Any]]:
    return [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]


ALERTS = [rule for rule in _rules() if "alert" in rule]


def _selectors() -> list[tuple[str, dict[str, tuple[str, str]]]]:
    """Every gpuhost_ series a rule selects, with its label matchers (label -> (operator, value))."""
    found = []
    for rule in _rules():
        for name, matchers in SELECTOR.findall(rule["expr"]):
            found.append((name, {label: (op, value) for label, op, value in MATCHER.findall(matchers)}))
    return found


def _values(op: str, value: str) -> set[str]:
    """The label values a matcher names: the literal, or each alternative of a regular expression."""
    return set(value.split("|")) if op in ("=~", "!~") else {value}


def _written_labels() -> dict[str, set[str]]:
    """Label names per series, from the writer's output for a report that has every labelled series."""
    p2p = [["X", "OK"], ["NS", "X"]]
    report = {
        "summary": {"verdict": "fit, with warnings", "gpu_count": 2, "virtualization": "kvm"},
        "findings": [{"id": "link_trained_lower", "severity": "warning"}],
        "gpus": {"driver_version": "580.95.05", "cuda_driver_version": "13.0",
                 "devices": [{"index": i, "pci_bus_id": f"0000:0{i + 1}:00.0", "name": "GPU", "vbios_version": "1",
                              "pcie": {"width_current": 8, "width_max": 16, "gen_current": 4, "gen_max": 5}}
                             for i in range(2)]},
        "p2p": {capability: p2p for capability in prometheus.CAPABILITIES},
        "drift": {"since": "2025-01-01 00:00 UTC", "changes": [{"item": "link"}]},
    }
    samples, _help, _types = exposition.parse(prometheus.textfile(report, 1_700_000_000))
    labels: dict[str, set[str]] = {}
    for name, label_set in samples:
        labels.setdefault(name, set()).update(label for label, _value in label_set)
    return labels


def _made_ids(path: Path) -> set[str]:
    """The finding ids a rules file names: its string literals that are catalog ids (make's first argument, or the
    value a helper passes on to it)."""
    tree = ast.parse(path.read_text())
    return {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and node.value in CATALOG}


def test_every_series_the_rules_read_is_one_the_writer_writes() -> None:
    unknown = sorted({name for name, _ in _selectors()} - set(prometheus.SERIES))
    assert not unknown, f"the alert rules read series report/prometheus.py never writes: {unknown}"


def test_every_label_the_rules_match_is_one_the_writer_writes() -> None:
    written = _written_labels()
    wrong = [(name, label) for name, matchers in _selectors() for label in matchers
             if label not in written.get(name, set())]
    assert not wrong, f"labels the writer does not put on these series: {wrong}; it writes {written}"
    # Joins name the series' own labels to leave out: each must be a label some gpuhost_ series has.
    every_label = set().union(*written.values())
    for rule in _rules():
        for labels in GROUPING.findall(rule["expr"]):
            named = {label.strip() for label in labels.split(",") if label.strip()}
            assert named <= every_label, f"{rule.get('alert') or rule.get('record')}: {named - every_label}"


@pytest.mark.parametrize(("label", "known"), [
    ("severity", set(SEVERITIES)),
    ("capability", set(prometheus.CAPABILITIES)),
    ("id", set(CATALOG)),
])
def test_every_label_value_the_rules_match_exists(label: str, known: set[str]) -> None:
    named = {v for _name, matchers in _selectors() if label in matchers for v in _values(*matchers[label])}
    assert named, f"no rule matches on {label}: this check checks nothing"
    assert named <= known, f"{label} values the writer never writes: {sorted(named - known)}"


def test_the_health_alert_covers_exactly_the_gpu_health_findings() -> None:
    """The ids of rules/health.py (catalog category health) and rules/gpu_usable.py: a new health rule must be
    added to the recording rule, or its finding pages as a plain critical finding or not at all."""
    rules_dir = ROOT / "plugins" / "module_utils" / "rules"
    health = {i for i, entry in CATALOG.items() if entry.category == "health" and not entry.retired}
    expected = health | _made_ids(rules_dir / "gpu_usable.py")
    assert _made_ids(rules_dir / "health.py") <= expected
    recorded = next(rule for rule in _rules() if rule.get("record") == "gpuhost:gpu_health_finding")
    in_record = {v for name, matchers in SELECTOR.findall(recorded["expr"])
                 for label, op, value in MATCHER.findall(matchers) if label == "id" for v in _values(op, value)}
    assert in_record == expected, (f"missing: {sorted(expected - in_record)}; "
                                   f"not GPU health: {sorted(in_record - expected)}")


@pytest.mark.parametrize("alert", ALERTS, ids=lambda rule: rule["alert"])
def test_every_alert_has_a_severity_and_says_what_to_run(alert: dict[str, Any]) -> None:
    assert alert.get("labels", {}).get("severity"), "no severity label"
    annotations = alert.get("annotations", {})
    assert annotations.get("summary") and annotations.get("description"), "summary and description are needed"
    playbooks = re.findall(r"playbooks/[a-z_]+\.yml", annotations["description"])
    assert playbooks, "the description names no playbook to run"
    for playbook in playbooks:
        assert (ROOT / playbook).is_file(), f"{playbook} does not exist"


def test_every_alert_fires_in_a_promtool_test() -> None:
    fired, quiet = set(), set()
    for path in RULE_TESTS:
        for test in yaml.safe_load(path.read_text())["tests"]:
            for case in test.get("alert_rule_test", []):
                (fired if case.get("exp_alerts") else quiet).add(case["alertname"])
    names = {alert["alert"] for alert in ALERTS}
    assert names - fired == set(), f"alerts no promtool test fires: {sorted(names - fired)}"
    assert names - quiet == set(), f"alerts no promtool test checks silent: {sorted(names - quiet)}"
