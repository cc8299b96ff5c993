"""Check argv lists with SGLang's own argument parser. Runs INSIDE the parser venv.

Standalone on purpose: stdlib + sglang only, no specsweep import, because it
runs in the pinned SGLang venv (``specsweep.engines.sglang.preflight.ensure_parser_env``)
or inside a built SGLang image, as ``python -I -c <this file's source>``.

Protocol: stdin is JSON ``{"items": [{"name": str, "argv": [str], "env": {str: str}}]}``
where ``argv`` holds the server flags only (no ``python -m sglang.launch_server``,
no --host/--port). stdout is JSON ``{"sglang_version": str, "results": {name:
{"ok": bool, "errors": [str], "warnings": [str]}}}``. Exit status 0 whenever
the check itself ran, whatever the verdicts.

Per item:
1. every ``--flag`` must be spelled exactly as SGLang defines it: argparse's
   prefix matching would silently accept ``--enable-msccl`` for
   ``--enable-mscclpp`` (and reports removed ``--cuda-graph-max-bs`` only as
   "ambiguous");
2. a flag given twice whose action keeps only the last value is an error
   (a list in config.yaml is one flag followed by its values);
3. ``sglang.srt.server_args.prepare_server_args(argv)`` -- exactly what
   ``python -m sglang.launch_server`` calls: ``ServerArgs.add_cli_args`` on an
   ``argparse.ArgumentParser``, ``parse_args``, ``ServerArgs.from_cli_args``.
   argparse's SystemExit is caught and its message (which names the bad flag or
   value) becomes the error. Resolution (``resolve_once``) is not run: it reads
   the model config and probes the GPU.

The item's ``env`` is applied around its check because some choices depend on
the environment when the parser is built (e.g. ``--sampling-backend``).
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import io
import json
import logging
import os
import re
import sys
from importlib import metadata

_KEEPS_ALL = (argparse._AppendAction, argparse._AppendConstAction, argparse._CountAction, argparse._ExtendAction)


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class _Records(logging.Handler):
    """Collects WARNING+ messages logged while SGLang parses (deprecations)."""

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.messages: list = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextlib.contextmanager
def _env(overrides: dict) -> "contextlib.AbstractContextManager[None]":
    saved = {k: os.environ.get(k) for k in overrides}
    try:
        for k, v in overrides.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = str(v)
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _flag_errors(parser: argparse.ArgumentParser, argv: list) -> list:
    """Flags that are not SGLang's exact spelling, and repeated single-value flags."""
    options = parser._option_string_actions
    errors = []
    seen: dict = {}
    for token in argv:
        if not token.startswith("--") or token == "--":
            continue
        flag = token.split("=", 1)[0]
        if flag not in options:
            prefixed = sorted(o for o in options if o.startswith(flag))
            close = difflib.get_close_matches(flag, list(options), n=3, cutoff=0.75)
            hint = ""
            if prefixed:
                hint = f"; argparse would take it as an abbreviation of {', '.join(prefixed[:4])}: spell the flag out"
            elif close:
                hint = f"; did you mean {', '.join(close)}?"
            errors.append(f"unrecognized flag {flag} (not a flag of SGLang {_version()}){hint}")
            continue
        action = options[flag]
        seen[action.dest] = seen.get(action.dest, 0) + 1
        if seen[action.dest] == 2 and not isinstance(action, _KEEPS_ALL):
            errors.append(f"flag {flag} given more than once; argparse keeps only the last value")
    return errors


def _version() -> str:
    try:
        return metadata.version("sglang")
    except metadata.PackageNotFoundError:
        return "unknown"


def check_one(argv: list, env: dict) -> dict:
    """Verdict for one argv (see module docstring)."""
    from sglang.srt.server_args import ServerArgs, prepare_server_args

    errors: list = []
    warnings: list = []
    with _env(env or {}):
        parser = argparse.ArgumentParser(prog="sglang serve")
        ServerArgs.add_cli_args(parser)
        errors.extend(_flag_errors(parser, argv))
        captured = io.StringIO()
        records = _Records()
        root = logging.getLogger()
        root.addHandler(records)
        try:
            with contextlib.redirect_stderr(captured), contextlib.redirect_stdout(captured):
                prepare_server_args(list(argv))
        except SystemExit as exc:
            lines = [ln for ln in captured.getvalue().splitlines() if "error:" in ln]
            message = lines[-1].split("error:", 1)[1].strip() if lines else f"argparse exited with {exc.code}"
            errors.append(f"SGLang's parser rejected the arguments: {message}")
        except Exception as exc:  # a from_cli_args failure is a verdict, not a crash of the check
            errors.append(f"ServerArgs.from_cli_args failed: {type(exc).__name__}: {exc}")
        finally:
            # prepare_server_args' basicConfig(force=True) may already have removed it.
            root.removeHandler(records)
        # Deprecated flags warn through logging while argparse runs (argparse_actions.py).
        warnings.extend(_ANSI.sub("", m) for m in records.messages)
    return {"ok": not errors, "errors": errors, "warnings": warnings}


def main() -> int:
    request = json.load(sys.stdin)
    results = {}
    for item in request["items"]:
        results[item["name"]] = check_one(list(item["argv"]), dict(item.get("env") or {}))
    json.dump({"sglang_version": _version(), "results": results}, sys.stdout, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
