"""SGLang 0.5.23's environment variables, and their values read the way SGLang reads them.

The table (``data/environ.json``) is generated from the wheel by :func:`environ_table`
(``python -m specsweep.engines.sglang.environ SGLANG_PACKAGE_DIR`` rewrites it; a slow test
regenerates it from the pinned wheel and compares). It holds, paths under ``sglang/``:

* every field of ``class Envs`` in ``srt/environ.py`` (771 in 0.5.23): its descriptor type
  (``EnvBool``, ``EnvInt``, ``EnvFloat``, ``EnvStr``, ...), its line, and for the parsed types
  (bool, int, float) its default;
  ``*WithAlias`` fields also answer to their ``deprecated_name``;
* the deprecated names of ``_DEPRECATED_ENVS`` (``srt/environ.py:2242-2291``: SGLang warns,
  and forwards the value where there is a replacement);
* every ``SGLANG_*`` name the rest of the package reads directly (``os.getenv``,
  ``os.environ``, ``get_bool_env_var``, ...), type ``read``: a known name whose value this
  module does not check.

How a field's value is read (``srt/environ.py``): ``EnvField.get`` (:67-83) parses the value
with the type's ``parse`` and, on ``ValueError``, warns and uses the default. ``EnvBool``
(:143-150) lower-cases the value and reads "true", "1", "yes", "y" as on and "false", "0",
"no", "n" as off (nothing is stripped: " 1" is unparsable); ``EnvInt`` is ``int(value)``
(:153-158), ``EnvFloat`` ``float(value)`` (:200-205). So a value SGLang cannot parse does not
stop the server: the run measures the default instead, which is why :func:`value_problem`
refuses it at plan time.
"""

from __future__ import annotations

import ast
import functools
import json
import re
import sys
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data" / "environ.json"

BOOL_ON = ("true", "1", "yes", "y")
BOOL_OFF = ("false", "0", "no", "n")
BOOL_ALLOWED = f"{', '.join(BOOL_ON)} (on) or {', '.join(BOOL_OFF)} (off), in any case"
_GET = "sglang/srt/environ.py:67-83"
_PARSERS = {"EnvBool": "sglang/srt/environ.py:143-150", "EnvInt": "sglang/srt/environ.py:153-158",
            "EnvFloat": "sglang/srt/environ.py:200-205"}


@functools.lru_cache(maxsize=1)
def table() -> dict[str, dict[str, Any]]:
    """Variable name -> ``{"type", "at"}``, and ``"default"`` for the types whose values are parsed
    (``data/environ.json``'s ``variables``)."""
    return json.loads(DATA.read_text())["variables"]


def env_bool(value: Any) -> bool | None:
    """A value as SGLang's EnvBool reads it: True, False, or None when it cannot parse it (and uses the default)."""
    text = str(value).lower()
    if text in BOOL_ON:
        return True
    if text in BOOL_OFF:
        return False
    return None


def parse_value(kind: str, value: str) -> tuple[Any, str | None]:
    """(the value SGLang reads, the ``ValueError`` text it would warn with) for a field of type ``kind``."""
    base = kind.replace("WithAlias", "")
    if base == "EnvBool":
        parsed = env_bool(value)
        return parsed, None if parsed is not None else f'"{value.lower()}" is not a valid boolean value'
    if base in ("EnvInt", "EnvFloat"):
        convert, word = (int, "integer") if base == "EnvInt" else (float, "float")
        try:
            return convert(value), None
        except ValueError:
            return None, f'"{value}" is not a valid {word} value'
    return value, None


def allowed_values(kind: str) -> str:
    base = kind.replace("WithAlias", "")
    return {"EnvBool": BOOL_ALLOWED, "EnvInt": "an integer (Python int())",
            "EnvFloat": "a number (Python float())"}.get(base, "any string")


def value_problem(name: str, value: Any) -> tuple[str, str] | None:
    """(why SGLang 0.5.23 would not use ``value`` for ``name``: it warns and uses the default, the allowed
    values); None when it would, or when ``name`` is not a field whose values SGLang parses."""
    entry = table().get(name)
    if entry is None or entry["type"] not in {k + s for k in _PARSERS for s in ("", "WithAlias")}:
        return None
    _, error = parse_value(entry["type"], str(value))
    if error is None:
        return None
    why = (f"{error}: SGLang 0.5.23 warns and uses the default {entry['default']!r} instead ({_GET}; "
           f"{entry['type']} at {entry['at']}, parsed at {_PARSERS[entry['type'].replace('WithAlias', '')]})")
    return why, allowed_values(entry["type"])


def name_problem(name: str) -> tuple[str, list[str]] | None:
    """(why ``name`` is not a variable SGLang reads, close names) or None when it is one; a deprecated name
    gives SGLang's own note."""
    entry = table().get(name)
    if entry is None:
        why = (f"{name} is not a variable SGLang 0.5.23 reads (its environ.py fields and every SGLANG_* name "
               f"the wheel reads directly)")
        return why, [n for n in table() if table()[n]["type"] != "deprecated"]
    if entry["type"] == "deprecated":
        instead = f"; use {entry['replacement']}" if entry.get("replacement") else ""
        note = f" ({entry['note']})" if entry.get("note") else ""
        return f"{name} is deprecated in SGLang 0.5.23 ({entry['at']}){instead}{note}", []
    return None


# --- the generator -----------------------------------------------------------------------------------

_DIRECT = re.compile(r"""(?:getenv|environ\.get|environ\[|environ\.setdefault|get_bool_env_var|"""
                     r"""get_int_env_var|get_float_env_var|get_str_env_var)\(?\s*['"](SGLANG_[A-Z0-9_]+)['"]""")


def _default(node: ast.expr | None, source: str) -> Any:
    if node is None:
        return None
    try:
        value = ast.literal_eval(node)
    except ValueError:
        return ast.get_source_segment(source, node)
    return list(value) if isinstance(value, tuple) else value


def environ_table(package: Path) -> dict[str, Any]:
    """The table of the ``sglang`` package at ``package`` (its directory): see the module docstring."""
    path = package / "srt" / "environ.py"
    source = path.read_text()
    tree = ast.parse(source)
    envs = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Envs")
    at = "sglang/srt/environ.py"
    variables: dict[str, dict[str, Any]] = {}
    for node in envs.body:
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Name) and node.value.func.id.startswith("Env")):
            continue
        call = node.value
        entry: dict[str, Any] = {"type": call.func.id, "at": f"{at}:{node.lineno}"}
        if call.func.id.replace("WithAlias", "") in _PARSERS:  # the default a refused value falls back to
            entry["default"] = _default(call.args[0] if call.args else None, source)
        for target in node.targets:
            if isinstance(target, ast.Name):
                variables[target.id] = entry
        alias = next((k.value for k in call.keywords if k.arg == "deprecated_name"), None)
        if alias is not None:
            variables[ast.literal_eval(alias)] = {**entry, "alias_of": node.targets[0].id}
    deprecated = next(n for n in tree.body if isinstance(n, ast.AnnAssign)
                      and getattr(n.target, "id", None) == "_DEPRECATED_ENVS")
    for key, value in zip(deprecated.value.keys, deprecated.value.values):
        kwargs = {k.arg: ast.literal_eval(k.value) for k in value.keywords if k.arg in ("replacement", "note")}
        variables.setdefault(ast.literal_eval(key), {"type": "deprecated", "at": f"{at}:{key.lineno}", **kwargs})
    for file in sorted(package.rglob("*.py")):
        rel = file.relative_to(package.parent).as_posix()
        if rel == at or "/test" in rel:
            continue
        text = file.read_text(errors="replace")
        for m in _DIRECT.finditer(text):
            variables.setdefault(m.group(1), {"type": "read", "at": f"{rel}:{text.count(chr(10), 0, m.start()) + 1}"})
    return {"source": "sglang 0.5.23 wheel: sglang/srt/environ.py (class Envs, _DEPRECATED_ENVS) and direct reads",
            "generated_by": "python -m specsweep.engines.sglang.environ <the wheel's sglang directory>",
            "variables": dict(sorted(variables.items()))}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m specsweep.engines.sglang.environ SGLANG_PACKAGE_DIR", file=sys.stderr)
        return 2
    DATA.parent.mkdir(parents=True, exist_ok=True)
    DATA.write_text(json.dumps(environ_table(Path(argv[0])), indent=1) + "\n")
    print(f"wrote {DATA}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
