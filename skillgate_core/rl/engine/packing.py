"""Sequence packing: variable-length samples -> micro-batches of one row each, no padding.

A sample is one episode as the trainer sees it: its prompt ids, its response ids (every token after
the prompt: sampled turns and the observation messages between them) and per-response-token float
arrays the caller attaches (loss mask, old / reference log-probs, advantages, weights; any names).
`pack_samples` places samples into micro-batches under a token budget by first-fit-decreasing
(deterministic: longest first, ties by input order; inside a micro-batch, input order). A micro-batch
is ONE row: the samples' ids concatenated, position_ids restarting at 0 for each sample, and
attention confined to each sample:

- CPU / sdpa / eager: a block-diagonal causal 4-D mask (`block_causal_mask`), T x T per micro-batch.
- GPU flash-attention: no mask; `flash_attention_kwargs` gives cu_seqlens / max_seqlen so
  transformers calls the varlen kernel (position_ids carry the same boundaries).

So each token's log-prob equals the one computed with the sample alone (tests/rl/test_packing.py).

Every response-side tensor of a micro-batch (targets, fields, and what `token_logprobs` returns) is
1-D in the *packed layout*: the response tokens of its samples, concatenated in micro-batch order.
`MicroBatch.split` cuts such a tensor per sample; `unpack` puts per-micro-batch tensors back in the
input order of the samples.

Under ZeRO-3 every rank must run the same number of forward/backward passes (each one gathers
parameters collectively): agree on the count, then pad with empty micro-batches:

    mbs = pack_samples(samples, PackingConfig(max_tokens=8192))
    mbs = pad_micro_batches(mbs, all_reduce_max(len(mbs)), field_names=TOKEN_FIELDS)  # rl.samples
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

__all__ = [
    "MicroBatch",
    "PackingConfig",
    "Sample",
    "TrainSample",
    "block_causal_mask",
    "empty_micro_batch",
    "flash_attention_kwargs",
    "pack_samples",
    "pad_micro_batches",
    "unpack",
]


@dataclass(frozen=True)
class PackingConfig:
    """How samples are packed into micro-batches."""

    max_tokens: int = 8192
    """Token budget of one micro-batch: prompt + response tokens of all its samples."""
    pad_token_id: int = 0
    """Id of the single filler token of an empty (count-balancing) micro-batch; its logit is unused."""
    max_samples: int = 0
    """Samples per micro-batch at most (0 = no limit). 1 without a varlen attention kernel: a dense
    block mask costs T^2 over the whole row, so several long samples in one row cost more than
    running them one by one (each then needs no mask at all)."""

    def __post_init__(self) -> None:
        if self.max_tokens < 2:
            raise ValueError("max_tokens must be >= 2 (one prompt token and one response token)")


class Sample(Protocol):
    """What `pack_samples` packs: ids, and per-response-token arrays by name (rl.samples.CreditedSample,
    TrainSample)."""

    @property
    def prompt_ids(self) -> Sequence[int]: ...

    @property
    def response_ids(self) -> Sequence[int]: ...

    @property
    def fields(self) -> Mapping[str, Any]: ...


def _num_tokens(sample: Sample) -> int:
    return len(sample.prompt_ids) + len(sample.response_ids)


def _check_sample(sample: Sample, index: int) -> None:
    if len(sample.prompt_ids) < 1:
        raise ValueError(f"sample {index}: a sample needs at least one prompt token")
    for name, values in sample.fields.items():
        if len(values) != len(sample.response_ids):
            raise ValueError(f"sample {index}: field {name!r} has {len(values)} values for "
                             f"{len(sample.response_ids)} response tokens")


@dataclass(frozen=True, eq=False)
class TrainSample:
    """One episode to train on: ids as sampled, plus per-response-token float arrays."""

    prompt_ids: Sequence[int]
    """Prompt token ids (at least one: the first response token is predicted from the last one)."""
    response_ids: Sequence[int]
    """Every token after the prompt (sampled turns and observations), as the sampler kept them."""
    fields: Mapping[str, Any] = field(default_factory=dict)
    """name -> per-response-token values (list, numpy array or tensor), each len(response_ids) long."""

    def __post_init__(self) -> None:
        _check_sample(self, 0)

    @property
    def num_tokens(self) -> int:
        return _num_tokens(self)


@dataclass(frozen=True, eq=False)
class MicroBatch:
    """Samples packed into one row; response-side tensors are 1-D in the packed layout (CPU tensors)."""

    input_ids: torch.Tensor
    """[1, T] int64: the samples' prompt + response ids, concatenated."""
    position_ids: torch.Tensor
    """[1, T] int64: 0..len-1 for each sample (restarts mark the sequence boundaries)."""
    cu_seqlens: torch.Tensor
    """[n + 1] int32: cumulative sample lengths in the row (flash-attention varlen layout)."""
    sample_indices: tuple[int, ...]
    """Index of each packed sample in the list given to `pack_samples`, in row order."""
    response_lengths: tuple[int, ...]
    """Number of response tokens of each packed sample, in row order."""
    target_positions: torch.Tensor
    """[R] int64: row position whose logits predict each response token (its own position - 1)."""
    target_ids: torch.Tensor
    """[R] int64: the response token ids (what is scored)."""
    fields: Mapping[str, torch.Tensor]
    """name -> [R] float32: the samples' per-response-token arrays, concatenated."""

    @property
    def num_tokens(self) -> int:
        """T, the row length (what the token budget counts)."""
        return int(self.input_ids.shape[1])

    @property
    def num_response_tokens(self) -> int:
        """R, the length of every packed-layout tensor."""
        return int(self.target_ids.shape[0])

    @property
    def max_seqlen(self) -> int:
        """Longest sample in the row (flash-attention varlen argument)."""
        return int((self.cu_seqlens[1:] - self.cu_seqlens[:-1]).max()) if len(self.cu_seqlens) > 1 else 0

    def split(self, values: torch.Tensor) -> list[torch.Tensor]:
        """Cut a packed-layout tensor [R, ...] into one tensor per packed sample, in row order."""
        if values.shape[0] != self.num_response_tokens:
            raise ValueError(f"expected {self.num_response_tokens} packed values, got {values.shape[0]}")
        return list(torch.split(values, list(self.response_lengths)))

    def to(self, device: torch.device | str) -> MicroBatch:
        """A copy with every tensor on `device` (non_blocking where the source allows)."""

        def move(t: torch.Tensor) -> torch.Tensor:
            return t.to(device, non_blocking=True)

        return MicroBatch(
            input_ids=move(self.input_ids),
            position_ids=move(self.position_ids),
            cu_seqlens=move(self.cu_seqlens),
            sample_indices=self.sample_indices,
            response_lengths=self.response_lengths,
            target_positions=move(self.target_positions),
            target_ids=move(self.target_ids),
            fields={k: move(v) for k, v in self.fields.items()},
        )


def _as_float32(values: object) -> torch.Tensor:
    if isinstance(values, torch.Tensor):
        return values.detach().to(device="cpu", dtype=torch.float32).reshape(-1)
    return torch.as_tensor(values, dtype=torch.float32).reshape(-1)


def _build(samples: Sequence[Sample], indices: Sequence[int], field_names: Sequence[str]) -> MicroBatch:
    ids: list[int] = []
    positions: list[int] = []
    cu = [0]
    targets: list[int] = []
    target_positions: list[int] = []
    fields: dict[str, list[torch.Tensor]] = {name: [] for name in field_names}
    for i in indices:
        s = samples[i]
        start = len(ids)
        prompt, response = list(s.prompt_ids), list(s.response_ids)
        ids += prompt + response
        positions += range(len(prompt) + len(response))
        cu.append(len(ids))
        # response token j sits at row position start + len(prompt) + j; the logit before it predicts it
        first = start + len(prompt) - 1
        target_positions += range(first, first + len(response))
        targets += response
        for name in field_names:
            fields[name].append(_as_float32(s.fields[name]))
    return MicroBatch(
        input_ids=torch.tensor([ids], dtype=torch.long),
        position_ids=torch.tensor([positions], dtype=torch.long),
        cu_seqlens=torch.tensor(cu, dtype=torch.int32),
        sample_indices=tuple(indices),
        response_lengths=tuple(len(samples[i].response_ids) for i in indices),
        target_positions=torch.tensor(target_positions, dtype=torch.long),
        target_ids=torch.tensor(targets, dtype=torch.long),
        fields={
            name: torch.cat(parts) if parts else torch.zeros(0, dtype=torch.float32)
            for name, parts in fields.items()
        },
    )


def pack_samples(samples: Sequence[Sample], config: PackingConfig) -> list[MicroBatch]:
    """First-fit-decreasing packing of `samples` into micro-batches of at most config.max_tokens.

    Every sample must carry the same field names, each as long as its response. A sample longer than
    the budget is an error (raise the budget: splitting a sequence would change its log-probs).
    """
    if not samples:
        return []
    names = sorted(samples[0].fields)
    for i, s in enumerate(samples):
        _check_sample(s, i)
        if sorted(s.fields) != names:
            raise ValueError(f"sample {i} has fields {sorted(s.fields)}, sample 0 has {names}")
        if _num_tokens(s) > config.max_tokens:
            raise ValueError(
                f"sample {i} has {_num_tokens(s)} tokens, over the micro-batch budget {config.max_tokens}"
            )
    order = sorted(range(len(samples)), key=lambda i: (-_num_tokens(samples[i]), i))
    bins: list[list[int]] = []
    room: list[int] = []
    for i in order:
        n = _num_tokens(samples[i])
        for b, free in enumerate(room):
            if n <= free and (not config.max_samples or len(bins[b]) < config.max_samples):
                bins[b].append(i)
                room[b] -= n
                break
        else:
            bins.append([i])
            room.append(config.max_tokens - n)
    return [_build(samples, sorted(b), names) for b in bins]


def empty_micro_batch(field_names: Sequence[str], pad_token_id: int = 0) -> MicroBatch:
    """A one-token micro-batch with no response token: its forward/backward joins ZeRO-3's
    collectives and contributes exactly zero to the loss and the gradient."""
    return MicroBatch(
        input_ids=torch.tensor([[pad_token_id]], dtype=torch.long),
        position_ids=torch.zeros((1, 1), dtype=torch.long),
        cu_seqlens=torch.tensor([0, 1], dtype=torch.int32),
        sample_indices=(),
        response_lengths=(),
        target_positions=torch.zeros(0, dtype=torch.long),
        target_ids=torch.zeros(0, dtype=torch.long),
        fields={name: torch.zeros(0, dtype=torch.float32) for name in field_names},
    )


def pad_micro_batches(
    micro_batches: Sequence[MicroBatch], count: int, field_names: Sequence[str], pad_token_id: int = 0
) -> list[MicroBatch]:
    """`micro_batches` followed by empty ones up to `count` (the max over ranks, so all ranks run
    the same number of passes)."""
    if count < len(micro_batches):
        raise ValueError(f"count {count} is below the {len(micro_batches)} micro-batches already packed")
    pad = [empty_micro_batch(field_names, pad_token_id) for _ in range(count - len(micro_batches))]
    return list(micro_batches) + pad


def unpack(
    micro_batches: Sequence[MicroBatch], values: Sequence[torch.Tensor], num_samples: int
) -> list[torch.Tensor]:
    """Per-micro-batch packed-layout tensors -> one tensor per sample, in `pack_samples` input order."""
    if len(values) != len(micro_batches):
        raise ValueError(f"{len(values)} value tensors for {len(micro_batches)} micro-batches")
    out: list[torch.Tensor | None] = [None] * num_samples
    for mb, v in zip(micro_batches, values, strict=True):
        for index, part in zip(mb.sample_indices, mb.split(v), strict=True):
            if out[index] is not None:
                raise ValueError(f"sample {index} appears in two micro-batches")
            out[index] = part
    missing = [i for i, v in enumerate(out) if v is None]
    if missing:
        raise ValueError(f"samples {missing[:10]} are in no micro-batch")
    return [v for v in out if v is not None]  # all of them (none is missing)


def block_causal_mask(micro_batch: MicroBatch, dtype: torch.dtype | None = None) -> torch.Tensor:
    """[1, 1, T, T] mask: token q sees token k iff both are in the same sample and k <= q.

    dtype None -> bool (True = attend; for sdpa). A floating dtype -> additive (0 / dtype min; for
    eager attention, which adds the mask to the scores).
    """
    t = micro_batch.num_tokens
    seq = torch.repeat_interleave(
        torch.arange(len(micro_batch.cu_seqlens) - 1, device=micro_batch.input_ids.device),
        (micro_batch.cu_seqlens[1:] - micro_batch.cu_seqlens[:-1]).to(torch.long),
    )
    pos = torch.arange(t, device=micro_batch.input_ids.device)
    allowed = (seq[:, None] == seq[None, :]) & (pos[None, :] <= pos[:, None])
    allowed = allowed[None, None]
    if dtype is None or dtype == torch.bool:
        return allowed
    zero = torch.zeros((), dtype=dtype, device=allowed.device)
    return torch.where(allowed, zero, torch.finfo(dtype).min)


def flash_attention_kwargs(micro_batch: MicroBatch) -> dict[str, Any]:
    """Keyword arguments that make transformers' flash-attention path run the varlen kernel over
    the packed row (cu_seqlens for queries and keys, their max length)."""
    cu = micro_batch.cu_seqlens.to(torch.int32)
    m = micro_batch.max_seqlen
    return {"cu_seq_lens_q": cu, "cu_seq_lens_k": cu, "max_length_q": m, "max_length_k": m}
