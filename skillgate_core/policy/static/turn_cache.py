"""Multi-turn KV reuse for the static sampler: each episode keeps its cache row across its turns.

Without it every turn of every episode prefills its whole conversation again (a slate prompt of
4.4-7k tokens, up to 6 turns), and the G episodes of a group each prefill the same prompt. Here
(`TurnCache`, one per StaticSampler, used through `StaticSampler.sample_turns`):

- one StaticCache of (B rows, L slots) lives across calls; each episode (a caller's key) holds one
  row. A row remembers the ids whose keys/values it holds and the slot of each (a row's keys need
  not be contiguous: the attention masks say which slots are real, and the position ids were applied
  when the keys were written, so a key's slot does not matter);
- a call prefills, per row, only the ids its context adds after the longest prefix the row holds
  (the last sampled token, the observation, the next assistant header). The episode loop never
  re-tokenizes (agent/episode.py), so a context is the row's ids plus new ones; one that is not
  (a cut turn, any divergence) keeps the common prefix and prefills the rest: counted as a fallback;
- the rows that continue prefill their suffixes together, left padded to end at one slot D, and
  decoding continues at D, D + 1, ... for every row, as in `StaticSampler.sample`; every key a row
  keeps lies before D minus the widest suffix (the slots the padded prefill writes). Rows not in the
  call (another lane's episodes, free rows) ride along as dummies: they write only past their keys;
- a row with nothing cached (a new episode) is prefilled apart, in a small batch of the distinct
  contexts of the call, and its keys/values copied in to end at D: the G episodes of a group share
  their prompt, so it is prefilled once and copied into each of their rows;
- the draws stay each episode's: only the call's rows draw, in the call's order (`StaticDecoder._draw`),
  so each episode draws exactly what a full re-prefill of the same call with the same seed draws, up
  to the float summation order of attention over a differently laid out cache. Compiled, every row
  draws (a static shape), the call's first, as the dummy rows of a compiled `sample` do;
- when the frontier would pass L, or the rows held need another batch bucket (a batch that grew, or
  shrank to half), the rows are laid out anew: each row's kept keys gathered to end at one slot (the
  longest kept part), so the cache never needs much more than the longest context plus a turn, into
  the same cache or one of the new shape (caches are kept per shape: CUDA graphs see the same addresses);
- rows are freed when the caller releases their keys (an ended episode). A cache is valid for one
  set of weights: a call after the weights changed in place (the trainer's replica refresh bumps the
  parameters' version counters) or from another owner (each LocalPolicy is one) starts empty.

`counters` add up what was prefilled and what was reused, for the rollout metrics.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from skillgate_core.policy.local_sampler import Completion, SamplingConfig
from skillgate_core.policy.static.decoder import StaticDecoder, bucket_batch, round_up

__all__ = ["COUNTERS", "TurnCache"]

COUNTERS = ("calls", "rows", "prefilled_tokens", "reused_tokens", "shared_tokens", "fallbacks", "fallback_tokens",
            "relayouts", "invalidated_rows", "failures")
"""What `TurnCache.counters` adds up: calls, rows sampled, context tokens prefilled (run through the
model), reused (their keys kept from an earlier turn), shared (copied from another row of the call
with the same context), fallbacks (rows whose context did not extend what they held) and the tokens
they had to drop, relayouts (rows gathered into a new layout), invalidated rows (weights or owner changed),
failures (calls that raised; the cache is then switched off for the sampler: `TurnCache.disable`)."""


@dataclass
class _Row:
    key: Hashable
    ids: list[int] = field(default_factory=list)
    """The ids whose keys/values the row holds, in context order (id i at position i)."""
    slots: list[int] = field(default_factory=list)
    """The cache slot of each."""


@dataclass
class _Item:
    """One context of a call: its row, how much of it the row holds, what must be prefilled."""

    row: int
    context: list[int]
    kept: int

    @property
    def suffix(self) -> list[int]:
        return self.context[self.kept :]


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def _seekable(model: Any) -> bool:
    from transformers import StaticCache

    layers = StaticCache(config=model.config, max_cache_len=1).layers
    return all(hasattr(layer, "cumulative_length") for layer in layers)


class TurnCache:
    """The per-episode cache rows of one StaticSampler, over its decoder (see the module docstring)."""

    def __init__(self, decoder: StaticDecoder, max_kept: int = 2) -> None:
        self.decoder = decoder
        self.rows: list[_Row | None] = []
        self.frontier = 0
        self.cache: Any = None
        self.bias: torch.Tensor | None = None
        self.owner: Hashable = None
        self._weights: tuple[int, ...] = ()
        self._kept: dict[tuple[int, int], tuple[Any, torch.Tensor]] = {}
        self.max_kept = max_kept
        self.counters: dict[str, int] = dict.fromkeys(COUNTERS, 0)
        self.stats: dict[str, Any] = {}
        """What the last call did (batch, cache shape, frontier, prefill widths, decode steps)."""
        self.supported = _seekable(decoder.model)
        """Whether this transformers' StaticCache can be written at a chosen slot (`decoder.seek_cache`);
        where not, callers sample with a full prefill per turn (agent.policies.LocalPolicy)."""
        self.disabled_reason: str | None = None
        """Why the cache was switched off after a failed call (`disable`); None while it works."""

    # --- rows -------------------------------------------------------------------------------------

    def release(self, keys: Sequence[Hashable]) -> None:
        """Free the rows of these keys (ended episodes); unknown keys are ignored."""
        drop = set(keys)
        self.rows = [None if r is not None and r.key in drop else r for r in self.rows]

    def clear(self) -> None:
        """Forget every row (the cache tensors are kept for reuse)."""
        self.counters["invalidated_rows"] += sum(r is not None for r in self.rows)
        self.rows = [None] * len(self.rows)

    def disable(self, reason: str) -> None:
        """Switch the cache off after a call raised `reason`: every row is forgotten and `supported` turns
        False, so callers sample with the full prefill per turn (the reference path) from now on."""
        self.counters["failures"] += 1
        self.clear()
        self.supported = False
        self.disabled_reason = reason

    def held(self) -> int:
        return sum(r is not None for r in self.rows)

    def _check_owner_and_weights(self, owner: Hashable) -> None:
        weights = tuple(p._version for p in self.decoder.model.parameters())
        if owner != self.owner or weights != self._weights:
            self.clear()
        self.owner, self._weights = owner, weights

    def _plan(self, keys: Sequence[Hashable], contexts: Sequence[Sequence[int]]) -> list[_Item]:
        """Each context's row (a free one for a new key) and how much of it the row already holds."""
        where = {r.key: i for i, r in enumerate(self.rows) if r is not None}
        items = []
        for key, context in zip(keys, contexts, strict=True):
            context = list(context)
            row = where.get(key)
            if row is None:
                row = next((i for i, r in enumerate(self.rows) if r is None), len(self.rows))
                if row == len(self.rows):
                    self.rows.append(None)
                self.rows[row] = _Row(key)
                where[key] = row
            held = self.rows[row]
            assert held is not None
            kept = min(_common_prefix(held.ids, context), len(context) - 1)  # at least one token to prefill
            if kept < len(held.ids):
                if held.ids:
                    self.counters["fallbacks"] += 1
                    self.counters["fallback_tokens"] += len(held.ids) - kept
                del held.ids[kept:], held.slots[kept:]
            items.append(_Item(row, context, kept))
        return items

    # --- layout -----------------------------------------------------------------------------------

    def _cache_for(self, batch: int, length: int) -> tuple[Any, torch.Tensor]:
        from transformers import StaticCache

        key = (batch, length)
        kept = self._kept.pop(key, None)
        if kept is None:
            while len(self._kept) >= self.max_kept:
                self._kept.pop(next(iter(self._kept)))
            model = self.decoder.model
            cache: Any = StaticCache(config=model.config, max_cache_len=length)
            config = model.config
            kv_heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
            head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
            fake = torch.zeros((batch, kv_heads, 0, head_dim), dtype=model.dtype, device=self.decoder.device)
            for layer in cache.layers:  # the keys/values exist before the first forward: rows are copied in
                if not layer.is_initialized:
                    layer.lazy_initialization(fake, fake)
            bias = torch.full((batch, 1, 1, length), torch.finfo(torch.float32).min, dtype=torch.float32,
                              device=self.decoder.device)
            if self.decoder.compiled:
                torch._dynamo.mark_static_address(bias)
            kept = (cache, bias)
        self._kept[key] = kept
        return kept

    def _relayout(self, items: list[_Item], batch: int, length: int) -> int:
        """Gather every held row's kept keys to end at one slot F (the longest kept part) in the cache of
        (batch, length), the rows renumbered from 0 when the batch changes; returns F, the new frontier."""
        live = [i for i, r in enumerate(self.rows) if r is not None]
        rows = self.rows
        frontier = max([len(rows[i].slots) for i in live] + [0])  # type: ignore[union-attr]
        renumber = self.bias is None or batch != self.bias.shape[0]
        target = {i: (k if renumber else i) for k, i in enumerate(live)}
        old = self.cache
        new, bias = self._cache_for(batch, length)
        for i in live:
            row = rows[i]
            assert row is not None
            if not row.slots:
                continue
            start = frontier - len(row.slots)
            src = torch.tensor(row.slots, device=self.decoder.device)
            for lo, ln in zip(old.layers, new.layers, strict=True):
                k, v = lo.keys[i].index_select(1, src), lo.values[i].index_select(1, src)  # copies first
                ln.keys[target[i], :, start:frontier] = k
                ln.values[target[i], :, start:frontier] = v
            row.slots = list(range(start, frontier))
        self.rows = [None] * batch
        for i in live:
            self.rows[target[i]] = rows[i]
        for it in items:
            it.row = target[it.row]
        self.cache, self.bias = new, bias
        self.counters["relayouts"] += old is not None
        return frontier

    def _shape(self, rows_needed: int, widest: int, new: int) -> tuple[int, int]:
        s = self.decoder
        batch = bucket_batch(max(rows_needed, s.config.min_batch)) if s.compiled else rows_needed
        # rounded up even on CPU: a cache with room for the next turns is not laid out anew every call
        length = max(widest + new, s.config.min_cache_length if s.compiled else 0)
        return batch, round_up(length, s.config.length_bucket)

    # --- one call ---------------------------------------------------------------------------------

    def sample(self, keys: Sequence[Hashable], contexts: Sequence[Sequence[int]], config: SamplingConfig,
               owner: Hashable = None) -> list[Completion]:
        """One completion per context, the context of episode `keys[i]` (see the module docstring)."""
        if not contexts:
            return []
        if any(len(c) == 0 for c in contexts):
            raise ValueError("every prompt needs at least one token")
        if len(set(keys)) != len(keys) or len(keys) != len(contexts):
            raise ValueError("sample_turns: one distinct key per context")
        s, new = self.decoder, config.max_new_tokens
        self._check_owner_and_weights(owner)
        items = self._plan(keys, contexts)
        # Continuing rows prefill their suffixes together at slots end - wide .. end - 1 (left padded), so
        # every key a row keeps must lie before end - wide; new rows' contexts are copied in to end at `end`.
        wide = max([len(it.suffix) for it in items if it.kept > 0] + [0])
        fresh = max([len(it.context) for it in items if it.kept == 0] + [0])
        held = sum(r is not None for r in self.rows)
        batch, _ = self._shape(held, 0, new)
        end = max(self.frontier + wide, fresh)
        if self.bias is None or batch != self.bias.shape[0] or end + new > self._length():
            kept = max([len(r.slots) for r in self.rows if r is not None] + [0])
            needed = max(kept + wide, fresh)
            # past the floor, room for the next turns too (fewer layouts; compiled: fewer shapes)
            grow = needed + new > (s.config.min_cache_length if s.compiled else 0)
            batch, length = self._shape(held, needed + (needed // 2 if grow else 0), new)
            if self.bias is not None and batch == self.bias.shape[0]:
                length = max(length, self._length())  # the same shape when it fits
            end = max(self._relayout(items, batch, length) + wide, fresh)
        with torch.no_grad(), torch.random.fork_rng(devices=[s.device] if s.device.type == "cuda" else []):
            torch.manual_seed(config.seed)
            out_ids, out_lp, steps, widths = self._generate(items, end, config)
        completions = s.completions(out_ids[[it.row for it in items]].cpu(), out_lp[[it.row for it in items]].cpu(),
                                     new)
        for it, c in zip(items, completions, strict=True):
            row = self.rows[it.row]
            assert row is not None
            fed = min(len(c.token_ids), steps)  # token t is written to the cache when step t + 1 feeds it
            n = len(it.suffix)
            row.ids = it.context + list(c.token_ids[:fed])
            row.slots = row.slots[: it.kept] + list(range(end - n, end)) + list(range(end, end + fed))
        self.frontier = end + steps
        self.counters["calls"] += 1
        self.counters["rows"] += len(items)
        self.stats = {"batch": len(items), "batch_bucket": len(self.rows), "cache_length": self._length(),
                      "frontier": self.frontier, "decode_steps": steps, **widths, "compiled": s.compiled}
        return completions

    def _length(self) -> int:
        return 0 if self.bias is None else int(self.bias.shape[-1])

    def _generate(self, items: list[_Item], end: int, config: SamplingConfig):
        s, cache, bias = self.decoder, self.cache, self.bias
        assert bias is not None
        batch, length, device = len(self.rows), self._length(), s.device
        valid = torch.zeros((batch, length), dtype=torch.bool)
        offset = torch.full((batch,), end, dtype=torch.long)
        for i, row in enumerate(self.rows):
            if row is not None and row.slots:
                valid[i, row.slots] = True
                offset[i] = end - len(row.ids)
        fresh = [it for it in items if it.kept == 0]
        going = [it for it in items if it.kept > 0]
        for it in items:
            offset[it.row] = end - len(it.context)
        logits = torch.zeros((batch, s.model.config.vocab_size), dtype=torch.float32, device=device)
        widths = {"suffix_width": 0, "fresh_width": 0, "fresh_distinct": 0}
        if going:  # the rows that continue: their suffixes, in the shared cache
            wide = max(len(it.suffix) for it in going)
            ids = torch.full((batch, wide), s.pad_id, dtype=torch.long)
            for it in going:
                ids[it.row, wide - len(it.suffix) :] = torch.tensor(it.suffix, dtype=torch.long)
                valid[it.row, end - len(it.suffix) : end] = True
            part, _ = s.prefill(ids.to(device), end - wide, offset.to(device), valid.to(device), cache)
            rows = torch.tensor([it.row for it in going], device=device)
            logits[rows] = part.float().index_select(0, rows)
            widths["suffix_width"] = wide
            self.counters["prefilled_tokens"] += sum(len(it.suffix) for it in going)
            self.counters["reused_tokens"] += sum(it.kept for it in going)
        if fresh:  # new episodes: each distinct context prefilled once, apart, then copied into its rows
            logits_fresh = self._prefill_fresh(fresh, end, widths)
            for it in fresh:
                valid[it.row, end - len(it.context) : end] = True
                logits[it.row] = logits_fresh[it.row]
        order = [it.row for it in items]
        if s.compiled:  # a static shape: every row draws, the call's first
            order += [i for i in range(batch) if i not in set(order)]
        done = torch.ones(batch, dtype=torch.bool, device=device)
        done[[it.row for it in items]] = False  # the other rows never hold the loop open
        out_ids, out_lp, steps = s.decode(logits, end, offset.to(device), valid.to(device), cache, bias, config,
                                           done, torch.tensor(order, device=device))
        return out_ids, out_lp, steps, widths

    def _prefill_fresh(self, fresh: list[_Item], end: int, widths: dict[str, int]) -> dict[int, torch.Tensor]:
        s = self.decoder
        distinct: dict[tuple[int, ...], int] = {}
        for it in fresh:
            distinct.setdefault(tuple(it.context), len(distinct))
        contexts = list(distinct)
        wide = max(len(c) for c in contexts)
        n = len(contexts)
        batch = bucket_batch(n) if s.compiled else n
        length = round_up(wide, s.config.length_bucket) if s.compiled else wide
        ids = torch.full((batch, wide), s.pad_id, dtype=torch.long)
        valid = torch.zeros((batch, length), dtype=torch.bool)
        pad = torch.full((batch,), wide - 1, dtype=torch.long)
        valid[n:, wide - 1] = True
        for j, c in enumerate(contexts):
            ids[j, wide - len(c) :] = torch.tensor(c, dtype=torch.long)
            valid[j, wide - len(c) : wide] = True
            pad[j] = wide - len(c)
        temp, _ = s.bucket_cache(batch, length)
        part, _ = s.prefill(ids.to(s.device), 0, pad.to(s.device), valid.to(s.device), temp)
        out = {}
        for it in fresh:
            j, size = distinct[tuple(it.context)], len(it.context)
            for lt, lc in zip(temp.layers, self.cache.layers, strict=True):
                lc.keys[it.row, :, end - size : end] = lt.keys[j, :, wide - size : wide]
                lc.values[it.row, :, end - size : end] = lt.values[j, :, wide - size : wide]
            out[it.row] = part[j].float()
        widths["fresh_width"], widths["fresh_distinct"] = wide, n
        self.counters["prefilled_tokens"] += sum(len(c) for c in contexts)
        self.counters["shared_tokens"] += sum(len(it.context) for it in fresh) - sum(len(c) for c in contexts)
        return out
