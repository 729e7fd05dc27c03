"""A policy that plays fixed tool calls, for tests of the harness around a policy (not a stand-in for one):
episode `repeat` plays scripts[repeat] turn by turn, one list of (tool, arguments) calls a turn, then
answers "Done.". Its text is tokenized the way a teacher's turns are (ended by <|im_end|>), with no
log-probs. Also the tiny tokenizer such tests encode with."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from skillgate_core.agent.episode import EpisodeView
from skillgate_core.policy.local_sampler import Completion

__all__ = ["Call", "ScriptedPolicy", "tiny_tokenizer"]

Call = tuple[str, dict[str, Any]]
"""One tool call: (tool name, arguments)."""


class ScriptedPolicy:
    """Plays scripts[repeat][turn] (module docstring)."""

    name = "scripted"

    def __init__(self, tokenizer: Any, scripts: Sequence[Sequence[Sequence[Call]]]) -> None:
        self.tokenizer, self.scripts = tokenizer, scripts

    def act(self, views: Sequence[EpisodeView]) -> list[Completion]:
        out = []
        for view in views:
            turns = self.scripts[view.spec.repeat]
            calls = turns[view.turn] if view.turn < len(turns) else []
            text = "".join("<tool_call>" + json.dumps({"name": n, "arguments": a}) + "</tool_call>" for n, a in calls)
            text = text or "Done."
            ids = self.tokenizer(text + "<|im_end|>", add_special_tokens=False)["input_ids"]
            out.append(Completion(tuple(ids), (), text, "stop"))
        return out


def tiny_tokenizer() -> Any:
    """The tiny model's BPE tokenizer with its ChatML template, trained on the bundled corpus (a second)."""
    from skillgate_core.policy.corpus import build_corpus
    from skillgate_core.policy.tiny_model import TinyModelConfig, train_tokenizer

    cfg = TinyModelConfig(vocab_size=600, corpus_lines=300)
    return train_tokenizer(cfg, build_corpus(cfg.corpus_lines, cfg.seed))
