"""Scoring a policy's first read, teacher-forced: which slate skill it would open first, without an episode.

    scores = score_candidates(model, prompt_ids, [turn_ids(name) for name in names])
    row = probe_prompt(model, tokenizer, prompt_ids, names, categories, oracle, "reasoning", cue)
    rows = probe_training_rows(model, tokenizer, rl_rows, "reasoning")     # held-in training prompts

Each candidate turn is the teacher's first read turn (agent.policies.first_read_turn) on that skill; the
turns differ only in the name, so the softmax over their scores is the policy's choice among the slate.
The evaluation's selection probe (evaluation.probe) runs this over a protocol's tasks; GRPO runs
`probe_training_rows` on a fixed held-in sample every few steps (the learnability curve). Here, below
both, so either may use it.
"""

from __future__ import annotations

import inspect
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from skillgate_core.agent.policies import first_read_turn, turn_token_ids
from skillgate_core.skills.aliases import shown_task_row

__all__ = ["CATEGORIES", "probe_prompt", "probe_training_rows", "score_candidates"]

CATEGORIES = ("oracle", "misleading", "relevant", "irrelevant")
"""Slate categories, in the order the masses are reported."""


def _softmax(values: Sequence[float]) -> list[float]:
    top = max(values)
    weights = [math.exp(v - top) for v in values]
    total = sum(weights)
    return [w / total for w in weights]


def score_candidates(model: Any, prompt: Sequence[int], continuations: Sequence[Sequence[int]]) -> list[float]:
    """Sum of log p(continuation tokens | prompt) for each continuation, teacher-forced, float32.

    The longest token prefix all sequences share is encoded once; its KV cache is repeated over the
    continuations' remainders, which run as one right-padded batch."""
    import torch
    import torch.nn.functional as F

    full = [list(prompt) + list(c) for c in continuations]
    shared = len(prompt)
    while shared < min(map(len, full)) and len({seq[shared] for seq in full}) == 1:
        shared += 1
    shared = min(shared, min(map(len, full)) - 1)  # every remainder keeps at least one token to score
    device = next(model.parameters()).device
    with torch.no_grad():
        head = model(torch.tensor([full[0][:shared]], device=device), use_cache=True)
        cache = head.past_key_values
        first_logits = head.logits[0, -1].float()
        # The continuations' common first tokens were encoded with the prompt: score them there.
        common = torch.tensor(full[0][len(prompt):shared], device=device)
        common_logp = float(F.log_softmax(head.logits[0, len(prompt) - 1: shared - 1].float(), dim=-1)
                            .gather(-1, common.unsqueeze(-1)).sum())
        rests = [seq[shared:] for seq in full]
        width = max(map(len, rests))
        ids = torch.zeros(len(rests), width, dtype=torch.long, device=device)
        keep = torch.zeros(len(rests), width, dtype=torch.bool, device=device)
        for i, rest in enumerate(rests):
            ids[i, : len(rest)] = torch.tensor(rest)
            keep[i, : len(rest)] = True
        cache.batch_repeat_interleave(len(rests))
        mask = torch.cat([torch.ones(len(rests), shared, dtype=torch.long, device=device), keep.long()], dim=1)
        positions = torch.arange(shared, shared + width, device=device).expand(len(rests), width)
        # transformers renamed `past_key_values` to `cache` (5.2x); the GPU machine runs an older 5.x.
        cache_kw = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
        out = model(ids, attention_mask=mask, position_ids=positions, use_cache=True, **{cache_kw: cache})
        logits = torch.cat([first_logits.expand(len(rests), 1, -1), out.logits[:, :-1].float()], dim=1)
        logp = F.log_softmax(logits, dim=-1).gather(-1, ids.unsqueeze(-1)).squeeze(-1)
        return [common_logp + float(logp[i][keep[i]].sum()) for i in range(len(rests))]


def probe_prompt(model: Any, tokenizer: Any, prompt: Sequence[int], names: Sequence[str],
                 categories: Sequence[str], oracle: str, turn: str, cue: Mapping[str, Any] | None = None,
                 label: str = "") -> dict[str, Any]:
    """The probe row of one rendered prompt: each slate name scored as the first read's target (module
    docstring). `cue`: the task's evidence, stated before the name in the reasoning turn as the teacher
    states it (the same text for every candidate)."""
    turns = [turn_token_ids(tokenizer, first_read_turn(name, reasoning=turn == "reasoning", cue=cue)) for name in names]
    limit = getattr(model.config, "max_position_embeddings", None)
    if limit and len(prompt) + max(map(len, turns)) > limit:
        raise ValueError(f"{label}: prompt of {len(prompt)} tokens and its read turn do not fit the "
                         f"model's {limit} positions ({getattr(model, 'name_or_path', 'policy')})")
    logprobs = score_candidates(model, prompt, turns)
    probs = _softmax(logprobs)
    order = sorted(range(len(names)), key=lambda i: -logprobs[i])
    at = list(names).index(oracle)
    row: dict[str, Any] = {
        "names": list(names), "categories": list(categories), "logprobs": logprobs, "probs": probs,
        "oracle_rank": order.index(at) + 1, "top_name": names[order[0]], "top_category": categories[order[0]],
        "prompt_tokens": len(prompt),
    }
    for category in CATEGORIES:
        row[f"{category}_mass"] = sum(p for p, c in zip(probs, categories, strict=True) if c == category)
    # The in-cluster choice: the oracle among itself and its five lookalikes (the names reveal the cluster,
    # so this, with chance 1/6, is the question a credit scheme can teach; docs/method.md, Premise checks).
    cluster = [i for i, c in enumerate(categories) if c in ("oracle", "misleading")]
    cluster_mass = sum(probs[i] for i in cluster)
    row["oracle_given_cluster"] = row["oracle_mass"] / cluster_mass if cluster_mass > 0 else 0.0
    row["cluster_rank1"] = max(cluster, key=lambda i: logprobs[i]) == at
    return row


def probe_training_rows(model: Any, tokenizer: Any, rows: Sequence[Mapping[str, Any]], turn: str,
                        evidence: bool = True) -> list[dict[str, Any]]:
    """Probe rows of held-in training prompts: rl-data-prep rows (their frozen `prompt_ids`, a renamed
    task's slate and gold under the names its prompt shows, its `selection_cue`), e.g. a fixed sample
    probed every few GRPO steps (the learnability curve)."""
    out = []
    for raw in rows:
        row = shown_task_row(raw)
        if row.get("prompt_ids") is None:
            raise ValueError(f"task {row['task_id']}: no slate prompt (a no-skill table); the probe needs slates")
        cue = json.loads(row["selection_cue"]) if evidence and row.get("selection_cue") else None
        probed = probe_prompt(model, tokenizer, list(row["prompt_ids"]), [s["name"] for s in row["slate"]],
                              [s["category"] for s in row["slate"]], row["gold_name"], turn, cue,
                              label=f"task {row['task_id']}")
        out.append({"task_id": row["task_id"], "benchmark": row["family"], "oracle": row["gold_name"], **probed})
    return out


