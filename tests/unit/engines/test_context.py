"""How many tokens one request may ask for, as each engine derives it from the model's config and its flags,
before any launch (``Engine.context_limit``); a workload beyond it is refused when the workflow starts."""

from __future__ import annotations

import json
from pathlib import Path

from specsweep.contracts.plan import Plan
from specsweep.engines.registry import get_engine
from specsweep.engines.sglang.context import derived_context, reserved_tokens
from specsweep.plan.config import load_configs
from specsweep.plan.resolve import resolve_plans
from specsweep.testing.doubles import plan_dict
from specsweep.testing.workflow import REPO

EAGLE = {"speculative-algorithm": "EAGLE3", "speculative-num-steps": 3, "speculative-eagle-topk": 1,
         "speculative-num-draft-tokens": 4}


def _sglang_plan(model: Path, **args) -> Plan:
    return Plan.from_dict(plan_dict(name="x", engine="sglang", server_args={"model-path": str(model), **args}))


def test_sglang_reads_its_context_keys_in_its_order_with_rope_scaling():
    llama = json.loads((REPO / "config/models/llama31-8b-instruct/config.json").read_text())
    assert derived_context(llama) == (131072, "max_position_embeddings 131072")  # llama3 scaling: factor 1
    assert derived_context({"max_position_embeddings": 4096, "rope_scaling": {"factor": 4.0}}) == \
        (16384, "max_position_embeddings 4096 x rope_scaling.factor 4.0")
    assert derived_context({"seq_length": 8192, "max_position_embeddings": 4096})[0] == 8192  # seq_length first
    assert derived_context({"text_config": {"max_position_embeddings": 32768}, "max_position_embeddings": 1}) == \
        (32768, "text_config.max_position_embeddings 32768")
    assert derived_context({"hidden_size": 1}) is None  # SGLang's 2048 default is no evidence to refuse by


def test_sglang_keeps_eagles_draft_slots_back(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"max_position_embeddings": 4096}))
    assert reserved_tokens(EAGLE) == 4 and reserved_tokens({}) == 0
    limit = get_engine("sglang").context_limit(_sglang_plan(tmp_path, **EAGLE), tmp_path)
    assert limit.tokens == 4092 and "config.json: max_position_embeddings 4096" in limit.source
    assert "4 output slots EAGLE keeps" in limit.source
    flag = get_engine("sglang").context_limit(_sglang_plan(tmp_path, **{"context-length": 2048}), tmp_path)
    assert (flag.tokens, flag.source) == (2048, "server_args.context-length 2048")
    assert get_engine("sglang").context_limit(_sglang_plan(tmp_path / "absent"), tmp_path) is None


def test_the_reference_engine_uses_its_own_limit():
    config = load_configs([REPO / "config.yaml"])
    plans = {name: Plan.from_dict(plan) for name, plan in resolve_plans(config).items()}
    nospec, eagle = (get_engine("reference").context_limit(plans[n], REPO) for n in ("nospec", "eagle3-shm"))
    assert nospec.tokens == 4095 and eagle.tokens == 4092  # 4096 less 1, less the 3 draft steps too
    assert nospec.source.startswith("specsweep/refengine/configs/tiny/config.json: max_position_embeddings 4096")
