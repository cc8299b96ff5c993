"""SGLang as a specsweep engine: launch argv, preflight, and what its log proves ran.

Modules:

- ``engine``: :class:`SGLangEngine`, the :class:`specsweep.engines.Engine` for
  ``python -m sglang.launch_server``.
- ``rules``: known incompatibilities checked without SGLang (static rules).
- ``preflight``: static rules plus every argv through SGLang 0.5.23's own
  argument parser, in a separate CPU-only venv (``ensure_parser_env``).
- ``parse_check``: the script that runs *inside* that venv (stdlib + sglang).
- ``logcheck``: NCCL_DEBUG=INFO parser and SGLang's own variant on/fallback lines.

The pinned SGLang version is :data:`SGLANG_VERSION`; log strings and rules are
read from that wheel's source (see ``tests/fixtures/sglang/SOURCES.md``).
"""

SGLANG_VERSION = "0.5.23"
