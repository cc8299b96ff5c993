"""Tensor-parallel DeepSeek-V3-like decoder plus an EAGLE-3-style draft layer.

Sharding is Megatron-style so that each decoder layer does exactly two
all-reduces, like the real model: attention heads are split over ranks
(column-parallel q/k/v, row-parallel output projection, then all-reduce),
and so are the MLP / expert intermediate dimensions (column-parallel
gate/up, row-parallel down, then all-reduce). Embedding, router, norms and
LM head are replicated, so nothing else communicates.

Simplifications, on purpose: multi-head attention with rotary embeddings
instead of MLA; sigmoid top-k routing without expert groups; dummy weights
only. Weights come from one seeded generator per tensor that produces the
*full* tensor before slicing, so TP=1 and TP=N hold the same model.

Requests are packed into one batch of ``Segment``s: all linear layers and all
all-reduces run once over the concatenated tokens, attention runs per segment
over that request's own KV cache (positions index the cache directly, so a
rejected speculative tail is simply overwritten later).

For CUDA graphs (``refengine.cudagraph``) the per-request buffers live in one
static pool (``enable_pool``: every slot's KV cache, aux features and draft
state at fixed addresses, plus one scratch slot that padding rows write to),
and ``forward_target_static`` / ``forward_draft_static`` compute the same
forwards over a fixed-shape batch (B segments of n tokens, all inputs in
device tensors, no Python-dependent shapes, no host synchronisation): attention
gathers each segment's cache up to a fixed length bucket and masks by
position, KV entries and features are written with index_put. The eager
forwards use the same pool through per-slot views, so the two paths can
alternate on one request.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F

from .comm import Communicator
from .config import ModelConfig


class Segment(NamedTuple):
    """One request's run of consecutive tokens inside a packed batch."""

    slot: int
    start: int  # position of the first token
    length: int


@dataclass
class SlotState:
    """Per-request buffers, identical in layout on every rank (each holds its head shard)."""

    k: torch.Tensor  # [layers, local_heads, capacity, head_dim]
    v: torch.Tensor
    dk: torch.Tensor | None  # draft layer cache [local_heads, capacity, head_dim]
    dv: torch.Tensor | None
    feats: torch.Tensor | None  # target aux features by position [capacity, 3 * hidden]
    draft_hidden: torch.Tensor | None  # draft output at its last processed position [hidden]
    capacity: int


def _seed_for(seed: int, name: str) -> int:
    return zlib.crc32(f"{seed}:{name}".encode())


class TPModel:
    """One rank's shard of the target model and of the draft layer."""

    def __init__(
        self,
        cfg: ModelConfig,
        rank: int,
        world_size: int,
        comm: Communicator,
        device: torch.device,
        dtype: torch.dtype,
        seed: int,
        with_draft: bool,
        draft_cfg: ModelConfig | None = None,
    ) -> None:
        self.cfg = cfg
        self.draft_cfg = draft_cfg or cfg
        self.rank = rank
        self.world_size = world_size
        self.comm = comm
        self.device = device
        self.dtype = dtype
        self.seed = seed
        self.with_draft = with_draft
        self.local_heads = cfg.num_attention_heads // world_size
        self.head_dim = cfg.head_dim
        self.slots: dict[int, SlotState] = {}
        self.aux_layers = cfg.aux_layers()
        self.pool_capacity: int | None = None  # set by enable_pool
        self.scratch_slot = -1
        self._build()

    # ---------------------------------------------------------------- weights
    def _full(self, name: str, shape: tuple[int, ...], std: float) -> torch.Tensor:
        gen = torch.Generator().manual_seed(_seed_for(self.seed, name))
        return torch.randn(shape, generator=gen, dtype=torch.float32) * std

    def _shard(self, full: torch.Tensor, dim: int) -> torch.Tensor:
        return full.chunk(self.world_size, dim=dim)[self.rank]

    def _dev(self, t: torch.Tensor) -> torch.Tensor:
        return t.contiguous().to(device=self.device, dtype=self.dtype)

    def _attn_weights(self, prefix: str, in_dim: int, out_std: float) -> dict[str, torch.Tensor]:
        cfg = self.cfg
        width = cfg.num_attention_heads * cfg.head_dim
        qkv = [
            self._shard(self._full(f"{prefix}.{n}", (in_dim, width), 1 / math.sqrt(in_dim)), 1)
            for n in ("q_proj", "k_proj", "v_proj")
        ]
        wo = self._shard(self._full(f"{prefix}.o_proj", (width, cfg.hidden_size), out_std), 0)
        return {"wqkv": self._dev(torch.cat(qkv, dim=1)), "wo": self._dev(wo)}

    def _mlp_weights(self, prefix: str, inter: int, out_std: float) -> dict[str, torch.Tensor]:
        h = self.cfg.hidden_size
        gate = self._shard(self._full(f"{prefix}.gate_proj", (h, inter), 1 / math.sqrt(h)), 1)
        up = self._shard(self._full(f"{prefix}.up_proj", (h, inter), 1 / math.sqrt(h)), 1)
        down = self._shard(self._full(f"{prefix}.down_proj", (inter, h), out_std), 0)
        return {"wgu": self._dev(torch.cat([gate, up], dim=1)), "wd": self._dev(down)}

    def _build(self) -> None:
        cfg = self.cfg
        h = cfg.hidden_size
        out_std = 1 / math.sqrt(h) / math.sqrt(2 * cfg.num_hidden_layers)
        self.embed = self._dev(self._full("embed_tokens", (cfg.vocab_size, h), 1.0))
        self.lm_head = self._dev(self._full("lm_head", (h, cfg.vocab_size), 1 / math.sqrt(h)))
        self.norm_w = torch.ones(h, device=self.device, dtype=self.dtype)
        self.layers: list[dict[str, object]] = []
        for i in range(cfg.num_hidden_layers):
            p = f"layers.{i}"
            layer: dict[str, object] = {"attn": self._attn_weights(f"{p}.self_attn", h, out_std)}
            if cfg.is_moe_layer(i):
                experts = [self._mlp_weights(f"{p}.mlp.experts.{e}", cfg.moe_intermediate_size, out_std)
                           for e in range(cfg.n_routed_experts)]
                layer["router"] = self._dev(self._full(f"{p}.mlp.gate", (h, cfg.n_routed_experts), 1 / math.sqrt(h)))
                layer["wgu"] = torch.stack([e["wgu"] for e in experts])
                layer["wd"] = torch.stack([e["wd"] for e in experts])
                if cfg.n_shared_experts:
                    layer["shared"] = self._mlp_weights(
                        f"{p}.mlp.shared_experts", cfg.n_shared_experts * cfg.moe_intermediate_size, out_std)
            else:
                layer["mlp"] = self._mlp_weights(f"{p}.mlp", cfg.intermediate_size, out_std)
            self.layers.append(layer)
        half = self.head_dim // 2
        inv_freq = 1.0 / (cfg.rope_theta ** (torch.arange(0, half, dtype=torch.float32) / half))
        angles = torch.outer(torch.arange(cfg.max_position_embeddings, dtype=torch.float32), inv_freq)
        self.cos = angles.cos().to(device=self.device, dtype=self.dtype)
        self.sin = angles.sin().to(device=self.device, dtype=self.dtype)
        if self.with_draft:
            d = self.draft_cfg
            self.draft_fc = self._dev(self._full("draft.fc", (3 * h, h), 1 / math.sqrt(3 * h)))
            self.draft_attn = self._attn_weights("draft.self_attn", 2 * h, out_std)
            self.draft_mlp = self._mlp_weights("draft.mlp", d.intermediate_size, out_std)

    # ------------------------------------------------------------- KV caches
    def enable_pool(self, max_slots: int, capacity: int) -> None:
        """Keep every slot's buffers in one static pool of ``max_slots`` slots + 1 scratch slot.

        Allocated once and zeroed (so a masked-out cache entry is a finite zero, never
        left-over memory that could hold a NaN); ``alloc`` then hands out views.
        """
        if self.slots:
            raise RuntimeError("enable_pool must come before the first alloc")
        L, hl, d, h = self.cfg.num_hidden_layers, self.local_heads, self.head_dim, self.cfg.hidden_size
        n = max_slots + 1
        kw = {"device": self.device, "dtype": self.dtype}
        self.pool_k = torch.zeros(L, n, hl, capacity, d, **kw)
        self.pool_v = torch.zeros(L, n, hl, capacity, d, **kw)
        if self.with_draft:
            self.pool_dk = torch.zeros(n, hl, capacity, d, **kw)
            self.pool_dv = torch.zeros(n, hl, capacity, d, **kw)
            self.pool_feats = torch.zeros(n, capacity, 3 * h, **kw)
            self.pool_draft_hidden = torch.zeros(n, h, **kw)
        self.pool_capacity = capacity
        self.scratch_slot = max_slots
        self._key_pos = torch.arange(capacity, device=self.device)

    def alloc(self, slot: int, capacity: int) -> None:
        """Allocate one request's caches (every rank does the same on the same command)."""
        if self.pool_capacity is not None:
            self._alloc_from_pool(slot, capacity)
            return
        L, hl, d = self.cfg.num_hidden_layers, self.local_heads, self.head_dim
        kw = {"device": self.device, "dtype": self.dtype}
        state = SlotState(
            k=torch.zeros(L, hl, capacity, d, **kw), v=torch.zeros(L, hl, capacity, d, **kw),
            dk=None, dv=None, feats=None, draft_hidden=None, capacity=capacity)
        if self.with_draft:
            state.dk = torch.zeros(hl, capacity, d, **kw)
            state.dv = torch.zeros(hl, capacity, d, **kw)
            state.feats = torch.zeros(capacity, 3 * self.cfg.hidden_size, **kw)
            state.draft_hidden = torch.zeros(self.cfg.hidden_size, **kw)
        self.slots[slot] = state

    def _alloc_from_pool(self, slot: int, capacity: int) -> None:
        assert self.pool_capacity is not None
        if not 0 <= slot < self.scratch_slot:
            raise ValueError(f"slot {slot} outside the pool's {self.scratch_slot} slots")
        if capacity > self.pool_capacity:
            raise ValueError(f"a request needs {capacity} positions, the pool holds {self.pool_capacity}")
        state = SlotState(k=self.pool_k[:, slot], v=self.pool_v[:, slot], dk=None, dv=None, feats=None,
                          draft_hidden=None, capacity=self.pool_capacity)
        if self.with_draft:
            state.dk, state.dv = self.pool_dk[slot], self.pool_dv[slot]
            state.feats = self.pool_feats[slot]
            state.draft_hidden = self.pool_draft_hidden[slot]
            state.draft_hidden.zero_()
        self.slots[slot] = state

    def free(self, slot: int) -> None:
        self.slots.pop(slot, None)

    # ------------------------------------------------------------ components
    def _rope_tables(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos/sin rows for the batch's positions, computed once per forward (not per layer)."""
        return self.cos[positions][:, None, None], self.sin[positions][:, None, None]

    def _rope(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        half = self.head_dim // 2
        c, s = rope
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)

    def _masks(self, segs: list[Segment]) -> list[torch.Tensor | None]:
        """Causal masks per segment (None for one token, which sees the whole cache), once per forward."""
        masks: list[torch.Tensor | None] = []
        for seg in segs:
            if seg.length == 1:
                masks.append(None)
                continue
            idx = torch.arange(seg.start + seg.length, device=self.device)
            masks.append(idx[None, :] <= (seg.start + torch.arange(seg.length, device=self.device))[:, None])
        return masks

    def _attention(
        self, x: torch.Tensor, w: dict[str, torch.Tensor], rope: tuple[torch.Tensor, torch.Tensor],
        segs: list[Segment], masks: list[torch.Tensor | None], caches: list[tuple[torch.Tensor, torch.Tensor]],
    ) -> torch.Tensor:
        """Partial (un-reduced) attention output of this rank's heads, [T, hidden]."""
        T = x.shape[0]
        hl, d = self.local_heads, self.head_dim
        qkv = (x @ w["wqkv"]).view(T, 3, hl, d)
        q, k = self._rope(qkv[:, :2], rope).unbind(1)  # q and k rotated in one go
        v = qkv[:, 2]
        out = torch.empty(T, hl, d, device=x.device, dtype=x.dtype)
        off = 0
        for seg, mask, (kc, vc) in zip(segs, masks, caches):
            n, s = seg.length, seg.start
            kc[:, s:s + n] = k[off:off + n].transpose(0, 1)
            vc[:, s:s + n] = v[off:off + n].transpose(0, 1)
            qs = q[off:off + n].transpose(0, 1)
            o = F.scaled_dot_product_attention(qs, kc[:, :s + n], vc[:, :s + n], attn_mask=mask)
            out[off:off + n] = o.transpose(0, 1)
            off += n
        return out.view(T, hl * d) @ w["wo"]

    @staticmethod
    def _mlp(x: torch.Tensor, w: dict[str, torch.Tensor]) -> torch.Tensor:
        gu = x @ w["wgu"]
        g, u = gu.chunk(2, dim=-1)
        return (F.silu(g) * u) @ w["wd"]

    def _moe(self, x: torch.Tensor, layer: dict[str, object]) -> torch.Tensor:
        """Routed experts (each sharded over its intermediate dim) plus shared experts.

        Computed densely: every local expert shard runs on every token and the
        routing weights (zero for experts a token did not pick) scale the
        result. At these sizes that is a handful of batched ops instead of a
        Python loop with data-dependent indexing (and, on CUDA, no host sync),
        and it is exactly the top-k mixture.
        """
        cfg = self.cfg
        scores = torch.sigmoid((x @ layer["router"]).float())  # type: ignore[operator]
        w, idx = scores.topk(cfg.num_experts_per_tok, dim=-1)
        if cfg.norm_topk_prob:
            w = w / w.sum(dim=-1, keepdim=True)
        gates = torch.zeros_like(scores).scatter_(1, idx, w * cfg.routed_scaling_factor).to(x.dtype)  # [T, E]
        wgu, wd = layer["wgu"], layer["wd"]  # [E, H, 2I], [E, I, H]
        g, u = torch.matmul(x.unsqueeze(0), wgu).chunk(2, dim=-1)  # type: ignore[arg-type]
        a = F.silu(g) * u * gates.t().unsqueeze(-1)  # [E, T, I]
        E, T, inter = a.shape
        out = a.transpose(0, 1).reshape(T, E * inter) @ wd.reshape(E * inter, -1)  # type: ignore[union-attr]
        shared = layer.get("shared")
        if shared is not None:
            out = out + self._mlp(x, shared)  # type: ignore[arg-type]
        return out

    def _rms(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],), None, self.cfg.rms_norm_eps)

    def _positions(self, segs: list[Segment]) -> torch.Tensor:
        return torch.cat([torch.arange(s.start, s.start + s.length) for s in segs]).to(self.device)

    @staticmethod
    def _last_rows(segs: list[Segment]) -> list[int]:
        rows, off = [], 0
        for s in segs:
            off += s.length
            rows.append(off - 1)
        return rows

    # -------------------------------------------------------------- forwards
    @torch.inference_mode()
    def forward_target(self, token_ids: list[int], segs: list[Segment], logits: str = "all") -> torch.Tensor | None:
        """Run the target over the packed batch; ``logits`` is 'all', 'last' (per segment) or 'none'.

        Writes each segment's KV entries and (with a draft) its EAGLE-3 aux features by position.
        """
        ids = torch.tensor(token_ids, device=self.device)
        rope = self._rope_tables(self._positions(segs))
        masks = self._masks(segs)
        x = self.embed[ids]
        aux: list[torch.Tensor] = []
        for i, layer in enumerate(self.layers):
            caches = [(self.slots[s.slot].k[i], self.slots[s.slot].v[i]) for s in segs]
            a = self._attention(self._rms(x), layer["attn"], rope, segs, masks, caches)  # type: ignore[arg-type]
            x = x + self.comm.all_reduce(a)
            h = self._rms(x)
            m = self._moe(h, layer) if "router" in layer else self._mlp(h, layer["mlp"])  # type: ignore[arg-type]
            x = x + self.comm.all_reduce(m)
            if self.with_draft and i in self.aux_layers:
                aux.append(x)
        if self.with_draft:
            feats = torch.cat(aux, dim=-1)
            off = 0
            for s in segs:
                self.slots[s.slot].feats[s.start:s.start + s.length] = feats[off:off + s.length]  # type: ignore[index]
                off += s.length
        return self._logits(x, segs, logits)

    def _logits(self, x: torch.Tensor, segs: list[Segment], which: str) -> torch.Tensor | None:
        if which == "none":
            return None
        if which == "last":
            x = x[self._last_rows(segs)]
        return (self._rms(x) @ self.lm_head).float()

    @torch.inference_mode()
    def forward_draft(
        self, token_ids: list[int], segs: list[Segment], source: str, logits: str = "last"
    ) -> torch.Tensor | None:
        """One EAGLE-3 draft-layer forward.

        ``source='target'``: the hidden input at position p is fc(target aux features at p-1)
        (zeros at p=0), used to extend the draft over verified tokens. ``source='draft'``:
        every segment has one token and the input is the draft's own last output, as in
        chain drafting.
        """
        ids = torch.tensor(token_ids, device=self.device)
        rope = self._rope_tables(self._positions(segs))
        if source == "target":
            parts = []
            for s in segs:
                feats = self.slots[s.slot].feats
                lo = max(s.start - 1, 0)
                chunk = feats[lo:s.start + s.length - 1]  # type: ignore[index]
                if s.start == 0:
                    chunk = torch.cat([torch.zeros_like(feats[:1]), chunk])  # type: ignore[index]
                parts.append(chunk)
            hidden = torch.cat(parts) @ self.draft_fc
        elif source == "draft":
            if any(s.length != 1 for s in segs):
                raise ValueError("draft-source forward takes exactly one token per segment")
            hidden = torch.stack([self.slots[s.slot].draft_hidden for s in segs])  # type: ignore[misc]
        else:
            raise ValueError(f"unknown draft source {source!r}")
        x = torch.cat([self._rms(self.embed[ids]), self._rms(hidden)], dim=-1)
        caches = [(self.slots[s.slot].dk, self.slots[s.slot].dv) for s in segs]
        a = self._attention(x, self.draft_attn, rope, segs, self._masks(segs), caches)  # type: ignore[arg-type]
        r = hidden + self.comm.all_reduce(a)
        out = r + self.comm.all_reduce(self._mlp(self._rms(r), self.draft_mlp))
        for s, row in zip(segs, self._last_rows(segs)):
            self.slots[s.slot].draft_hidden.copy_(out[row])  # type: ignore[union-attr]
        return self._logits(out, segs, logits)

    # ------------------------------------------------ fixed-shape (graph) forwards
    def _static_inputs(self, pos: torch.Tensor, slots: torch.Tensor, kv_len: int):
        """Flat positions and slots per row, rope rows and the [B, 1, n, kv_len] position mask."""
        B, n = pos.shape
        pflat = pos.reshape(B * n)
        sflat = slots[:, None].expand(B, n).reshape(B * n)
        mask = self._key_pos[:kv_len][None, None, None, :] <= pos[:, None, :, None]
        return pflat, sflat, self._rope_tables(pflat), mask

    def _attention_static(
        self, x: torch.Tensor, w: dict[str, torch.Tensor], rope: tuple[torch.Tensor, torch.Tensor],
        pos: torch.Tensor, slots: torch.Tensor, pflat: torch.Tensor, sflat: torch.Tensor, mask: torch.Tensor,
        kpool: torch.Tensor, vpool: torch.Tensor, kv_len: int,
    ) -> torch.Tensor:
        """``_attention`` over B segments of n tokens: write K/V by (slot, position), attend over the
        first ``kv_len`` cache positions of each segment's slot, masked to positions <= the query's."""
        B, n = pos.shape
        T = B * n
        hl, d = self.local_heads, self.head_dim
        qkv = (x @ w["wqkv"]).view(T, 3, hl, d)
        q, k = self._rope(qkv[:, :2], rope).unbind(1)
        kpool[sflat, :, pflat] = k
        vpool[sflat, :, pflat] = qkv[:, 2]
        keys = kpool[:, :, :kv_len].index_select(0, slots)  # [B, hl, kv_len, d]
        values = vpool[:, :, :kv_len].index_select(0, slots)
        qs = q.view(B, n, hl, d).transpose(1, 2)
        o = F.scaled_dot_product_attention(qs, keys, values, attn_mask=mask)  # [B, hl, n, d]
        return o.transpose(1, 2).reshape(T, hl * d) @ w["wo"]

    @staticmethod
    def _static_logits_rows(x: torch.Tensor, last: torch.Tensor, which: str) -> torch.Tensor | None:
        if which == "none":
            return None
        return x if which == "all" else x[last]

    @torch.inference_mode()
    def forward_target_static(self, ids: torch.Tensor, pos: torch.Tensor, slots: torch.Tensor, last: torch.Tensor,
                              kv_len: int, logits: str) -> torch.Tensor | None:
        """``forward_target`` over a fixed-shape batch: ``ids`` [B*n], ``pos`` [B, n], ``slots`` [B]
        (pool slots, the scratch slot for padding), ``last`` [B] (row of each segment's last real
        token, for ``logits='last'``); attention reads cache positions ``< kv_len``."""
        pflat, sflat, rope, mask = self._static_inputs(pos, slots, kv_len)
        x = self.embed[ids]
        aux: list[torch.Tensor] = []
        for i, layer in enumerate(self.layers):
            a = self._attention_static(self._rms(x), layer["attn"], rope, pos, slots, pflat, sflat, mask,  # type: ignore[arg-type]
                                       self.pool_k[i], self.pool_v[i], kv_len)
            x = x + self.comm.all_reduce(a)
            h = self._rms(x)
            m = self._moe(h, layer) if "router" in layer else self._mlp(h, layer["mlp"])  # type: ignore[arg-type]
            x = x + self.comm.all_reduce(m)
            if self.with_draft and i in self.aux_layers:
                aux.append(x)
        if self.with_draft:
            self.pool_feats[sflat, pflat] = torch.cat(aux, dim=-1)
        rows = self._static_logits_rows(x, last, logits)
        return None if rows is None else (self._rms(rows) @ self.lm_head).float()

    @torch.inference_mode()
    def forward_draft_static(self, ids: torch.Tensor, pos: torch.Tensor, slots: torch.Tensor, last: torch.Tensor,
                             kv_len: int, source: str, logits: str) -> torch.Tensor | None:
        """``forward_draft`` over a fixed-shape batch (inputs as in ``forward_target_static``).

        ``source='target'``: padding tokens after a segment's real ones are allowed (they write
        cache entries past the segment's end, which a later forward overwrites before any query
        can see them, as with a rejected speculative tail); ``last`` picks the real last rows.
        """
        B, n = pos.shape
        pflat, sflat, rope, mask = self._static_inputs(pos, slots, kv_len)
        if source == "target":
            prev = self.pool_feats[sflat, (pflat - 1).clamp(min=0)]
            hidden = (prev * (pflat > 0).unsqueeze(-1).to(prev.dtype)) @ self.draft_fc
        elif source == "draft":
            if n != 1:
                raise ValueError("draft-source forward takes exactly one token per segment")
            hidden = self.pool_draft_hidden[slots]
        else:
            raise ValueError(f"unknown draft source {source!r}")
        x = torch.cat([self._rms(self.embed[ids]), self._rms(hidden)], dim=-1)
        a = self._attention_static(x, self.draft_attn, rope, pos, slots, pflat, sflat, mask,
                                   self.pool_dk, self.pool_dv, kv_len)
        r = hidden + self.comm.all_reduce(a)
        out = r + self.comm.all_reduce(self._mlp(self._rms(r), self.draft_mlp))
        self.pool_draft_hidden[slots] = out[last]
        if logits == "none":
            return None
        return (self._rms(out if logits == "all" else out[last]) @ self.lm_head).float()
