"""The host report's DCGM section: the tests that did not pass with DCGM's words, or why there is no verdict."""

from __future__ import annotations

from ansible_collections.gpuhost.gpu.plugins.module_utils.report.health_md import health_tables

from tests.unit.audit.test_dcgm_diag import from_material


def dcgm_table(name: str):
    return next(t for t in health_tables(from_material(name)) if t[0] == "DCGM diagnostic")


def test_a_failed_test_is_a_row_with_its_gpu_and_message() -> None:
    _heading, before, headers, rows = dcgm_table("4.x_r2_memory_fail_gpu2.json")
    assert "DCGM 4.2.3" in before[0] and "1 fail" in before[0] and "1 skip" in before[0]
    assert headers[-1] == "DCGM's message"
    [row] = rows
    assert row[:4] == ["Hardware", "memory", "fail", "2"] and "[DCGM error 17]" in row[4]


def test_no_verdict_says_why() -> None:
    _heading, before, headers, rows = dcgm_table("3.x_r3_t400_skips_cut.txt")
    assert "no verdict" in before[0] and headers == ["Why"] and "cut short" in rows[0][0]


def test_a_run_that_passed_says_so_in_one_row() -> None:
    assert dcgm_table("4.x_r1_pass.json")[3] == [["-", "every test run", "pass or skip", "-", "-"]]


def test_the_fabric_manager_s_log_errors_are_said_escaped_above_its_table() -> None:
    from tests.unit.rules.test_fabric_manager_log import from_material as fabric_material

    found = fabric_material("log_8xH200_config-invalid.txt", with_gpus=True)
    _heading, before, headers, rows = next(t for t in health_tables(found) if t[0] == "NVSwitch fabric")
    assert before == ["The fabric manager's log in the material: config_invalid: &lt;node ip>: fabric manager "
                      "config file item: FABRIC_NODE_CONFIG_FILE has an invalid value"]
    assert headers[-1] == "Package" and rows == [[None, "not read", "-"]]
