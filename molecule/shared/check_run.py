#!/usr/bin/env python3
"""Which files on a test container changed since prepare marked it: the one implementation of the
scenarios' "the check run (or the role) changed nothing" verification.

prepare touches BASELINE (keeping its timestamps) as its last step; every file newer than it was
written afterwards. Paths a running system writes on its own, whatever the roles do, are ignored.

Used two ways, with the same find command:
- testinfra tests, `changed_files(host)` (the verifier puts this directory on PYTHONPATH, see
  .config/molecule/config.yml);
- Ansible tasks, tasks/nothing_changed.yml, which runs this file on the target with
  ansible.builtin.script: it prints the changed paths, one a line.

Runs on the target as a script, so the standard library of Debian 12's Python 3.11 only.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from collections.abc import Iterable
from typing import Any

BASELINE = "/run/molecule-baseline"
# Written by the kernel, systemd, logging and Ansible's own temporary files.
IGNORED = ("/proc", "/sys", "/dev", "/run", "/tmp", "/var/tmp", "/var/log", "/var/lib/systemd", "/root/.ansible")


def find_command(extra_ignored: Iterable[str] = ()) -> list[str]:
    """argv of find listing the files newer than BASELINE on the root filesystem, IGNORED pruned."""
    prune: list[str] = []
    for path in (*IGNORED, *extra_ignored):
        prune += [*(["-o"] if prune else []), "-path", path]
    return ["find", "/", "-xdev", "(", *prune, "-o", "-name", "__pycache__", ")", "-prune",
            "-o", "-newer", BASELINE, "-print"]


def changed_files(host: Any, extra_ignored: Iterable[str] = ()) -> list[str]:
    """The files changed on a testinfra host since prepare; fails the test when find does."""
    return host.check_output(shlex.join(find_command(extra_ignored))).splitlines()


def main(argv: list[str]) -> int:
    """As a script: the arguments are extra paths to ignore; prints what changed."""
    result = subprocess.run(find_command(argv), capture_output=True, text=True, check=False)
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    return result.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
