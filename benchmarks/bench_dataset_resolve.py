"""Plan-resolution cost of a dataset: the first start (select, write) against later ones (stat + index).

    python3 benchmarks/bench_dataset_resolve.py WORKDIR N_CONVERSATIONS

Makes a ShareGPT file of N synthetic conversations in WORKDIR (once), then times
``plan.datasets.resolve_prompts`` twice, with the reference engine's byte tokenizer
and with a tiny Hugging Face tokenizer (the transformers import is in its first start).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from specsweep.plan.datasets import resolve_prompts
from specsweep.plan.resolve import builtin_defaults, merged_entry
from specsweep.testing.datasets import sharegpt_conversations, write_tokenizer


def main(work: Path, n: int) -> None:
    work.mkdir(parents=True, exist_ok=True)
    os.chdir(work)
    data = work / "big.json"
    if not data.exists():
        data.write_text(json.dumps(sharegpt_conversations(n)))
    tok = write_tokenizer(work / "tok")
    print(f"dataset {data.stat().st_size / 1e6:.1f} MB, {n} conversations")
    for label, extra in (("byte tokenizer", {}), ("HF tokenizer", {"tokenizer": str(tok)})):
        workload = {"endpoint": "chat", "input_len": 256, "dataset": {"format": "sharegpt", "path": str(data), **extra}}
        entry = merged_entry({"configurations": {"c": {"workload": workload}}}, "c", builtin_defaults())
        t0 = time.perf_counter()
        first = resolve_prompts(entry, "refengine-bytes", write=True)
        t1 = time.perf_counter()
        later = resolve_prompts(entry, "refengine-bytes", write=True)
        t2 = time.perf_counter()
        assert first == later
        print(f"{label}: first start {t1 - t0:.2f} s, later start {(t2 - t1) * 1e3:.2f} ms ({first['count']} prompts)")


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]))
