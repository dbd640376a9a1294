#!/usr/bin/env python3
"""What AnsiballZ ships to a host for a module (`scripts/bench_audit.py --payload`).

Builds the module's zip with ansible's own recursive finder, the code every task run builds and
caches, so the numbers are the real payload: the project's module_utils files it holds, their
source bytes, and the size of the whole zip (ansible's own module_utils and the module included).
`--root` measures another checkout of the project, its ansible.cfg and module_utils.
"""

from __future__ import annotations

import argparse
import datetime
import io
import json
import os
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROJECT_PACKAGE = "ansible_collections/gpuhost/gpu/plugins/module_utils/"


def payload(root: Path, module: str) -> dict:
    """The zip AnsiballZ builds for `module` of the checkout at `root`, and what it holds."""
    # The loaders read the configuration once, at import: point it at the checkout first.
    os.environ["ANSIBLE_CONFIG"] = str(root / "ansible.cfg")
    os.chdir(root)
    from ansible import constants
    from ansible._internal._ansiballz import _builder
    from ansible.executor import module_common
    from ansible.plugins.loader import init_plugin_loader

    init_plugin_loader()  # ansible's own module_utils redirect through the ansible.builtin collection

    module_path = root / "plugins" / "modules" / f"{module}.py"
    data = module_path.read_bytes()
    buffer = io.BytesIO()
    compression = getattr(zipfile, constants.DEFAULT_MODULE_COMPRESSION)
    now = datetime.datetime.now(datetime.UTC)
    with zipfile.ZipFile(buffer, mode="w", compression=compression) as archive:
        module_common.recursive_finder(module, f"ansible_collections.gpuhost.gpu.plugins.modules.{module}", data,
                                       archive, now, _builder.ExtensionManager.create(task_vars={}))
        archive.writestr(f"ansible_collections/gpuhost/gpu/plugins/modules/{module}.py", data)
        names = archive.namelist()
    project = sorted(name for name in names if name.startswith(PROJECT_PACKAGE))
    sizes = {name: (root / "plugins" / "module_utils" / name.removeprefix(PROJECT_PACKAGE)).stat().st_size
             for name in project}
    return {
        "root": str(root), "module": module, "compression": constants.DEFAULT_MODULE_COMPRESSION,
        "module_utils_files": len(project), "module_utils_bytes": sum(sizes.values()),
        "module_utils_lines": sum(len((root / "plugins" / "module_utils" / name.removeprefix(PROJECT_PACKAGE))
                                      .read_bytes().splitlines()) for name in project),
        "zip_files": len(names), "zip_bytes": len(buffer.getvalue()),
        "files": {name.removeprefix(PROJECT_PACKAGE): size for name, size in sizes.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=ROOT, help="checkout to measure (default this one)")
    parser.add_argument("--module", default="gpu_host_facts",
                        help="module under plugins/modules/ (default gpu_host_facts)")
    parser.add_argument("--files", action="store_true", help="also list the module_utils files and their bytes")
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON")
    args = parser.parse_args()
    result = payload(args.root.resolve(), args.module)
    if args.json:
        json.dump(result, sys.stdout, indent=2)
        print()
        return
    print(f"{result['module']} payload ({result['root']}): {result['module_utils_files']} module_utils files, "
          f"{result['module_utils_bytes']} bytes ({result['module_utils_lines']} lines); zip "
          f"{result['zip_bytes']} bytes ({result['zip_files']} files, {result['compression']})")
    if args.files:
        for name, size in sorted(result["files"].items()):
            print(f"  {size:7d}  {name}")


if __name__ == "__main__":
    main()
