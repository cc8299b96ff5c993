"""config/refengine-sharegpt-chat.yaml end to end: a ShareGPT file made here, the chat endpoint, output agreement.

One run (module fixture) of the example config, plus one configuration with the
test-only corrupted all-reduce (``SPECSWEEP_TEST_CORRUPT_ALLREDUCE``, read by
the reference engine only for this): speculation without simulated acceptance
must reproduce the baseline token for token, the corrupted configuration must
be flagged, and a changed dataset reruns exactly what its selection changes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from specsweep.testing.datasets import write_sharegpt
from specsweep.testing.workflow import SNAKEMAKE, copy_workflow, job_counts, launch_path, only_point, run, run_pipeline

pytestmark = pytest.mark.slow

CONFIG = "config/refengine-sharegpt-chat.yaml"
DATA = "data/sharegpt-sample.json"


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    work = copy_workflow(tmp_path_factory.mktemp("workloads"))
    write_sharegpt(work / DATA, n=48)
    config = yaml.safe_load((work / CONFIG).read_text())
    config["defaults"]["workload"].update(num_prompts=4, output_len=24)
    config["configurations"]["eagle3-corrupt"] = {
        "description": "TEST ONLY: every all-reduce result scaled by 0.5 (a broken kernel)",
        "extends": "eagle3-shm",
        "env": {"SPECSWEEP_TEST_CORRUPT_ALLREDUCE": "0.5"},
    }
    return run_pipeline(work, config, config_path=CONFIG, args=("all", "--configfile", CONFIG))


summary = only_point  # the one point of a configuration


def shm_requests(work: Path) -> Path:
    return launch_path(work, "eagle3-shm", configfiles=[CONFIG]) / "requests.jsonl"


def test_the_dataset_is_pinned_in_every_plan(work):
    plans = {n: json.loads((work / "results" / n / "plan.json").read_text())
             for n in ("nospec", "eagle3-shm", "eagle3-shm-acc25", "eagle3-corrupt")}
    identity = plans["nospec"]["prompts"]
    assert identity["dataset"] == {"format": "sharegpt", "path": DATA, "size": (work / DATA).stat().st_size}
    assert identity["tokenizer"]["kind"] == "refengine-bytes"
    assert all(p["prompts"] == identity for p in plans.values())  # same dataset, seed, lengths: same prompts
    assert (work / identity["file"]).is_file()


def test_requests_went_over_chat_at_their_intended_lengths(work):
    recs = [json.loads(line) for line in shm_requests(work).read_text().splitlines()]
    assert len(recs) == 8 and {r["endpoint"] for r in recs} == {"chat"}
    assert all(r["prompt_tokens"] == r["input_len"] <= 160 for r in recs)
    assert all(len(r["output_ids"]) == r["completion_tokens"] == 24 for r in recs)
    assert not any(w.startswith("prompt length") for w in summary(work, "eagle3-shm")["warnings"])


def test_greedy_speculation_reproduces_the_baseline_token_for_token(work):
    s = summary(work, "eagle3-shm")
    assert s["status"] == "ok", (s["reason"], s["detail"])
    assert s["agreement"] | {"definition": None} == {
        "baseline": "nospec", "threshold": 0.9, "match_share": 1.0, "flagged": False, "reason": None,
        "paired": 8, "matching": 8, "unpaired": 0, "definition": None}
    assert s["metrics"]["output_common_prefix_tokens"]["value"] == 24
    hist = s["metrics"]["accept_histogram"]["value"]
    assert len(hist) == 4 and sum(hist) == sum(
        json.loads(line)["spec_verify_ct"] for line in shm_requests(work).open())


def test_a_corrupted_all_reduce_is_flagged_not_reported_ok(work):
    s = summary(work, "eagle3-corrupt")
    assert s["status"] == "failed" and s["reason"] == "outputs_differ", s["detail"]
    assert s["agreement"]["flagged"] is True and s["agreement"]["match_share"] < 0.9
    assert "metrics" in s and s["metrics"]["output_tok_s"]["p50"] > 0  # it ran, and fast: only its outputs are wrong
    md = (work / "results/report.md").read_text()
    assert "| eagle3-corrupt | failed |" in md and "**outputs differ from the baseline**" in md
    assert "### eagle3-corrupt: failed" in md


def test_simulated_acceptance_is_not_comparable(work):
    s = summary(work, "eagle3-shm-acc25")
    assert s["status"] == "ok" and s["agreement"]["match_share"] is None
    assert "acceptance is simulated" in s["agreement"]["reason"]
    md = (work / "results/report.md").read_text()
    assert "not comparable (simulated acceptance)" in md and "## Acceptance per draft position" in md


def test_a_touched_dataset_reruns_nothing_and_a_changed_one_its_configurations(work):
    def planned() -> dict[str, int]:
        result = run(SNAKEMAKE + ["-n", "all", "--configfile", CONFIG], work)
        assert result.returncode == 0, result.stdout + result.stderr
        return job_counts(result.stdout)

    assert planned() == {}
    data = work / DATA
    original = data.read_text()
    try:
        os.utime(data, ns=(data.stat().st_atime_ns, data.stat().st_mtime_ns + 10**9))  # touched: reselected
        assert planned() == {}
        convs = json.loads(original)
        convs[0]["conversations"][0]["value"] = "An edited question about all-reduce?"
        data.write_text(json.dumps(convs, indent=1))
        counts = planned()  # the plans pin the dataset's size and the selected prompts' hash
        # 4 configurations + the baseline's A/A control launch
        assert counts["benchmark_server"] == 5 and counts["summarize_config"] == 4
    finally:
        data.write_text(original)
    assert planned() == {}
