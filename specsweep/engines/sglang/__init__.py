"""SGLang as a specsweep engine: launch argv, preflight, and what its log proves ran.

Modules, low to high:

- ``launch``: the launch module, address flags, ports (no SGLang import).
- ``rules``: known incompatibilities checked without SGLang (static rules).
- ``logcheck``: NCCL_DEBUG=INFO parser and SGLang's own variant on/fallback and
  failure lines, each signature citing the file and line of the 0.5.23 wheel
  (or NCCL 2.30.7 / NVSHMEM 3.4.5 source) it was read from and the level it
  prints at; SGLang's all-reduce dispatch order (shadowed variants).
- ``preflight``: static rules, volume host paths, every argv through SGLang
  0.5.23's own argument parser, and every model and draft directory through
  its own ModelConfig and tokenizer/processor loading, in a separate venv that
  uses no GPU (``ensure_parser_env``).
- ``parse_check``, ``model_check``: the scripts that run *inside* that venv
  (stdlib + sglang).
- ``engine``: :class:`SGLangEngine`, the ``specsweep.engines.registry.Engine``
  for ``python -m sglang.launch_server``.

The pinned SGLang version is :data:`SGLANG_VERSION` (``envs/sglang-parser.txt``
and the images pin the same).
"""

SGLANG_VERSION = "0.5.23"
