"""pip for the virtual environments ansible-test creates, without its download of get-pip.py.

ansible-test builds each sanity test's environment without pip and runs a get-pip.py script that it downloads
from its own file server (ansible_test/_util/target/setup/requirements.py, ``bootstrap``), which offline
machines cannot reach. It runs the script from ``~/.ansible/test/cache/get_pip_<version>.py`` when that file
exists; scripts/sanity.sh puts this one there. It does what get-pip.py does with the arguments ansible-test
gives it (``pip==<version>`` and pip options): pip from the interpreter's own ensurepip, then the requested pip
from the package index pip is configured with.
"""

from __future__ import annotations

import ensurepip
import subprocess
import sys

# get-pip.py's own options, which pip install does not take.
GET_PIP_ONLY = {"--no-setuptools", "--no-wheel"}

if __name__ == "__main__":
    ensurepip.bootstrap(upgrade=True)
    arguments = [argument for argument in sys.argv[1:] if argument not in GET_PIP_ONLY]
    sys.exit(subprocess.call([sys.executable, "-m", "pip", "install", *arguments]))
