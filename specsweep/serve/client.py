"""The streaming benchmark client: one timing core for both engines.

``run_workload`` warms the server up until its throughput is steady, then
runs ``repeats`` measured rounds of ``num_prompts`` requests, either at a
fixed concurrency or with seeded Poisson arrivals at ``request_rate``. Every
request becomes one raw record (``specsweep.records.new_record``) with its send time and
every chunk's arrival time (``time.perf_counter_ns``); token counts come from
the server. Failed and incomplete requests are recorded, never dropped.

Each phase's file is written atomically when the phase ends (temp + rename):
a crash leaves no file, never a truncated one that looks complete.

What the client knows of an endpoint it asks the endpoint registry
(``specsweep.contracts.endpoints``: path, whether it needs the served model
name) and the endpoint's adapter (``specsweep.serve.payloads``: payload,
chunk parsing); the timing loop below is shared.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, TextIO

import aiohttp

from specsweep.contracts.endpoints import get_endpoint
from specsweep.contracts.vocabulary import Failure, Reason, RequestStatus, Stage
from specsweep.files import write_jsonl_atomic
from specsweep.records import DEFAULT_POINT, new_record, new_run_id
from specsweep.serve.console import Console
from specsweep.serve.drive import Gate, drive
from specsweep.serve.payloads import EndpointAdapter, Prompt, StreamState, get_adapter, make_prompt, prompt_key
from specsweep.warmup import warmup_report, warmup_windows_tok_s, windows_converged

_HEADERS = {"Content-Type": "application/json", "Accept": "text/event-stream"}
_CONNECT_PREFIX = "connection failed: "


class BenchmarkError(Failure):
    """The benchmark could not produce a measurement: a ``Failure`` of stage ``warmup`` or ``benchmark``,
    reason ``unreachable``, ``all_requests_failed`` or ``repeat_failed``, the detail naming the first
    errors seen."""


@dataclass(frozen=True)
class _Request:
    """One request ready to send: its record skeleton and serialised body."""

    base: dict[str, Any]
    body: bytes


async def stream_one(
    session: aiohttp.ClientSession, url: str, req: _Request, adapter: EndpointAdapter, timeout_s: float
) -> dict[str, Any]:
    """Send one streaming request and time every chunk; return its raw record.

    Status: ``ok`` when the stream reached ``data: [DONE]``; ``error`` when no
    valid stream was obtained (connection failure, HTTP status != 200, an
    ``error`` object or a malformed chunk); ``incomplete`` when a 200 stream
    stopped before ``[DONE]`` (timeout, disconnect).
    """
    state = StreamState()
    chunk_ns: list[int] = []
    chunk_tokens: list[int | None] = []
    status, error, http_status, end_ns = RequestStatus.INCOMPLETE, None, None, None
    started = False
    send_ns = time.perf_counter_ns()
    try:
        async with session.post(
            url, data=req.body, headers=_HEADERS, timeout=aiohttp.ClientTimeout(total=timeout_s)
        ) as resp:
            http_status = resp.status
            if resp.status != 200:
                text = (await resp.read()).decode("utf-8", "replace")[:500]
                status, error, end_ns = RequestStatus.ERROR, f"HTTP {resp.status}: {text}", time.perf_counter_ns()
            else:
                started = True
                buf = b""
                done = False
                async for data in resp.content.iter_any():
                    now = time.perf_counter_ns()  # arrival time of this network read
                    lines = (buf + data).split(b"\n")
                    buf = lines.pop()
                    for line in lines:
                        if not line.startswith(b"data:"):
                            continue  # blank separators, comments, event: lines
                        payload = line[5:].strip()
                        if payload == b"[DONE]":
                            done, end_ns = True, now
                            break
                        n_new = adapter.feed(state, json.loads(payload))
                        if state.error is not None:
                            break
                        chunk_ns.append(now)
                        chunk_tokens.append(n_new)
                    if done or state.error is not None:
                        break
                if state.error is not None:
                    status, error = RequestStatus.ERROR, f"server error in stream: {state.error}"
                    end_ns = time.perf_counter_ns()
                elif done:
                    status = RequestStatus.OK
                else:
                    status, error = RequestStatus.INCOMPLETE, "stream ended without [DONE]"
                    end_ns = time.perf_counter_ns()
    except TimeoutError:
        status = RequestStatus.INCOMPLETE if started else RequestStatus.ERROR
        error, end_ns = f"timeout after {timeout_s} s", time.perf_counter_ns()
    except aiohttp.ClientConnectorError as exc:
        status, error, end_ns = RequestStatus.ERROR, f"{_CONNECT_PREFIX}{exc}", time.perf_counter_ns()
    except aiohttp.ClientError as exc:
        status = RequestStatus.INCOMPLETE if started else RequestStatus.ERROR
        error, end_ns = f"{type(exc).__name__}: {exc}", time.perf_counter_ns()
    except OSError as exc:  # a socket error aiohttp did not wrap
        status = RequestStatus.INCOMPLETE if started else RequestStatus.ERROR
        error, end_ns = f"{type(exc).__name__}: {exc}", time.perf_counter_ns()
    except ValueError as exc:  # json.JSONDecodeError and UnicodeDecodeError are ValueErrors
        status, error, end_ns = RequestStatus.ERROR, f"malformed chunk: {exc}", time.perf_counter_ns()

    return new_record(
        **req.base,
        send_ns=send_ns,
        chunk_ns=chunk_ns,
        chunk_tokens=chunk_tokens,
        end_ns=end_ns,
        http_status=http_status,
        prompt_tokens=state.prompt_tokens,
        completion_tokens=state.completion_tokens,
        spec_verify_ct=state.spec_verify_ct,
        spec_accept_length=state.spec_accept_length,
        spec_correct_drafts_histogram=state.spec_correct_drafts_histogram,
        output_ids=state.output_ids,
        e2e_latency_s=state.e2e_latency_s,
        timing=state.timing,
        finish_reason=state.finish_reason,
        status=status,
        error=error,
    )


class _Progress:
    """A log line every ``every`` completed requests: done, failures, running tok/s."""

    def __init__(self, log: TextIO, label: str, total: int, every: int | None = None,
                 console: Console | None = None, final_shown: bool = False) -> None:
        self.log, self.label, self.total, self.console = log, label, total, console
        self.final_shown = final_shown  # the terminal gets this round's last line (the last measured round's)
        self.every = every or max(1, total // 10)
        self.done = self.failed = self.tokens = 0
        self.t0 = time.perf_counter()

    def update(self, rec: dict[str, Any]) -> None:
        self.done += 1
        if rec["status"] == RequestStatus.OK and rec["completion_tokens"] is not None:
            self.tokens += rec["completion_tokens"]
        else:
            self.failed += 1
        if self.done % self.every == 0 or self.done == self.total:
            self.line()

    def line(self) -> None:
        dt = time.perf_counter() - self.t0
        rate = f"{self.tokens / dt:.1f}" if dt > 0 else "n/a"
        text = (f"[{self.label}] {self.done}/{self.total} requests, {self.failed} failed, "
                f"{rate} output tok/s running, {dt:.1f} s")
        self.log.write(text + "\n")
        self.log.flush()
        if self.console is not None:  # the terminal: after a silence, and the last round's last line
            self.console.progress(self.label, text, final=self.final_shown and self.done == self.total)


def _failure_detail(records: list[dict[str, Any]]) -> tuple[str, str]:
    """(reason, detail) for a phase in which no request succeeded."""
    errors = [r["error"] or r["status"] for r in records]
    if records and all(e.startswith(_CONNECT_PREFIX) for e in errors):
        reason = Reason.UNREACHABLE
    else:
        reason = Reason.ALL_REQUESTS_FAILED
    distinct = list(dict.fromkeys(errors))[:3]
    return reason, f"{len(records)} requests, 0 succeeded; first errors: {distinct}"


def check_workload(workload: dict[str, Any]) -> None:
    """Raise ``ValueError`` for workload values the client cannot run (schema defaults are upstream)."""
    problems = []
    for key in ("num_prompts", "repeats", "concurrency", "output_len"):
        if int(workload[key]) < 1:
            problems.append(f"{key} must be >= 1, got {workload[key]}")
    if int(workload["input_len"]) < 0:
        problems.append(f"input_len must be >= 0, got {workload['input_len']}")
    rate = workload.get("request_rate")
    if rate is not None and float(rate) <= 0:
        problems.append(f"request_rate must be > 0 or null, got {rate}")
    w = workload["warmup"]
    if int(w["window"]) < 1 or int(w["min_windows"]) < 1 or int(w["max_requests"]) < 0:
        problems.append(f"warmup needs window >= 1, min_windows >= 1, max_requests >= 0: {w}")
    if float(workload["request_timeout_s"]) <= 0:
        problems.append(f"request_timeout_s must be > 0, got {workload['request_timeout_s']}")
    if problems:
        raise ValueError("; ".join(problems))


class _Runner:
    """State shared by the phases of one ``run_workload`` call."""

    def __init__(self, base_url: str, workload: dict[str, Any], log: TextIO,
                 prompts: list[Prompt] | None = None, run_id: str | None = None, point: str = DEFAULT_POINT,
                 console: Console | None = None, gate: Gate | None = None) -> None:
        check_workload(workload)
        self.console = console
        self.gate = gate  # windows of warmup and measurement (serve.sidebyside); None: no windows
        self.workload = workload
        self.prompts = prompts
        self.point = point
        self.endpoint = get_endpoint(workload["endpoint"])
        if not self.endpoint.streams:  # stream_one times SSE chunks; a whole-body answer has none
            raise ValueError(f"endpoint {self.endpoint.name!r} does not stream; the client times streamed answers")
        self.adapter = get_adapter(self.endpoint.name)
        self.base_url = base_url
        self.url = base_url.rstrip("/") + self.endpoint.path
        self.log = log
        self.run_id = run_id or new_run_id()
        self.timeout_s = float(workload["request_timeout_s"])
        self.rate = workload.get("request_rate")
        self.concurrency = int(workload["concurrency"])

    async def name_model(self, session: aiohttp.ClientSession) -> None:
        """Ask the server which model it serves, where the endpoint's body names it and the workload does not."""
        if self.endpoint.needs_model_name and "model" not in self.workload:
            model = await served_model_name(session, self.base_url, self.log)
            if model is not None:
                self.adapter = get_adapter(self.endpoint.name, model)

    def request(self, phase: str, repeat: int | None, index: int) -> _Request:
        """Record skeleton and body of one request (prompt built before timing starts)."""
        w = self.workload
        prompt = self.prompt(phase, repeat, index)
        body = json.dumps(self.adapter.build_payload(prompt, w)).encode()
        tag = "w" if phase == "warmup" else f"m{repeat}" if phase == "measured" else phase
        base = {
            "run_id": self.run_id,
            "point": self.point,
            # unique within the run: the points of one launch share its run id
            "request_id": f"{self.run_id}-{tag}-{index:05d}" if self.point == DEFAULT_POINT
            else f"{self.run_id}-{self.point}-{tag}-{index:05d}",
            "phase": phase,
            "repeat": repeat,
            "window": None,
            "index": index,
            "endpoint": self.endpoint.name,
            "prompt_key": prompt_key(self.endpoint.name, self.adapter.prompt_fields(prompt), int(w["output_len"])),
            "input_len": self.adapter.intended_len(prompt),
            "output_len": int(w["output_len"]),
            "scheduled_ns": None,
        }
        return _Request(base=base, body=body)

    def prompt(self, phase: str, repeat: int | None, index: int) -> Prompt:
        """The prompt of one request: synthetic (``make_prompt``), or the plan's selected prompts.

        Selected prompts are laid out measured first, ``repeat * num_prompts +
        index``, then warmup: so the measured requests of two configurations
        with the same dataset, seed and lengths get the same prompts whatever
        their warmup settings (``plan.datasets.prompts_needed``).
        """
        w = self.workload
        if self.prompts is None:
            return make_prompt(int(w["seed"]), phase, repeat, index, int(w["input_len"]))
        n, repeats = int(w["num_prompts"]), int(w["repeats"])
        slot = repeat * n + index if phase == "measured" else repeats * n + index
        return self.prompts[slot % len(self.prompts)]

    async def send(
        self, session: aiohttp.ClientSession, req: _Request, scheduled_ns: int | None
    ) -> dict[str, Any]:
        """Send one request; ``scheduled_ns`` is its Poisson arrival time (rate mode)."""
        req.base["scheduled_ns"] = scheduled_ns
        return await stream_one(session, self.url, req, self.adapter, self.timeout_s)

    async def warmup(self, session: aiohttp.ClientSession, path: Path) -> dict[str, Any]:
        """Warm up until the last ``min_windows`` windows agree within ``tolerance``.

        Windows are consecutive groups of ``window`` requests in completion
        order; a window's throughput is its completed tokens over the time
        since the previous window ended (``warmup.warmup_windows_tok_s``).
        """
        cfg = self.workload["warmup"]
        window, tol = int(cfg["window"]), float(cfg["tolerance"])
        min_windows, cap = int(cfg["min_windows"]), int(cfg["max_requests"])
        reqs = [self.request("warmup", None, i) for i in range(cap)]
        records: list[dict[str, Any]] = []
        stop = {"converged": False, "failed_window": False}
        progress = _Progress(self.log, "warmup", cap, every=window, console=self.console)

        def on_done(rec: dict[str, Any]) -> None:
            stopped = stop["converged"] or stop["failed_window"]
            n_done = len(records)
            rec["window"] = None if stopped else n_done // window
            records.append(rec)
            progress.update(rec)
            if stopped or (n_done + 1) % window:
                return
            tok_s = warmup_windows_tok_s(records, window)
            if not any(r["status"] == RequestStatus.OK for r in records):
                stop["failed_window"] = True  # a whole window, nothing succeeded: fail fast
            elif windows_converged(tok_s, tol, min_windows):
                stop["converged"] = True

        await drive(
            lambda i, sched: self.send(session, reqs[i], sched),
            limit=cap,
            concurrency=self.concurrency,
            request_rate=self.rate,
            arrival_seed=f"arrivals:{self.workload['seed']}:warmup",
            should_stop=lambda: stop["converged"] or stop["failed_window"],
            on_done=on_done,
            gate=self.gate,
            label="warmup",
        )
        write_jsonl_atomic(path, records)
        report = {**warmup_report(records, cfg), "run_id": self.run_id}
        self.log.write(f"[warmup] done: {json.dumps(report)}\n")
        self.log.flush()
        if self.console is not None:
            self.console.say(f"[warmup] {'steady' if report.get('converged') else 'not steady'} after "
                             f"{len(records)} requests")
        if records and not any(r["status"] == RequestStatus.OK for r in records):
            raise BenchmarkError(Stage.WARMUP, *_failure_detail(records))
        return report

    async def measure(self, session: aiohttp.ClientSession, path: Path) -> list[dict[str, Any]]:
        """``repeats`` independent rounds of ``num_prompts`` requests, drained between rounds."""
        n, repeats = int(self.workload["num_prompts"]), int(self.workload["repeats"])
        records: list[dict[str, Any]] = []
        failure: BenchmarkError | None = None
        for r in range(repeats):
            reqs = [self.request("measured", r, i) for i in range(n)]
            round_records: list[dict[str, Any]] = []
            progress = _Progress(self.log, f"measured {r + 1}/{repeats}", n, console=self.console,
                                 final_shown=r + 1 == repeats)

            def on_done(rec: dict[str, Any], _rr: list[dict[str, Any]] = round_records) -> None:
                _rr.append(rec)
                progress.update(rec)

            await drive(
                lambda i, sched, _reqs=reqs: self.send(session, _reqs[i], sched),
                limit=n,
                concurrency=self.concurrency,
                request_rate=self.rate,
                arrival_seed=f"arrivals:{self.workload['seed']}:measured:{r}",
                should_stop=lambda: False,
                on_done=on_done,
                gate=self.gate,
                label="measured",
            )
            records.extend(round_records)
            if round_records and not any(x["status"] == RequestStatus.OK for x in round_records):
                reason, detail = _failure_detail(round_records)
                if any(x["status"] == RequestStatus.OK for x in records):
                    reason = Reason.REPEAT_FAILED  # the server worked earlier in this run, then stopped
                failure = BenchmarkError(Stage.BENCHMARK, reason, f"repeat {r}: {detail}")
                break
        write_jsonl_atomic(path, records)
        if failure is not None:
            raise failure
        return records

    async def phase(self, session: aiohttp.ClientSession, phase: str, n: int, path: Path) -> list[dict[str, Any]]:
        """``n`` requests of the workload outside warmup and measurement (e.g. while the engine's profiler records).

        Same prompts generator, lengths, endpoint and concurrency (or arrival rate)
        as the measured rounds; the records carry ``phase`` and never enter the metrics.
        """
        reqs = [self.request(phase, None, i) for i in range(n)]
        records: list[dict[str, Any]] = []
        progress = _Progress(self.log, phase, n)

        def on_done(rec: dict[str, Any]) -> None:
            records.append(rec)
            progress.update(rec)

        await drive(
            lambda i, sched: self.send(session, reqs[i], sched),
            limit=n,
            concurrency=self.concurrency,
            request_rate=self.rate,
            arrival_seed=f"arrivals:{self.workload['seed']}:{phase}",
            should_stop=lambda: False,
            on_done=on_done,
        )
        write_jsonl_atomic(path, records)
        if records and not any(r["status"] == RequestStatus.OK for r in records):
            raise BenchmarkError(phase, *_failure_detail(records))
        return records


async def served_model_name(session: aiohttp.ClientSession, base_url: str, log: TextIO) -> str | None:
    """The first model id of ``GET /v1/models`` (OpenAI ``model`` field), or None when not served.

    OpenAI-compatible servers may reject a ``model`` they do not serve; asking is
    cheaper than guessing. A failure is logged, and the adapter's default is used.
    """
    try:
        async with session.get(base_url.rstrip("/") + "/v1/models", timeout=aiohttp.ClientTimeout(total=10)) as r:
            if r.status == 200:
                data = (await r.json()).get("data") or []
                if data and data[0].get("id"):
                    return str(data[0]["id"])
            log.write(f"[client] GET /v1/models: HTTP {r.status} or no model id; using the default model name\n")
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        log.write(f"[client] GET /v1/models failed ({type(exc).__name__}: {exc}); using the default model name\n")
    return None


async def run_workload_async(
    base_url: str, workload: dict[str, Any], warmup_path: Path, measured_path: Path, log: TextIO,
    prompts: list[Prompt] | None = None, run_id: str | None = None,
    on_stage: Callable[[str], None] | None = None, point: str = DEFAULT_POINT, console: Console | None = None,
    gate: Gate | None = None,
) -> dict[str, Any]:
    """Async body of ``run_workload``."""
    runner = _Runner(base_url, workload, log, prompts, run_id, point, console, gate)
    mode = (
        f"request_rate={runner.rate}/s (Poisson, seeded)"
        if runner.rate is not None
        else f"concurrency={runner.concurrency}"
    )
    log.write(f"[client] run {runner.run_id}: {runner.url} {mode} workload={json.dumps(workload, sort_keys=True)}\n")
    log.flush()
    connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300)
    async with aiohttp.ClientSession(connector=connector, read_bufsize=2**18) as session:
        await runner.name_model(session)
        if on_stage is not None:
            on_stage(Stage.WARMUP)
        report = await runner.warmup(session, Path(warmup_path))
        if on_stage is not None:
            on_stage(Stage.BENCHMARK)
        await runner.measure(session, Path(measured_path))
    return report


def run_workload(base_url: str, workload: dict, warmup_path: Path, measured_path: Path, log: TextIO,
                 prompts: list[Prompt] | None = None, run_id: str | None = None,
                 on_stage: Callable[[str], None] | None = None, point: str = DEFAULT_POINT,
                 console: Console | None = None, gate: Gate | None = None) -> dict:
    """Warm up, then measure; write ``warmup_path`` and ``measured_path`` (JSONL).

    ``prompts``: the plan's selected prompts (``serve.phases.load_prompts``);
    ``None`` = synthetic prompts (``payloads.make_prompt``, the ``random`` dataset).
    ``run_id`` is the server job's run id (every record carries it; a fresh one
    when None). ``on_stage`` is called with ``"warmup"`` and then ``"benchmark"``
    as each phase starts, so that an interruption is recorded with its stage.
    Every record carries ``point`` (the workload point of the launch it belongs to).
    ``console``: where the progress also goes, rate-limited (the terminal; ``serve.console``).
    ``gate``: warmup and measurement in windows, each inside the gate (``Gate``; side-by-side rounds).

    Returns the warmup report ``{"requests", "windows_tok_s", "converged",
    "tolerance", ...}``. Raises ``BenchmarkError`` (stage ``warmup`` or
    ``benchmark``) when the server is unreachable or every request of a phase
    (or of one measured round) failed; the phase's records are written first.
    """
    return asyncio.run(run_workload_async(base_url, workload, warmup_path, measured_path, log, prompts, run_id,
                                          on_stage, point, console, gate))


async def run_phase_async(base_url: str, workload: dict[str, Any], phase: str, n: int, path: Path,
                          log: TextIO, prompts: list[Prompt] | None = None,
                          run_id: str | None = None) -> list[dict[str, Any]]:
    """Async body of ``run_phase``."""
    runner = _Runner(base_url, workload, log, prompts, run_id)
    connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300)
    async with aiohttp.ClientSession(connector=connector, read_bufsize=2**18) as session:
        await runner.name_model(session)
        return await runner.phase(session, phase, n, Path(path))


def run_phase(base_url: str, workload: dict, phase: str, n: int, path: Path, log: TextIO,
              prompts: list[Prompt] | None = None, run_id: str | None = None) -> list[dict]:
    """``n`` requests of ``workload`` tagged ``phase`` (e.g. ``profile``), written to ``path`` (JSONL).

    ``prompts``: the plan's selected prompts, as for ``run_workload`` (a phase other than
    warmup and measured takes them from the warmup part of the selection). ``run_id``: the
    server job's (every record carries it), as for ``run_workload``. Raises
    ``BenchmarkError`` (stage ``phase``) when none of them succeeded.
    """
    return asyncio.run(run_phase_async(base_url, workload, phase, n, path, log, prompts, run_id))
