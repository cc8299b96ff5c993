"""SGLang as a specsweep engine: launch argv, preflight, and what its log proves ran.

Modules, low to high:

- ``launch``: the launch module, address flags, ports (no SGLang import).
- ``rules``: known incompatibilities checked without SGLang (static rules).
- ``logcheck``: NCCL_DEBUG=INFO parser and SGLang's own variant on/fallback lines,
  each signature citing the file and line of the 0.5.23 wheel it was read from.
- ``preflight``: static rules plus every argv through SGLang 0.5.23's own
  argument parser, in a separate CPU-only venv (``ensure_parser_env``).
- ``parse_check``: the script that runs *inside* that venv (stdlib + sglang).
- ``engine``: :class:`SGLangEngine`, the ``specsweep.engines.registry.Engine``
  for ``python -m sglang.launch_server``.

The pinned SGLang version is :data:`SGLANG_VERSION` (``envs/sglang-parser.txt``
and the images pin the same).
"""

SGLANG_VERSION = "0.5.23"
