"""Speculative decoding decisions: greedy acceptance and simulated accept length.

Kept free of torch and of the model so that the rules can be unit-tested on
plain lists. Accept length follows SGLang: it counts the bonus token, so with
``k`` draft tokens it lies in ``[1, k + 1]``.
"""

from __future__ import annotations

import math
import random
import zlib


def greedy_accept(draft: list[int], target: list[int]) -> int:
    """Number of leading draft tokens the target agrees with (0..len(draft)).

    ``target[j]`` is the target's greedy token after the prefix that ends with
    the j-th verify input, so ``target`` has ``len(draft) + 1`` entries and the
    emitted tokens are ``target[: accepted + 1]`` (accepted drafts plus bonus).
    """
    if len(target) != len(draft) + 1:
        raise ValueError(f"target has {len(target)} tokens, expected {len(draft) + 1}")
    n = 0
    for d, t in zip(draft, target):
        if d != t:
            break
        n += 1
    return n


def parse_simulate_acc_len(value: str | None, num_steps: int | None) -> float | None:
    """Validate ``SGLANG_SIMULATE_ACC_LEN`` (None, empty or <= 0 = off, as SGLang's default -1)."""
    if value is None or value.strip() == "":
        return None
    try:
        mean = float(value)
    except ValueError as exc:
        raise ValueError(f"SGLANG_SIMULATE_ACC_LEN={value!r} is not a number") from exc
    if mean <= 0:
        return None
    if num_steps is None:
        raise ValueError(
            "SGLANG_SIMULATE_ACC_LEN is set but speculative decoding is off (--speculative-algorithm NONE)")
    if not 1.0 <= mean <= num_steps + 1:
        raise ValueError(
            f"SGLANG_SIMULATE_ACC_LEN={mean} is outside [1, {num_steps + 1}] (accept length counts the bonus token)")
    return mean


class SimulatedAcceptance:
    """Deterministic accept lengths whose running mean tracks ``mean`` exactly.

    Error diffusion: each verify adds ``mean`` to an accumulator and accepts its
    integer part, so every length is floor(mean) or ceil(mean) and after N
    verifies the total is within one token of N * mean. A per-request phase
    (seeded from the engine seed and the prompt) staggers requests without
    making output depend on arrival order.
    """

    def __init__(self, mean: float, max_len: int, seed: int, key: list[int]) -> None:
        if not 1.0 <= mean <= max_len:
            raise ValueError(f"mean accept length {mean} outside [1, {max_len}]")
        self.mean = mean
        self.max_len = max_len
        digest = zlib.crc32(repr((seed, key)).encode())
        self.acc = random.Random(digest).random()

    def next(self) -> int:
        self.acc += self.mean
        n = math.floor(self.acc)
        self.acc -= n
        return max(1, min(self.max_len, n))
