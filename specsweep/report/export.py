"""The best configuration of each grid, as files a user can apply, with the evidence it won by.

Per grid ``<grid>`` (``analysis.grids.best_of_grids`` picks the winner; report.json's ``grids`` holds it):

* ``results/best/<grid>.env``: the environment the winner was measured with
  (``KEY=VALUE`` lines, for ``docker run --env-file`` or ``set -a; .
  file``); the keys the grid varied first, a key the winner removed (axis
  value null) as a comment; the winner's server flags as comments; a
  simulated accept length (``SGLANG_SIMULATE_ACC_LEN``) only as a comment.
* ``results/best/<grid>.nccl-tuner.csv``: the winner's NCCL algorithm and
  protocol for all-reduce, in the CSV format of NCCL's example tuner plugin
  (NVIDIA/nccl ``plugins/tuner/example``, identical at v2.30.7-1, the NCCL
  this project pins: ``plugin.c:17-33`` the fields
  ``colltype,minbytes,maxbytes,algorithm,protocol,channels,nNodes,nRanks[,numPipeOps[,regBuff]]``,
  8 to 10 of them or the line is ignored (``:229``); split with ``strtok`` on
  ',' (``:215-225``: an empty field vanishes, so none is written), spaces and
  tabs trimmed; a line starting with '#' or empty is skipped (``:199``, only
  in column 0: no trailing comments), lines are read into 256 bytes
  (``:14``); algorithm in tree|ring|collnet_direct|collnet_chain|nvls|
  nvls_tree|pat, unknown = ring (``:81-90``), protocol in ll|ll128|simple,
  unknown = simple (``:107-112``); a line applies when ``minbytes <= nBytes
  <= maxbytes`` and nNodes, nRanks, numPipeOps, regBuff equal NCCL's or are
  -1 (``:381-387``), the first such line wins; channels -1 keeps NCCL's
  choice (``:407``); the plugin reads the file named by
  ``NCCL_TUNER_CONFIG_FILE`` and is loaded with ``NCCL_TUNER_PLUGIN``). The
  byte range is the verify's all-reduce sizes at the measured points (from
  the micro-benchmark's bytes per token x draft tokens x concurrency), other
  sizes keep NCCL's own choice; a commented line gives the measured setting
  for every size; without a micro-benchmark the one line covers every size.
  numPipeOps and regBuff are -1 (any): the sweep did not vary them. A
  line is written only when the winner fixes both NCCL_ALGO and NCCL_PROTO
  to values this mapping knows: the example plugin parses an unknown
  algorithm as ring and an unknown protocol as simple, so a guessed field
  would silently be a different setting. Otherwise the file holds only
  comments saying why (the env file is then the way to apply the winner).
* ``results/best/<grid>.json``: the evidence: the winner, its settings, its
  decode rate, end-to-end median tok/s and interval, its verdict against every other member and
  against the baseline, the method.
"""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from specsweep.analysis.blocks import BLOCKED_METHOD
from specsweep.contracts.layout import BEST_FILES
from specsweep.files import write_json_atomic, write_text_atomic

# Format history of results/best/<grid>.json:
#   1  grid, point, winner, significant, settings, env, server_args, argv, tok_s_median, tok_s_ci,
#      against, baseline_verdict, method.
#   2  + compared_at (the simulated accept length the members were compared at, {} without such an
#      axis; no longer in settings), wins_at and accept_lengths (None without such an axis).
#   3  the winner is the member of the highest decode rate (the statistic the verdicts compare, now on
#      decode); + decode_rate; each entry of against carries decode_rate and threshold (the half-width of
#      its verdict's interval) instead of noise.
BEST_FORMAT_VERSION = 3
TUNER_SOURCE = "NVIDIA/nccl plugins/tuner/example (plugin.c, README.md)"
#: NCCL_ALGO values -> (collective, tuner algorithm). A bare algorithm applies to every collective;
#: the tuner line is written for all-reduce, the collective of tensor parallelism.
_ALGOS = {"ring": "ring", "tree": "tree", "pat": "pat", "nvls": "nvls", "nvlstree": "nvls_tree",
          "collnetdirect": "collnet_direct", "collnetchain": "collnet_chain"}
_PROTOS = {"ll": "ll", "ll128": "ll128", "simple": "simple"}
_PLAIN = re.compile(r"^[A-Za-z0-9_.,:/=+@%-]*$")


def export_paths(best_dir: Path | str, grid: str) -> dict[str, Path]:
    best_dir = Path(best_dir)
    return {kind: best_dir / f"{grid}{suffix}" for kind, suffix in BEST_FILES.items()}


def tuner_algorithm(value: str | None) -> str | None:
    """The tuner's algorithm for an NCCL_ALGO value that fixes all-reduce to one algorithm, else None."""
    if not value:
        return None
    text = value.strip().lower()
    if ";" in text or "," in text or text.startswith("^"):
        return None  # several collectives or algorithms, or an exclusion: not one tuner line
    if ":" in text:
        coll, _, algo = text.partition(":")
        if coll != "allreduce":
            return None
        text = algo
    return _ALGOS.get(text.replace("_", ""))


def tuner_protocol(value: str | None) -> str | None:
    if not value:
        return None
    text = value.strip().lower()
    if ";" in text or "," in text or text.startswith("^") or ":" in text:
        return None
    return _PROTOS.get(text)


#: The largest byte count the README's own examples use for "every size".
ALL_SIZES_MAX = 4294967295
#: Longest comment line written (the plugin's line buffer is 256 bytes, newline and NUL included).
TUNER_COMMENT_WIDTH = 200


def _comment(text: str) -> str:
    """``# `` lines of at most ``TUNER_COMMENT_WIDTH`` characters: the plugin reads a line into 256 bytes
    (plugin.c:14), so a longer comment's rest would be read as a line of its own, not a comment."""
    return "".join(f"# {part}\n" for part in textwrap.wrap(text, TUNER_COMMENT_WIDTH - 2, break_on_hyphens=False))


def tuner_csv(env: Mapping[str, str], tp_size: int, winner: str, sizes: Sequence[int] = ()) -> str:
    """The NCCL tuner CSV for the winner's env; ``sizes``: bytes of the verify's all-reduce at each measured
    point (empty: unknown, one line for every size) (module docstring)."""
    head = (_comment(f"NCCL example tuner plugin config ({TUNER_SOURCE}), from specsweep: the winner {winner}.")
            + "# Format: collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks,"
              "numPipeOps,regBuff\n"
            + _comment("Use: NCCL_TUNER_PLUGIN=<path to libnccl-tuner-example.so> NCCL_TUNER_CONFIG_FILE=<this file>"))
    algo, proto = tuner_algorithm(env.get("NCCL_ALGO")), tuner_protocol(env.get("NCCL_PROTO"))
    if algo is None or proto is None:
        missing = [k for k, v in (("NCCL_ALGO", algo), ("NCCL_PROTO", proto)) if v is None]
        return head + _comment(
            f"No tuner line: the winner does not fix {' and '.join(missing)} to one value the tuner can express "
            f"(it has NCCL_ALGO={env.get('NCCL_ALGO')!r}, NCCL_PROTO={env.get('NCCL_PROTO')!r}). The example "
            "plugin would read a missing field as ring/simple, a different setting: apply the env file instead.")
    channels = env.get("NCCL_MAX_NCHANNELS")
    note = ""
    if channels and channels.isdigit():
        note = _comment(f"channels {channels} from NCCL_MAX_NCHANNELS, which capped the channel count in the "
                        "measurement; the tuner sets it exactly.")
    else:
        channels = "-1"
    tail = f"{algo},{proto},{channels},-1,{tp_size},-1,-1\n"
    if not sizes:
        return (head + note + _comment("Every size (no micro-benchmark gave the verify's all-reduce size):")
                + f"allreduce,0,{ALL_SIZES_MAX},{tail}")
    return (head + note
            + _comment(f"The verify's all-reduce: {' '.join(map(str, sorted(sizes)))} bytes at the measured points; "
                       "other sizes keep NCCL's own choice.")
            + f"allreduce,{min(sizes)},{max(sizes)},{tail}"
            + _comment("The measured setting at every size (NCCL_ALGO/NCCL_PROTO applied to all sizes): uncomment "
                       "the next line instead.")
            + f"#allreduce,0,{ALL_SIZES_MAX},{tail}")


def _env_line(key: str, value: str) -> str:
    if _PLAIN.match(value):
        return f"{key}={value}\n"
    return f"# {key} has characters an env file cannot carry unquoted: {json.dumps(value)}\n"


def env_file(winner: Mapping[str, Any]) -> str:
    row = winner["winner"] or {}
    env: dict[str, str] = row.get("env") or {}
    # A simulated accept length is how the sweep measured, not a setting to apply: a comment only.
    what_if = {k.split(".", 1)[1]: v for k, v in winner['compared_at'].items()}
    varied = [k.split(".", 1)[1] for k in winner['values'] if k.startswith("env.") and k not in winner['compared_at']]
    standing = ("significantly faster than every other member" if winner['significant']
                else "highest median, but NOT significantly better than every other member")
    out = [f"# specsweep: best configuration of grid {winner['grid']} at point {winner['point']}: "
           f"{row.get('config')}\n",
           f"# {standing} (evidence: {winner['grid']}.json)\n"]
    if varied:
        out.append("# The environment the grid varied:\n")
    for key in varied:
        out.append(_env_line(key, env[key]) if key in env else f"# {key} unset (the library's default)\n")
    for key, value in what_if.items():
        out.append(f"# Compared at {key}={value}: a simulated accept length, a what-if of the sweep, not a setting "
                   f"(leave {key} unset). The same settings were the fastest at {len(winner['wins_at'] or [])} of "
                   f"{len(winner['accept_lengths'] or [])} accept lengths "
                   f"({', '.join(map(str, winner['wins_at'] or []))}).\n")
    rest = [k for k in sorted(env) if k not in varied and k not in what_if]
    if rest:
        out.append("# The rest of the environment it was measured with:\n")
        out.extend(_env_line(k, env[k]) for k in rest)
    flags = {k.split(".", 1)[1]: v for k, v in winner['values'].items() if k.startswith("server_args.")}
    if flags:
        out.append("# Server flags the grid varied (not environment; pass them on the command line):\n")
        out.extend(f"#   --{k} {v}\n" for k, v in flags.items())
    return "".join(out)


def write_exports(winners: Sequence[Mapping[str, Any]], best_dir: Path | str) -> dict[str, dict[str, str]]:
    """Write the three files of every grid (report.json's ``grids``); returns their paths by grid (for the
    report). The tuner's byte range is the winner's ``verify_sizes`` (``analysis.answer.verify_sizes``)."""
    paths_by: dict[str, dict[str, str]] = {}
    for w in winners:
        paths = export_paths(best_dir, w["grid"])
        paths_by[w["grid"]] = {k: str(v) for k, v in paths.items()}
        row = w["winner"] or {}
        if w["winner"] is None:
            text = f"# specsweep: grid {w['grid']} has no winner: {w['why_none']}\n"
            write_text_atomic(paths["env"], text)
            write_text_atomic(paths["tuner"], text)
        else:
            write_text_atomic(paths["env"], env_file(w))
            write_text_atomic(paths["tuner"], tuner_csv(row["env"] or {}, row["tp_size"], row["config"],
                                                        row["verify_sizes"]))
        write_json_atomic(paths["evidence"], {
            "format_version": BEST_FORMAT_VERSION,
            "grid": w["grid"],
            "point": w["point"],
            "winner": row.get("config"),
            "why_none": w["why_none"],
            "significant": w["significant"],
            "settings": {k: v for k, v in w["values"].items() if k not in w["compared_at"]},
            "compared_at": w["compared_at"],
            "wins_at": w["wins_at"],
            "accept_lengths": w["accept_lengths"],
            "env": row.get("env"),
            "server_args": row.get("server_args"),
            "argv": row.get("argv"),
            "decode_rate": row.get("decode_rate"),
            "tok_s_median": row.get("tok_s_median"),
            "tok_s_ci": row.get("tok_s_ci", [None, None]),
            "against": w["against"],
            "baseline_verdict": w["baseline_verdict"],
            "method": BLOCKED_METHOD,
        })
    return paths_by
