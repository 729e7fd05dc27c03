"""Local sampling with a transformers model: token ids, per-token log-probs and finish reasons.

Rollouts keep exactly what the sampler produced (ids + log-probs); nothing is re-tokenized later.
The log-prob of a sampled token is log_softmax(logits / temperature) at that position, the same
quantity the trainer computes (it divides logits by the same temperature), so at the first
optimizer step rho = exp(logp_theta - logp_old) is 1 up to float noise. top-p filtering changes
which tokens can be drawn but not the recorded log-prob; training uses top-p 1.0 (docs/method.md 2).

    model, tok = load_policy("path/to/hf-model-dir")
    [c] = sample_completions(model, tok, [tok.apply_chat_template(msgs, add_generation_prompt=True)],
                             SamplingConfig(max_new_tokens=64))
    c.token_ids, c.logprobs, c.finish
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from skillgate_core.base.config_ranges import NonNegativeInt, PositiveFloat, PositiveInt, Range, check_ranges

if TYPE_CHECKING:
    import torch

__all__ = [
    "Completion",
    "SamplerKind",
    "SamplingConfig",
    "load_policy",
    "sample_completions",
    "sequence_logprobs",
    "stop_token_ids",
]

SamplerKind = Literal["auto", "hf", "static"]
"""hf = transformers generate (this module); static = static KV cache + compiled decode step
(`policy.static`); auto = static when the model is on CUDA, hf otherwise."""


@dataclass(frozen=True)
class SamplingConfig:
    """How completions are drawn."""

    temperature: PositiveFloat = 1.0
    """Logits are divided by this before sampling and before computing log-probs."""
    top_p: Annotated[float, Range(gt=0, le=1)] = 1.0
    """Nucleus sampling mass (1.0 = off; training keeps it off)."""
    max_new_tokens: PositiveInt = 512
    """Longest completion; reaching it ends the turn with finish = "length"."""
    seed: NonNegativeInt = 0
    """Seed of the sampling RNG."""
    sampler: SamplerKind = "auto"
    """Who samples (policy.static.sample_batch dispatches): hf, static, or auto (static on CUDA)."""
    reuse_kv: bool = True
    """The static sampler only, for a multi-turn policy (agent.policies.LocalPolicy): each episode keeps its
    KV cache across its turns, so a turn prefills only what its context added, and the episodes that
    start from the same prompt prefill it once (policy.static.turn_cache). The same ids and log-probs as a
    full prefill per turn, up to float summation order (tests/policy/test_turn_cache.py). False: every
    turn prefills its whole context. Not part of any digested config: how a sample is computed, not
    what is sampled."""

    def __post_init__(self) -> None:
        check_ranges(self)  # temperature > 0: greedy decoding is not a sampling policy
        if self.sampler not in ("auto", "hf", "static"):
            raise ValueError(f"sampler: expected auto, hf or static, got {self.sampler!r}")


@dataclass(frozen=True)
class Completion:
    """One sampled completion."""

    token_ids: tuple[int, ...]
    """Sampled ids, the stop token included when it was sampled."""
    logprobs: tuple[float, ...]
    """log p(token) under the tempered sampling distribution, one per id."""
    text: str
    """The ids decoded with special tokens removed: the turn's response text."""
    finish: Literal["stop", "length"]
    """stop = a stop token was sampled; length = max_new_tokens was reached."""
    error: str = ""
    """Why no turn was produced (a served policy whose endpoint failed): non-empty ends that episode
    as aborted, an infrastructure error, without touching the others of the batch."""
    context_tokens: int | None = None
    """The server's count of the context this turn was generated from (its usage.prompt_tokens), from
    a served policy with no local tokenizer; the episode's context is then counted from it. None:
    the ids are real and counted locally."""


def load_policy(model_dir: str | Path, dtype: torch.dtype | None = None, device: str = "cpu"):
    """(model in eval mode, tokenizer) from an HF model directory, loaded as any HF checkpoint is."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype)
    model = model.to(device)  # type: ignore[arg-type]  # transformers' @wraps(Module.to) hides `self` from mypy
    model.eval()
    return model, tok


def stop_token_ids(tokenizer: Any) -> list[int]:
    """The ids that end a turn: eos, and <|im_end|> / <|endoftext|> where the vocabulary has them
    (every sampler stops on the same set)."""
    ids = {tokenizer.eos_token_id}
    for tok in ("<|im_end|>", "<|endoftext|>"):
        tid = tokenizer.convert_tokens_to_ids(tok)
        if isinstance(tid, int) and tid != tokenizer.unk_token_id:
            ids.add(tid)
    return sorted(i for i in ids if i is not None)


def sample_completions(
    model: Any, tokenizer: Any, prompts: Sequence[Sequence[int]], config: SamplingConfig
) -> list[Completion]:
    """Sample one completion per prompt (prompt = token ids), batched with left padding."""
    import torch

    if not prompts:
        return []
    device = next(model.parameters()).device
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    width = max(len(p) for p in prompts)
    input_ids = torch.full((len(prompts), width), pad, dtype=torch.long)
    attention = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, prompt in enumerate(prompts):
        input_ids[row, width - len(prompt) :] = torch.tensor(list(prompt), dtype=torch.long)
        attention[row, width - len(prompt) :] = 1
    stop = stop_token_ids(tokenizer)
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(config.seed)
    try:
        with torch.no_grad():
            out = model.generate(
                input_ids=input_ids.to(device),
                attention_mask=attention.to(device),
                do_sample=True,
                temperature=config.temperature,
                top_p=config.top_p,
                top_k=0,
                max_new_tokens=config.max_new_tokens,
                eos_token_id=stop,
                pad_token_id=pad,
                output_logits=True,
                return_dict_in_generate=True,
            )
    finally:
        torch.random.set_rng_state(generator_state)
    new = out.sequences[:, width:].cpu()
    logits = torch.stack(out.logits, dim=1).float().cpu()  # [batch, steps, vocab], raw
    logp_all = torch.log_softmax(logits / config.temperature, dim=-1)
    chosen = logp_all.gather(-1, new.unsqueeze(-1)).squeeze(-1)
    completions = []
    for row in range(len(prompts)):
        ids = new[row].tolist()
        end = next((i + 1 for i, t in enumerate(ids) if t in stop), None)
        finish: Literal["stop", "length"] = "stop" if end is not None else "length"
        ids = ids[:end] if end is not None else ids
        completions.append(
            Completion(
                token_ids=tuple(ids),
                logprobs=tuple(float(x) for x in chosen[row, : len(ids)]),
                text=tokenizer.decode(ids, skip_special_tokens=True),
                finish=finish,
            )
        )
    return completions


def sequence_logprobs(model: Any, prompt: Sequence[int], completion: Sequence[int], temperature: float = 1.0):
    """Teacher-forced log-probs of `completion` after `prompt` (what the trainer computes), as a tensor."""
    import torch

    ids = torch.tensor([list(prompt) + list(completion)], dtype=torch.long, device=next(model.parameters()).device)
    logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float()
    logp = torch.log_softmax(logits / temperature, dim=-1)
    return logp.gather(-1, ids[0, len(prompt) :].unsqueeze(-1)).squeeze(-1)
