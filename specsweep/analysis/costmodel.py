"""The cost model of one decode step from its measured parts, and the communication budget it implies.

One step of decoding, with speculation a cycle (the draft steps + one verify), without it one
target forward of one token per request::

    predicted_ms = fixed_ms + allreduces x latency_us / 1e3
    fixed_ms     = draft_ms + verify_compute_ms          (speculation)
                 = decode_compute_ms                     (no speculation)
    tok/s        = tokens / predicted_ms x 1e3           (tokens = accept length; 1 without speculation)

``draft_ms``, ``verify_compute_ms`` (= verify - its communication) and ``allreduces`` (per target
forward) are the engine's own timing; ``latency_us`` is the all-reduce micro-benchmark's median at
the target forward's message size, measured before the server started (``serve/allreduce_bench.py``):
for the reference engine between the layers of its own model (``in_forward``: on a CPU a collective
between compute costs 3-6x the back-to-back loop's figure), for SGLang back to back (its model runs
only inside its server). The draft's own all-reduces
stay inside ``draft_ms`` as measured (the draft is one layer: 2 all-reduces a step against the
target's 2 per layer), so the budget below prices only the target forward's all-reduces at the
latency it varies. A step without communication (TP=1) has ``allreduces = 0``.

What the model leaves out is the residual, measured - predicted, which splits exactly into

* ``outside_ms`` = measured step - the engine's phases (draft + verify, or the decode forward):
  scheduling, sampling and streaming between forwards, which the client's clock sees and the
  engine's phases do not;
* ``comm_missed_ms`` = the engine's in-forward communication - allreduces x latency: what the
  micro-benchmark does not see (for a back-to-back loop: interleaving with compute and waiting for
  the slower rank; in forwards: the server's own threads and the client beside the ranks; a
  different message size).

The budget (``latency_budget_us``): speculation beats a baseline decode rate ``B`` (tok/s) when
``accept / predicted_ms x 1e3 > B``, i.e. when one all-reduce takes less than
``(accept / B x 1e3 - fixed_ms) / allreduces x 1e3`` us: the formula
``accept_length > cycle_time_s x baseline_tok_s`` solved for the latency. Its inverse
(``accept_needed``) is the accept length needed at a given latency. Against its own
no-speculation counterpart on the same link (``own_crossover``) both sides pay the latency, the
baseline ``allreduces`` per token and speculation ``allreduces / accept`` per token, so a slower
link can make speculation pay more, not less (vLLM RFC #56128's 2.27x on NCCL vs 2.06x on PCIe
peer-to-peer at batch 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: A residual beyond this share of the measured step is large: the report names the part the model misses.
RESIDUAL_LARGE = 0.10

RESIDUAL_PARTS = {
    "outside_ms": "time outside the engine's draft and verify phases (scheduling, sampling, streaming)",
    "comm_missed_ms": "communication beyond all-reduces x the micro-benchmark's latency (what its timing does "
                      "not see: waiting for the slower rank, interleaving with compute, another message size)",
}


@dataclass(frozen=True)
class StepParts:
    """The measured parts of one step (see the module docstring); ``latency_us`` None only without all-reduces."""

    fixed_ms: float
    allreduces: float
    latency_us: float | None
    tokens: float = 1.0

    def __post_init__(self) -> None:
        if self.allreduces > 0 and self.latency_us is None:
            raise ValueError("a step with all-reduces needs their latency")
        if self.tokens <= 0:
            raise ValueError("tokens per step must be positive")

    @property
    def comm_ms(self) -> float:
        """The modelled communication per step, ms: ``allreduces x latency_us / 1e3`` (0 without all-reduces)."""
        return 0.0 if self.allreduces == 0 else self.allreduces * float(self.latency_us) / 1e3  # type: ignore[arg-type]


def predicted_ms(parts: StepParts, latency_us: float | None = None) -> float:
    """Predicted step time, ms, at the measured latency or at ``latency_us``."""
    if latency_us is None:
        return parts.fixed_ms + parts.comm_ms
    return parts.fixed_ms + parts.allreduces * latency_us / 1e3


def predicted_tok_s(parts: StepParts, latency_us: float | None = None) -> float:
    """Predicted single-stream decode rate, tok/s: ``tokens / predicted_ms x 1e3``."""
    return parts.tokens / predicted_ms(parts, latency_us) * 1e3


def residual(measured_ms: float, predicted: float, engine_phases_ms: float, engine_comm_ms: float,
             model_comm_ms: float) -> dict[str, float]:
    """measured - predicted, its share of the measured step, and its two parts (module docstring);
    ``outside_ms + comm_missed_ms == residual_ms`` when ``predicted`` used the engine's compute."""
    return {"residual_ms": measured_ms - predicted, "residual_share": (measured_ms - predicted) / measured_ms,
            "outside_ms": measured_ms - engine_phases_ms, "comm_missed_ms": engine_comm_ms - model_comm_ms}


def missed_part(res: dict[str, float], large: float = RESIDUAL_LARGE) -> str | None:
    """Which part the model misses, when the residual is large (None when it is not)."""
    if abs(res["residual_share"]) <= large:
        return None
    key = max(RESIDUAL_PARTS, key=lambda k: abs(res[k]))
    return key


def latency_budget_us(parts: StepParts, baseline_tok_s: float) -> float | None:
    """All-reduce latency per call, us, below which this step beats ``baseline_tok_s``:
    ``(tokens / baseline_tok_s x 1e3 - fixed_ms) / allreduces x 1e3``. None without all-reduces
    (communication absent: no latency to budget). Negative: no latency is low enough (the fixed
    part alone is slower than the baseline)."""
    if parts.allreduces == 0:
        return None
    return (parts.tokens / baseline_tok_s * 1e3 - parts.fixed_ms) / parts.allreduces * 1e3


def accept_needed(parts: StepParts, baseline_tok_s: float, latency_us: float | None = None) -> float:
    """Accept length needed to equal ``baseline_tok_s`` at the measured latency or ``latency_us``:
    ``baseline_tok_s x predicted_ms / 1e3`` (the break-even accept length of the model)."""
    return baseline_tok_s * predicted_ms(parts, latency_us) / 1e3


def own_crossover(spec: StepParts, plain: StepParts) -> dict[str, Any]:
    """Where speculation (``spec``, ``tokens`` = accept length) equals its own counterpart without it
    (``plain``, one token a step) when both pay the same latency L per all-reduce.

    Speculation pays iff ``A (S + n_s L) > D + n_v L`` (A accept length, S and D the fixed parts,
    n_s and n_v the all-reduces per step), i.e. ``c + k L > 0`` with ``c = A S - D`` and
    ``k = A n_s - n_v`` (per 1e3 us). Returns ``{"pays": "always"|"never"|"above"|"below",
    "latency_us": L* or None}``: above = pays when L > L*, below = when L < L*.
    """
    a = spec.tokens
    c = a * plain.fixed_ms - spec.fixed_ms
    k = (a * plain.allreduces - spec.allreduces) / 1e3
    if k == 0:
        return {"pays": "always" if c > 0 else "never", "latency_us": None}
    cross = -c / k
    if k > 0:
        return {"pays": "always", "latency_us": None} if cross <= 0 else {"pays": "above", "latency_us": cross}
    return {"pays": "never", "latency_us": None} if cross <= 0 else {"pays": "below", "latency_us": cross}
