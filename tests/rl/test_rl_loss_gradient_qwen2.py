"""The selector loss's gradient on a real tiny Qwen2 model equals the analytic value.

Sign convention: the loss is minimised, so at rho = 1 (logp_old = logp) and logp_ref = logp,
dL/dlogp_t = -(w_task_t A_task_t + lambda w_sel_t A_sel_t) / N. Task tokens get -w_task A_task / N,
identity tokens -lambda w_sel A_sel / N, other tokens of a read call 0, unmasked tokens 0.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from skillgate_core.credit import (
    SelectionAction,
    per_token_advantages,
    selector_advantages,
    task_advantages,
    token_weights,
)
from skillgate_core.rl.loss import global_token_normaliser, selector_grpo_loss

O, M = "oracle", "misleading"  # noqa: E741  (docs/method.md 11 notation)
SEQ = 24
"""Token ids per episode; the model scores SEQ - 1 next-token log-probs."""


@pytest.fixture(scope="module")
def tiny_qwen2() -> Qwen2ForCausalLM:
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=300,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    return Qwen2ForCausalLM(config).double().eval()


def read(call: range, identity: list[int], category: str) -> SelectionAction:
    return SelectionAction(
        turn_index=0, call_index=0, path_index=0, tool_name="read", skill_name=category,
        category=category, call_token_indices=tuple(call), identity_token_indices=tuple(identity),
    )  # fmt: skip


def test_gradient_matches_analytic_per_token_value(tiny_qwen2):
    # Four episodes of SEQ - 1 response positions: 3 prompt-side positions and an observation
    # unmasked; reads on masked tokens. Group: reads [O], [M], [O, M], []; scores 1, 0, 0, 1.
    reads = [[O], [M], [O, M], []]
    scores = [1.0, 0.0, 0.0, 1.0]
    n = SEQ - 1
    mask = np.ones(n)
    mask[:3] = 0
    mask[12:15] = 0  # an observation message
    masks = [mask.copy() for _ in reads]
    actions = [
        [read(range(4, 9), [6, 7], O)],
        [read(range(5, 8), [6], M)],
        [read(range(3, 7), [5], O), read(range(16, 20), [18], M)],
        [],
    ]
    sel = selector_advantages(reads, "clean_oracle")  # b = 1/4: +0.75 for episode 0, -0.25 otherwise
    weights = token_weights(masks, actions, sel)
    a_task, a_sel = per_token_advantages([n] * 4, task_advantages(scores), actions, sel)
    normaliser = global_token_normaliser(masks)
    coef = 0.2

    ids = torch.randint(0, 300, (4, SEQ), generator=torch.Generator().manual_seed(1))
    logits = tiny_qwen2(input_ids=ids).logits
    logp = torch.log_softmax(logits[:, :-1], dim=-1).gather(-1, ids[:, 1:, None]).squeeze(-1)
    assert logp.shape == (4, n)

    stack = lambda arrays: torch.as_tensor(np.stack(arrays), dtype=torch.float64)  # noqa: E731
    w_task, w_sel, at, asel, m = map(stack, (weights.w_task, weights.w_sel, a_task, a_sel, masks))
    out = selector_grpo_loss(
        logp, logp.detach(), at, asel, w_task, w_sel, m, normaliser,
        selector_coef=coef, logp_ref=logp.detach(), beta=3e-5,
    )  # fmt: skip
    (grad,) = torch.autograd.grad(out.loss, logp, retain_graph=True)

    for e, episode_actions in enumerate(actions):
        call = {i for a in episode_actions for i in a.call_token_indices}
        identity = {i for a in episode_actions for i in a.identity_token_indices}
        for t in range(n):
            if t in identity:
                expected = -coef * w_sel[e, t] * asel[e, t] / normaliser
                assert expected != 0
            elif t in call or mask[t] == 0:
                expected = 0.0
            else:
                expected = -w_task[e, t] * at[e, t] / normaliser
                assert expected != 0
            assert grad[e, t].item() == pytest.approx(float(expected), rel=1e-9, abs=1e-15), (e, t)

    # the oracle's name tokens in the clean episode are pushed up, the misleading name down
    assert grad[0, 6] < 0 and grad[1, 6] > 0
    # and the loss reaches the model's weights
    out.loss.backward()
    grads = [p.grad for p in tiny_qwen2.parameters()]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    assert any(g.abs().sum() > 0 for g in grads)
