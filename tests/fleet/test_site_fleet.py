"""site.yml over a fleet of captures: the audit, benchmark-from-logs and gate phases.

Every host of tests/fleet/hosts.yml replays a capture of tests/captures (and, where it has them,
NCCL and P2P probe logs of tests/fixtures); the verdicts and launch settings are asserted per host.
The playbook runs once in check mode for the verdicts, and twice for real (reports written) with the
two hosts of tests/fleet/lost.yml added, one unreachable and one whose audit fails: fleet.md and the
summary must keep every host, and the second run must change nothing. Its JSON output is the evidence.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
INVENTORY = ROOT / "tests" / "fleet" / "hosts.yml"
LOST = ROOT / "tests" / "fleet" / "lost.yml"
FLEET = {"incident-guest", "incident-guest-accepted", "pro6000-baremetal", "pro6000-tp2-unproven", "h100-baremetal",
         "h100-unproven", "rtx4090-workstation", "a6000-i440fx-guest", "microvm-no-gpu", "pve-no-clique",
         "pve-clique-ok", "pve-vfio"}
# The unreachable host's last report, from an earlier run: fleet.md shows it with this date.
LAST_REPORT_MTIME = 1767323045  # 2026-01-02 03:04:05 UTC
# The fleet runs SGLang 0.5.10.post1, whose own defaults on SM120 are trtllm for both DSA backends (with the fp8
# KV cache it picks there): the known-good table adds no backend flag (gate/known_good.py).
INCIDENT_ARGS = ["--tp", "8", "--disable-custom-all-reduce"]


def ansible_playbook() -> str:
    found = shutil.which("ansible-playbook", path=os.pathsep.join([str(Path(sys.executable).parent),
                                                                    os.environ.get("PATH", "")]))
    if not found:
        pytest.fail("ansible-playbook not found next to this Python or on PATH: run `make venv` first")
    return found


def site(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
           "ANSIBLE_NOCOLOR": "1"}
    return subprocess.run([ansible_playbook(), str(ROOT / "site.yml"), "--tags", "audit,bench,gate", *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def fleet(site_check: dict[str, Any]) -> dict[str, Any]:
    """The walkthrough in check mode (tests/fleet/conftest.py), which the walkthrough's own test reads too."""
    assert site_check["rc"] == 0, f"site.yml failed on the fleet: {site_check['output']['stats']}"
    return site_check


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two real runs over the fleet and tests/fleet/lost.yml, reports written; the unreachable host has an
    old report."""
    reports = tmp_path_factory.mktemp("written")
    last = reports / "lost-gpu-host.json"
    last.write_text(json.dumps({"host": "lost-gpu-host", "summary": {
        "verdict": "fit", "virtualization": "bare metal", "gpu_count": 8, "gpu_models": ["NVIDIA H100 80GB HBM3"],
        "p2p": "ok", "worst_finding": None}, "gpus": {"driver_version": "550.127.05"}}))
    os.utime(last, (LAST_REPORT_MTIME, LAST_REPORT_MTIME))
    args = ("-i", str(INVENTORY), "-i", str(LOST), "-e", f"gpuhost_report_dir={reports}")
    runs = []
    for number in range(2):
        # The second run under load, as in `make test` beside the other suites: there the idempotence check once
        # failed, the ssh race of the unreachable host (Connection refused or Broken pipe) turning the other way.
        with cpu_load(1 if number else 0):
            run = site(*args)
        # The lost hosts fail the run (unreachable, failed), after every phase ran for the others.
        assert run.returncode != 0 and run.stdout.startswith("{"), f"{run.stdout[-6000:]}\n{run.stderr[-3000:]}"
        runs.append(json.loads(run.stdout))
    return {"first": runs[0], "second": runs[1], "reports": reports}


def idle_cores() -> int:
    """The cores the machine leaves idle: the core count less the last minute's load average, at least none."""
    return max(0, (os.cpu_count() or 1) - round(os.getloadavg()[0]))


@contextlib.contextmanager
def cpu_load(processes: int) -> Iterator[None]:
    """Up to ``processes`` busy loops beside the block, each a core's worth of load, but no more than the cores the
    machine leaves idle: under `make test` the other suites already load every core, where a busy loop would only
    take CPU from them."""
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(min(processes, idle_cores()))]
    try:
        yield
    finally:
        for process in busy:
            process.kill()
            process.wait()


def task_results(fleet: dict[str, Any], name: str) -> dict[str, dict[str, Any]]:
    """Per host, the result of the task with this name (its last run)."""
    results: dict[str, dict[str, Any]] = {}
    for play in fleet["output"]["plays"]:
        for task in play["tasks"]:
            # Role tasks are named "<role> : <task>".
            if task["task"]["name"].split(" : ")[-1] == name:
                results.update(task["hosts"])
    return results


def gate(fleet: dict[str, Any], host: str) -> dict[str, Any]:
    return task_results(fleet, "Keep the verdict for the deployment")[host]["ansible_facts"]["deployment_gate_result"]


def audit(fleet: dict[str, Any], host: str) -> dict[str, Any]:
    return task_results(fleet, "Audit the GPU host")[host]["ansible_facts"]["gpu_host"]


def ids(items: list[dict[str, Any]]) -> set[str]:
    return {item["id"] for item in items}


def test_check_mode_writes_no_report_and_changes_no_host(fleet):
    # Check mode creates not even the report directory.
    assert not fleet["reports"].exists() or list(fleet["reports"].iterdir()) == []
    recap = fleet["output"]["stats"]
    assert set(recap) == FLEET
    assert all(stats["failures"] == 0 and stats["unreachable"] == 0 for stats in recap.values())


def test_incident_guest_is_blocked_at_tp8_without_p2p(fleet):
    result = gate(fleet, "incident-guest")
    assert result["verdict"] == "block"
    assert "p2p_not_supported" in ids(result["reasons"])
    # Derived even when blocked: what it would take, and where the fix is.
    assert result["launch"]["args"] == INCIDENT_ARGS
    link = result["proxmox_link"]
    assert (link["proxmox_host"], link["vmid"]) == ("pve-no-clique", 120)
    assert "x-nv-gpudirect-clique" in link["remedies"]["p2p_not_supported"]


def test_incident_guest_passes_with_the_risk_accepted_and_p2p_off(fleet):
    result = gate(fleet, "incident-guest-accepted")
    assert result["verdict"] == "pass"
    assert "p2p_not_supported" in ids(result["accepted"])
    launch = result["launch"]
    assert launch["args"] == INCIDENT_ARGS
    assert launch["env"]["NCCL_P2P_DISABLE"] == "1"
    assert launch["custom_all_reduce"] is False
    # The incident's log is a transfer test laid out as all_reduce_perf: its 8-GPU "all-reduce" (13.7 us) is no
    # slower than one copy of the probe (13.9 us), so the gate refuses it and estimates each all-reduce as
    # 2(8-1) = 14 ring hops of 13.9 us; 157 all-reduces per token (78 layers x 2 and the embedding's) make
    # about 30.6 ms per token, a third of the 90 ms the incident measured (11 tok/s): communication is no
    # negligible share here. NCCL does every all-reduce on this host.
    floor = launch["communication_ceiling"]
    assert floor["basis"] == "estimated_from_pair_latency"
    assert floor["comm_us_per_token"] == pytest.approx(157 * 14 * 13.9)
    assert launch["communication_ceiling_tok_s"] == 32.7
    assert "transfer test, not an all-reduce" in " ".join(result["notes"])
    assert ("communication ceiling 32.7 tok/s single stream, 30.6 ms of all-reduce per token (estimated: 14 ring "
            "steps at TP 8") in result["summary"]
    assert launch["all_reduce"]["path"] == "nccl" and launch["communication_ceiling_basis"] == "nccl"
    # Its replayed --help is checked: nothing to change.
    assert launch["flag_check"] == {"checked": True, "translated": [], "refused": []}


def test_bare_metal_pro6000_at_tp8_runs_nccl_as_sglang_would(fleet):
    result = gate(fleet, "pro6000-baremetal")
    launch = result["launch"]
    assert result["verdict"] == "pass"
    # P2P is proven, so the gate forbids nothing; SGLang itself turns custom all-reduce off at 8 PCIe GPUs.
    assert launch["p2p"]["state"] == "proven" and "--disable-custom-all-reduce" not in launch["args"]
    assert launch["custom_all_reduce"] is False
    assert launch["all_reduce"]["path"] == "nccl" and launch["all_reduce"]["off_by"] == "sglang"
    assert launch["all_reduce"]["nvlink_mesh"] is False
    assert "custom all-reduce on" not in result["summary"]
    assert "custom all-reduce off (SGLang turns it off: 8 GPUs without an NVLink mesh); NCCL does every " \
           "all-reduce" in result["summary"]
    assert "NCCL_P2P_DISABLE" not in launch["env"]
    # With P2P a copy takes 1 us: 157 all-reduces of 14 hops make about 2.2 ms per token, small next to the
    # 20 ms per token of the 50 tok/s these GPUs decode GLM-5 at on bare metal.
    floor = launch["communication_ceiling"]
    assert floor["basis"] == "estimated_from_pair_latency"
    assert floor["comm_us_per_token"] == pytest.approx(157 * 14 * 1.0)


def test_on_0_5_10_post1_the_table_adds_no_backend_flag_sglangs_defaults_do_it(fleet):
    result = gate(fleet, "pro6000-baremetal")
    assert result["launch"]["args"] == ["--tp", "8"]
    assert result["launch"]["flag_check"]["translated"] == []
    assert [s["id"] for s in result["launch"]["known_good_source"]] == ["sm120-glm5-dsa-trtllm-by-default"]


def test_two_pcie_gpus_with_p2p_claimed_not_proven_get_sglangs_own_p2p_check(fleet):
    result = gate(fleet, "pro6000-tp2-unproven")
    launch = result["launch"]
    assert result["verdict"] == "pass"
    assert launch["p2p"]["state"] == "claimed"
    assert launch["args"] == ["--tp", "2", "--enable-p2p-check"]
    assert launch["all_reduce"]["p2p_check"] == "cuda_ipc" and launch["custom_all_reduce"] is None
    assert any(note.startswith("P2P between the 2 chosen GPUs is claimed by the driver but not proven: "
                               "--enable-p2p-check added") for note in result["notes"])
    # No --help in this replay: said, not assumed.
    assert launch["flag_check"]["checked"] is False


def test_h100_passes_with_custom_all_reduce_on(fleet):
    result = gate(fleet, "h100-baremetal")
    assert result["verdict"] == "pass"
    assert result["launch"]["args"] == ["--tp", "4"]
    assert result["launch"]["gpus"] == [0, 1, 2, 3]
    assert result["launch"]["custom_all_reduce"] is True
    assert result["launch"]["all_reduce"]["path"] == "custom"
    assert result["launch"]["all_reduce"]["nvlink_mesh"] is True
    assert result["summary"].endswith("custom all-reduce on (P2P proven)")


def test_h100_without_a_probe_lets_sglang_test_cuda_ipc(fleet):
    # An NVLink mesh whose P2P the driver claims: SGLang's own check (--enable-p2p-check) decides at start-up.
    result = gate(fleet, "h100-unproven")
    assert result["verdict"] == "pass"
    assert result["launch"]["custom_all_reduce"] is None
    assert result["launch"]["args"] == ["--tp", "4", "--enable-p2p-check"]
    assert result["launch"]["all_reduce"]["p2p_check"] == "cuda_ipc"


def test_consumer_gpus_without_p2p_serve_a_small_model_on_one_gpu(fleet):
    result = gate(fleet, "rtx4090-workstation")
    assert result["verdict"] == "pass"
    assert result["launch"]["tensor_parallel_size"] == 1
    # P2P findings do not matter at TP1.
    assert "p2p_not_supported" in ids(result["resolved"])


def test_i440fx_guest_is_blocked_with_the_machine_type(fleet):
    result = gate(fleet, "a6000-i440fx-guest")
    assert result["verdict"] == "block"
    assert {"p2p_not_supported", "qemu_machine_i440fx"} <= ids(result["reasons"])


def test_a_host_without_gpu_is_blocked(fleet):
    result = gate(fleet, "microvm-no-gpu")
    assert result["verdict"] == "block"
    assert "no_nvidia_gpu" in ids(result["reasons"])
    assert result["launch"]["tensor_parallel_size"] is None


def test_proxmox_hosts_are_audited_not_gated(fleet):
    assert not {"pve-no-clique", "pve-clique-ok", "pve-vfio"} & set(task_results(fleet, "Keep the verdict for the "
                                                                                      "deployment"))
    bad = ids(audit(fleet, "pve-no-clique")["findings"])
    assert {"proxmox_vm_no_clique", "proxmox_vm_hidden"} <= bad
    good = {f["id"] for f in audit(fleet, "pve-clique-ok")["findings"] if f["severity"] in ("critical", "warning")}
    assert not good & {"proxmox_vm_no_clique", "proxmox_vm_hidden", "proxmox_vm_not_q35", "proxmox_vm_no_pcie"}


# ---------------------------------------------------------------------------
# The written runs: fleet.md and the summary lose no host; a re-run changes nothing


def fleet_rows(reports: Path) -> dict[str, str]:
    """fleet.md's table: host -> its whole row."""
    rows = [line for line in (reports / "fleet.md").read_text().splitlines()
            if line.startswith("| ") and not line.startswith("| Host |")]
    return {row.split(" | ")[0][2:]: row for row in rows}


def test_the_runs_reach_every_host_but_the_lost_ones(written):
    recap = written["first"]["stats"]
    assert set(recap) == FLEET | {"lost-gpu-host", "broken-capture-host"}
    assert recap["lost-gpu-host"]["unreachable"] == 1 and recap["broken-capture-host"]["failures"] == 1
    assert all(recap[host]["failures"] == 0 and recap[host]["unreachable"] == 0 for host in FLEET)


def test_fleet_md_after_the_benchmark_lists_every_host_of_the_inventory(written):
    # The benchmark phase, which runs on gpu_hosts only, wrote fleet.md last: it kept the Proxmox nodes
    # and the GPU-less host that it does not benchmark, and the hosts the run lost.
    rows = fleet_rows(written["reports"])
    assert set(rows) == FLEET | {"lost-gpu-host", "broken-capture-host"}
    assert all("| this run |" in rows[host] for host in FLEET)
    # A hypervisor's verdict is about its VMs' configs, and the table says what each verdict judges.
    assert "| pve-no-clique | this run | unfit | hypervisor |" in rows["pve-no-clique"]
    assert "| rtx4090-workstation | this run | unfit | TP over all 4 GPUs |" in rows["rtx4090-workstation"]
    assert "critical: no_nvidia_gpu" in rows["microvm-no-gpu"]


def test_an_unreachable_host_keeps_its_last_report_with_its_date(written):
    reports = written["reports"]
    row = fleet_rows(reports)["lost-gpu-host"]
    assert row.startswith("| lost-gpu-host | unreachable, last report 2026-01-02 03:04 UTC | fit | TP over 8 GPUs | "
                          "8 x NVIDIA H100")
    text = (reports / "fleet.md").read_text()
    header = text.splitlines()[2]
    assert header.startswith("14 host(s): ") and header.endswith("; 1 unreachable, 1 failed in this run (rows from "
                                                                  "their last report).")
    # The reason is Ansible's, in one of two wordings by timing ("Connection refused", or "Broken pipe" when ssh
    # ends before Ansible's write to it): the one the first run recorded, which the second kept.
    assert "- lost-gpu-host: unreachable: " in text and "127.0.0.1" in text
    # Its report is left untouched, date included.
    assert (reports / "lost-gpu-host.json").stat().st_mtime == LAST_REPORT_MTIME
    assert not (reports / "lost-gpu-host.md").exists()


def test_a_host_whose_audit_failed_is_listed_with_the_reason(written):
    row = fleet_rows(written["reports"])["broken-capture-host"]
    assert row.startswith("| broken-capture-host | failed, no report yet | - |")
    assert "- broken-capture-host: failed: cannot read the capture " in (written["reports"] / "fleet.md").read_text()


def test_the_summary_names_the_hosts_the_run_lost(written):
    lost = task_results({"output": written["first"]}, "Name the hosts this run lost on the way")
    lines = next(iter(lost.values()))["msg"]
    assert len(lines) == 2
    assert any(line.startswith("lost-gpu-host: UNREACHABLE in the audit: ") for line in lines)
    assert any(line.startswith("broken-capture-host: FAILED in the audit: cannot read the capture") for line in lines)


def test_a_replayed_host_without_saved_outputs_says_why_nothing_was_measured(written):
    # The host replays a capture: a probe or a sweep here would measure this machine under its name. Before the
    # replay rule they ran, failed for want of torch, and left bench_nccl_not_run and bench_probe_not_run.
    text = (written["reports"] / "h100-unproven.md").read_text()
    assert "bench_nccl_not_run" not in text and "bench_probe_not_run" not in text
    line = task_results({"output": written["first"]}, "Say what the benchmark found")["h100-unproven"]["msg"]
    assert "findings: none; NCCL benchmark not run live: the host replays a capture" in line
    summary = task_results({"output": written["first"]}, "Summarise each host")["h100-unproven"]["msg"]
    bench = next(line for line in summary if line.startswith("bench: "))
    assert bench == ("bench: no all-reduce curve; findings: none; not run live: the host replays a capture "
                     "(gpu_bench_nccl_log judges a saved output)")


def test_a_guest_report_keeps_its_proxmox_link_after_the_benchmark(written):
    assert "This guest is VM 120 (glm5-tp8) on the Proxmox host pve-no-clique" in \
        (written["reports"] / "incident-guest.md").read_text()


def test_a_second_run_changes_nothing(written):
    recap = written["second"]["stats"]
    assert {host: stats["changed"] for host, stats in recap.items() if stats["changed"]} == {}
    # What the second run's lost host was told, whichever wording, left the table's reason as the first recorded.
    first, second = (task_results({"output": written[run]}, "Write the reports on the controller")
                     for run in ("first", "second"))
    assert first["incident-guest"]["fleet"]["lost-gpu-host"] == second["incident-guest"]["fleet"]["lost-gpu-host"]


# ---------------------------------------------------------------------------
# What the written reports say first


def test_the_host_reports_say_what_their_verdict_judges(written):
    reports = written["reports"]
    pve = (reports / "pve-no-clique.md").read_text().splitlines()
    assert pve[2].startswith("**Verdict: unfit**")
    assert pve[4].startswith("Verdict scope: judged as a hypervisor: its 8 GPUs are bound to vfio-pci for guests")
    rtx = (reports / "rtx4090-workstation.md").read_text()
    assert "Every critical finding (p2p_not_supported) is about traffic between GPUs, which a model that fits one " \
           "GPU (TP1) does not have" in rtx
    gate_rtx = (reports / "rtx4090-workstation-gate.md").read_text()
    assert gate_rtx.startswith("# Deployment gate: rtx4090-workstation\n\n**PASS**")
    assert "Findings set aside for this launch: `p2p_not_supported`" in gate_rtx


def test_the_host_report_shows_the_read_matrix_first_and_folds_identical_ones(written):
    text = (written["reports"] / "h100-baremetal.md").read_text()
    matrices = [line for line in text.splitlines() if line.startswith("## P2P ") and line.endswith(" matrix")]
    assert matrices == ["## P2P read matrix"]
    assert "The write, nvlink, atomics and pci matrices are identical to read." in text
    assert text.index("## What to do next") < text.index("## Findings")


def test_the_blocked_guests_gate_report_gives_its_vms_fix_once_in_a_code_block(written):
    text = (written["reports"] / "incident-guest-gate.md").read_text()
    assert text.index("## What to do next") < text.index("## What blocks")
    number = re.search(r"\[How to fix\]\(#(\d+)-p2p_not_supported\)", text).group(1)
    block = text.split(f"### {number}. `p2p_not_supported`\n", 1)[1].split("\n### ", 1)[0].split("\n## ", 1)[0]
    assert "```text\nThis guest is VM 120 (glm5-tp8)" in block and "0000:BB:00.0" not in block
    assert text.count("qm set 120 --cpu host") == 1
    assert not any(line.startswith("| `p2p_not_supported`") for line in text.splitlines())
