"""The host's action reaches every view as the one record holds it: the host Markdown, the finding blocks, the
fleet row and the metrics, read back as a person or a scraper reads them."""

from __future__ import annotations

import re

from ansible_collections.gpuhost.gpu.plugins.module_utils.report import render
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.prometheus import textfile

from tests.unit import captures


def test_the_views_show_the_action_of_a_sick_host() -> None:
    facts = captures.audited(captures.H100_SICK)
    assert facts["summary"]["action"] == "reset_gpu"
    markdown = render.host_markdown("h", facts)
    assert re.search(r"^\*\*Action: reset_gpu\*\*", markdown, re.MULTILINE)
    assert markdown.count("\nAction: reset_gpu\n") == 3  # xid_needs_reset, ecc_uncorrectable_errors, row remap
    assert re.search(r"^\| h \| this run \| unfit \| .* \| reset_gpu \|$", render.fleet_markdown({"h": facts}),
                     re.MULTILINE)
    metrics = textfile(facts, 0)
    assert 'gpuhost_action{action="reset_gpu"} 1' in metrics
    assert len(re.findall(r"^gpuhost_action\{.*\} 1$", metrics, re.MULTILINE)) == 1


def test_a_healthy_host_asks_nothing_in_every_view() -> None:
    facts = captures.audited(captures.H100)
    assert re.search(r"^\*\*Action: none\*\*", render.host_markdown("h", facts), re.MULTILINE)
    assert 'gpuhost_action{action="none"} 1' in textfile(facts, 0)


def test_a_report_older_than_actions_has_no_action_series() -> None:
    facts = captures.audited(captures.H100)
    del facts["summary"]["action"]
    assert "gpuhost_action{" not in textfile(facts, 0)
    assert "**Action: not stated**" in render.host_markdown("h", facts)
