"""A test stand-in for SGLang (https://github.com/sgl-project/sglang), standard library only.

It answers the part of SGLang's HTTP API the sglang_serve role relies on, started by the same
command line (``python -m sglang.launch_server ...``). It loads no model and needs no GPU. See
tests/sglang_standin/README.md.
"""

__version__ = "0.0.0+standin"
