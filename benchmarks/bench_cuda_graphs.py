"""CUDA graphs in the reference engine on one GPU: eager vs graph forwards, the kernel floor, the server.

1. Forwards of the 61-layer model (config/models/refengine-kimi-gpu, bf16, TP=1):
   the verify (k+1 = 4 tokens per request), the draft extend and a chain draft
   step at batch 1, 4 and 16, each eager and as a replayed CUDA graph (median
   wall time of the engine's own call including the argmax that reads the
   logits; the bare replay timed with CUDA events), plus whether both give the
   same argmax tokens.
2. The floor: a torch profiler trace of graph replays (and of eager verifies);
   the sum of one forward's kernel durations, the GPU span from its first
   kernel's start to its last kernel's end, and the ratios of the measured
   times to that sum.
3. A probe: can a timing CUDA event pair be recorded inside a captured graph
   (``torch.cuda.Event(external=True)``) and read after a replay?
4. The server end to end (``python -m specsweep.refengine``): EAGLE3 (simulated
   accept length 2.0) and no speculation, each with CUDA graphs and with
   ``--disable-cuda-graph``, requests interleaved over the four; then a profiler
   trace of the graph server (and a short one of the eager server) through
   ``/start_profile``, trimmed to a few cycles for tests/fixtures/traces.

    python3 benchmarks/bench_cuda_graphs.py --out OUT_DIR

Writes OUT_DIR/graphs-bench.json (every figure), the trimmed traces and
server logs' tails; prints a summary last.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import time
import traceback
import urllib.request
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from specsweep.refengine.comm import make_communicator  # noqa: E402
from specsweep.refengine.config import load_config  # noqa: E402
from specsweep.refengine.cudagraph import GraphPlan, GraphRunner, pool_capacity  # noqa: E402
from specsweep.refengine.model import Segment, TPModel  # noqa: E402
from specsweep.refengine.rendezvous import prepare_spec  # noqa: E402
from specsweep.serve.server import Server as SupervisedServer  # noqa: E402
from specsweep.serve.server import free_port  # noqa: E402

MODEL = REPO / "config" / "models" / "refengine-kimi-gpu"
PROMPT_LEN = 64
K = 3
SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def _median_s(fn: Callable[[], Any], warmup: int, iters: int) -> float:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _replay_median_s(graph: Any, iters: int) -> float:
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
    graph.replay()
    for s, e in events:
        s.record()
        graph.replay()
        e.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in events) / 1e3


def kernel_stats(trace_path: Path, min_kernels: int) -> dict[str, Any]:
    """One forward's kernels in a profiler trace: count, summed durations, GPU span (ms).

    Kernels are grouped by their launch's correlation id (all kernels of one graph
    replay share the cudaGraphLaunch's); if no group reaches ``min_kernels`` (a CUPTI
    that gives graph kernels their own ids), by idle gaps of more than 1 ms, which
    ``_profile`` leaves between iterations. Groups below ``min_kernels`` are dropped.
    """
    events = json.loads(gzip.open(trace_path).read() if trace_path.suffix == ".gz" else trace_path.read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    kernels = sorted((e for e in events if e.get("cat") == "kernel" and e.get("ph") == "X"), key=lambda e: e["ts"])
    by_corr: dict[Any, list[dict]] = {}
    for e in kernels:
        by_corr.setdefault(e.get("args", {}).get("correlation"), []).append(e)
    groups, method = list(by_corr.values()), "correlation"
    if not any(len(g) >= min_kernels for g in groups):
        groups, method, end = [], "gap>1ms", None
        for e in kernels:
            if end is None or e["ts"] - end > 1000:
                groups.append([])
            groups[-1].append(e)
            end = max(end or 0, e["ts"] + e["dur"])
    rows = []
    for ks in groups:
        if len(ks) < min_kernels:
            continue
        start = min(k["ts"] for k in ks)
        stop = max(k["ts"] + k["dur"] for k in ks)
        rows.append({"kernels": len(ks), "kernel_sum_ms": sum(k["dur"] for k in ks) / 1e3,
                     "span_ms": (stop - start) / 1e3})
    return {"groups": rows, "grouped_by": method, "all_kernels": len(kernels),
            "all_kernel_sum_ms": sum(k["dur"] for k in kernels) / 1e3}


def _profile(fn: Callable[[], Any], n: int, path: Path) -> None:
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            fn()
            torch.cuda.synchronize()
            time.sleep(0.003)  # an idle gap between iterations (kernel_stats can split on it)
    prof.export_chrome_trace(str(path))


def bench_graph_comm_timing(iters: int) -> dict[str, Any]:
    """The 61-layer verify (batch 1) with a communicating NCCL forced on one GPU (122 real collectives):
    eager with per-call CUDA events, and replayed graphs with and without the captured timing events."""
    cfg = load_config(MODEL)
    comm = make_communicator(0, prepare_spec("nccl", 1, "cuda", force_collectives=True))
    try:
        model = TPModel(cfg, 0, 1, comm, torch.device("cuda", 0), torch.bfloat16, 0, with_draft=True)
        model.enable_pool(1, pool_capacity(512))
        plan = GraphPlan(batch_sizes=(1,), kv_buckets=(128,), kinds=(("target", K + 1),))
        timed = GraphRunner(model, plan, logits=True)
        timed.capture()
        comm.timed = False
        untimed = GraphRunner(model, plan, logits=True)
        untimed.capture()
        comm.timed = True
        gen = torch.Generator().manual_seed(2)
        model.alloc(0, 512)
        model.forward_target(torch.randint(0, 256, (PROMPT_LEN,), generator=gen).tolist(),
                             [Segment(0, 0, PROMPT_LEN)], "last")
        segs = [Segment(0, PROMPT_LEN - 1, K + 1)]
        ids = torch.randint(0, cfg.vocab_size, (K + 1,), generator=gen).tolist()
        calls = {"eager": lambda: model.forward_target(ids, segs, "all"),
                 "graph_timed": lambda: timed.run(timed.lookup("target", segs), ids, segs, "all"),
                 "graph_untimed": lambda: untimed.run(untimed.lookup("target", segs), ids, segs, "all")}
        out: dict[str, Any] = {"allreduces_per_verify": 2 * cfg.num_hidden_layers}
        for name, fn in calls.items():
            walls, comms, counts = [], [], []
            for i in range(iters + 3):
                comm.reset_stats()
                t0 = time.perf_counter()
                fn().argmax(-1).tolist()
                wall = time.perf_counter() - t0
                count, seconds = comm.stats()
                if i >= 3:
                    walls.append(wall)
                    comms.append(seconds)
                    counts.append(count)
            measured = [c for c in comms if c is not None]
            out[name] = {"wall_ms": statistics.median(walls) * 1e3, "allreduce_ct": statistics.median(counts),
                         "comm_ms": statistics.median(measured) * 1e3 if measured else None,
                         "comm_unmeasured": len(comms) - len(measured)}
            print(f"forced nccl {name:>13}: wall {out[name]['wall_ms']:.2f} ms, comm "
                  f"{out[name]['comm_ms'] if out[name]['comm_ms'] is None else round(out[name]['comm_ms'], 3)} ms "
                  f"over {out[name]['allreduce_ct']} all-reduces", flush=True)
        for name, runner in (("graph_timed", timed), ("graph_untimed", untimed)):
            out[name]["replay_ms"] = _replay_median_s(runner.graphs[runner.lookup("target", segs)][0], iters) * 1e3
        return out
    finally:
        comm.close()


def bench_forwards(batches: list[int], iters: int, tmp: Path, only: set[str] | None = None) -> dict[str, Any]:
    cfg = load_config(MODEL)
    comm = make_communicator(0, prepare_spec("nccl", 1, "cuda"))
    t0 = time.perf_counter()
    model = TPModel(cfg, 0, 1, comm, torch.device("cuda", 0), torch.bfloat16, 0, with_draft=True)
    build_s = time.perf_counter() - t0
    model.enable_pool(max(batches), pool_capacity(512))
    plan = GraphPlan(batch_sizes=tuple(batches), kv_buckets=(128,),
                     kinds=(("target", K + 1), ("draft_extend", K + 1), ("draft_step", 1), ("target", 1)))
    runner = GraphRunner(model, plan, logits=True)
    cap = runner.capture()
    gen = torch.Generator().manual_seed(0)
    out: dict[str, Any] = {"model_build_s": build_s, "capture_s": cap["capture_s"], "graphs": len(cap["captured"]),
                           "capture_failed": cap["failed"], "layers": cfg.num_hidden_layers, "rows": []}
    for slot in range(max(batches)):
        prompt = torch.randint(0, 256, (PROMPT_LEN,), generator=gen).tolist()
        model.alloc(slot, 512)
        model.forward_target(prompt, [Segment(slot, 0, PROMPT_LEN)], "last")
        model.forward_draft(prompt[:-1], [Segment(slot, 0, PROMPT_LEN - 1)], "target", "none")
    torch.cuda.synchronize()
    shapes = {  # name: (kind for the runner, segments for batch b, tokens per segment, eager call)
        "verify": ("target", lambda b: [Segment(s, PROMPT_LEN - 1, K + 1) for s in range(b)],
                   lambda ids, segs: model.forward_target(ids, segs, "all")),
        "decode": ("target", lambda b: [Segment(s, PROMPT_LEN - 1, 1) for s in range(b)],
                   lambda ids, segs: model.forward_target(ids, segs, "all")),
        "draft_extend": ("draft_extend", lambda b: [Segment(s, PROMPT_LEN - 1, 2) for s in range(b)],
                         lambda ids, segs: model.forward_draft(ids, segs, "target", "last")),
        "draft_step": ("draft_step", lambda b: [Segment(s, PROMPT_LEN + 1, 1) for s in range(b)],
                       lambda ids, segs: model.forward_draft(ids, segs, "draft", "last")),
    }
    for name, (kind, make_segs, eager) in shapes.items():
        if only and name not in only:
            continue
        for b in batches:
            segs = make_segs(b)
            ids = torch.randint(0, cfg.vocab_size, (sum(s.length for s in segs),), generator=gen).tolist()
            key = runner.lookup(kind, segs)
            if key is None:
                out["rows"].append({"forward": name, "batch": b, "error": "no graph for this shape"})
                continue
            graph = runner.graphs[key][0]
            eager_tok = eager(ids, segs).argmax(-1).tolist()
            graph_tok = runner.run(key, ids, segs, "all" if kind == "target" else "last").argmax(-1).tolist()
            row = {
                "forward": name, "batch": b, "graph_key": list(key),
                "eager_ms": _median_s(lambda: eager(ids, segs).argmax(-1).tolist(), 3, iters) * 1e3,
                "graph_ms": _median_s(lambda: runner.run(key, ids, segs, "all" if kind == "target" else "last")
                                      .argmax(-1).tolist(), 3, iters) * 1e3,
                "replay_ms": _replay_median_s(graph, iters) * 1e3,
                "tokens": len(eager_tok), "tokens_equal": sum(a == c for a, c in zip(eager_tok, graph_tok)),
            }
            if name == "verify" and b == batches[0]:
                trace = tmp / "graph-verify.json"
                _profile(lambda: runner.run(key, ids, segs, "all").argmax(-1).tolist(), 10, trace)
                ks = kernel_stats(trace, min_kernels=100)
                row["graph_profile"] = _floor(ks, row["replay_ms"], row["graph_ms"])
                # The same fixed-shape forward run without the graph: the same kernels, launched one by one.
                trace = tmp / "static-verify.json"
                _profile(lambda: runner._forward(key, True).argmax(-1).tolist(), 3, trace)
                ks = kernel_stats(trace, min_kernels=10**9)
                per = ks["all_kernel_sum_ms"] / 3
                row["static_eager_profile"] = {"kernels_per_forward": ks["all_kernels"] / 3, "kernel_sum_ms": per,
                                               "replay_over_this_kernel_sum": row["replay_ms"] / per if per else None}
                trace = tmp / "eager-verify.json"
                _profile(lambda: eager(ids, segs).argmax(-1).tolist(), 3, trace)
                ks = kernel_stats(trace, min_kernels=10**9)  # no group qualifies: totals only
                per = ks["all_kernel_sum_ms"] / 3
                row["eager_profile"] = {"kernels_per_forward": ks["all_kernels"] / 3, "kernel_sum_ms": per,
                                        "eager_over_kernel_sum": row["eager_ms"] / per if per else None}
            out["rows"].append(row)
            print(f"{name:>13} b={b:<3} eager {row['eager_ms']:8.2f} ms  graph {row['graph_ms']:7.2f} ms  "
                  f"replay {row['replay_ms']:7.2f} ms  tokens equal {row['tokens_equal']}/{row['tokens']}",
                  flush=True)
    comm.close()
    return out


def _floor(ks: dict[str, Any], replay_ms: float, graph_ms: float) -> dict[str, Any]:
    rows = ks["groups"]
    if not rows:
        return {"error": "no kernel group of >= 100 kernels in the trace (graph kernels not traced?)",
                "all_kernels": ks["all_kernels"]}
    sums = statistics.median(r["kernel_sum_ms"] for r in rows)
    span = statistics.median(r["span_ms"] for r in rows)
    return {"replays_traced": len(rows), "kernels_per_replay": statistics.median(r["kernels"] for r in rows),
            "kernel_sum_ms": sums, "gpu_span_ms": span, "replay_over_kernel_sum": replay_ms / sums,
            "engine_call_over_kernel_sum": graph_ms / sums, "span_over_kernel_sum": span / sums}


def probe_graph_events() -> dict[str, Any]:
    """Time a matmul with an external event pair recorded inside a captured graph."""
    try:
        x = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
        start = torch.cuda.Event(enable_timing=True, external=True)
        end = torch.cuda.Event(enable_timing=True, external=True)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            y = x @ x
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            start.record()
            y = x @ x
            end.record()
        eager = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(5)]
        for a, b in eager:
            a.record()
            y = x @ x
            b.record()
        inside = []
        for _ in range(5):
            g.replay()
            torch.cuda.synchronize()
            inside.append(start.elapsed_time(end))
        torch.cuda.synchronize()
        del y
        return {"works": True, "inside_graph_ms": inside, "eager_ms": [a.elapsed_time(b) for a, b in eager]}
    except Exception as exc:  # the answer to the probe, reported as such
        return {"works": False, "error": f"{type(exc).__name__}: {exc}"}


# ---------------------------------------------------------------- server
def _post(base: str, path: str, body: dict[str, Any], timeout: float = 600) -> Any:
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        raw = r.read()
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw.decode()


def _get(base: str, path: str) -> Any:
    with urllib.request.urlopen(base + path, timeout=60) as r:
        return json.loads(r.read())


def _generate(base: str, prompt: list[int], max_new: int) -> dict[str, Any]:
    return _post(base, "/generate", {"input_ids": prompt, "sampling_params": {"max_new_tokens": max_new,
                                                                            "ignore_eos": True, "temperature": 0}})


def bench_servers(n_req: int, output_len: int, logs: Path, traces: Path, out_dir: Path) -> dict[str, Any]:
    common = ["--model-path", str(MODEL), "--device", "cuda", "--dtype", "bfloat16", "--random-seed", "0"]
    spec = ["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", str(K), "--speculative-eagle-topk", "1",
            "--speculative-num-draft-tokens", str(K + 1)]
    runs = {
        "eagle3-graph": (common + spec, {"SGLANG_SIMULATE_ACC_LEN": "2.0"}),
        "eagle3-eager": (common + spec + ["--disable-cuda-graph"], {"SGLANG_SIMULATE_ACC_LEN": "2.0"}),
        "nospec-graph": (common, {}),
        "nospec-eager": (common + ["--disable-cuda-graph"], {}),
    }
    servers: dict[str, SupervisedServer] = {}
    result: dict[str, Any] = {"startup_s": {}, "rows": {}}
    files = []
    try:
        t0 = time.perf_counter()
        for name, (args, env) in runs.items():  # all start at once: the weights are drawn on the CPU in parallel
            port = free_port("127.0.0.1")
            fh = open(logs / f"{name}.log", "wb")
            files.append(fh)
            srv = SupervisedServer(argv=[sys.executable, "-m", "specsweep.refengine", "--port", str(port), *args],
                                   env={**os.environ, **SAFE_ENV, **env}, host="127.0.0.1", port=port,
                                   ready_path="/ready", log_file=fh)
            srv.start()
            servers[name] = srv
        for name, srv in servers.items():
            srv.wait_ready(600)
            result["startup_s"][name] = time.perf_counter() - t0
        result["server_info_graph"] = _get(servers["eagle3-graph"].base_url, "/server_info").get("cuda_graph")
        result["server_info_eager"] = _get(servers["eagle3-eager"].base_url, "/server_info").get("cuda_graph")
        gen = torch.Generator().manual_seed(1)
        prompts = [torch.randint(97, 123, (PROMPT_LEN,), generator=gen).tolist() for _ in range(n_req + 2)]
        metas: dict[str, list[dict[str, Any]]] = {name: [] for name in servers}
        outputs: dict[str, list[list[int]]] = {name: [] for name in servers}
        for i, p in enumerate(prompts):
            for name, srv in servers.items():
                r = _generate(srv.base_url, p, output_len)
                if i >= 2:
                    metas[name].append(r["meta_info"])
                    outputs[name].append(r["output_ids"])
        from bench_refengine import summarize

        for name, m in metas.items():
            row = summarize(name, m)
            row["verify_graph_ct"] = sum(x["timing"].get("verify_graph_ct", 0) for x in m)
            row["forward_ct"] = sum(x["timing"]["forward_ct"] for x in m)
            result["rows"][name] = row
        result["nospec_same_tokens_graph_vs_eager"] = _same(outputs["nospec-graph"], outputs["nospec-eager"])
        # Traces through the engine's own endpoints.
        for name, steps, file in (("eagle3-graph", 6, "graph"), ("eagle3-eager", 3, "eager")):
            base = servers[name].base_url
            pdir = traces / file
            _post(base, "/start_profile", {"output_dir": str(pdir), "num_steps": steps})
            _generate(base, prompts[0], output_len)
            stop = _post(base, "/stop_profile", {})
            result[f"trace_{file}"] = {"files": stop.get("all_files") if isinstance(stop, dict) else stop}
            raw = sorted(pdir.glob("*.trace.json.gz"))
            if raw:
                result[f"trace_{file}"]["raw_bytes"] = raw[-1].stat().st_size
                result[f"trace_{file}"]["raw_kernels"] = kernel_stats(raw[-1], min_kernels=100)
                dst = out_dir / f"refengine-h200-tp1{'' if file == 'graph' else '-eager'}.trace.json.gz"
                for keep in ((3, 2, 1) if file == "graph" else (1,)):
                    trimmed = trim_trace(raw[-1], dst, skip=1, cycles=keep)
                    if trimmed["bytes_gz"] <= 300_000:
                        break
                result[f"trace_{file}"]["trimmed"] = trimmed
    finally:
        for srv in servers.values():
            srv.stop()
        for fh in files:
            fh.close()
    return result


def _same(a: list[list[int]], b: list[list[int]]) -> dict[str, int]:
    tokens = sum(len(x) for x in a)
    return {"tokens": tokens, "equal": sum(p == q for x, y in zip(a, b) for p, q in zip(x, y)),
            "requests_identical": sum(x == y for x, y in zip(a, b)), "requests": len(a)}


def trim_trace(src: Path, dst: Path, skip: int, cycles: int) -> dict[str, Any]:
    """Keep ``cycles`` speculation cycles of a trace (after skipping ``skip``), all metadata events.

    A cycle starts at the first ``refengine.draft`` range after the previous ``refengine.verify``
    and ends where the next cycle starts, so the GPU work a verify launched (which runs after its
    CPU range ended) stays in.
    """
    data = json.loads(gzip.open(src).read())
    events = data["traceEvents"]
    ranges = sorted((e for e in events if e.get("ph") == "X" and e.get("cat") == "user_annotation"
                     and e.get("name") in ("refengine.draft", "refengine.verify")), key=lambda e: e["ts"])
    starts = []  # ts of each cycle's first draft range
    prev = "refengine.verify"
    for e in ranges:
        if e["name"] == "refengine.draft" and prev == "refengine.verify":
            starts.append(e["ts"])
        prev = e["name"]
    if len(starts) < skip + cycles + 1:
        raise RuntimeError(f"{src}: only {len(starts)} cycles, need {skip + cycles + 1}")
    lo, hi = starts[skip], starts[skip + cycles]
    kept = [e for e in events if e.get("ph") == "M" or (isinstance(e.get("ts"), (int, float)) and lo <= e["ts"] < hi)]
    data["traceEvents"] = kept
    data.setdefault("specsweep", {})["trimmed"] = {"source": src.name, "cycles": cycles, "skipped": skip,
                                                   "window_us": [lo, hi], "events_before": len(events)}
    dst.write_bytes(gzip.compress(json.dumps(data, separators=(",", ":")).encode(), 9, mtime=0))
    return {"events": len(kept), "events_before": len(events), "bytes_gz": dst.stat().st_size, "window_us": hi - lo,
            "cycles": cycles}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--batches", default="1,4,16")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--num-requests", type=int, default=6)
    p.add_argument("--output-len", type=int, default=48)
    p.add_argument("--shapes", default=None, help="comma list of forwards (default: all)")
    p.add_argument("--skip-forwards", action="store_true")
    p.add_argument("--skip-comm-timing", action="store_true")
    p.add_argument("--skip-server", action="store_true")
    a = p.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path("/tmp/bench_cuda_graphs")
    (tmp / "logs").mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {"args": vars(a), "torch": torch.__version__, "cuda": torch.version.cuda,
                              "device": torch.cuda.get_device_name(0)}
    sections: list[tuple[str, Callable[[], Any]]] = []
    only = set(a.shapes.split(",")) if a.shapes else None
    if not a.skip_forwards:
        sections.append(("forwards", lambda: bench_forwards([int(b) for b in a.batches.split(",")], a.iters, tmp,
                                                            only)))
    sections.append(("graph_event_probe", probe_graph_events))
    if not a.skip_comm_timing:
        sections.append(("graph_comm_timing", lambda: bench_graph_comm_timing(a.iters)))
    if not a.skip_forwards:  # the same forwards again, later in the session (drift of the card's state)
        sections.append(("forwards_again", lambda: bench_forwards([int(b) for b in a.batches.split(",")][:1],
                                                                  a.iters, tmp, {"verify"})))
    if not a.skip_server:
        sections.append(("server", lambda: bench_servers(a.num_requests, a.output_len, tmp / "logs", tmp, out)))
    sampler = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,"
                                "utilization.gpu,temperature.gpu", "--format=csv,noheader", "-lms", "500"],
                               stdout=open(out / "gpu-clocks.csv", "wb"), stderr=subprocess.DEVNULL)
    for name, fn in sections:
        print(f"[{name}] at {time.strftime('%H:%M:%S')}", flush=True)
        t0 = time.perf_counter()
        try:
            record[name] = fn()
        except Exception:
            record[name] = {"error": traceback.format_exc()}
            print(f"[{name}] failed:\n{record[name]['error']}", flush=True)
        record[f"{name}_wall_s"] = time.perf_counter() - t0
        (out / "graphs-bench.json").write_text(json.dumps(record, indent=2, default=str) + "\n")
    sampler.terminate()
    sampler.wait(timeout=10)
    tails = []
    for log in sorted((tmp / "logs").glob("*.log")):
        lines = log.read_text(errors="replace").splitlines()
        shown = lines if len(lines) <= 30 else lines[:15] + ["..."] + lines[-15:]
        tails.append(f"===== {log.name} ({len(lines)} lines)\n" + "\n".join(shown))
    (out / "server-logs.txt").write_text("\n\n".join(tails) + "\n")
    print(json.dumps(record, indent=1, default=str)[-6000:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
