"""NCCL's environment variables, and their values read the way NCCL 2.30.7 reads them.

NCCL 2.30.7 is the NCCL torch 2.14.1 pins (``nvidia-nccl-cu13==2.30.7``), the torch of
SGLang 0.5.23 and of the reference engine's GPU runs. ``data/nccl-env.json`` lists every
variable it reads, generated from NVIDIA/nccl at tag v2.30.7-1 (commit
73cf112295c33aee2b895f329f592f2a9b4b0f97) by ``tests/fixtures/nccl/make_env_list.py``
(each entry: how it is read and the file:line). Paths below are in that tree.

How the values are read, and so what is checked before a launch:

* ``NCCL_ALGO`` / ``NCCL_PROTO``: ``parseList`` (src/graph/tuning.cc:55-130), called at
  tuning.cc:453-462: ``[<collective>:][^]<elem>[,<elem>...]`` entries separated by ``;``, only
  the first without a collective; names matched case-insensitively against ``ncclFuncStr``,
  ``ncclAlgoStr``, ``ncclProtoStr`` (src/init.cc:52-55). Anything else is ``ncclInvalidUsage``:
  the communicator fails to initialise.
* ``NCCL_PARAM`` integers (most tuning variables, and the 0/1 switches such as
  ``NCCL_NVLS_ENABLE``): ``strtoll(str, nullptr, 0)`` (src/misc/param.cc:91-94), with no check
  of where the number ends: "16M" is read as 16, "true" as 0, "010" as 8 (octal), silently.
* ``DEFINE_NCCL_PARAM`` (src/include/param/param.h:151-169): a value its parser refuses is
  replaced by the default, silently. Booleans take 1/T/TRUE or 0/F/FALSE in any case
  (param/parser_default.h:40-56); ``ncclParamOneOf`` one option name, ``ncclParamBitsetOf`` a
  comma list of option names, optionally led by ``^`` (param/parser_bitset.h:27-58), case-insensitive.
* ``NCCL_P2P_LEVEL`` / ``NCCL_NET_GDR_LEVEL``: ``ncclGetLevel`` (src/graph/paths.cc:242-283):
  one of LOC, NVL, NVB, C2C, PIX, PXB, P2C, PXN, PHB, SYS exactly (case-sensitive,
  ``topoPathTypeStr``, src/graph/topo.cc:34) or a number; anything else is ignored.
  ``NCCL_P2P_DISABLE``: ``strtol``, and only 1 disables P2P (paths.cc:248-252).
* every other variable is a string NCCL reads as given (a path, an interface name, ...).

Besides libnccl, torch's ProcessGroupNCCL reads a few ``NCCL_*`` spellings of its own
``TORCH_NCCL_*`` variables (:data:`TORCH_NAMES`).
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data" / "nccl-env.json"
VERSION = "2.30.7"

FUNCTIONS = ("Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce")  # src/init.cc:52
ALGORITHMS = ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT")  # src/init.cc:53-54
PROTOCOLS = ("LL", "LL128", "Simple")  # src/init.cc:55
PATH_LEVELS = ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS")  # topo.cc:34, up to PATH_SYS
_LEVEL_READERS = ("NCCL_P2P_LEVEL", "NCCL_NET_GDR_LEVEL")
_LISTS = {"NCCL_ALGO": ALGORITHMS, "NCCL_PROTO": PROTOCOLS}
_EXAMPLES = {"NCCL_ALGO": "'allreduce:tree' or 'Ring'", "NCCL_PROTO": "'^LL128' or 'LL,Simple'"}
_TRUE, _FALSE = ("1", "t", "true"), ("0", "f", "false")

#: torch's deprecated NCCL_* spellings of TORCH_NCCL_* variables (still read, with a warning), as found in
#: torch 2.13.0's include/torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp:62-196 (torch 2.14.1 not checked).
TORCH_NAMES = ("NCCL_ASYNC_ERROR_HANDLING", "NCCL_BLOCKING_WAIT", "NCCL_DESYNC_DEBUG", "NCCL_ENABLE_TIMING",
               "NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK")


@functools.lru_cache(maxsize=1)
def table() -> dict[str, dict[str, Any]]:
    """Variable name -> how NCCL reads it (``data/nccl-env.json``'s ``variables``)."""
    return json.loads(DATA.read_text())["variables"]


def name_problem(name: str) -> tuple[str, list[str]] | None:
    """(why ``name`` is not a variable NCCL or torch reads, the known names) or None when it is one."""
    if name in table() or name in TORCH_NAMES:
        return None
    why = (f"{name} is not a variable NCCL {VERSION} reads (NVIDIA/nccl v2.30.7-1 src/, plugins/, contrib/) "
           f"nor one of torch's NCCL_* spellings")
    return why, [*table(), *TORCH_NAMES]


def parse_list(value: str, elems: tuple[str, ...]) -> str | None:
    """NCCL's ``parseList`` (src/graph/tuning.cc:55-130) on ``value``: the reason it refuses it, or None.

    ``strtok_r`` skips empty tokens, so ``;;`` and a trailing ``;`` are fine; no whitespace is trimmed.
    """
    entries = [e for e in value.split(";") if e]
    for i, entry in enumerate(entries):
        parts = [p for p in entry.split(":") if p]
        if not parts:
            continue
        prefix, elem_list = (parts[0], parts[1]) if len(parts) > 1 else (None, parts[0])
        if prefix is None and i > 0:
            return f"every entry but the first must name a collective ({entry!r})"
        if prefix is not None and prefix.lower() not in [f.lower() for f in FUNCTIONS]:
            return f"unknown collective {prefix!r}"
        for elem in (e for e in elem_list.removeprefix("^").split(",") if e):
            if elem.lower() not in [x.lower() for x in elems]:
                return f"unknown element {elem!r}"
    return None


def strtoll(text: str) -> tuple[int, str]:
    """C's ``strtoll(text, &end, 0)``: (the number, what follows it). No digits: (0, text)."""
    m = re.match(r"\s*([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)", text)
    if m is None:
        return 0, text
    digits = m.group(2)
    base = 16 if digits[:2].lower() == "0x" else 8 if digits.startswith("0") and len(digits) > 1 else 10
    number = int(digits, base)
    return (-number if m.group(1) == "-" else number), text[m.end():]


def value_problem(name: str, value: Any) -> tuple[str, str] | None:
    """(why NCCL would not read ``value`` as written, the allowed values) or None when it would."""
    text = str(value)
    entry = table().get(name) or {}
    if name in _LISTS:
        why = parse_list(text, _LISTS[name])
        if why is None:
            return None
        allowed = (f"[<collective>:][^]<{name[5:].lower()}>[,...] entries separated by ';' (only the first without "
                   f"a collective), {name[5:].lower()} one of {list(_LISTS[name])}, collective one of "
                   f"{list(FUNCTIONS)}, any case, e.g. {_EXAMPLES[name]}")
        return (f"{why}: NCCL {VERSION} refuses {text!r} (ncclInvalidUsage, src/graph/tuning.cc:55-130) and the "
                f"communicator fails to initialise"), allowed
    if name in _LEVEL_READERS:
        if text in PATH_LEVELS or text[:1].isdigit():
            return None
        return (f"{text!r} is not a level: NCCL {VERSION} ignores it and chooses itself (src/graph/paths.cc:"
                f"255-273, case-sensitive)"), f"one of {list(PATH_LEVELS)} or a number"
    if name == "NCCL_P2P_DISABLE":
        if text in ("0", "1"):
            return None
        number, _ = strtoll(text)
        return (f"{text!r}: NCCL {VERSION} reads it with strtol as {number} and disables P2P only for 1 "
                f"(src/graph/paths.cc:248-252)"), "1 (disable) or 0"
    if entry.get("kind") == "param" and text != "":
        number, rest = strtoll(text)
        if rest == "" and re.fullmatch(r"\s*[+-]?(0|[1-9][0-9]*)", text):
            return None
        how = f"stops at {rest!r}" if rest else "reads a leading 0 as octal, 0x as hexadecimal"
        return (f"{text!r} is read as {number} by NCCL {VERSION} (strtoll {how}, src/misc/param.cc:91-94; "
                f"{name} at {entry['at']})"), "a decimal integer"
    if entry.get("kind") == "define":
        return _define_problem(name, text, entry)
    return None


def _define_problem(name: str, text: str, entry: dict[str, Any]) -> tuple[str, str] | None:
    options = entry.get("options")
    if entry["type"] == "bool":
        ok, allowed = text.lower() in _TRUE + _FALSE, "1, T, TRUE (on) or 0, F, FALSE (off), any case"
    elif entry.get("parser") == "oneof":
        ok, allowed = text.strip().lower() in [o.lower() for o in options], f"one of {options}, any case"
    elif entry.get("parser") == "bitset":
        tokens = [t.strip() for t in text.removeprefix("^").split(",") if t.strip()]
        ok = all(t.lower() in [o.lower() for o in options] for t in tokens)
        allowed = f"a comma list of {options}, optionally led by '^' (all but those), any case"
    elif entry["type"] in ("int", "int64_t", "uint64_t", "uint32_t", "int32_t"):
        ok, allowed = re.fullmatch(r"[+-]?\d+", text) is not None, "a decimal integer"
    else:
        return None
    if ok:
        return None
    return (f"{text!r}: NCCL {VERSION}'s parser refuses it and uses the default instead, silently "
            f"(src/include/param/param.h:151-169; {name} at {entry['at']})"), allowed
