"""tensor_parallel_gpus naming a GPU the host does not have: a critical finding, not a silently smaller group."""

from __future__ import annotations

from ansible_collections.gpuhost.gpu.plugins.module_utils.gate import decide as gate
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.tp_group import index_ranges

from tests.unit.captures import H100, MICROVM, audit, capture


def tp_findings(facts):
    return [f for f in facts["findings"] if f["id"] == "tensor_parallel_gpus_not_on_host"]


def test_an_index_the_host_lacks_is_a_critical_finding_naming_the_host_gpus():
    facts = audit(capture(H100), tensor_parallel_gpus=[0, 1, 2, 9])
    [finding] = tp_findings(facts)
    assert finding["severity"] == "critical"
    assert finding["summary"].startswith("tensor_parallel_gpus names GPU 9, which this host does not have "
                                         "(it has GPUs 0-7): P2P and NUMA were judged on 0, 1, 2 only")
    assert finding["evidence"] == {"tensor_parallel_gpus": [0, 1, 2, 9], "not_on_host": [9],
                                   "host_gpus": list(range(8)), "judged": [0, 1, 2]}
    assert "only indexes this host has (0-7)" in finding["remedy"]


def test_indexes_the_host_has_or_none_given_make_no_finding():
    assert tp_findings(audit(capture(H100), tensor_parallel_gpus=[0, 1, 2, 3])) == []
    assert tp_findings(audit(capture(H100))) == []


def test_a_host_without_a_gpu_list_has_nothing_to_compare_with():
    # no_nvidia_gpu says what is wrong there; a second finding about the group would say nothing more.
    assert tp_findings(audit(capture(MICROVM), tensor_parallel_gpus=[0, 1])) == []


def test_the_gate_blocks_on_it():
    facts = audit(capture(H100), tensor_parallel_gpus=[0, 1, 2, 9])
    model = {"name": "Llama-3-70B-Instruct", "weights_gib": 131.5, "tensor_parallel_size": 8}
    result = gate.decide(facts, model)
    assert result["verdict"] == "block"
    assert "tensor_parallel_gpus_not_on_host" in [r["id"] for r in result["reasons"]]


def test_index_ranges_reads_as_a_person_writes_them():
    assert index_ranges([0, 1, 2, 3, 5, 7, 8]) == "0-3, 5, 7, 8"
    assert index_ranges([]) == ""
