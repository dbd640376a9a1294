#!/usr/bin/env python3
"""The audit of this host as a scheduler prolog or a Nagios-style check: one status line, and the exit code of
the one verdict (plugins/module_utils/report/check_status.py):

    0  fit                  1  fit, with warnings
    2  unfit                3  not judged, or the audit could not run

    scripts/gpu_prolog.py                          audit this host (run as root for every reading)
    scripts/gpu_prolog.py --capture FILE           replay a capture (playbooks/capture.yml) instead
    scripts/gpu_prolog.py --material FILE [...]    judge material (nvidia-bug-report.log.gz, pastes)
    options: --tensor-parallel-gpus 0,1,2,3  --min-bar1-mib N  --json FILE (the facts, as gpu_host_facts gives)
    scripts/gpu_prolog.py --slurm [--node NAME] --json FILE   and act on it in Slurm (HealthCheckProgram, Prolog)

With --slurm the verdict is acted on through scontrol (report/slurm_drain.py decides): the node is drained
when the verdict asks any action, with a reason that starts "gpuhost:" and names the action, the findings and
the --json report; a node drained so is resumed once an audit says fit; a node drained by anyone else is left
as it is. The node is --node, else $SLURMD_NODENAME (set in Prolog and Epilog), else this host's short name.
What was done goes to stderr; the exit code stays the verdict's.

The same audit as the gpu_audit role, run without Ansible (the prolog runs on the node, where no controller
is): the status line goes to stdout, nothing else does. Bad input (a file that is not a capture, an option
that does not parse) is reported on that line as UNKNOWN, never as a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_check import import_module_utils  # scripts/ is not a package: imported by path

UNKNOWN = 3


def _gpu_list(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected GPU indexes separated by commas (0,1,2,3), found {text!r}") from None


def arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    given = parser.add_mutually_exclusive_group()
    given.add_argument("--capture", type=Path, help="a capture of a host to replay instead of this host")
    given.add_argument("--material", type=Path, nargs="+", help="material files to judge instead")
    parser.add_argument("--tensor-parallel-gpus", type=_gpu_list, default=None,
                        help="the GPU indexes of the tensor-parallel group (default: every GPU)")
    parser.add_argument("--min-bar1-mib", type=int, default=None, help="the BAR1 size under which to warn")
    parser.add_argument("--json", type=Path, help="also write the facts to this file")
    parser.add_argument("--slurm", action="store_true",
                        help="drain this Slurm node when the verdict asks an action; resume it when fit again")
    parser.add_argument("--node", help="the Slurm node name (default: $SLURMD_NODENAME, else the short host name)")
    args = parser.parse_args(argv)
    if args.node is not None and not args.slurm:
        parser.error("--node names the Slurm node that --slurm acts on: give --slurm too, or drop --node")
    return args


def source_of(args: argparse.Namespace) -> Any:
    from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.source import LiveSource
    from ansible_collections.gpuhost.gpu.plugins.module_utils.material.nccl_readers import replay

    if args.capture:
        try:
            capture = json.loads(args.capture.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"expected a capture (JSON, as playbooks/capture.yml writes it); {args.capture} is "
                             f"not: {exc}. For material (pastes, bug reports) use --material") from None
        return replay(capture)
    if args.material:
        from ansible_collections.gpuhost.gpu.plugins.module_utils.material.capture import build_capture

        return replay(build_capture([(path.name, path.read_bytes()) for path in args.material]))
    return LiveSource()


def audit(args: argparse.Namespace) -> dict[str, Any]:
    from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.facts import audit as run_audit
    from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.facts import resolve_subsets
    from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.views import RuleOptions

    options = {"tensor_parallel_gpus": args.tensor_parallel_gpus}
    if args.min_bar1_mib is not None:
        options["min_bar1_mib"] = args.min_bar1_mib
    return run_audit(source_of(args), resolve_subsets(["all"]), RuleOptions(**options))


def _scontrol(*argv: str) -> str:
    scontrol = shutil.which("scontrol")
    if scontrol is None:
        raise OSError("scontrol is not on PATH: install Slurm's client (Debian: slurm-client) or drop --slurm")
    run = subprocess.run([scontrol, *argv], capture_output=True, text=True, timeout=30,
                         env={**os.environ, "LC_ALL": "C"}, check=False)
    if run.returncode != 0:
        raise OSError(f"scontrol {' '.join(argv)} exited {run.returncode}: "
                      f"{' '.join((run.stderr or run.stdout).split()) or 'no message'}")
    return run.stdout


def act_in_slurm(facts: dict[str, Any], node: str, report: Path | None) -> str:
    """Drain, resume or leave ``node`` as report/slurm_drain.py decides; what was done, in one line."""
    from ansible_collections.gpuhost.gpu.plugins.module_utils.report.slurm_drain import decide, read_node

    decision = decide(facts, read_node(_scontrol("show", "node", node)), str(report) if report else None)
    if decision.act == "drain":
        _scontrol("update", f"NodeName={node}", "State=DRAIN", f"Reason={decision.reason}")
    elif decision.act == "resume":
        _scontrol("update", f"NodeName={node}", "State=RESUME")
    return f"gpuhost slurm: node {node}: {decision.act}: {decision.why}"


def main(argv: list[str] | None = None) -> int:
    import_module_utils()
    from ansible_collections.gpuhost.gpu.plugins.module_utils.report.check_status import (
        exit_code,
        failed_line,
        status_line,
    )

    try:
        args = arguments(sys.argv[1:] if argv is None else argv)
    except SystemExit as exc:
        # --help exits 0 after printing; a bad option is UNKNOWN, never the usage error's 2 (which means unfit).
        if exc.code in (0, None):
            return 0
        print(failed_line("the options did not parse (see the message above; --help lists them)"))
        return UNKNOWN
    try:
        facts = audit(args)
    except Exception as exc:  # a check that could not look says UNKNOWN, whatever stopped it
        print(failed_line(f"{type(exc).__name__}: {exc}"))
        return UNKNOWN
    if args.json:
        try:
            args.json.write_text(json.dumps(facts, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        except OSError as exc:
            print(failed_line(f"the facts could not be written to {args.json}: {exc}"))
            return UNKNOWN
    print(status_line(facts))
    if args.slurm:
        node = args.node or os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
        try:
            print(act_in_slurm(facts, node, args.json), file=sys.stderr)
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            # The verdict stands and its code is returned: a prolog that exits non-zero on a fit host would
            # have Slurm drain it for nothing.
            print(f"gpuhost slurm: node {node}: nothing done: {exc}", file=sys.stderr)
    return exit_code(facts)


if __name__ == "__main__":
    sys.exit(main())
