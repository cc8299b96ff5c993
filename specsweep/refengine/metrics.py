"""Prometheus metrics under SGLang's names where SGLang has one, ``refengine:`` otherwise.

A private registry (not prometheus_client's global one) so that importing the
engine in a test or in the workflow's preflight registers nothing globally.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

LATENCY_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
                   7.5, 10.0, 15.0, 20.0, 30.0, 60.0, 120.0, 300.0)
STEP_BUCKETS = (0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1, 0.25,
                0.5, 1.0)


class Metrics:
    """All server metrics; the scheduler thread calls the ``observe_*`` methods."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self, model_name: str, tp_size: int, backend: str) -> None:
        self.registry = CollectorRegistry()
        labels = {"model_name": model_name}
        names = list(labels)
        r = self.registry

        def counter(name: str, doc: str) -> Any:
            return Counter(name, doc, names, registry=r).labels(**labels)

        def gauge(name: str, doc: str, extra: dict[str, str] | None = None) -> Any:
            lab = {**labels, **(extra or {})}
            return Gauge(name, doc, list(lab), registry=r).labels(**lab)

        def hist(name: str, doc: str, buckets: tuple[float, ...]) -> Any:
            return Histogram(name, doc, names, buckets=buckets, registry=r).labels(**labels)

        self.prompt_tokens = counter("sglang:prompt_tokens", "Number of prefill tokens processed.")
        self.generation_tokens = counter("sglang:generation_tokens", "Number of generation tokens processed.")
        self.num_requests = counter("sglang:num_requests", "Number of requests processed.")
        self.spec_verify_ct = counter("sglang:spec_verify_ct", "Number of speculative verify steps.")
        self.spec_accept_length = gauge("sglang:spec_accept_length",
                                        "Average speculative accept length over the server lifetime.")
        self.num_running = gauge("sglang:num_running_reqs", "The number of running requests.")
        self.gen_throughput = gauge("sglang:gen_throughput", "The generation throughput (token/s), last 10 s.")
        self.num_queue = gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue.")
        self.ttft = hist("sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                         LATENCY_BUCKETS)
        self.itl = hist("sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
                        LATENCY_BUCKETS)
        self.e2e = hist("sglang:e2e_request_latency_seconds", "Histogram of end-to-end request latency in seconds.",
                        LATENCY_BUCKETS)
        self.draft_seconds = hist("refengine:draft_seconds", "Draft phase time per engine step.", STEP_BUCKETS)
        self.verify_seconds = hist("refengine:verify_seconds",
                                   "Verify (target forward) time per engine step; decode steps without speculation.",
                                   STEP_BUCKETS)
        self.verify_comm_seconds = counter("refengine:verify_allreduce_seconds",
                                           "Seconds spent in all-reduces during verify forwards.")
        self.verify_allreduce = counter("refengine:verify_allreduce",
                                        "All-reduce calls during verify forwards.")
        self.backend_info = gauge("refengine:all_reduce_backend_info", "All-reduce backend in use (value 1).",
                                  {"backend": backend, "tp_size": str(tp_size)})
        self.backend_info.set(1)

    def observe_step(self, draft_s: float, verify_s: float, comm_s: float | None, allreduce_ct: int,
                     mean_accept: float | None) -> None:
        """``comm_s`` is None for a forward replayed from a CUDA graph over several ranks (not timed)."""
        self.draft_seconds.observe(draft_s)
        self.verify_seconds.observe(verify_s)
        if comm_s is not None:
            self.verify_comm_seconds.inc(comm_s)
        self.verify_allreduce.inc(allreduce_ct)

    def observe_first_token(self, seconds: float) -> None:
        self.ttft.observe(seconds)

    def observe_inter_token(self, seconds: float) -> None:
        self.itl.observe(seconds)

    def observe_finished(self, req: Any, e2e_s: float, avg_accept: float | None) -> None:
        self.prompt_tokens.inc(len(req.input_ids))
        self.generation_tokens.inc(len(req.output_ids))
        self.num_requests.inc()
        self.e2e.observe(e2e_s)
        if avg_accept is not None:
            self.spec_verify_ct.inc(req.verify_ct)
            self.spec_accept_length.set(avg_accept)

    def set_queue(self, running: int, waiting: int) -> None:
        self.num_running.set(running)
        self.num_queue.set(waiting)

    def render(self) -> bytes:
        return generate_latest(self.registry)
