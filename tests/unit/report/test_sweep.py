"""The sweep report: break-even curves and their crossing, A/A lines, points, the best-configuration export."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from specsweep.analysis.grids import break_even_groups
from specsweep.analysis.rows import config_rows
from specsweep.analysis.summary import build_summary
from specsweep.report.export import tuner_algorithm, tuner_csv
from specsweep.testing.doubles import engine_facts
from specsweep.testing.reports import OK, WORKLOAD, render_summaries, sequential_records


def records(run: str, gap_ms: float, per_chunk: int, spec: bool, seed: int) -> list[dict]:
    """33-token requests: first token at 50 ms, then a chunk of ``per_chunk`` tokens every ``gap_ms`` (+-0.5 %)."""
    return sequential_records(run, gap_ms, per_chunk, spec, seed, jitter=0.005)


def summary(name: str, backend: str, acc: int | None, cycle_ms: float, seed: int) -> dict:
    spec = acc is not None
    args = {"speculative-algorithm": "EAGLE3" if spec else "NONE", "all-reduce-backend": backend, "tp-size": 2}
    env = {"SGLANG_SIMULATE_ACC_LEN": str(acc)} if spec else {}
    plan = {"name": name, "engine": "reference", "image": None, "server_args": args, "env": env, "gpus": 0,
            "workload": WORKLOAD, "facts": engine_facts("reference", args, env)}
    return build_summary(plan, None, OK, [], records(name, cycle_ms, acc or 1, spec, seed), None)


GRIDS = {"eagle3": {"axes": [{"keys": ["server_args.all-reduce-backend"], "token": "", "labels": ["fast", "slow"]},
                             {"keys": ["env.SGLANG_SIMULATE_ACC_LEN"], "token": "acc", "labels": ["1", "2", "3"]}],
                    "members": {f"eagle3-{b}-acc{a}": {"server_args.all-reduce-backend": b,
                                                       "env.SGLANG_SIMULATE_ACC_LEN": str(a)}
                                for b in ("fast", "slow") for a in (1, 2, 3)}}}


@pytest.fixture()
def summaries() -> list[dict]:
    out = [summary("base", "fast", None, 12.0, 0)]  # decodes at 1000 / 12 = 83.3 tok/s
    for acc in (1, 2, 3):
        out.append(summary(f"eagle3-fast-acc{acc}", "fast", acc, 20.0, acc))  # acc tokens / 20 ms
        out.append(summary(f"eagle3-slow-acc{acc}", "slow", acc, 40.0, 10 + acc))  # acc tokens / 40 ms
    return out


def test_break_even_groups_find_the_measured_crossing_next_to_the_computed_one(summaries):
    rows, _ = config_rows(summaries, "base")
    groups = {g.label: g for g in break_even_groups(rows, GRIDS, n_resamples=1000)}
    assert set(groups) == {"eagle3 [all-reduce-backend=fast]", "eagle3 [all-reduce-backend=slow]"}
    fast = groups["eagle3 [all-reduce-backend=fast]"]
    accept = [r["accept_length"] for r in fast.rows]
    assert accept == pytest.approx([33 / 32, 33 / 16, 33 / 11])
    # decode tok/s 50, 100, 150 against 83.3: between the first two points, linearly
    expected = accept[0] + (1000 / 12 - 50) / (100 - 50) * (accept[1] - accept[0])
    assert fast.crossing["where"] == "inside" and fast.crossing["x"] == pytest.approx(expected, rel=0.01)
    assert fast.interval["low"] < fast.crossing["x"] < fast.interval["high"]
    # computed: 20 ms x 83.3 tok/s = 1.67 at every point of the group
    assert fast.computed == pytest.approx([0.020 * 1000 / 12] * 3, rel=0.01)
    slow = groups["eagle3 [all-reduce-backend=slow]"]
    assert slow.crossing["where"] == "above_range"  # 25, 50, 75 tok/s never reach 83.3


def test_the_report_opens_with_the_aa_lines_and_the_break_even_table(summaries, tmp_path: Path):
    best = tmp_path / "best"
    render_summaries(summaries, "base", tmp_path / "s.csv", tmp_path / "r.md", tmp_path / "plots",
                  sweep={"grids": GRIDS, "aa_control": True}, best_dir=best)
    md = (tmp_path / "r.md").read_text()
    head = md.split("## Results")[0]
    assert head.index("A/A control") < head.index("## On this setup, speculation pays above accept length X")
    assert head.startswith("# specsweep report\n\n**On this host, deploy `eagle3-fast-acc3`**")  # what to deploy first
    assert head.split("\n\n")[2].startswith("**Verdicts are on the decode rate")
    # one launch per configuration and no control launch: the rule says the launch effect is unknown
    assert "no configuration was launched twice, so the launch effect is unknown" in head
    assert "A/A control: no control launch ended ok" in head and "Positive control: none" in head
    table = head.split("## On this setup")[1]
    assert "| eagle3 [all-reduce-backend=fast] | default | **1.7" in table and "> 3.00 (pays at none of them)" in table
    assert "computed break-even" in table and "1.67 (range 1.67-1.67 over 3 points)" in table
    for name in ("break_even.png", "pareto.png"):
        assert (tmp_path / "plots" / name).read_bytes()[:4] == b"\x89PNG"
    evidence = json.loads((best / "eagle3.json").read_text())
    assert evidence["winner"] == "eagle3-fast-acc3" and evidence["significant"] is True
    # The accept length is a what-if of the sweep: the winner is compared at its own accept length only
    # (with the other backend), and the backend's lead is counted over every accept length.
    assert [a["config"] for a in evidence["against"]] == ["eagle3-slow-acc3"]
    assert evidence["compared_at"] == {"env.SGLANG_SIMULATE_ACC_LEN": "3"}
    assert evidence["settings"] == {"server_args.all-reduce-backend": "fast"}
    assert evidence["wins_at"] == ["1", "2", "3"] and evidence["accept_lengths"] == ["1", "2", "3"]
    env = (best / "eagle3.env").read_text()
    assert "#   --all-reduce-backend fast" in env
    assert not any(line.startswith("SGLANG_SIMULATE_ACC_LEN=") for line in env.splitlines()), env
    assert "# Compared at SGLANG_SIMULATE_ACC_LEN=3: a simulated accept length" in env
    assert "fastest at 3 of the 3 accept lengths measured" in md
    assert "No tuner line" in (best / "eagle3.nccl-tuner.csv").read_text()
    assert "**eagle3** at point default: **eagle3-fast-acc3**" in md
    rows = {r["config"]: r for r in csv.DictReader((tmp_path / "s.csv").open())}
    assert rows["eagle3-fast-acc2"]["point"] == "default" and rows["eagle3-fast-acc2"]["devices"] == "2"
    # one baseline tok/s everywhere: the baseline's decode rate
    assert float(rows["eagle3-fast-acc2"]["baseline_tok_s"]) == pytest.approx(float(rows["base"]["decode_rate"]))
    assert float(rows["base"]["decode_rate"]) == pytest.approx(1000 / 12, rel=0.01)


@pytest.mark.parametrize("algo, expected", [("Ring", "ring"), ("allreduce:tree", "tree"), ("Tree", "tree"),
                                            ("^Tree", None), ("allgather:ring", None), ("Tree,Ring", None),
                                            (None, None)])
def test_tuner_algorithm(algo, expected):
    assert tuner_algorithm(algo) == expected


def test_tuner_csv_line_in_nccls_example_plugin_format():
    text = tuner_csv({"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL", "NCCL_MAX_NCHANNELS": "16"}, 8, "nccl-ring-ll")
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    assert lines == ["allreduce,0,4294967295,ring,ll,16,-1,8,-1,-1"]
    fields = lines[0].split(",")
    assert len(fields) == 10  # colltype,minbytes,maxbytes,algorithm,protocol,channels,nNodes,nRanks,numPipeOps,regBuff
    only_algo = tuner_csv({"NCCL_ALGO": "Ring"}, 8, "x")
    assert [line for line in only_algo.splitlines() if not line.startswith("#")] == []
    assert "NCCL_PROTO" in only_algo
