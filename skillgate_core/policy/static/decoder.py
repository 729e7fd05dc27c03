"""The static sampler's engine: prefill and decode over a static KV cache, for any caller's rows.

One `StaticDecoder` per replica holds what makes sampling fast (caches per (batch, length) bucket, the
compiled decode step, the captured CUDA graphs) and offers the steps both samplers of this package are
made of: `bucket_cache` (a reset cache and its decode key bias), `prefill` (ids written at chosen cache
slots), `decode` (the first token from the prefill's logits, then one token per step for every row)
and `completions` (the drawn ids cut at their first stop token). `StaticSampler.sample` lays out one
left-padded batch with them; `turn_cache.TurnCache` keeps each episode's row across turns with them.

How a batch is decoded:

- prompts are left-padded to one width W; every row writes its KV cache in lock-step (slot W + t at
  decode step t), so one `StaticCache` of length L >= W + max_new_tokens serves the batch. Each row's
  position ids restart at its first real token (position = slot - pad). A query sees the real keys
  at or before its slot (a pad query sees itself only, so no softmax row is empty);
- the prompt is prefilled eagerly (in query chunks, so the explicit 4-D mask [B, 1, q, L] stays
  small), then a single-token decode step samples on the device: logits.float() / T -> log_softmax
  (the recorded log-prob, the trainer's formula) and softmax -> (top-p) -> multinomial, exactly the
  RNG calls of `generate(do_sample=True)`. On CUDA that step is
  `torch.compile(mode="reduce-overhead")`: one CUDA graph replay per token;
- the decode step builds no mask: a float32 additive key bias [B, 1, 1, L] is kept with the cache,
  filled once per batch from the prompt padding and opened one slot per step (one tiny fill), and
  the step attends with `decode_attention.static_decode_attention` (registered as the attention
  implementation STATIC_ATTENTION for the decode steps only): one query per row against the whole cache with the
  query heads grouped over their KV head, so K/V are read once per KV head and never repeated to
  the query heads (transformers' sdpa path repeats them whenever a mask is given, and rebuilt the
  mask in every layer of every step: half the decode step's GPU time on an H200);
- live slots (`live_slots`, on by default): the decode step attends only the slots before the batch's
  newest one, rounded up to `live_bucket` (`attended_slots`; the bias is passed cut to that length, a
  view), not the whole cache: exact, as every slot past it is masked for every row. `attended` records
  the length of each step, `attention_stats` the K/V bytes a step read;
- finished rows keep decoding (their extra tokens are cut at the first stop token afterwards); the
  loop ends at max_new_tokens or once every row has stopped, checked every `finish_check_every`
  steps (one host sync per check, not per token);
- block decoding (on CUDA by default, `block_decode`): the bookkeeping between two tokens (opening the
  query's own key slot, writing the token and its log-prob into the output, the stop flags, the next
  slot) runs on the device too, in buffers with fixed addresses, so `graph_steps` consecutive decode
  steps are captured as ONE CUDA graph (torch.cuda.graph around the step compiled without
  reduce-overhead) and replayed with one launch. Per token the host then does nothing: with a
  reduce-overhead step it re-checked the step's guards, copied its inputs and ran the bookkeeping
  eagerly, ~0.4 of the 1.7 ms a token took on an H200 at batch 32 (benchmarks/results/gpu/LOG.md 1).
  Blocks end where the finish checks fall, so the loop stops where the per-step loop does, and the
  RNG calls are the same ones in the same order. A block attends what its last step sees (one length
  per block), and a graph is captured per (block size, attended length, sampling, shared prefix); the
  first step at each new length runs outside any graph. The first step of each cache bucket runs outside any
  graph (compilation, lazy initialisation); a capture that fails switches the sampler to the per-step
  path for good (logged; `stats["block_decode"]` says which ran);
- compiled graphs have static shapes, so on CUDA the batch is padded to a power of two with dummy
  rows and the cache length is rounded up to `length_bucket`; the caches are kept per (batch,
  length) bucket and reused (`StaticCache.reset()` keeps the tensors' addresses, which the CUDA
  graphs captured). The replica's weights are refreshed in place (`engine.refresh_replica`), so the
  captured graphs stay valid across optimizer steps.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import math
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from skillgate_core.policy.local_sampler import Completion, SamplingConfig, stop_token_ids
from skillgate_core.policy.static.config import StaticSamplerConfig
from skillgate_core.policy.static.decode_attention import (
    MASKED,
    STATIC_ATTENTION,
    kv_read_bytes,
    register_static_attention,
    shared_prefix_key,
)
from skillgate_core.policy.static.fused_decode import FusedDecode, fusable, too_large

__all__ = ["MASK_ELEMENTS", "StaticDecoder", "bucket_batch", "round_up", "sample_next", "seek_cache"]

MASK_ELEMENTS = 1 << 27
"""Prefill runs in query chunks so that the [B, 1, chunk, L] boolean mask stays under this size."""


def _cudagraph_tls_ready() -> None:
    """Give this thread its CUDA-graph tree state if it has none. torch 2.11's cudagraph trees set it up
    only in the thread that imported them and assert elsewhere (newer torch does this lazily itself),
    so a sampler used from a policy thread could not record a graph; each thread gets its own trees."""
    from collections import defaultdict
    from threading import Lock

    from torch._inductor import cudagraph_trees as trees

    if hasattr(trees.local, "tree_manager_containers") or torch._C._is_key_in_tls("tree_manager_containers"):
        return
    trees.local.tree_manager_containers = {}
    trees.local.tree_manager_locks = defaultdict(Lock)
    torch._C._stash_obj_in_tls("tree_manager_containers", trees.local.tree_manager_containers)
    torch._C._stash_obj_in_tls("tree_manager_locks", trees.local.tree_manager_locks)


def bucket_batch(n: int) -> int:
    """The batch bucket of n rows when compiled: the next power of two."""
    return 1 << max(0, math.ceil(math.log2(n)))


def round_up(n: int, multiple: int) -> int:
    """n rounded up to a multiple of `multiple`."""
    return -(-n // multiple) * multiple


def _top_p_filter(scores: torch.Tensor, top_p: float) -> torch.Tensor:
    """transformers' TopPLogitsWarper (min_tokens_to_keep = 1), so both samplers draw alike."""
    sorted_scores, sorted_idx = torch.sort(scores, descending=False)
    cumulative = sorted_scores.softmax(dim=-1).cumsum(dim=-1)
    remove_sorted = cumulative <= (1 - top_p)
    remove_sorted[..., -1:] = False
    remove = remove_sorted.scatter(1, sorted_idx, remove_sorted)
    return scores.masked_fill(remove, -float("inf"))


def sample_next(logits: torch.Tensor, temperature: float, top_p: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(next ids [B, 1], their log-probs [B, 1] float32) from last-position logits [B, V].

    The log-prob is log_softmax(logits.float() / T) at the drawn id: what `local_sampler` records and
    what the trainer recomputes. top-p changes what can be drawn, not the recorded log-prob.
    """
    scores = logits.float() / temperature
    logp = torch.log_softmax(scores, dim=-1)
    probs = torch.softmax(scores if top_p >= 1.0 else _top_p_filter(scores, top_p), dim=-1)
    nxt = torch.multinomial(probs, num_samples=1)
    return nxt, logp.gather(-1, nxt)


def seek_cache(cache: Any, slot: int) -> None:
    """Make `cache`'s next write land at `slot`: transformers' StaticLayer writes at its own counter
    (cumulative_length, a device tensor with a static address, advanced in place by every update:
    inside the compiled decode step too), not at the positions it is given."""
    for layer in cache.layers:
        counter = getattr(layer, "cumulative_length", None)
        if counter is None:
            raise RuntimeError(f"{type(layer).__name__} has no cumulative_length: this transformers' StaticCache "
                               "cannot be written at a chosen slot (static.decoder.seek_cache)")
        if isinstance(counter, torch.Tensor):
            counter.fill_(slot)
        else:
            layer.cumulative_length = slot


@dataclass
class _BlockState:
    """The device buffers block decoding works in (fixed addresses: captured CUDA graphs read and write
    them), per cache and bias."""

    ids: torch.Tensor
    """[B, 1] the last token of each row: the next step's input."""
    slot: torch.Tensor
    """[1] the cache slot the next step writes (its query's own key)."""
    col: torch.Tensor
    """[1] the output column the next token goes to."""
    offset: torch.Tensor
    """[B] each row's position offset (slot - offset = position), copied in per call when fixed."""
    order: torch.Tensor
    """[B] the rows in drawing order (`StaticDecoder._draw`), copied in per call when fixed."""
    out_ids: torch.Tensor
    """[B, cache length] tokens drawn (pad where none)."""
    out_lp: torch.Tensor
    """[B, cache length] their log-probs."""
    done: torch.Tensor
    """[B] rows that stopped (or never hold the loop open)."""
    bias_ptr: int
    """The decode key bias this state was made for (a new bias tensor: a new state)."""
    fixed: bool
    """Whether offset and order are copied into the buffers above (graphs) or passed as they come."""
    warm: set[int] = field(default_factory=set)
    """The attended lengths (live slots) whose first decode step has run (outside any graph)."""
    graphs: dict[tuple[Any, ...], Any] = field(default_factory=dict)
    """Captured graphs by (steps, attended length, temperature, top_p, the shared prefix's key or None)."""

    def take(self, buffer: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        """`value` through `buffer` when fixed (same shape), else `value` itself (CPU: order may hold
        only the caller's rows)."""
        if not self.fixed:
            return value
        return buffer.copy_(value)


def _sampling_attention(model: Any) -> str:
    """The model's attention implementation for sampling: its own when sdpa or eager, else sdpa (flash
    kernels take no 4-D mask; the replica only samples, so it may switch kernels)."""
    impl = str(getattr(model.config, "_attn_implementation", None) or "eager")
    if impl not in ("sdpa", "eager"):
        model.set_attn_implementation("sdpa")
        impl = "sdpa"
    return impl


class StaticDecoder:
    """Prefill and decode over static KV caches for one replica (module docstring). Not thread-safe: one
    call at a time."""

    def __init__(self, model: Any, tokenizer: Any, config: StaticSamplerConfig) -> None:
        """The decoder of `model` (one per replica); `config`: the switches, each documented in
        StaticSamplerConfig."""
        register_static_attention()
        self.config, self.model, self.tokenizer = config, model, tokenizer
        self.device = next(model.parameters()).device
        cuda = self.device.type == "cuda"
        self.compiled = cuda if config.compile is None else config.compile
        self.stop_ids = sorted(set(config.stop_ids)) if config.stop_ids is not None else stop_token_ids(tokenizer)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.additive_mask = _sampling_attention(model) == "eager"
        # transformers >= 5.2x renamed past_key_values to cache (the old name warns, inside the graph too)
        self._cache_kwarg = "cache" if "cache" in inspect.signature(type(model).forward).parameters else "past_key_values"
        self._caches: dict[tuple[int, int, str], tuple[Any, torch.Tensor]] = {}
        self._stop = torch.tensor(self.stop_ids, dtype=torch.long, device=self.device)
        self.block_decode = (self.compiled and cuda) if config.block_decode is None else bool(config.block_decode)
        self.capture = self.block_decode and self.compiled and cuda
        """Whether blocks are captured as CUDA graphs (else run step by step, on the device buffers)."""
        self._step, self._plain_step = self._decode_steps()
        self.fused, self.fused_why_not = self._fused_decode()
        """The decode step with fused projections (None: the model's forward decodes), and why not ("" when
        fused)."""
        self._blocks: dict[int, tuple[Any, _BlockState]] = {}
        self._side: Any = None  # the stream the first step of a bucket and every capture run on
        self.block_stats: dict[str, Any] = {"block_decode": "off"}
        """How the last `decode` ran: off (the per-step loop), device loop or graphs, and graphs captured."""
        self.attended: list[int] = []
        """The cache slots each decode step of the last `decode` attended (live slots: `attended_slots`)."""

    def _decode_steps(self) -> tuple[Callable[..., Any], Callable[..., Any]]:
        """(the per-step path's decode step, the one block decoding captures): `_decode_step` itself when
        not compiled."""
        step = plain = self._decode_step
        if not self.compiled:
            return step, plain
        options: dict[str, Any] = ({"mode": "reduce-overhead", "fullgraph": False, "dynamic": False}
                                   | dict(self.config.compile_options or {}))
        step = torch.compile(step, **options)  # compiled at its first call: the per-step path only
        # captured by hand: inductor without its own CUDA graphs (a graph in a graph cannot be captured)
        # (max-autotune keeps its kernel search without the graphs: the small-batch decode GEMMs are
        # what a token's time goes to, and the default picks are tuned for larger shapes)
        plain_mode = {"max-autotune": "max-autotune-no-cudagraphs"}.get(options.get("mode") or "")
        plain = torch.compile(self._decode_step, **(options | {"mode": plain_mode})) if options.get("mode") else step
        # one graph per (batch, length) bucket and cache object: multi-turn rollouts meet several,
        # and past dynamo's default limit (8) the step would silently run eagerly
        dynamo_config = torch._dynamo.config
        for name in ("recompile_limit", "cache_size_limit"):
            if hasattr(dynamo_config, name):
                setattr(dynamo_config, name, max(getattr(dynamo_config, name), 64))
        return step, plain

    def _fused_decode(self) -> tuple[FusedDecode | None, str]:
        """(the fused decode step or None, why not: "" when fused), as `config.fuse_projections` says."""
        model, fuse = self.model, self.config.fuse_projections
        why = fusable(model) if fuse is not False else "fuse_projections=False"
        if fuse is None and not why:
            if not (self.compiled and self.device.type == "cuda"):
                why = "not compiled on CUDA (the fused step pays off against the GPU's per-kernel cost)"
            else:  # a default must not cost a large model its memory: the copies are two thirds of the layers
                why = too_large(model, torch.cuda.mem_get_info(self.device)[0])
        if fuse and why:
            raise ValueError(f"fuse_projections=True: {type(model).__name__} cannot be fused ({why})")
        if why:
            return None, why
        fused = FusedDecode(model)
        if self.compiled:
            for tensor in fused.buffers():
                torch._dynamo.mark_static_address(tensor)
        return fused, ""

    # --- the model calls -------------------------------------------------------------------------

    def _mask(self, allowed: torch.Tensor) -> torch.Tensor:
        if not self.additive_mask:
            return allowed
        dtype = self.model.dtype
        return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill_(~allowed, torch.finfo(dtype).min)

    def _logits(self, ids: torch.Tensor, slots: torch.Tensor, offset: torch.Tensor, mask: torch.Tensor, cache: Any):
        """Logits of the last query of `ids` [B, q] written at cache slots `slots` [q], under the 4-D `mask`;
        a row's position ids are its slots minus its `offset` [B] (left padding, or where its context
        lies in a multi-turn cache: `turn_cache`)."""
        position_ids = (slots[None, :] - offset[:, None]).clamp_min(0)
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=position_ids,
                         use_cache=True, logits_to_keep=1, **{self._cache_kwarg: cache})
        return out.logits[:, -1, :]

    def _prefill(self, ids: torch.Tensor, slots: torch.Tensor, offset: torch.Tensor, valid: torch.Tensor, cache: Any):
        keys = torch.arange(valid.shape[1], device=valid.device)
        # query at slot s sees key k iff k <= s and (k is a real token, or k is s itself)
        allowed = (keys[None, :] <= slots[:, None])[None] & (valid[:, None, :] | (keys[None, :] == slots[:, None])[None])
        return self._logits(ids, slots, offset, self._mask(allowed[:, None]), cache)

    def prefill(self, ids: torch.Tensor, start: int, offset: torch.Tensor, valid: torch.Tensor,
                        cache: Any) -> tuple[torch.Tensor, int]:
        """Prefill `ids` [B, W] at cache slots start .. start + W - 1 in query chunks (so the explicit 4-D
        mask [B, 1, chunk, L] stays small); (the last query's logits [B, V], chunks run)."""
        batch, width = ids.shape
        seek_cache(cache, start)
        chunk = max(1, min(width, MASK_ELEMENTS // max(1, batch * valid.shape[1])))
        slots = torch.arange(start, start + width, device=ids.device)
        chunks = 0
        for at in range(0, width, chunk):
            logits = self._prefill(ids[:, at : at + chunk], slots[at : at + chunk], offset, valid, cache)
            chunks += 1
        return logits, chunks

    def _decode_step(self, ids, slot, offset, bias, cache, order, temperature: float, top_p: float):
        """One token per row at cache slot `slot` [1]; `bias` [B, 1, 1, L] is 0 for the keys the query
        sees (its own slot included) and MASKED elsewhere. Rows draw as `_draw` says. Returns (ids,
        log-probs, stopped) [B, 1]."""
        if self.fused is not None:
            logits = self.fused.logits(ids, slot, offset, bias, cache)
        else:
            logits = self._logits(ids, slot, offset, bias, cache)
        nxt, lp = self._draw(logits, order, temperature, top_p)
        return nxt, lp, torch.isin(nxt[:, 0], self._stop)

    def _draw(self, logits: torch.Tensor, order: torch.Tensor, temperature: float, top_p: float):
        """(ids, log-probs) [B, 1] sampled from `logits` [B, V] for the rows `order` names, drawn in that
        order (a pad id and 0 for the rows it leaves out): a caller's rows first, in its order, so that
        each draws from the RNG exactly what it would draw in a batch of the caller's rows alone
        (`turn_cache` keeps rows of several callers in one batch). On CPU `order` holds the caller's
        rows only; compiled, every row (a static shape), the caller's first."""
        nxt, lp = sample_next(logits.index_select(0, order), temperature, top_p)
        batch = logits.shape[0]
        ids = torch.full((batch, 1), self.pad_id, dtype=nxt.dtype, device=nxt.device).index_copy(0, order, nxt)
        return ids, torch.zeros((batch, 1), dtype=lp.dtype, device=lp.device).index_copy(0, order, lp)

    def bucket_cache(self, batch: int, length: int, role: str = "") -> tuple[Any, torch.Tensor]:
        """The (StaticCache, decode key bias) of this bucket, reset; kept so CUDA graphs see the same
        addresses every time. `role` tells apart caches of one shape one call holds at once (a shared
        prefix's and the rows' own: policy.static.shared_prefix)."""
        from transformers import StaticCache

        key = (batch, length, role)
        kept = self._caches.pop(key, None)
        if kept is None:
            while len(self._caches) >= self.config.max_cached:
                self._caches.pop(next(iter(self._caches)))
            cache = StaticCache(config=self.model.config, max_cache_len=length)
            bias = torch.full((batch, 1, 1, length), MASKED, dtype=torch.float32, device=self.device)
            if self.compiled:
                torch._dynamo.mark_static_address(bias)
            kept = (cache, bias)
        else:
            kept[0].reset()
        self._caches[key] = kept  # most recently used last
        return kept

    def attended_slots(self, newest: int, length: int) -> int:
        """The cache slots a decode step attends whose keys lie before slot `newest` (exclusive: the step's
        own slot is newest - 1), in a cache of `length` slots: `newest` rounded up to live_bucket, at most
        the cache; the whole cache with live_slots off."""
        if not self.config.live_slots:
            return length
        return min(length, round_up(newest, self.config.live_bucket))

    def live_bias(self, bias: torch.Tensor, slots: int) -> torch.Tensor:
        """The decode key bias cut to its first `slots` slots (a view: the fills of the whole bias show
        through), what `static_decode_attention` reads the cache to. Compiled, the length is marked
        dynamic, so one compiled step serves every length (a graph per length stays static-shaped)."""
        view = bias[..., :slots]
        if self.compiled and self.config.live_slots and slots > 1:
            torch._dynamo.maybe_mark_dynamic(view, 3)
        return view

    def attention_stats(self, cache: Any, rows: int) -> dict[str, Any]:
        """What the last `decode`'s steps read of the cache: slots attended per step (mean, max), the
        cache's slots, and the K/V bytes a step read on average (from the shapes: `kv_read_bytes`) against
        the whole cache's."""
        if cache is None or not all(getattr(layer, "is_initialized", False) for layer in cache.layers):
            return {"live_slots": self.config.live_slots}  # nothing decoded yet
        length = int(cache.layers[0].keys.shape[2])
        steps = self.attended or [length]
        mean = sum(steps) / len(steps)
        return {"live_slots": self.config.live_slots, "cache_slots": length,
                "attended_slots_mean": mean, "attended_slots_max": max(steps),
                "kv_bytes_per_step": kv_read_bytes(cache, rows, 1) * mean,
                "kv_bytes_per_step_whole_cache": kv_read_bytes(cache, rows, length)}

    def decode(self, logits, start: int, offset, valid, cache, bias, config: SamplingConfig, done, order):
        """Sample the first token of every row from the prefill's `logits` [B, V], then decode one token per
        step at slots start, start + 1, ... (the keys before `start` a row sees: its `valid` ones).
        `done` [B]: rows that never hold the loop open (dummies); `order`: who draws (`_draw`). Returns (ids [B, new], log-probs, steps)."""
        batch, new = logits.shape[0], config.max_new_tokens
        temperature, top_p = float(config.temperature), float(config.top_p)
        if self.fused is not None:
            self.fused.refresh()  # the replica's weights may have changed since the last call
        nxt, lp = self._draw(logits, order, temperature, top_p)
        out_ids = torch.full((batch, new), self.pad_id, dtype=torch.long, device=logits.device)
        out_lp = torch.zeros((batch, new), dtype=torch.float32, device=logits.device)
        out_ids[:, :1], out_lp[:, :1] = nxt, lp
        done = done | torch.isin(nxt[:, 0], self._stop)
        # the decode key bias: the keys each row sees (a dummy row: its one pad key), opened slot by slot
        bias.fill_(MASKED)
        bias[:, 0, 0, :start].masked_fill_(valid[:, :start], 0.0)
        seek_cache(cache, start)
        self.block_stats = {"block_decode": "off"}
        self.attended = []
        if self.block_decode:
            return self._decode_blocks(nxt, lp, done, start, offset, cache, bias, new, order, temperature, top_p)
        slot = torch.arange(start, start + new, device=logits.device)  # the slot token t is written at
        t = 1
        with self._decoding_attention():
            while t < new:
                if (t - 1) % self.config.finish_check_every == 0 and bool(done.all()):
                    break  # every row has stopped; the columns left stay pad and are never read
                prev = nxt.clone()  # read the last replay's output before the next replay may overwrite it
                bias[:, :, :, start + t - 1].fill_(0.0)  # the query sees its own slot from now on
                attended = self.attended_slots(start + t, bias.shape[-1])
                self.attended.append(attended)
                if self.compiled:
                    torch.compiler.cudagraph_mark_step_begin()
                nxt, lp, stopped = self._step(prev, slot[t - 1 : t], offset, self.live_bias(bias, attended), cache,
                                              order, temperature, top_p)
                out_ids[:, t : t + 1], out_lp[:, t : t + 1] = nxt, lp
                done |= stopped
                t += 1
        return out_ids, out_lp, t - 1

    def ready_thread(self) -> None:
        """Call before sampling from a thread: compiled on CUDA, the thread needs its CUDA-graph trees."""
        if self.compiled and self.device.type == "cuda":
            _cudagraph_tls_ready()

    def decode_stats(self) -> dict[str, Any]:
        """Which decode step samples: fused or the model's forward, and why (also in `stats` after every
        call)."""
        return {"fused_decode": self.fused is not None, "fused_decode_why_not": self.fused_why_not}

    @contextlib.contextmanager
    def _decoding_attention(self) -> Iterator[None]:
        """The model attends with STATIC_ATTENTION inside, its own implementation again after: the decode
        steps only (see the module doc)."""
        impl = self.model.config._attn_implementation
        self.model.config._attn_implementation = STATIC_ATTENTION
        try:
            yield
        finally:
            self.model.config._attn_implementation = impl

    # --- block decoding (see the module docstring) ---------------------------------------------------

    def _decode_blocks(self, nxt, lp, done, start: int, offset, cache, bias, new: int, order,
                       temperature: float, top_p: float):
        """`_decode` after its first token, the bookkeeping on the device: blocks of up to graph_steps
        tokens, each ending where the per-step loop would check for the finish (so both stop at the same
        step), each one CUDA-graph replay when captured. Returns what `_decode` returns."""
        st = self._block_state(cache, bias)
        if new > st.out_ids.shape[1]:
            raise ValueError(f"max_new_tokens {new} exceeds the cache length {st.out_ids.shape[1]}")
        st.out_ids.fill_(self.pad_id)
        st.out_lp.zero_()
        st.out_ids[:, :1], st.out_lp[:, :1] = nxt, lp
        st.ids.copy_(nxt)
        st.done.copy_(done)
        st.slot.fill_(start)
        st.col.fill_(1)
        offset, order = st.take(st.offset, offset), st.take(st.order, order)
        check, t = self.config.finish_check_every, 1
        captured = 0
        with self._decoding_attention():
            while t < new:
                if (t - 1) % check == 0 and bool(st.done.all()):
                    break  # every row has stopped; the columns left stay pad and are never read
                k = min(self.config.graph_steps, new - t, check - (t - 1) % check)
                # one attended length for the whole block: what its last step (slot start + t + k - 2) sees
                attended = self.attended_slots(start + t + k - 1, bias.shape[-1])
                inputs = (offset, order, self.live_bias(bias, attended), cache, temperature, top_p)
                if self.capture and attended not in st.warm:  # a length's first step: outside any graph
                    self._on_side_stream(functools.partial(self._advance, st, self._plain_step, *inputs))
                    st.warm.add(attended)
                    self.attended.append(attended)
                    t += 1
                    continue
                captured += self._block(st, k, inputs)
                self.attended += [attended] * k
                t += k
        self.block_stats = {"block_decode": "graphs" if self.capture else "device loop", "graphs_captured": captured}
        return st.out_ids[:, :new].clone(), st.out_lp[:, :new].clone(), t - 1

    def _advance(self, st: _BlockState, step: Callable[..., Any], offset, order, bias, cache,
                 temperature: float, top_p: float) -> None:
        """One token, every part on the device: open the query's own key slot, sample (the decode step),
        write the token and its log-prob at column `col`, fold in the stop flags, move `slot` and `col` on."""
        bias.index_fill_(3, st.slot, 0.0)
        nxt, lp, stopped = step(st.ids, st.slot, offset, bias, cache, order, temperature, top_p)
        st.out_ids.index_copy_(1, st.col, nxt)
        st.out_lp.index_copy_(1, st.col, lp)
        st.done.logical_or_(stopped)
        st.ids.copy_(nxt)
        st.slot.add_(1)
        st.col.add_(1)

    def _block(self, st: _BlockState, k: int, inputs: tuple[Any, ...]) -> int:
        """Run k tokens: one replay of the graph of k `_advance` steps (captured now if new: returns 1),
        or, uncaptured, k steps one by one (returns 0)."""
        if not self.capture:
            for _ in range(k):
                self._advance(st, self._plain_step, *inputs)
            return 0
        key = (k, int(inputs[2].shape[-1]), inputs[4], inputs[5], shared_prefix_key())
        graph, captured = st.graphs.get(key), 0
        if graph is None:
            try:
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph, stream=self._side_stream(), capture_error_mode="thread_local"):
                    for _ in range(k):
                        self._advance(st, self._plain_step, *inputs)
            except Exception as exc:  # a capture this torch cannot make: the per-step path from now on
                logging.getLogger(__name__).warning(
                    "static sampler: capturing %d decode steps as a CUDA graph failed (%s: %s); decoding step by "
                    "step from now on", k, type(exc).__name__, exc)
                self.capture = False
                self.block_decode = False
                for _ in range(k):  # a capture runs nothing: these k steps are still to do
                    self._advance(st, self._plain_step, *inputs)
                return 0
            st.graphs[key], captured = graph, 1
        graph.replay()
        return captured

    def _side_stream(self) -> Any:
        if self._side is None:
            self._side = torch.cuda.Stream(device=self.device)
        return self._side

    def _on_side_stream(self, fn: Callable[[], None]) -> None:
        """Run `fn` on the capture stream, ordered after and before the current stream's work (lazy
        per-stream initialisation happens here, not inside a capture)."""
        side, current = self._side_stream(), torch.cuda.current_stream(self.device)
        side.wait_stream(current)
        with torch.cuda.stream(side):
            fn()
        current.wait_stream(side)

    def _block_state(self, cache: Any, bias: torch.Tensor) -> _BlockState:
        """The device buffers (and captured graphs) of this cache and bias, made on first use; kept while
        the cache lives (the graphs captured their addresses, and the cache's)."""
        key = id(cache)
        kept = self._blocks.get(key)
        if kept is not None and kept[0]() is cache and kept[1].bias_ptr == bias.data_ptr():
            return kept[1]
        self._blocks = {k: v for k, v in self._blocks.items() if v[0]() is not None}
        batch, length = bias.shape[0], bias.shape[-1]
        device = bias.device
        state = _BlockState(
            ids=torch.zeros((batch, 1), dtype=torch.long, device=device),
            slot=torch.zeros(1, dtype=torch.long, device=device),
            col=torch.zeros(1, dtype=torch.long, device=device),
            offset=torch.zeros(batch, dtype=torch.long, device=device),
            order=torch.zeros(batch, dtype=torch.long, device=device),
            out_ids=torch.zeros((batch, length), dtype=torch.long, device=device),
            out_lp=torch.zeros((batch, length), dtype=torch.float32, device=device),
            done=torch.zeros(batch, dtype=torch.bool, device=device),
            bias_ptr=bias.data_ptr(),
            fixed=self.capture,
        )
        self._blocks[key] = (weakref.ref(cache), state)
        return state

    def completions(self, out_ids: torch.Tensor, out_lp: torch.Tensor, new: int) -> list[Completion]:
        stop = set(self.stop_ids)
        completions = []
        for row_ids, row_lp in zip(out_ids.tolist(), out_lp.tolist(), strict=True):
            end = next((i + 1 for i, t in enumerate(row_ids) if t in stop), None)
            finish: Literal["stop", "length"] = "stop" if end is not None else "length"
            keep = end if end is not None else new
            ids = row_ids[:keep]
            completions.append(Completion(token_ids=tuple(ids), logprobs=tuple(float(x) for x in row_lp[:keep]),
                                          text=self.tokenizer.decode(ids, skip_special_tokens=True), finish=finish))
        return completions
