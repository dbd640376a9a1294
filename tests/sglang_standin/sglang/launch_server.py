"""``python -m sglang.launch_server``: the stand-in's entry point, as SGLang's own is named."""

from __future__ import annotations

import sys

from sglang.standin import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
