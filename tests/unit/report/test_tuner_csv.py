"""The NCCL tuner CSV, parsed back by a reader written to the example plugin's own parser.

The reader follows NVIDIA/nccl ``plugins/tuner/example/plugin.c`` at v2.30.7-1 (the NCCL that torch
2.14.1 pins; the file is the same on master) line by line:

* ``:14`` lines are read into ``char line[256]`` (``fgets``): a longer line is split;
* ``:199`` a line whose first character is ``#`` or that is empty is skipped (column 0 only);
* ``:215-225`` fields come from ``strtok(line, ",")``: consecutive commas make no empty field, and
  each token has leading and trailing spaces/tabs trimmed;
* ``:229`` only lines with 8 to 10 fields are configs (others are silently ignored);
* ``:231-238`` collective (``:59-65``, unknown -> allreduce), min/max bytes (``strtoull``), algorithm
  (``:81-90``, unknown -> ring), protocol (``:107-112``, unknown -> simple), channels, nNodes,
  nRanks (``atoi``); ``:241-251`` numPipeOps and regBuff, -1 when absent;
* ``:381-387`` a config applies when the collective matches, minBytes <= nBytes <= maxBytes and
  nNodes/nRanks/numPipeOps/regBuff are -1 or equal; the first one that applies wins.
"""

from __future__ import annotations

import pytest

from specsweep.report.export import ALL_SIZES_MAX, tuner_csv

_COLLS = ("broadcast", "reduce", "allgather", "reducescatter", "allreduce")
_ALGOS = ("tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat")
_PROTOS = ("ll", "ll128", "simple")
MAX_LINE_LENGTH = 256


def read_tuner_config(text: str) -> tuple[list[dict], list[str]]:
    """(configs, problems): what plugin.c's loadConfig would load, and what it would silently change or drop
    (an unknown name it maps to its default, a line it ignores, a line too long for its buffer)."""
    configs, problems = [], []
    for n, line in enumerate(text.split("\n"), 1):
        if len(line) + 1 > MAX_LINE_LENGTH - 1:  # fgets keeps 255 characters and the newline would not fit
            problems.append(f"line {n}: {len(line)} characters, the plugin reads 254 and a newline")
        if line == "" or line.startswith("#"):
            continue
        tokens = [t.strip(" \t") for t in line.split(",") if t != ""]  # strtok: no empty tokens
        if not 8 <= len(tokens) <= 10:
            problems.append(f"line {n}: {len(tokens)} fields, ignored")
            continue
        coll, lo, hi, algo, proto, channels, nodes, ranks = tokens[:8]
        for value, allowed, default in ((coll, _COLLS, "allreduce"), (algo, _ALGOS, "ring"),
                                        (proto, _PROTOS, "simple")):
            if value not in allowed:
                problems.append(f"line {n}: {value!r} unknown, read as {default}")
        if not (lo.isdigit() and hi.isdigit()):
            problems.append(f"line {n}: byte range {lo!r}-{hi!r} is not two unsigned integers")
            continue
        configs.append({"coll": coll if coll in _COLLS else "allreduce", "min": int(lo), "max": int(hi),
                        "algo": algo if algo in _ALGOS else "ring", "proto": proto if proto in _PROTOS else "simple",
                        "channels": int(channels), "nodes": int(nodes), "ranks": int(ranks),
                        "pipe_ops": int(tokens[8]) if len(tokens) >= 9 else -1,
                        "reg_buff": int(tokens[9]) if len(tokens) >= 10 else -1})
    return configs, problems


def applies(configs: list[dict], coll: str, n_bytes: int, nodes: int, ranks: int, pipe_ops: int = 1,
            reg_buff: int = 0) -> dict | None:
    """plugin.c:381-387: the first config that applies to one call."""
    for c in configs:
        if (c["coll"] == coll and c["min"] <= n_bytes <= c["max"] and c["nodes"] in (-1, nodes)
                and c["ranks"] in (-1, ranks) and c["pipe_ops"] in (-1, pipe_ops) and c["reg_buff"] in (-1, reg_buff)):
            return c
    return None


def test_round_trip_covers_the_verify_sizes():
    # A verify all-reduce of 7168 hidden x 4 draft tokens x bf16 at concurrency 1, 2 and 4.
    sizes = [57344, 114688, 229376]
    text = tuner_csv({"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL", "NCCL_MAX_NCHANNELS": "16"}, 8, "nccl-ring-ll", sizes)
    configs, problems = read_tuner_config(text)
    assert problems == []
    assert configs == [{"coll": "allreduce", "min": 57344, "max": 229376, "algo": "ring", "proto": "ll",
                        "channels": 16, "nodes": -1, "ranks": 8, "pipe_ops": -1, "reg_buff": -1}]
    for size in sizes:  # every verify all-reduce, on 8 ranks, any pipeline ops or buffer registration
        assert applies(configs, "allreduce", size, nodes=1, ranks=8, pipe_ops=3, reg_buff=1) == configs[0]
    assert applies(configs, "allreduce", 57343, 1, 8) is None  # a decode step's smaller one: NCCL's choice
    assert applies(configs, "allreduce", 229377, 1, 8) is None
    assert applies(configs, "allgather", 57344, 1, 8) is None
    assert applies(configs, "allreduce", 57344, 1, 4) is None  # another TP size
    # The commented alternative: the measured setting at every size, once uncommented.
    alt = [line[1:] for line in text.splitlines() if line.startswith("#allreduce,")]
    assert len(alt) == 1
    every, problems = read_tuner_config(alt[0])
    assert problems == [] and every[0]["min"] == 0 and every[0]["max"] == ALL_SIZES_MAX


def test_without_sizes_one_line_for_every_size():
    configs, problems = read_tuner_config(tuner_csv({"NCCL_ALGO": "allreduce:tree", "NCCL_PROTO": "Simple"}, 2, "x"))
    assert problems == []
    assert [(c["min"], c["max"], c["algo"], c["proto"], c["channels"], c["ranks"]) for c in configs] == [
        (0, ALL_SIZES_MAX, "tree", "simple", -1, 2)]


@pytest.mark.parametrize("env", [{"NCCL_ALGO": "Ring"}, {"NCCL_PROTO": "LL"},
                                 {"NCCL_ALGO": "Tree,Ring," * 40, "NCCL_PROTO": "LL"}])
def test_no_line_when_a_field_would_be_guessed(env):
    # Also: a long explanation stays comments only (no rest of a long line read as a config).
    configs, problems = read_tuner_config(tuner_csv(env, 8, "x" * 300, [4096] * 3 + list(range(1, 200))))
    assert configs == [] and problems == []


def test_the_reader_catches_what_the_plugin_would_change():
    configs, problems = read_tuner_config("allreduce,0,10,rings,LL,-1,-1,8\n #x\nallreduce,0,10,ring\n")
    assert configs[0]["algo"] == "ring" and configs[0]["proto"] == "simple"  # the plugin's defaults
    assert problems == ["line 1: 'rings' unknown, read as ring", "line 1: 'LL' unknown, read as simple",
                        "line 2: 1 fields, ignored", "line 3: 4 fields, ignored"]
