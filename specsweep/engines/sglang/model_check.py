"""Load model and draft directories the way SGLang's launch does. Runs INSIDE the parser venv.

Standalone on purpose (stdlib + sglang only, no specsweep import), like
``parse_check``: it runs with the pinned SGLang's python, given as an argv
prefix (``specsweep.engines.sglang.preflight.run_model_check``), with this
file's source on ``-c``.

Why: a directory that parses fine can still stop a launch minutes in. The
TokenizerManager of SGLang 0.5.23 (``sglang/srt/managers/tokenizer_manager.py``)
builds ``ModelConfig.from_server_args`` (``init_model_config``), then in
``init_tokenizer_and_processor``: when ``model_config.is_multimodal`` and not
``--language-model-only`` it calls ``get_processor`` (``get_processor_wrapper``)
*even with* ``--skip-tokenizer-init``; otherwise ``get_tokenizer`` unless
``--skip-tokenizer-init``. On a config.json-only multimodal directory,
``get_processor`` lets transformers' ``OSError`` ("Can't load image
processor") through (it catches only ``ValueError``). The draft model's
config is built by the draft TP worker with ``ModelConfig.from_server_args(...,
model_path=<draft>, is_draft_model=True)`` (``managers/tp_worker.py``).

What this cannot replay on a CPU: ``ServerArgs.resolve_once`` (it probes the
accelerator and raises "No accelerator ... is available"), so nothing that
reads the *published* runtime context (``get_mm_processor``) runs here. The
values those calls take are read from the parsed ServerArgs through
``resolving_view``, as ``ModelConfig.from_server_args`` itself does, with
resolution's default for ``tokenizer_path`` (= ``model_path``,
``arg_groups/serving_hook.py::handle_missing_default_values``).
``--language-model-only`` is checked with SGLang's own
``arg_groups/model_hook.py::handle_language_model_only`` (its architecture list).

Protocol: stdin JSON ``{"items": [{"name": str, "argv": [str], "env": {str: str}}]}``;
``argv`` holds server flags whose model paths are already the host paths to
load. stdout JSON ``{"sglang_version", "transformers_version", "results":
{name: {"ok", "errors": [str], "loaded": [{"role", "path", "architectures",
"model_type", "multimodal", "tokenizer_manager"}]}}}``. Exit 0 whenever the
check itself ran.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import sys
import warnings
from importlib import metadata


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "unknown"


@contextlib.contextmanager
def _env(overrides: dict):
    saved = {k: os.environ.get(k) for k in overrides}
    try:
        for k, v in overrides.items():
            os.environ[k] = str(v)
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _error(role: str, path: str, step: str, exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    if len(text) > 600:
        text = text[:600] + " ..."
    return f"{role} directory {path}: SGLang's {step} raised {type(exc).__name__}: {text}"


def _tokenizer_manager_step(cfg, model_config) -> tuple[str, object]:
    """What TokenizerManager.init_tokenizer_and_processor would load, and the call that loads it."""
    from sglang.srt.utils.hf_transformers_utils import get_processor, get_tokenizer

    tokenizer_path = cfg.tokenizer_path or cfg.model_path
    if model_config.is_multimodal and not cfg.language_model_only:
        # tokenizer_manager.get_processor_wrapper(): the same arguments, taken from the args record.
        backend = "pil" if cfg.disable_fast_image_processor else (cfg.image_processor_backend or "auto")

        def load():
            return get_processor(
                tokenizer_path,
                tokenizer_mode=cfg.tokenizer_mode,
                trust_remote_code=cfg.trust_remote_code,
                revision=cfg.revision,
                image_processor_backend=backend,
                tokenizer_backend=cfg.tokenizer_backend,
                model_name=cfg.model_path,
            )

        return "get_processor (multimodal: loaded even with --skip-tokenizer-init)", load
    if cfg.skip_tokenizer_init:
        return "nothing (text model, --skip-tokenizer-init)", None

    def load_tokenizer():
        return get_tokenizer(
            tokenizer_path,
            tokenizer_mode=cfg.tokenizer_mode,
            trust_remote_code=cfg.trust_remote_code,
            revision=cfg.revision,
            tokenizer_backend=cfg.tokenizer_backend,
        )

    return "get_tokenizer", load_tokenizer


def check_one(argv: list, env: dict) -> dict:
    from sglang.srt.arg_groups.model_hook import handle_language_model_only
    from sglang.srt.arg_groups.overrides import resolving_view
    from sglang.srt.configs.model_config import ModelConfig
    from sglang.srt.server_args import prepare_server_args

    errors: list = []
    loaded: list = []
    with _env(env or {}):
        try:
            with contextlib.redirect_stderr(io.StringIO()):
                server_args = prepare_server_args(list(argv))
        except SystemExit as exc:
            return {"ok": False, "errors": [f"SGLang's parser rejected the arguments (exit {exc.code})"], "loaded": []}
        cfg = resolving_view(server_args)
        target = {"role": "model", "path": cfg.model_path}
        try:
            model_config = ModelConfig.from_server_args(server_args)
        except Exception as exc:  # a verdict on the directory, not a crash of the check
            errors.append(_error("model", cfg.model_path, "ModelConfig.from_server_args", exc))
            model_config = None
        if model_config is not None:
            target.update(
                architectures=list(getattr(model_config.hf_config, "architectures", None) or []),
                model_type=getattr(model_config.hf_config, "model_type", None),
                multimodal=bool(model_config.is_multimodal),
            )
            if cfg.language_model_only:
                try:
                    handle_language_model_only(server_args)
                except Exception as exc:
                    errors.append(_error("model", cfg.model_path, "handle_language_model_only", exc))
            what, load = _tokenizer_manager_step(cfg, model_config)
            target["tokenizer_manager"] = what
            if load is not None:
                try:
                    load()
                except Exception as exc:
                    errors.append(_error("model", cfg.tokenizer_path or cfg.model_path, what.split(" ")[0], exc))
        loaded.append(target)
        draft_path = cfg.speculative_draft_model_path
        if draft_path:
            draft = {"role": "draft", "path": draft_path}
            try:
                draft_config = ModelConfig.from_server_args(
                    server_args,
                    model_path=draft_path,
                    model_revision=cfg.speculative_draft_model_revision,
                    is_draft_model=True,
                )
                draft.update(
                    architectures=list(getattr(draft_config.hf_config, "architectures", None) or []),
                    model_type=getattr(draft_config.hf_config, "model_type", None),
                    multimodal=bool(draft_config.is_multimodal),
                )
            except Exception as exc:
                errors.append(_error("draft", draft_path, "ModelConfig.from_server_args(is_draft_model=True)", exc))
            loaded.append(draft)
    return {"ok": not errors, "errors": errors, "loaded": loaded}


def main() -> int:
    request = json.load(sys.stdin)
    # SGLang's import-time warnings (no CUDA for AWQ/GGUF kernels) are noise on a CPU host.
    warnings.simplefilter("ignore")
    logging.disable(logging.WARNING)
    results = {}
    # Whatever SGLang or transformers print goes to stderr: stdout carries only the JSON.
    with contextlib.redirect_stdout(sys.stderr):
        for item in request["items"]:
            results[item["name"]] = check_one(list(item["argv"]), dict(item.get("env") or {}))
    out = {"sglang_version": _version("sglang"), "transformers_version": _version("transformers"), "results": results}
    json.dump(out, sys.stdout, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
